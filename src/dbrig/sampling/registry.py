"""Every sampler a trial may run, one entry each, as ``tools/registry.py`` lists the tools.

An entry (:class:`SamplerEntry`) declares what it samples, the files it writes in the
trial's folder, the metric columns its summary gives (entries of :mod:`dbrig.metrics`),
where it runs (:class:`Where`), when it applies to a trial (``applies``, given the
facts of :class:`TrialFacts`) and how it is built from what the run side hands it
(:class:`SamplerInputs`). ``run/samplers.py`` asks :func:`select` which entries apply,
builds them, starts and stops them as one unit and summarises the files.

A sampler that needs a process of its own (``perf record``, ``iostat``) does not start
it: its ``argv`` describes the command, and the run side starts it through
:mod:`dbrig.proc` for the trial's window (its output in ``<key>.out``) and stops it
with the other samplers, as it does for a tool. So sampling/ stays free of processes
(tested on captured output, like a tool's parser), and every child of a trial has
one owner that logs it, puts it in its process group and stops it on every way out.

Adding a sampler: docs/architecture.md, "Adding a sampler".
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from dbrig.sampling import internals, profile
from dbrig.sampling.host import HostSampler
from dbrig.sampling.schedule import SampleTiming
from dbrig.sampling.status import StatusSampler

# With the server's host sampled there, dbrig's own host sampler samples the client's
# host into this folder of the trial (remote/samples.py merges the two).
CLIENT_FOLDER = "client"


class Where(Enum):
    """Where a sampler runs."""

    HERE = "here"  # on the machine dbrig runs on
    SERVER_HOST = "the server's host"  # on the server's host, through its handle (the agent)


class Sampler(Protocol):
    """What the run side does with a built sampler (``sampling.base._Sampler`` is one)."""

    error: str | None  # why the trial must stop, set while it runs
    failure: BaseException | None  # the exception behind ``error``, when there was one

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class TrialFacts:
    """What decides which samplers a trial gets: its server's capabilities and the
    scenario's ``sampling:`` block (run/samplers.py reads them off the trial)."""

    enabled: bool  # sampling.enabled
    server_status: bool  # SHOW GLOBAL STATUS can be read (the handle's ``status``)
    server_samples_its_host: bool  # the handle's ``samples_its_host`` (the agent)
    profile_hz: int = 0  # sampling.profile.cpu.frequency (0: no CPU profile)
    internals: bool = False  # sampling.internals.enabled


@dataclass(frozen=True)
class SamplerInputs:
    """What the run side hands the builders of one trial's samplers."""

    folder: Path  # the trial's folder
    timing: SampleTiming
    selected: frozenset[str]  # the keys of every entry chosen for this trial
    devices: list[str] | None  # this machine's block devices to record (None: every disk)
    server_devices: list[str] | None  # the scenario's sampling.devices, for the server's host
    processes: Callable[[], Mapping[str, list[int]]]  # role -> pids, asked at every sample
    # SHOW GLOBAL STATUS, name -> value (reconnecting when a fault may take the server away)
    status: Callable[[], Mapping[str, Any]] | None
    server_host: Callable[[SampleTiming, list[str] | None], Any] | None  # the handle's
    # The handle's CPU profile of its server on its own host (timing, frequency): the agent's
    server_profile: Callable[[SampleTiming, int], Any] | None = None
    profile_hz: int = 0  # sampling.profile.cpu.frequency
    profile_client: bool = False  # sampling.profile.cpu.client
    connect: Callable[[], Any] | None = None  # a new connection to the trial's server
    digests: int = 0  # sampling.internals.digests


@dataclass(frozen=True)
class SamplerEntry:
    """One sampler: what it samples, what it gives, where it runs, when and how."""

    key: str
    samples: str  # one line, for docs and ``dbrig doctor``
    files: tuple[str, ...]  # written in the trial's folder (each module documents its columns)
    metrics: tuple[str, ...]  # summary columns, each an entry of dbrig.metrics
    where: Where
    applies: Callable[[TrialFacts], bool]
    # The sampler, or None when its samples are taken by the thread of entry ``shares``.
    build: Callable[[SamplerInputs], Sampler | None]
    shares: str | None = None
    # A process the run side starts through dbrig.proc for the window (None: none).
    argv: Callable[[SamplerInputs], list[str] | None] = lambda inputs: None
    # After every sampler of the trial stopped: its results put in the trial's folder,
    # and what they add to the trial (metrics, lines for its warnings), if anything.
    collect: Callable[[Any, Path], profile.ProfileOutcome | None] | None = None
    # ``argv``'s process starts when the measured window does (after the warm-up), not
    # with the other samplers: its samples are the window's only.
    at_window_start: bool = False
    # What stops ``argv``'s process so that it writes its file (perf record: SIGINT).
    stop_signal: int = signal.SIGTERM
    # After ``argv``'s process stopped: a command the run side runs to completion, its
    # stdout in ``after_file`` of the trial's folder (``perf script``).
    after: Callable[[SamplerInputs], list[str] | None] = lambda inputs: None
    after_file: str | None = None
    # Last: the metrics and the lines for the trial's warnings, read from its files.
    finish: Callable[[SamplerInputs], profile.ProfileOutcome] | None = None


def _host(inputs: SamplerInputs) -> Sampler:
    here_only = "server-host" not in inputs.selected
    return HostSampler(
        inputs.folder if here_only else inputs.folder / CLIENT_FOLDER,
        timing=inputs.timing,
        processes=inputs.processes if "processes" in inputs.selected else None,
        devices=inputs.devices,
    )


def _status(inputs: SamplerInputs) -> Sampler:
    assert inputs.status is not None, "the status sampler needs the server's status query"
    return StatusSampler(inputs.folder, timing=inputs.timing, fetch=inputs.status)


def _server_host(inputs: SamplerInputs) -> Sampler:
    assert inputs.server_host is not None, "the server's handle samples no host of its own"
    return inputs.server_host(inputs.timing, inputs.server_devices)


def _collect_server_host(sampler: Any, folder: Path) -> None:
    sampler.collect(folder)


def _server_profile(inputs: SamplerInputs) -> Sampler:
    assert inputs.server_profile is not None, "the server's handle records no profile there"
    sampler = inputs.server_profile(inputs.timing, inputs.profile_hz)
    assert sampler is not None, "the server's handle records no profile there"
    return sampler


def _collect_server_profile(sampler: Any, folder: Path) -> profile.ProfileOutcome:
    return sampler.collect(folder)


def _server_pid(inputs: SamplerInputs) -> int | None:
    pids = inputs.processes().get("server")
    return pids[0] if pids else None


def _perf_record(inputs: SamplerInputs) -> list[str] | None:
    """perf record of the server, and of the client when asked (None: no server pid)."""
    pid = _server_pid(inputs)
    if pid is None:
        return None
    pids = [pid]
    if inputs.profile_client:
        pids += inputs.processes().get("workload", [])
    return profile.record_argv(pids, inputs.profile_hz, inputs.folder / profile.PERF_DATA)


def _perf_script(inputs: SamplerInputs) -> list[str] | None:
    data = inputs.folder / profile.PERF_DATA
    return profile.script_argv(data) if data.exists() else None


def _profile_outcome(inputs: SamplerInputs) -> profile.ProfileOutcome:
    return profile.finish(inputs.folder, _server_pid(inputs))


def _internals(inputs: SamplerInputs) -> Sampler:
    assert inputs.connect is not None, "internals need a connection to the server"
    return internals.InternalsSampler(inputs.folder, inputs.timing, inputs.connect, inputs.digests)


def _internals_outcome(inputs: SamplerInputs) -> profile.ProfileOutcome:
    return internals.finish(inputs.folder)


HOST_METRICS = (
    "cpu_busy_pct",
    "cpu_busy_pct_core<N>",
    "pinned_cores_busy_pct",
    "iowait_pct",
    "steal_pct",
    "disk_iops",
    "disk_read_mb_per_s",
    "disk_write_mb_per_s",
    "disk_await_ms",
    "disk_util_pct",
    "swap_in_mb_per_s",
    "swap_out_mb_per_s",
    "mem_available_mb_min",
    "other_cpu_pct",
    "sampler_cpu_pct",
)
_PER_PROCESS = ("cpu_pct", "cpu_s", "rss_mb_max", "ctx_switches", "read_mb_per_s", "write_mb_per_s")
# Per role: the server, the workload, each interference tool (its key), the kernel threads.
PROCESS_METRICS = (
    *(f"{role}_{what}" for role in ("server", "workload") for what in _PER_PROCESS),
    "kernel_cpu_pct",
    "kernel_cpu_s",
)

SAMPLERS: tuple[SamplerEntry, ...] = (
    SamplerEntry(
        key="host",
        samples="this machine's CPU per core, disks and memory (psutil)",
        files=("cpu.csv", "disk.csv", "memory.csv", "sampler.csv"),
        metrics=HOST_METRICS,
        where=Where.HERE,
        applies=lambda facts: facts.enabled,
        build=_host,
    ),
    SamplerEntry(
        key="processes",
        samples="CPU, memory, context switches and I/O of the trial's processes, by role",
        files=("procs.csv",),
        metrics=PROCESS_METRICS,
        where=Where.HERE,
        applies=lambda facts: facts.enabled,
        build=lambda inputs: None,
        shares="host",  # one pass over /proc per tick, on the host sampler's thread
    ),
    SamplerEntry(
        key="server-host",
        samples="the server's host (CPU per core, disks, memory, the server's processes), "
        "by the agent there",
        files=("cpu.csv", "disk.csv", "memory.csv", "procs.csv", "sampler.csv"),
        metrics=(*HOST_METRICS, *(f"server_{what}" for what in _PER_PROCESS)),
        where=Where.SERVER_HOST,
        applies=lambda facts: facts.enabled and facts.server_samples_its_host,
        build=_server_host,
        collect=_collect_server_host,
    ),
    SamplerEntry(
        key="status",
        samples="the server's SHOW GLOBAL STATUS (counters as rates, gauges as values)",
        files=("status.csv", "sampler.csv"),
        metrics=("questions_per_s", "buffer_pool_hit_ratio"),
        where=Where.HERE,  # a query over the network from here
        applies=lambda facts: facts.enabled and facts.server_status,
        build=_status,
    ),
    SamplerEntry(
        key="profile",
        samples="the server's CPU stacks (and the client's, when asked) over the measured "
        "window (perf record), folded",
        files=(profile.FOLDED, profile.RECORD_OUT),
        metrics=("profile_samples",),
        where=Where.HERE,
        applies=lambda facts: facts.profile_hz > 0 and not facts.server_samples_its_host,
        build=lambda inputs: None,
        argv=_perf_record,
        at_window_start=True,  # the measured window only
        stop_signal=signal.SIGINT,  # perf record writes its file on SIGINT
        after=_perf_script,
        after_file=profile.SCRIPT,
        finish=_profile_outcome,
    ),
    SamplerEntry(
        key="server-profile",
        samples="the server's CPU stacks over the measured window, recorded (perf record) "
        "and folded on its host by the agent there",
        files=(profile.FOLDED, profile.RECORD_OUT),
        metrics=("profile_samples",),
        where=Where.SERVER_HOST,
        applies=lambda facts: facts.profile_hz > 0 and facts.server_samples_its_host,
        build=_server_profile,
        collect=_collect_server_profile,
    ),
    SamplerEntry(
        key="internals",
        samples="the server's wait events and statement digests (performance_schema), "
        "INNODB_METRICS and SHOW ENGINE INNODB STATUS, as deltas over the measured window",
        files=internals.FILES,
        metrics=("server_wait_s",),
        where=Where.HERE,  # queries over the network from here
        applies=lambda facts: facts.internals and facts.server_status,
        build=_internals,
        finish=_internals_outcome,
    ),
)


def select(facts: TrialFacts, entries: tuple[SamplerEntry, ...] = SAMPLERS) -> list[SamplerEntry]:
    """The entries that apply to a trial with these ``facts``, in registry order (the
    order they start and stop in)."""
    return [entry for entry in entries if entry.applies(facts)]


def sampler_entry(key: str) -> SamplerEntry:
    for entry in SAMPLERS:
        if entry.key == key:
            return entry
    raise KeyError(key)
