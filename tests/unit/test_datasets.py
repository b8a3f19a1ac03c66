"""Data sets: when the run prepares, snapshots, restores and re-prepares, without a server.

The handles are fakes that subclass the real ones (so they declare the real ones'
capabilities, which ``datasets.py`` reads) with an ``__init__`` that starts
nothing; they record every call in order. ``run_prepare`` is replaced by a
recorder, except in the tests of ``run_prepare`` itself, which run a real short
process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dbrig.endpoint import Credentials, Endpoint
from dbrig.errors import ToolError
from dbrig.run import datasets
from dbrig.run.datasets import (
    data_set_id,
    prepare_steps,
    prepared_before_every_trial,
    ready_for_trial,
    run_prepare,
)
from dbrig.scenario import ExternalServer, ManagedServer
from dbrig.server.handles import ExternalServerHandle, ManagedServerHandle
from dbrig.tools.mysqlslap import MysqlslapParams, MysqlslapTool
from dbrig.tools.sysbench import SysbenchParams, SysbenchTool

BINARY = Path("/usr/bin/sysbench")
SOCKET_ENDPOINT = Endpoint(user="root", database="sbtest", socket="/tmp/sandbox/mysql.sock")
TCP_ENDPOINT = Endpoint(user="bench", database="sbtest", host="127.0.0.1", port=3306)


# ----------------------------------------------------------------------------- fakes


class FakeManaged(ManagedServerHandle):
    """A managed handle that only records: no sandbox, no datadir, no snapshots on disk."""

    def __init__(self, home: Path, calls: list[tuple]) -> None:  # no super(): starts nothing
        self.name = "db1"
        self.spec = ManagedServer(config={"innodb_buffer_pool_size": "128M"})
        self.home = home
        self.info = {}
        self.calls = calls
        self.saved: set[str] = set()
        self.cached: set[str] = set()  # what the snapshot cache holds

    def endpoint(self, database: str) -> Endpoint:
        return Endpoint(user="root", database=database, socket="/tmp/sandbox/mysql.sock")

    def has_data_set(self, digest: str) -> bool:
        return digest in self.saved

    def take_from_cache(self, digest: str) -> bool:
        if digest not in self.cached:
            return False
        self.calls.append(("take_from_cache", digest))
        self.saved.add(digest)
        return True

    def load_base(self, database: str) -> None:
        self.calls.append(("load_base", database))

    def start_for_prepare(self, database: str) -> None:
        self.calls.append(("start_for_prepare", database))

    def stop(self) -> float:
        self.calls.append(("stop",))
        return 0.1

    def save_data_set(self, digest: str, key: tuple) -> None:
        self.calls.append(("save_data_set", digest, key))
        self.saved.add(digest)

    def restore_data_set(self, digest: str) -> float:
        self.calls.append(("restore_data_set", digest))
        return 1.5

    def start(self, spec: ManagedServer) -> dict[str, float]:
        self.calls.append(("start", spec))
        return {"server_start_s": 3.0}


class FakeExternal(ExternalServerHandle):
    """An external handle that only records: no connection, no option files."""

    def __init__(self, spec: ExternalServer, home: Path, calls: list[tuple]) -> None:
        self.name = "ext"
        self.spec = spec
        self.home = home
        self.info = {}
        self._loaded = {}
        self.calls = calls

    def endpoint(self, database: str, options_text: str | None, filename: str) -> Endpoint:
        self.calls.append(("endpoint", database, options_text is not None, filename))
        return Endpoint(user="bench", database=database, host="127.0.0.1", port=3306)

    def credentials(self) -> Credentials:
        return Credentials(
            user="bench", password="s3cret", host="127.0.0.1", port=3306, socket=None
        )

    def describe_once(self) -> None:
        self.calls.append(("describe_once",))

    def ensure_database(self, database: str) -> None:
        self.calls.append(("ensure_database", database))

    def loaded(self, database: str) -> str | None:
        return super().loaded(database)

    def mark_loaded(self, database: str, digest: str) -> None:
        self.calls.append(("mark_loaded", database, digest))
        super().mark_loaded(database, digest)


@pytest.fixture
def calls() -> list[tuple]:
    """Every call on a fake handle, on ``before_start`` and on ``run_prepare``, in order."""
    return []


@pytest.fixture
def prepares(monkeypatch: pytest.MonkeyPatch, calls: list[tuple]) -> list[tuple]:
    """``run_prepare`` recorded as (name, argv, out) instead of running anything."""
    recorded: list[tuple] = []

    def fake_run_prepare(name: str, argv: list[str], out: Path) -> None:
        recorded.append((name, argv, out))
        calls.append(("run_prepare", argv[2]))  # sysbench's command word: prepare / cleanup

    monkeypatch.setattr(datasets, "run_prepare", fake_run_prepare)
    return recorded


def sysbench(table_size: int = 1000) -> SysbenchTool:
    return SysbenchTool(SysbenchParams(table_size=table_size))


def external(reset: str = "none", prepare: bool = True) -> ExternalServer:
    return ExternalServer(kind="external", user="bench", reset=reset, prepare=prepare)


def marker(calls: list[tuple]) -> Callable[[], None]:
    return lambda: calls.append(("before_start",))


def fake_clock(*readings: float) -> Callable[[], float]:
    values: Iterator[float] = iter(readings)
    return lambda: next(values)


def names(calls: list[tuple]) -> list[str]:
    return [call[0] for call in calls]


# ----------------------------------------------------------------------------- managed


def test_managed_first_trial_prepares_saves_restores_and_starts_with_the_cells_spec(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    server = FakeManaged(tmp_path, calls)
    tool = sysbench()
    cell_spec = ManagedServer(config={"innodb_buffer_pool_size": "1G"})
    key, digest = data_set_id(tool)

    timings = ready_for_trial(server, tool, cell_spec, BINARY, before_start=marker(calls))

    assert calls == [
        ("load_base", "sbtest"),
        ("start_for_prepare", "sbtest"),
        ("run_prepare", "prepare"),
        ("stop",),
        ("save_data_set", digest, key),
        ("restore_data_set", digest),
        ("before_start",),
        ("start", cell_spec),
    ]
    assert timings.pop("data_set_load_s") >= 0  # timed once, by the trial that loads it
    assert timings == {"restore_s": 1.5, "server_start_s": 3.0}
    [(name, argv, out)] = prepares
    assert name == "db1"
    assert argv[:3] == [str(BINARY), "oltp_read_write", "prepare"]
    assert "--table-size=1000" in argv
    assert out == tmp_path / "prepare.out"


def test_managed_second_trial_of_the_same_data_set_only_restores_and_starts(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    server = FakeManaged(tmp_path, calls)
    spec = ManagedServer()
    ready_for_trial(server, sysbench(), spec, BINARY)
    calls.clear()

    timings = ready_for_trial(server, sysbench(), spec, BINARY, before_start=marker(calls))

    _, digest = data_set_id(sysbench())
    assert calls == [("restore_data_set", digest), ("before_start",), ("start", spec)]
    assert len(prepares) == 1
    assert timings == {"restore_s": 1.5, "server_start_s": 3.0}


def test_managed_trial_of_another_data_set_prepares_again_under_its_own_digest(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    server = FakeManaged(tmp_path, calls)
    spec = ManagedServer()
    ready_for_trial(server, sysbench(1000), spec, BINARY)
    calls.clear()

    ready_for_trial(server, sysbench(5000), spec, BINARY)

    _, small = data_set_id(sysbench(1000))
    key, big = data_set_id(sysbench(5000))
    assert big != small
    assert names(calls) == [
        "load_base",
        "start_for_prepare",
        "run_prepare",
        "stop",
        "save_data_set",
        "restore_data_set",
        "start",
    ]
    assert ("save_data_set", big, key) in calls
    assert ("restore_data_set", big) in calls
    assert len(prepares) == 2
    assert "--table-size=5000" in prepares[1][1]
    assert server.saved == {small, big}


def test_managed_prepare_failure_stops_the_server_and_saves_nothing(
    tmp_path: Path, calls: list[tuple], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(name: str, argv: list[str], out: Path) -> None:
        raise ToolError("server 'db1': preparing the data failed: FATAL: boom")

    monkeypatch.setattr(datasets, "run_prepare", failing)
    server = FakeManaged(tmp_path, calls)

    with pytest.raises(ToolError):
        ready_for_trial(server, sysbench(), ManagedServer(), BINARY)

    assert names(calls) == ["load_base", "start_for_prepare", "stop"]
    assert server.saved == set()


def test_managed_tool_without_prepare_starts_nothing_for_it_but_still_saves_the_data_set(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    server = FakeManaged(tmp_path, calls)
    tool = MysqlslapTool(MysqlslapParams(number_of_queries=100))
    key, digest = data_set_id(tool)
    spec = ManagedServer()

    timings = ready_for_trial(server, tool, spec, BINARY, before_start=marker(calls))

    assert calls == [
        ("load_base", "mysqlslap"),
        ("save_data_set", digest, key),
        ("restore_data_set", digest),
        ("before_start",),
        ("start", spec),
    ]
    assert prepares == []
    assert timings.pop("data_set_load_s") >= 0
    assert timings == {"restore_s": 1.5, "server_start_s": 3.0}


def test_a_data_set_the_snapshot_cache_holds_is_taken_from_it_said_and_timed(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    server = FakeManaged(tmp_path, calls)
    _, digest = data_set_id(sysbench())
    server.cached.add(digest)
    said: list[str] = []
    ticks = iter([10.0, 10.25])

    timings = ready_for_trial(
        server, sysbench(), ManagedServer(), BINARY, clock=lambda: next(ticks), say=said.append
    )

    assert calls[0] == ("take_from_cache", digest) and prepares == []
    assert timings["data_set_cache_s"] == 0.25 and "data_set_load_s" not in timings
    assert said == [f"data set {digest}: from the snapshot cache in 0.2 s (no init, no prepare)"]


def test_a_data_set_load_is_said_before_and_after(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    server = FakeManaged(tmp_path, calls)
    _, digest = data_set_id(sysbench())
    said: list[str] = []
    ticks = iter([0.0, 612.4])
    ready_for_trial(
        server, sysbench(), ManagedServer(), BINARY, clock=lambda: next(ticks), say=said.append
    )
    assert said == [
        f"data set {digest}: loading it on server 'db1' (init, prepare, snapshot)",
        f"data set {digest}: loaded in 612.4 s; every trial restores it from its snapshot",
    ]
    said.clear()
    ready_for_trial(server, sysbench(), ManagedServer(), BINARY, say=said.append)
    assert said == []  # restored, not loaded: nothing to say


# ----------------------------------------------------------------------------- external


def test_external_reset_none_cleans_up_and_prepares_only_when_the_data_set_changes(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    spec = external("none")
    server = FakeExternal(spec, tmp_path, calls)
    _, small = data_set_id(sysbench(1000))
    _, big = data_set_id(sysbench(5000))

    first = ready_for_trial(server, sysbench(1000), spec, BINARY, clock=fake_clock(0.0, 2.5))
    assert [p[1][2] for p in prepares] == ["cleanup", "prepare"]
    assert first == {"reset_s": 2.5}
    assert server.loaded("sbtest") == small

    second = ready_for_trial(server, sysbench(1000), spec, BINARY, clock=fake_clock())
    assert second == {}
    assert len(prepares) == 2

    third = ready_for_trial(server, sysbench(5000), spec, BINARY, clock=fake_clock(10.0, 11.0))
    assert third == {"reset_s": 1.0}
    assert [p[1][2] for p in prepares[2:]] == ["cleanup", "prepare"]
    assert "--table-size=5000" in prepares[3][1]
    assert server.loaded("sbtest") == big


def test_external_prepare_runs_cleanup_then_prepare_after_ensuring_the_database(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    spec = external("none")
    server = FakeExternal(spec, tmp_path, calls)
    _, digest = data_set_id(sysbench())

    ready_for_trial(server, sysbench(), spec, BINARY, before_start=marker(calls))

    assert calls == [
        ("before_start",),
        ("describe_once",),
        ("ensure_database", "sbtest"),
        ("endpoint", "sbtest", True, "sysbench.cnf"),  # the password goes to an option file
        ("run_prepare", "cleanup"),
        ("run_prepare", "prepare"),
        ("mark_loaded", "sbtest", digest),
    ]
    assert [(p[0], p[2]) for p in prepares] == [
        ("ext", tmp_path / "cleanup.out"),
        ("ext", tmp_path / "prepare.out"),
    ]


def test_external_reset_reprepare_cleans_up_and_prepares_before_every_trial(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    spec = external("reprepare")
    server = FakeExternal(spec, tmp_path, calls)

    for _ in range(3):
        timings = ready_for_trial(server, sysbench(), spec, BINARY, clock=fake_clock(0.0, 2.5))
        assert timings == {"reset_s": 2.5}

    assert [p[1][2] for p in prepares] == ["cleanup", "prepare"] * 3


def test_external_prepare_false_never_loads_anything(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    spec = external("reprepare", prepare=False)
    server = FakeExternal(spec, tmp_path, calls)

    for table_size in (1000, 1000, 5000):
        timings = ready_for_trial(
            server, sysbench(table_size), spec, BINARY, before_start=marker(calls)
        )
        assert timings == {}

    assert prepares == []
    assert "ensure_database" not in names(calls)
    assert "mark_loaded" not in names(calls)
    assert names(calls).count("before_start") == 3


def test_external_before_start_is_called_even_when_nothing_is_prepared(
    tmp_path: Path, calls: list[tuple], prepares: list[tuple]
) -> None:
    spec = external("none")
    server = FakeExternal(spec, tmp_path, calls)
    ready_for_trial(server, sysbench(), spec, BINARY)
    calls.clear()

    timings = ready_for_trial(server, sysbench(), spec, BINARY, before_start=marker(calls))

    assert timings == {}
    assert calls == [("before_start",), ("describe_once",)]


def test_external_failed_prepare_forgets_the_data_set_its_cleanup_dropped(
    tmp_path: Path, calls: list[tuple], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = external("none")
    server = FakeExternal(spec, tmp_path, calls)
    ran: list[str] = []

    def prepare_fails_for_5000_rows(name: str, argv: list[str], out: Path) -> None:
        ran.append(argv[2])
        if argv[2] == "prepare" and "--table-size=5000" in argv:
            raise ToolError("server 'ext': preparing the data failed: FATAL: disk full")

    monkeypatch.setattr(datasets, "run_prepare", prepare_fails_for_5000_rows)
    ready_for_trial(server, sysbench(1000), spec, BINARY)
    with pytest.raises(ToolError):
        ready_for_trial(server, sysbench(5000), spec, BINARY)  # its cleanup dropped sbtest
    ran.clear()

    ready_for_trial(server, sysbench(1000), spec, BINARY)

    assert ran == ["cleanup", "prepare"]  # the 1000-row tables are gone: load them again


# ----------------------------------------------------------------------------- steps


def test_prepare_steps_on_a_managed_server_is_prepare_only() -> None:
    steps = prepare_steps(sysbench(), ManagedServer(), SOCKET_ENDPOINT, BINARY)

    assert [s.name for s in steps] == ["prepare"]
    assert steps[0].argv[2] == "prepare"
    assert steps[0].output == "prepare.out"


def test_prepare_steps_on_an_external_server_is_cleanup_then_prepare() -> None:
    steps = prepare_steps(sysbench(), external("none"), TCP_ENDPOINT, BINARY)

    assert [s.name for s in steps] == ["cleanup", "prepare"]
    assert [s.argv[2] for s in steps] == ["cleanup", "prepare"]
    assert [s.output for s in steps] == ["cleanup.out", "prepare.out"]


def test_prepare_steps_on_an_external_server_with_prepare_false_is_empty() -> None:
    assert prepare_steps(sysbench(), external("reprepare", False), TCP_ENDPOINT, BINARY) == []


def test_prepare_steps_skip_a_tool_without_prepare_or_cleanup() -> None:
    tool = MysqlslapTool(MysqlslapParams(number_of_queries=100))

    assert prepare_steps(tool, ManagedServer(), SOCKET_ENDPOINT, BINARY) == []
    assert prepare_steps(tool, external("reprepare"), TCP_ENDPOINT, BINARY) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ManagedServer(), False),
        (external("none"), False),
        (external("reprepare"), True),
        (external("reprepare", prepare=False), False),
    ],
    ids=["managed", "external-none", "external-reprepare", "external-prepare-false"],
)
def test_only_external_reprepare_prepares_before_every_trial(spec: Any, expected: bool) -> None:
    assert prepared_before_every_trial(spec) is expected


# ----------------------------------------------------------------------------- run_prepare


def test_run_prepare_failure_is_one_line_naming_the_server_and_the_fatal_line(
    tmp_path: Path,
) -> None:
    out = tmp_path / "prepare.out"

    with pytest.raises(ToolError) as raised:
        run_prepare("db1", ["sh", "-c", "echo starting; echo FATAL: boom; exit 3"], out)

    message = raised.value.message
    assert "\n" not in message
    assert "'db1'" in message
    assert "FATAL: boom" in message
    assert "starting" in out.read_text()


def test_run_prepare_failure_without_output_names_the_exit_code(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="exit 3"):
        run_prepare("db1", ["sh", "-c", "exit 3"], tmp_path / "prepare.out")


def test_run_prepare_success_returns_none(tmp_path: Path) -> None:
    out = tmp_path / "prepare.out"

    assert run_prepare("db1", ["sh", "-c", "echo done"], out) is None
    assert out.read_text().strip() == "done"


# ----------------------------------------------------------------------------- data_set_id


def test_data_set_id_is_stable_for_equal_keys() -> None:
    first = data_set_id(sysbench(1000))
    again = data_set_id(SysbenchTool(SysbenchParams(table_size=1000, threads=64, time=30)))

    assert first == again
    key, digest = first
    assert key == sysbench(1000).data_set_key()
    assert len(digest) == 12
    assert all(c in "0123456789abcdef" for c in digest)


def test_data_set_id_differs_for_different_keys() -> None:
    small_key, small = data_set_id(sysbench(1000))
    big_key, big = data_set_id(sysbench(5000))
    _, other_tables = data_set_id(SysbenchTool(SysbenchParams(tables=4)))

    assert small_key != big_key
    assert len({small, big, other_tables}) == 3
