"""sysbench's hardware tests and Lua scripts: validation, commands, parsing, work folders."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dbrig import ownership
from dbrig.endpoint import Endpoint
from dbrig.errors import ConfigError
from dbrig.run.workdir import WorkDirHandle, check_work_parent, remove_abandoned
from dbrig.scenario import plan_from_dict
from dbrig.tools import sysbench_hw as hw
from dbrig.tools.sysbench import SysbenchParams, SysbenchTool

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sysbench"
OUTPUTS = FIXTURES / "1.0.20"
COUNTING = FIXTURES / "lua" / "counting.lua"
NOWHERE = Endpoint(user="none", database="sbtest", socket="<no server>")


def tool(**block: object) -> SysbenchTool:
    return SysbenchTool(SysbenchParams.model_validate(block))


def run_argv(**block: object) -> list[str]:
    return tool(**block).run_argv(NOWHERE, Path("sysbench"), 0)


def plan(workload: dict, **more: object) -> object:
    return plan_from_dict(
        {"name": "hw", "workload": {"sysbench": workload}, **more}, source="x.yaml"
    )


# --------------------------------------------------------------------------- commands


@pytest.mark.parametrize(
    ("block", "tail"),
    [
        ({"test": "cpu", "cpu_max_prime": 2000}, ["--cpu-max-prime=2000"]),
        (
            {"test": "memory", "memory_block_size": "4K", "memory_oper": "read"},
            ["--memory-block-size=4K", "--memory-oper=read"],
        ),
        ({"test": "threads", "thread_yields": 100}, ["--thread-yields=100"]),
        (
            {"test": "mutex", "mutex_num": 64, "mutex_loops": 0},
            ["--mutex-num=64", "--mutex-loops=0"],
        ),
        (
            {
                "test": "fileio",
                "file_test_mode": "rndrw",
                "file_extra_flags": "direct",
                "file_fsync_all": True,
            },
            [
                "--file-num=128",
                "--file-total-size=2G",
                "--file-test-mode=rndrw",
                "--file-extra-flags=direct",
                "--file-fsync-all=on",
            ],
        ),
    ],
)
def test_hardware_run_commands_have_no_database_options(block: dict, tail: list[str]) -> None:
    argv = run_argv(threads=2, time=3, **block)
    assert argv[:3] == ["sysbench", block["test"], "run"]
    assert "--threads=2" in argv and "--time=3" in argv
    assert argv[-len(tail) :] == tail
    assert not any(a.startswith(("--mysql", "--db-", "--tables")) for a in argv)


def test_only_fileio_prepares_and_nothing_cleans_up() -> None:
    fileio = tool(test="fileio", file_test_mode="rndwr", file_num=4, file_total_size="8M")
    assert fileio.prepare_argv(NOWHERE, Path("sysbench")) == [
        "sysbench",
        "fileio",
        "prepare",
        "--file-num=4",
        "--file-total-size=8M",
    ]
    assert fileio.cleanup_argv(NOWHERE, Path("sysbench")) is None  # dbrig removes its folder
    assert tool(test="cpu").prepare_argv(NOWHERE, Path("sysbench")) is None


def test_warmup_uses_checkpoints_for_hardware_tests_too() -> None:
    argv = tool(test="cpu", time=5).run_argv(NOWHERE, Path("sysbench"), 2)
    assert "--time=7" in argv and "--report-checkpoints=2" in argv


def test_hardware_tests_need_no_server_and_oltp_does() -> None:
    for test in hw.TEST_OPTIONS:
        extra = {"file_test_mode": "seqrd"} if test == "fileio" else {}
        assert not tool(test=test, **extra).needs_server
    assert tool().needs_server
    assert tool(test="cpu").title == "sysbench cpu"


def test_fileio_data_set_is_its_files_not_its_block_size_or_mode() -> None:
    """Checked on 1.0.20: the block size changes no byte of the prepared files."""
    a = tool(test="fileio", file_test_mode="seqrd", file_total_size="64M", file_block_size="4K")
    b = tool(test="fileio", file_test_mode="rndrd", file_total_size="65536K", file_block_size=16384)
    c = tool(test="fileio", file_test_mode="seqrd", file_total_size="128M")
    assert a.data_set_key() == b.data_set_key() != c.data_set_key()
    assert a.space_needed() == 64 * 2**20


def test_seqwr_makes_its_own_files_so_it_never_shares_the_prepared_ones() -> None:
    """Checked on 1.0.20: seqwr truncates the files, and later modes then fail."""
    seqwr = tool(test="fileio", file_test_mode="seqwr", file_total_size="64M")
    rndrd = tool(test="fileio", file_test_mode="rndrd", file_total_size="64M")
    assert seqwr.data_set_key() != rndrd.data_set_key()
    assert seqwr.prepare_argv(NOWHERE, Path("sysbench")) is None
    assert rndrd.prepare_argv(NOWHERE, Path("sysbench")) is not None


def test_preflight_counts_the_space_of_every_data_set(tmp_path: Path) -> None:
    from dbrig.run.preflight import _check_work_directories

    free = shutil.disk_usage(tmp_path).free
    half = f"{free * 6 // 10 // 2**20}M"  # each fits, both do not
    two = plan(
        {"test": "fileio", "file_test_mode": "rndrd", "file_total_size": half, "file_num": 1},
        matrix={"workload.sysbench.file_test_mode": ["rndrd", "seqwr"]},
    )
    with pytest.raises(ConfigError, match=r"x\.yaml: workload\.sysbench\.file_total_size: needs"):
        _check_work_directories(two, tmp_path)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"test": "disk"}, "workload.sysbench.test: Input should be"),
        (
            {"test": "cpu", "file_num": 3},
            "file_num: not an option of test cpu (it takes: cpu_max_prime)",
        ),
        (
            {"test": "fileio", "file_test_mode": "rndrw", "cpu_max_prime": 5},
            "cpu_max_prime: not an",
        ),
        ({"test": "fileio"}, "test fileio needs file_test_mode"),
        ({"test": "mutex", "tables": 4}, "tables: an OLTP option; test mutex does not take it"),
        (
            {"cpu_max_prime": 100},
            "cpu_max_prime: an option of a hardware test, not of oltp_read_write",
        ),
        ({"test": "memory", "memory_block_size": "lots"}, "expected a size such as 64M"),
        ({"test": "cpu", "bogus": 1}, "workload.sysbench.bogus"),
        ({"script": "nothere.lua"}, "workload.sysbench.script: no such Lua script"),
        ({"script": str(COUNTING), "test": "cpu"}, "give test or script, not both"),
    ],
)
def test_bad_hardware_blocks_are_one_line_naming_file_and_key(workload: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(workload)
    text = caught.value.message
    assert text.startswith("x.yaml: ") and message in text and "\n" not in text


def test_a_server_block_with_a_serverless_workload_is_refused() -> None:
    with pytest.raises(ConfigError, match="server: sysbench cpu needs no server"):
        plan({"test": "cpu"}, server={"config": {"max_connections": 10}})


def test_matrix_can_vary_the_test_with_its_own_options_per_block() -> None:
    cells = plan(
        {"test": "cpu", "time": 1},
        matrix=[
            {"workload.sysbench.cpu_max_prime": [1000, 2000]},
            {"workload.sysbench.test": ["fileio"], "workload.sysbench.file_test_mode": ["seqwr"]},
        ],
    ).cells
    assert [c.scenario.workload.sysbench.test for c in cells] == ["cpu", "cpu", "fileio"]


def test_script_is_relative_to_the_scenario_file(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "w.lua").write_text(COUNTING.read_text())
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nworkload:\n  sysbench: {script: bench/w.lua}\n")
    from dbrig.scenario import load

    params = load(scenario).scenario.workload.sysbench
    assert params.script == str((tmp_path / "bench" / "w.lua").resolve())


# --------------------------------------------------------------------------- Lua scripts


def test_script_commands_and_what_it_declares() -> None:
    script = tool(script=str(COUNTING), threads=2, options={"rounds": 10})
    assert script.needs_server  # a script is not read for clues: undeclared, it gets one
    root = COUNTING.resolve().parent
    run = script.run_argv(NOWHERE, Path("sysbench"), 0)
    lua_path = f"LUA_PATH={root}/?.lua;{root}/?/init.lua;;"
    assert run[:5] == ["env", lua_path, "sysbench", str(COUNTING.resolve()), "run"]
    assert "--rounds=10" in run and "--threads=2" in run
    assert "--mysql-socket=<no server>" in run  # connection options always
    assert script.prepare_argv(NOWHERE, Path("sysbench")) is None  # not probed, not declared
    declared = tool(script=str(COUNTING), commands=["prepare"], needs_server=False)
    assert not declared.needs_server
    assert declared.prepare_argv(NOWHERE, Path("sysbench"))[4] == "prepare"
    assert declared.cleanup_argv(NOWHERE, Path("sysbench")) is None
    assert script.inputs() == {"script": COUNTING.resolve()}


def test_script_digest_is_part_of_the_data_set(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "w.lua", tmp_path / "b" / "w.lua"
    for path in (one, two):
        path.parent.mkdir()
        path.write_text("function event() end\n")
    (two.parent / "lib.lua").write_text("x = 1\n")
    assert tool(script=str(one)).data_set_key() != tool(script=str(two)).data_set_key()


def test_script_output_parses_and_gets_an_event_rate() -> None:
    out = tool(script=str(COUNTING)).analyse((OUTPUTS / "lua_counting_run.txt").read_text(), 0)
    assert out.reason is None
    assert out.metrics["events"] == 462279
    assert out.metrics["events_per_s"] == pytest.approx(462279 / 2.0125)


def test_a_lua_error_is_the_failure_reason() -> None:
    text = (OUTPUTS / "lua_error_run.txt").read_text()
    out = tool(script=str(COUNTING)).analyse(text, 1)
    assert out.reason is not None
    assert out.reason.endswith("counting.lua:26: attempt to index local 'missing' (a nil value)")


# --------------------------------------------------------------------------- metrics per test


def test_fileio_metrics_on_a_direct_run_with_warmup() -> None:
    fileio = tool(test="fileio", file_test_mode="rndrw", file_extra_flags="direct")
    out = fileio.analyse((OUTPUTS / "fileio_direct_checkpoint_run.txt").read_text(), 0)
    m = out.metrics
    assert (m["reads_per_s"], m["read_mib_per_s"], m["written_mib_per_s"]) == (
        7854.29,
        122.72,
        81.82,
    )
    assert m["measured_time_s"] == pytest.approx(3.0011 - 1.0024)
    assert m["events_per_s"] == pytest.approx(27212 / m["measured_time_s"])
    assert out.intervals is not None and not out.intervals["measured"].iloc[0]


def test_memory_metrics_keep_mib_per_s_as_throughput() -> None:
    memory = tool(test="memory", memory_oper="read", memory_access_mode="rnd")
    out = memory.analyse((OUTPUTS / "memory_read_rnd_run.txt").read_text(), 0)
    assert out.metrics["mib_per_s"] == 855.91 and "events_per_s" not in out.metrics


def test_cpu_keeps_its_own_event_rate() -> None:
    out = tool(test="cpu").analyse((OUTPUTS / "cpu_run.txt").read_text(), 0)
    assert out.metrics["events_per_s"] == 2596.66


# --------------------------------------------------------------------------- work folders


def test_prepare_makes_the_folder_once_and_a_failed_prepare_leaves_none(tmp_path: Path) -> None:
    handle = WorkDirHandle("none", tmp_path)
    folder = handle.data_set_folder(None, "abc")
    calls: list[Path] = []

    def fails(cwd: Path) -> None:
        (cwd / "test_file.0").write_text("half")
        raise RuntimeError("killed mid-prepare")

    with pytest.raises(RuntimeError):
        handle.prepare(folder, fails, clock=lambda: 0.0)
    assert not folder.exists()  # only abc.partial, which the next attempt replaces
    assert handle.prepare(folder, calls.append, clock=lambda: 1.0) == {"prepare_s": 0.0}
    assert handle.prepare(folder, calls.append, clock=lambda: 1.0) == {}
    assert len(calls) == 1 and handle.cwd == folder and not (folder / "test_file.0").exists()
    handle.close()
    assert list(tmp_path.iterdir()) == []


def test_a_folder_left_by_a_killed_run_is_removed_and_others_are_not(tmp_path: Path) -> None:
    dead = tmp_path / ".dbrig-work-999999999"
    ownership.mark_owned(dead, "work directory")
    alive = tmp_path / f".dbrig-work-{os.getppid()}"
    ownership.mark_owned(alive, "work directory")
    foreign = tmp_path / ".dbrig-work-999999998"
    foreign.mkdir()  # no marker: not dbrig's
    assert remove_abandoned(tmp_path) == [dead]
    assert alive.exists() and foreign.exists()


def test_work_parent_checks(tmp_path: Path) -> None:
    check_work_parent(tmp_path / "not" / "yet", 1, "out")  # made later, inside tmp_path
    with pytest.raises(ConfigError, match="file_total_size: needs"):
        check_work_parent(tmp_path, 2**62, "workload.sysbench.file_total_size")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is not a directory"):
        check_work_parent(tmp_path / "file", 1, "workload.sysbench.directory")


def test_a_script_that_asks_for_a_driver_gets_a_server_and_connection_options() -> None:
    script = tool(script=str(FIXTURES / "lua" / "select_one.lua"), threads=2)
    assert script.needs_server
    endpoint = Endpoint(user="root", database="sbtest", socket="/tmp/s.sock")
    argv = script.run_argv(endpoint, Path("sysbench"), 0)
    assert "--db-driver=mysql" in argv and "--mysql-socket=/tmp/s.sock" in argv
    assert "--db-ps-mode=auto" in argv
    assert script.prepare_argv(endpoint, Path("sysbench")) is None  # it defines none


def test_script_takes_tables_when_given_and_refuses_db_keys_it_cannot_use() -> None:
    db_script = str(FIXTURES / "lua" / "select_one.lua")
    argv = tool(script=db_script, tables=4).run_argv(NOWHERE, Path("sysbench"), 0)
    assert "--tables=4" in argv and not any(a.startswith("--table-size") for a in argv)
    with pytest.raises(ConfigError, match="db_ps_mode: the script declares needs_server: false"):
        plan({"script": str(COUNTING), "db_ps_mode": "disable", "needs_server": False})


def test_a_matrix_mixing_tests_with_and_without_a_server_is_refused() -> None:
    with pytest.raises(ConfigError, match="sysbench cpu needs no server but sysbench oltp_"):
        plan({"test": "cpu"}, matrix={"workload.sysbench.test": ["cpu", "oltp_read_only"]})


def test_history_follows_the_runs_throughput_when_no_metric_is_named() -> None:
    from types import SimpleNamespace

    import pandas as pd

    from dbrig.commands.history import throughput_of

    def runs(*columns: str) -> list:
        return [SimpleNamespace(results=pd.DataFrame(columns=list(columns)))]

    assert throughput_of(runs("tps", "events_per_s")) == "tps"
    assert throughput_of(runs("events_per_s", "read_mib_per_s")) == "events_per_s"
    assert throughput_of(runs("mib_per_s")) == "mib_per_s"
    assert throughput_of(runs("latency_avg_ms")) == "tps"  # and history says it is missing
