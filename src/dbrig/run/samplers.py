"""A trial's samplers as one unit: which apply, built, started, stopped and summarised.

The registry (:mod:`dbrig.sampling.registry`) says which samplers exist and when each
applies; this module reads the facts off the trial (its server handle's capabilities,
the scenario's ``sampling:`` block, whether a fault may take the server away), hands
the builders what they need (the processes to follow, the SHOW GLOBAL STATUS query,
the handle's sampler of its own host), starts the processes samplers ask for through
:mod:`dbrig.proc`, and turns the files into the trial's sampler metrics.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbrig import proc, sampling
from dbrig.run.commands import TrialCommands
from dbrig.run.server_status import resilient_status
from dbrig.sampling import internals
from dbrig.sampling.profile import ProfileOutcome
from dbrig.sampling.registry import (
    SAMPLERS,
    SamplerEntry,
    SamplerInputs,
    TrialFacts,
    select,
)
from dbrig.sampling.status import global_status
from dbrig.scenario.model import Sampling
from dbrig.server.protocol import Handle
from dbrig.tools.base import InterferenceTool, WorkloadTool
from dbrig.util.files import disk_full, is_disk_full

PROCESS_STOP_GRACE_S = 5.0  # a sampler's own process (perf) flushes its output on SIGTERM
AFTER_TIMEOUT_S = 300.0  # a sampler's command after the window (perf script)


@dataclass(frozen=True)
class SampledTrial:
    """What a trial's samplers need from the trial."""

    folder: Path
    server: Handle
    sampling: Sampling  # the scenario's block
    warmup: int
    clock: Callable[[], float]
    devices: list[str] | None  # this machine's device to record (the datadir's)
    faults: bool  # a fault may take the server away
    processes: Callable[[], Mapping[str, list[int]]]  # role -> pids, read at every sample
    pinned_cores: list[int] | None
    processes_here: bool
    role_prefixes: Mapping[str, str] = field(default_factory=dict)  # interference columns
    warnings: list[str] = field(default_factory=list)  # the trial's: samplers add lines


def trial_facts(server: Handle, sampling_block: Sampling) -> TrialFacts:
    caps = server.capabilities
    return TrialFacts(
        enabled=sampling_block.enabled,
        server_status=caps.status,
        server_samples_its_host=caps.samples_its_host,
        profile_hz=sampling_block.profile.cpu.frequency,
        internals=sampling_block.internals.enabled,
    )


def processes_here(
    server: Handle, workload: WorkloadTool, interference: Sequence[InterferenceTool]
) -> bool:
    """Every process of the trial that takes this host's CPU is one the host sampler
    follows: not so with an external server (no pid), a server on another host
    (cpu.csv is its host's), or a client or interference over ssh (the local ssh
    connection carries their traffic and is not followed)."""
    if not server.capabilities.followed_here:
        return False
    if workload.client_host is not None:
        return False
    return all(tool.host is None for tool in interference)


def sampled_pinned_cores(server: Handle, commands: TrialCommands) -> list[int] | None:
    """The cores interference is pinned to on the host whose cores the trial's cpu.csv
    holds (the server's host, sampled by its agent, when the server is elsewhere)."""
    here = [c for c in commands.interference if c.host == server.sampled_host]
    return next((p for c in here if (p := c.tool.pinned_cores())), None)


def process_roles(
    server_pid: int | None, workload_pid: int | None, interference: Mapping[str, int | None]
) -> dict[str, list[int]]:
    """The processes the host sampler follows, by role (``interference``: pid by the
    tool's key); a role with no process yet is left out."""
    roles = {"server": server_pid, "workload": workload_pid, **interference}
    return {role: [pid] for role, pid in roles.items() if pid}


def status_fetch(
    server: Handle, may_vanish: bool, unmeasured: bool = False
) -> tuple[Callable[[], Any], Callable[[], None]]:
    """The SHOW GLOBAL STATUS query and how to close its connection. With a fault on the
    way it reconnects, and repeats its last answer while the server is away; else one
    connection, opened now (a server that does not answer fails the trial here).
    ``unmeasured``: its connections left out of performance_schema (internals on)."""
    connect = internals.unmeasured(server.connect) if unmeasured else server.connect
    if may_vanish:
        fetch = resilient_status(connect, global_status)
        return fetch, fetch.close  # type: ignore[attr-defined]
    conn = connect()
    return (lambda: global_status(conn)), conn.close


@contextlib.contextmanager
def sampled(
    trial: SampledTrial, metrics: dict[str, float], entries: tuple[SamplerEntry, ...] = SAMPLERS
) -> Iterator[list[Any]]:
    """The trial's samplers running for the block (yielded: the trial polls their
    ``error``); after it, their files collected and summarised into ``metrics``.
    ``entries``: the registry (a test's own)."""
    chosen = select(trial_facts(trial.server, trial.sampling), entries)
    if not chosen:
        yield []
        return
    keys = frozenset(entry.key for entry in chosen)
    fetch, close_status = None, None
    if "status" in keys:
        fetch, close_status = status_fetch(trial.server, trial.faults, "internals" in keys)
    inputs = SamplerInputs(
        folder=trial.folder,
        timing=sampling.SampleTiming(
            interval=trial.sampling.interval,
            clock=trial.clock,
            t0=trial.clock() + trial.warmup,
            warmup_s=trial.warmup,
        ),
        selected=keys,
        devices=trial.sampling.devices or trial.devices,
        server_devices=trial.sampling.devices,
        processes=trial.processes,
        status=fetch,
        server_host=trial.server.host_sampler,
        server_profile=trial.server.profiler,
        profile_hz=trial.sampling.profile.cpu.frequency,
        profile_client=trial.sampling.profile.cpu.client,
        connect=trial.server.connect,
        digests=trial.sampling.internals.digests,
    )
    built: list[tuple[SamplerEntry, Any]] = []
    children: list[tuple[SamplerEntry, proc.Child | WindowStart]] = []
    try:
        built = [(entry, s) for entry in chosen if (s := entry.build(inputs)) is not None]
        children = _start_processes(chosen, inputs)
        for _, sampler in built:  # one may fail to start (the agent): stop those that did
            sampler.start()
        yield [sampler for _, sampler in built]
    finally:
        for _, sampler in built:
            sampler.stop()
        _stop_processes(children)
        if close_status is not None:
            with contextlib.suppress(Exception):
                close_status()
    _collect(built, trial.folder, metrics, trial.warnings)
    _finish(chosen, inputs, metrics, trial.warnings)
    metrics.update(
        sampling.summarize_cell(
            trial.folder,
            pinned_cores=trial.pinned_cores,
            processes_here=trial.processes_here,
            role_prefixes=trial.role_prefixes,
        )
    )


def _start_processes(
    chosen: list[SamplerEntry], inputs: SamplerInputs
) -> list[tuple[SamplerEntry, proc.Child | WindowStart]]:
    """The processes samplers asked for, each writing ``<key>.out`` in the trial's folder:
    now, or when the measured window starts (``at_window_start``)."""
    children: list[tuple[SamplerEntry, proc.Child | WindowStart]] = []
    try:
        for entry in chosen:
            out = inputs.folder / f"{entry.key}.out"
            if entry.at_window_start:
                children.append((entry, WindowStart(entry, inputs, out)))
            elif argv := entry.argv(inputs):
                children.append((entry, proc.spawn(argv, stdout=out, merge_stderr=True)))
    except BaseException:
        _stop_processes(children)
        raise
    return children


def _stop_processes(children: list[tuple[SamplerEntry, proc.Child | WindowStart]]) -> None:
    """Each with its entry's signal (perf record writes its file on SIGINT)."""
    for entry, child in children:
        child.stop(grace_s=PROCESS_STOP_GRACE_S, sig=entry.stop_signal)


class WindowStart:
    """A sampler's process started when the measured window starts (after the warm-up),
    so it sees the window only, by a thread that waits for that moment, starts it, and
    stops it when told.

    perf record's own delay (``-D``) is no substitute: threads the server creates while
    its events are held back (the connections of the warm-up) are never enabled, and
    the profile comes out empty. The thread lives as long as the process because the
    kernel's parent-death signal (``proc``'s setpriv) follows the thread that started
    it, not dbrig. A start that fails writes why in the output file (the entry's
    ``finish`` turns it into a warning)."""

    def __init__(self, entry: SamplerEntry, inputs: SamplerInputs, out: Path) -> None:
        self._entry, self._inputs, self._out = entry, inputs, out
        self._stopping = threading.Event()
        self._grace_s, self._sig = PROCESS_STOP_GRACE_S, entry.stop_signal
        self._thread = threading.Thread(target=self._run, name=f"{entry.key} sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        timing = self._inputs.timing
        if self._stopping.wait(max(0.0, timing.t0 - timing.clock())):
            return  # the trial ended during its warm-up
        if not (argv := self._entry.argv(self._inputs)):
            return
        try:
            child = proc.spawn(argv, stdout=self._out, merge_stderr=True)
        except Exception as exc:  # said in the trial's warnings instead
            with open(self._out, "a") as out:
                out.write(f"Error: could not start {argv[0]}: {exc}\n")
            return
        self._stopping.wait()
        child.stop(grace_s=self._grace_s, sig=self._sig)

    def stop(self, grace_s: float, sig: int) -> None:
        self._grace_s, self._sig = grace_s, sig
        self._stopping.set()
        self._thread.join()


def _finish(
    chosen: list[SamplerEntry],
    inputs: SamplerInputs,
    metrics: dict[str, float],
    warnings: list[str],
) -> None:
    """Each entry's command after the window (perf script), then its metrics and warnings.
    A command that fails or runs out of time is a warning of its own (what it printed
    may be cut short); the trial is still measured."""
    for entry in chosen:
        if entry.after_file is not None and (argv := entry.after(inputs)):
            out = inputs.folder / entry.after_file
            done = proc.run(argv, timeout_s=AFTER_TIMEOUT_S, stdout=out)
            if done.timed_out or done.returncode != 0:
                how = f"ran past {AFTER_TIMEOUT_S:.0f} s" if done.timed_out else done.exit_text
                command = " ".join(argv[:2])
                warnings.append(f"{entry.key}: {command} {how}: its results may be incomplete")
        if entry.finish is not None:
            _add(entry, entry.finish(inputs), metrics, warnings)


def _collect(
    built: list[tuple[SamplerEntry, Any]],
    folder: Path,
    metrics: dict[str, float],
    warnings: list[str],
) -> None:
    """A full disk stops the run; each sampler's results put in the trial's folder (the
    agent's), with what they add to the trial's metrics and warnings."""
    for _, sampler in built:
        if sampler.failure is not None and is_disk_full(sampler.failure):
            raise disk_full(folder) from sampler.failure
    for entry, sampler in built:
        if entry.collect is not None and (outcome := entry.collect(sampler, folder)):
            _add(entry, outcome, metrics, warnings)


def _add(
    entry: SamplerEntry, outcome: ProfileOutcome, metrics: dict[str, float], warnings: list[str]
) -> None:
    """What a sampler's outcome adds to the trial: only the metrics its entry declares
    (an agent's answer cannot set others), and its warnings."""
    metrics.update({k: v for k, v in outcome.metrics.items() if k in entry.metrics})
    warnings.extend(outcome.warnings)
