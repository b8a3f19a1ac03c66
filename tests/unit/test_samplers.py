"""The sampler seam: which samplers a trial gets, and the handles' declared capabilities.

The registry (sampling/registry.py) is asked with facts read off fake handles that
declare the real handles' capabilities; ``run.samplers.sampled`` runs a registry of
fakes (a threaded sampler that records, and one that asks for a real short process).
"""

from __future__ import annotations

import dataclasses
import inspect
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dbrig import metrics, proc
from dbrig.remote.server import RemoteServerHandle
from dbrig.run import samplers
from dbrig.run.commands import InterferenceCommand, TrialCommands
from dbrig.run.workdir import WorkDirHandle
from dbrig.sampling.profile import ProfileOutcome
from dbrig.sampling.registry import (
    CLIENT_FOLDER,
    SAMPLERS,
    SamplerEntry,
    SamplerInputs,
    TrialFacts,
    Where,
    sampler_entry,
    select,
)
from dbrig.sampling.schedule import SampleTiming
from dbrig.scenario.model import Sampling
from dbrig.server.handles import ExternalServerHandle, ManagedServerHandle
from dbrig.server.protocol import Capabilities, ClientRoute, DataSets, Handle

HANDLES = (ManagedServerHandle, ExternalServerHandle, RemoteServerHandle, WorkDirHandle)


@dataclass
class FakeHandle:
    """A handle that declares the capabilities of ``like`` and starts nothing."""

    like: type
    sampled_host: str | None = None
    pid: int | None = 4242
    connects: int = 0

    @property
    def capabilities(self) -> Capabilities:
        return self.like.capabilities

    def connect(self) -> Any:
        self.connects += 1
        return FakeConnection(self.connects)

    def host_sampler(self, timing: SampleTiming, devices: list[str] | None) -> Any:
        return RecordingSampler("server-host", devices=devices)

    def profiler(self, timing: SampleTiming, frequency: int) -> Any:
        return RecordingSampler("server-profile")


class FakeConnection:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    def cursor(self) -> Any:
        return FakeCursor(self)

    def close(self) -> None:
        self.closed = True


class FakeCursor:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str) -> None:
        if self.conn.closed:
            raise ConnectionError("gone")
        assert sql == "SHOW GLOBAL STATUS"

    def fetchall(self) -> list[tuple[str, str]]:
        return [("Questions", str(self.conn.number))]


@dataclass
class RecordingSampler:
    key: str
    devices: list[str] | None = None
    log: list[str] = field(default_factory=list)
    error: str | None = None
    failure: BaseException | None = None

    def start(self) -> None:
        self.log.append(f"start {self.key}")

    def stop(self) -> None:
        self.log.append(f"stop {self.key}")


def _facts(handle: Any, *, enabled: bool = True) -> TrialFacts:
    return samplers.trial_facts(handle, Sampling(enabled=enabled))


def _keys(handle: Any, **kwargs: Any) -> list[str]:
    return [entry.key for entry in select(_facts(handle, **kwargs))]


# ------------------------------------------------------------------- which samplers


def test_a_trial_with_no_server_gets_no_status_sampler() -> None:
    assert _keys(FakeHandle(WorkDirHandle)) == ["host", "processes"]


def test_an_external_server_is_queried_but_its_processes_are_not_followed_here() -> None:
    handle = FakeHandle(ExternalServerHandle, pid=None)
    assert _keys(handle) == ["host", "processes", "status"]
    workload = _Workload()
    assert not samplers.processes_here(handle, workload, [])


def test_a_remote_managed_server_has_its_host_sampled_there_and_the_client_here() -> None:
    handle = FakeHandle(RemoteServerHandle, sampled_host="db1", pid=None)
    chosen = select(_facts(handle))
    assert [e.key for e in chosen] == ["host", "processes", "server-host", "status"]
    assert sampler_entry("server-host").where is Where.SERVER_HOST
    inputs = _inputs(Path("/t"), frozenset(e.key for e in chosen))
    host = sampler_entry("host").build(inputs)
    assert host.cell_dir == Path("/t") / CLIENT_FOLDER  # the client's host, beside the agent's
    assert not samplers.processes_here(handle, _Workload(), [])


def test_a_local_managed_server_with_a_fault_gets_the_same_samplers() -> None:
    handle = FakeHandle(ManagedServerHandle)
    assert _keys(handle) == ["host", "processes", "status"]  # the query reconnects: below
    assert samplers.processes_here(handle, _Workload(), [])
    host = sampler_entry("host").build(_inputs(Path("/t"), frozenset({"host", "processes"})))
    assert host.cell_dir == Path("/t")


def test_sampling_off_starts_nothing() -> None:
    for like in HANDLES:
        assert _keys(FakeHandle(like), enabled=False) == []


def test_a_fault_trials_status_query_reconnects_and_repeats_its_last_answer() -> None:
    handle = FakeHandle(ManagedServerHandle)
    fetch, close = samplers.status_fetch(handle, may_vanish=True)
    assert fetch() == {"Questions": "1"}
    close()  # as if the server went away: the next query reconnects
    assert fetch() == {"Questions": "2"}
    assert handle.connects == 2
    close()


def test_a_plain_status_query_uses_one_connection_opened_at_once() -> None:
    handle = FakeHandle(ExternalServerHandle)
    fetch, close = samplers.status_fetch(handle, may_vanish=False)
    assert handle.connects == 1
    assert fetch() == fetch() == {"Questions": "1"}
    close()
    with pytest.raises(ConnectionError):
        fetch()


# ------------------------------------------------------------------- the registry itself


def test_every_entry_is_unique_and_its_metrics_are_in_the_metric_registry() -> None:
    keys = [entry.key for entry in SAMPLERS]
    assert len(keys) == len(set(keys))
    for entry in SAMPLERS:
        assert entry.samples and entry.files, entry.key
        named = [name.replace("<N>", "0") for name in entry.metrics]  # cpu_busy_pct_core<N>
        unknown = [name for name in named if metrics.metric(name) is None]
        assert not unknown, f"{entry.key}: {unknown} not in dbrig.metrics"
        assert entry.shares is None or entry.shares in keys


def test_pinned_cores_are_those_on_the_host_cpu_csv_describes() -> None:
    here, there = _Pinned([0]), _Pinned([1])
    commands = TrialCommands(
        workload=None,  # type: ignore[arg-type]
        argv=[],
        timeout_s=1,
        interference=[
            InterferenceCommand(there, [], 1, "i1", host="db1"),
            InterferenceCommand(here, [], 1, "i2"),
        ],
    )
    assert samplers.sampled_pinned_cores(FakeHandle(ManagedServerHandle), commands) == [0]
    remote = FakeHandle(RemoteServerHandle, sampled_host="db1")
    assert samplers.sampled_pinned_cores(remote, commands) == [1]


def test_process_roles_leave_out_what_has_no_process_yet() -> None:
    roles = samplers.process_roles(10, None, {"stress-ng": 12, "other": None})
    assert roles == {"server": [10], "stress-ng": [12]}


# ------------------------------------------------------------------- one unit


def test_samplers_start_and_stop_as_one_unit_and_a_process_is_stopped_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    started: list[proc.Child] = []
    real_spawn = proc.spawn

    def spawn(argv: list[str], **kwargs: Any) -> proc.Child:
        started.append(real_spawn(argv, **kwargs))
        return started[-1]

    entries = (
        _entry("first", lambda inputs: RecordingSampler("first", log=log)),
        _entry(
            "ticker",
            lambda inputs: None,
            argv=lambda inputs: [sys.executable, "-c", "import time; time.sleep(60)"],
        ),
        _entry(
            "second",
            lambda inputs: RecordingSampler("second", log=log),
            collect=lambda sampler, folder: log.append(f"collect {sampler.key}"),
        ),
    )
    trial = _trial(tmp_path, FakeHandle(ManagedServerHandle))
    found: dict[str, float] = {}
    monkeypatch.setattr(proc, "spawn", spawn)
    with samplers.sampled(trial, found, entries) as running:
        assert [s.key for s in running] == ["first", "second"]
        assert started and started[0].wait(0) is None  # running for the window
    assert log == ["start first", "start second", "stop first", "stop second", "collect second"]
    assert started[0].wait(5) is not None, "the sampler's process was stopped"
    assert (tmp_path / "ticker.out").is_file()


def test_a_window_process_starts_after_the_warm_up_and_its_outcome_reaches_the_trial(
    tmp_path: Path,
) -> None:
    """``at_window_start``: started when the window starts, by a thread that outlives the
    start (setpriv's parent-death signal follows that thread); stopped with the entry's
    signal; then its command after the window, and its metrics and warnings."""
    marker = tmp_path / "started"
    script = (
        "import pathlib, signal, sys, time\n"
        f"pathlib.Path({str(marker)!r}).write_text(str(time.monotonic()))\n"
        "signal.signal(signal.SIGINT, lambda *a: (print('flushed'), sys.exit(0)))\n"
        "time.sleep(60)\n"
    )
    entries = (
        SamplerEntry(
            key="window",
            samples="window",
            files=(),
            metrics=("window_x",),
            where=Where.HERE,
            applies=lambda facts: True,
            build=lambda inputs: None,
            argv=lambda inputs: [sys.executable, "-c", script],
            at_window_start=True,
            stop_signal=signal.SIGINT,
            after=lambda inputs: [sys.executable, "-c", "print('after')"],
            after_file="window.after",
            finish=lambda inputs: ProfileOutcome({"window_x": 1.0}, ("window: a line",)),
        ),
    )
    trial = dataclasses.replace(
        _trial(tmp_path, FakeHandle(ManagedServerHandle)), warmup=1, clock=time.monotonic
    )
    found: dict[str, float] = {}
    entered = time.monotonic()
    with samplers.sampled(trial, found, entries):
        assert not marker.exists()  # the warm-up
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the child installs its handler
    assert float(marker.read_text()) - entered >= 0.9
    assert (tmp_path / "window.out").read_text() == "flushed\n"  # SIGINT, not SIGTERM
    assert (tmp_path / "window.after").read_text() == "after\n"
    assert found["window_x"] == 1.0 and trial.warnings == ["window: a line"]


def test_a_window_process_never_starts_when_the_trial_ends_in_its_warm_up(
    tmp_path: Path,
) -> None:
    entries = (
        _entry("window", lambda inputs: None, argv=lambda inputs: ["false"], at_window_start=True),
    )
    trial = dataclasses.replace(
        _trial(tmp_path, FakeHandle(ManagedServerHandle)), warmup=30, clock=time.monotonic
    )
    with samplers.sampled(trial, {}, entries):
        pass
    assert not (tmp_path / "window.out").exists()


def test_a_failing_after_command_is_a_warning_and_the_trial_goes_on(tmp_path: Path) -> None:
    failing = [sys.executable, "-c", "import sys; sys.exit(3)"]
    entries = (
        _entry("late", lambda inputs: None, after=lambda inputs: failing, after_file="late.txt"),
    )
    trial = _trial(tmp_path, FakeHandle(ManagedServerHandle))
    with samplers.sampled(trial, {}, entries):
        pass
    assert trial.warnings == [f"late: {sys.executable} -c exit 3: its results may be incomplete"]


def test_the_handles_declare_every_member_of_the_protocol() -> None:
    members = [
        name
        for name, value in vars(Handle).items()
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))
    ]
    for handle in HANDLES:
        assert isinstance(handle.capabilities, Capabilities), handle.__name__
        missing = [name for name in members if not hasattr(handle, name)]
        assert not missing, f"{handle.__name__} lacks {missing}"


def test_the_capabilities_each_handle_declares() -> None:
    managed, external = ManagedServerHandle.capabilities, ExternalServerHandle.capabilities
    remote, none = RemoteServerHandle.capabilities, WorkDirHandle.capabilities
    assert [c.data_sets for c in (managed, external, remote, none)] == [
        DataSets.SNAPSHOTS,
        DataSets.IN_DATABASE,
        DataSets.SNAPSHOTS,
        DataSets.FOLDER,
    ]
    assert [c.client_route for c in (managed, external, remote, none)] == [
        ClientRoute.FORWARDED,
        ClientRoute.DIRECT,
        ClientRoute.DIRECT,
        ClientRoute.NONE,
    ]
    assert [c.faults for c in (managed, external, remote, none)] == [True, False, False, False]
    assert not none.status and managed.status and external.status and remote.status
    assert remote.samples_its_host and not (managed.samples_its_host or none.samples_its_host)


# ------------------------------------------------------------------- helpers


class _Workload:
    """A local client: the seam's ``client_host`` is None."""

    params = None
    client_host = None


@dataclass
class _Pinned:
    cores: list[int]
    params: Any = None

    def pinned_cores(self) -> list[int]:
        return self.cores


def _entry(key: str, build: Any, **kwargs: Any) -> SamplerEntry:
    return SamplerEntry(
        key=key,
        samples=key,
        files=(),
        metrics=(),
        where=Where.HERE,
        applies=lambda facts: facts.enabled,
        build=build,
        **kwargs,
    )


def _inputs(folder: Path, selected: frozenset[str]) -> SamplerInputs:
    return SamplerInputs(
        folder=folder,
        timing=SampleTiming(),
        selected=selected,
        devices=None,
        server_devices=None,
        processes=lambda: {},
        status=None,
        server_host=None,
    )


def _trial(folder: Path, handle: Any) -> samplers.SampledTrial:
    return samplers.SampledTrial(
        folder,
        handle,
        Sampling(),
        warmup=0,
        clock=lambda: 0.0,
        devices=None,
        faults=False,
        processes=lambda: {},
        pinned_cores=None,
        processes_here=True,
    )


@dataclass
class _AgentsProfile(RecordingSampler):
    def collect(self, folder: Path) -> ProfileOutcome:
        (folder / "profile.folded").write_text("mariadbd;do_command 3\n")
        # tps: a metric the entry does not declare, which the answer cannot set
        metrics = {"profile_samples": 3.0, "tps": 1e9}
        return ProfileOutcome(metrics, ("profile: a line from there",))


def test_a_server_whose_agent_samples_its_host_is_profiled_by_its_handle(tmp_path: Path) -> None:
    """The agent records and folds there: what its ``collect`` gives reaches the trial."""

    class Remote(FakeHandle):
        def profiler(self, timing: SampleTiming, frequency: int) -> Any:
            assert frequency == 99
            return _AgentsProfile("server-profile")

    trial = dataclasses.replace(
        _trial(tmp_path, Remote(RemoteServerHandle)),
        sampling=Sampling(enabled=False, profile={"cpu": {"frequency": 99}}),
    )
    found: dict[str, float] = {}
    with samplers.sampled(trial, found) as running:
        assert [s.key for s in running] == ["server-profile"]
    assert found == {"profile_samples": 3.0}
    assert trial.warnings == ["profile: a line from there"]
    assert (tmp_path / "profile.folded").read_text() == "mariadbd;do_command 3\n"
