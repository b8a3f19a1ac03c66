"""``--dry-run`` shows what loads each data set and when, as the run will do it (no server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dbrig.run.commands import interference_limit_s, workload_timeout_s
from dbrig.run.dryrun import describe, describe_disk, disk_line
from dbrig.run.preflight import Toolbox, check_host, find_binaries
from dbrig.scenario import plan_from_dict
from dbrig.tools.sysbench import ROW_BYTES, SysbenchParams, SysbenchTool

SYSBENCH = {"test": "oltp_read_write", "tables": 1, "table_size": 100, "time": 10}


def _lines(raw: dict[str, Any]) -> list[str]:
    return list(describe(plan_from_dict({"name": "d", **raw}, seed=3)))


def _external(**spec: Any) -> dict[str, Any]:
    return {"kind": "external", "host": "127.0.0.1", "port": 3306, "user": "bench", **spec}


def test_a_managed_data_set_is_prepared_once_by_the_first_cell_in_trial_order() -> None:
    lines = _lines(
        {"workload": {"sysbench": SYSBENCH}, "matrix": {"workload.sysbench.threads": [1, 2]}}
    )
    order = next(ln for ln in lines if ln.startswith("order: ")).split()[1:]
    first = order[0].split("-")[0]
    prepares = [ln for ln in lines if ln.startswith("  prepare (once, data set ")]
    assert len(prepares) == 1
    shared = [ln for ln in lines if "loaded once, first by" in ln]
    assert len(shared) == 1 and f"first by {first}'s trial" in shared[0]
    assert not any("cleanup" in ln for ln in lines)  # a fresh datadir needs none


def test_reprepare_shows_cleanup_and_prepare_before_every_trial() -> None:
    lines = _lines(
        {"servers": {"db": _external(reset="reprepare")}, "workload": {"sysbench": SYSBENCH}}
    )
    assert [ln.split(":")[0] for ln in lines if "(before every trial)" in ln] == [
        "  cleanup (before every trial)",
        "  prepare (before every trial)",
    ]


def test_prepare_false_shows_that_nothing_is_loaded() -> None:
    lines = _lines(
        {
            "servers": {"db": _external(reset="none", prepare=False)},
            "workload": {"sysbench": SYSBENCH},
        }
    )
    assert "  prepare: none (servers.db.prepare: false: the data is there)" in lines
    assert not any(" prepare --" in ln or "cleanup" in ln for ln in lines)


def test_the_interference_limit_shown_is_the_one_the_run_uses() -> None:
    lines = _lines(
        {
            "workload": {"sysbench": SYSBENCH},
            "interference": {"stress-ng": {"cpu": 1}},
            "warmup": 2,
        }
    )
    shown = next(ln for ln in lines if ln.startswith("  interference: ")).split()
    expected_s = SYSBENCH["time"] + 2
    assert shown[shown.index("-t") + 1] == f"{interference_limit_s(expected_s, 3600)}s"
    assert interference_limit_s(expected_s, 3600) > workload_timeout_s(expected_s, 3600)


def test_an_external_server_reloads_a_data_set_each_time_the_order_switches_back() -> None:
    raw = {
        "name": "d",
        "servers": {"db": _external(reset="none")},
        "workload": {"sysbench": SYSBENCH},
        "matrix": {"workload.sysbench.table_size": [100, 200]},
        "repeat": 3,
    }
    plan = plan_from_dict(raw, seed=3)
    cells = [t.cell.id for t in plan.trials]
    entered = [cell for i, cell in enumerate(cells) if i == 0 or cells[i - 1] != cell]
    lines = list(describe(plan))
    for cell in ("c000", "c001"):
        shown = lines[lines.index(next(ln for ln in lines if ln.startswith(cell))) + 1]
        times = entered.count(cell)
        assert shown.startswith("  cleanup (" + ("once" if times == 1 else f"{times} times"))


def test_a_sequential_order_loads_each_external_data_set_once() -> None:
    lines = _lines(
        {
            "servers": {"db": _external(reset="none")},
            "workload": {"sysbench": SYSBENCH},
            "matrix": {"workload.sysbench.table_size": [100, 200]},
            "repeat": 3,
            "order": "sequential",
        }
    )
    assert sum(ln.startswith("  prepare (once, data set") for ln in lines) == 2


def test_my_cnf_lines_are_shown_as_written() -> None:
    lines = _lines(
        {
            "server": {"config": {"log_bin": None, "slow_query_log": True, "sync_binlog": 1}},
            "workload": {"sysbench": SYSBENCH},
        }
    )
    assert "  my.cnf: log_bin, slow_query_log=ON, sync_binlog=1" in lines


def test_stress_ng_on_another_host_is_shown_behind_ssh_and_its_cores_are_not_this_hosts() -> None:
    """Its cores are checked against that host by preflight, not against this one; the
    binary is named, its path there is found when the run connects."""
    raw = {
        "name": "d",
        "hosts": {"db1": {"ssh": "bench@db1"}},
        "workload": {"sysbench": SYSBENCH},
        "interference": {"stress-ng": {"cpu": 1, "taskset": [4095], "host": "db1"}},
    }
    plan = plan_from_dict(raw, seed=3)
    check_host(plan, None, *find_binaries(plan, strict=False), strict=False)  # this host's
    shown = next(ln for ln in describe(plan) if ln.startswith("  interference: "))
    assert shown.startswith("  interference: ssh bench@db1 -- stress-ng --cpu 1 ")
    assert "--taskset 4095" in shown


def test_a_toolbox_names_the_version_of_stress_ng_on_each_host() -> None:
    box = Toolbox(
        workload=Path("/usr/bin/sysbench"),
        workload_version="sysbench 1.0.20",
        interference={"stress-ng@db1": Path("/usr/bin/stress-ng")},
        interference_versions={"stress-ng@db1": "stress-ng, version 0.15.06"},
        servers={},
    )
    assert box.uses_other_hosts
    versions = box.versions()
    assert versions["stress-ng"] is None and versions["stress-ng@db1"].endswith("0.15.06")


def test_the_disk_the_run_needs_is_shown_and_counts_the_cells_own_data_sets() -> None:
    """A base block naming only ``time``, a matrix block choosing fileio: its files are the
    data set (in dbrig's work folder), and no server's snapshot is counted."""
    fileio = {
        "workload.sysbench.test": ["fileio"],
        "workload.sysbench.file_test_mode": ["rndrd"],
        "workload.sysbench.file_total_size": ["64M"],
    }
    plan = plan_from_dict({"name": "d", "workload": {"sysbench": {"time": 2}}, "matrix": [fileio]})
    lines = list(describe(plan))
    assert (
        "  no server: sysbench fileio needs none (works in a folder beside the run directory)"
        in lines
    )
    assert describe_disk(plan).startswith("disk: about 64 MiB on this machine")
    assert not any(ln.startswith("  my.cnf") for ln in lines)


def test_the_disk_line_says_size_unknown_for_data_sets_the_tool_cannot_size() -> None:
    counted = "disk: about 3 MiB on this machine (data sets, their snapshots and a working copy"
    assert disk_line(3 * 2**20, []).startswith(counted)
    assert "unknown" not in disk_line(3 * 2**20, [])
    line = disk_line(2**19, ["mysqlslap", "sysbench orders.lua"])
    assert line.startswith("disk: under 1 MiB on this machine (")
    assert ", plus the data sets of mysqlslap, sysbench orders.lua: size unknown (" in line


def test_sysbench_oltp_tables_are_counted_and_mysqlslaps_are_said_unknown() -> None:
    """2 tables x 10,000 rows at ~230 B: a snapshot and a working copy (9 MiB), not "under
    1 MiB"; mysqlslap's tables cannot be sized before it loads them."""
    big = {**SYSBENCH, "tables": 2, "table_size": 10000}
    plan = plan_from_dict({"name": "d", "workload": {"sysbench": big}})
    assert describe_disk(plan).startswith("disk: about 9 MiB on this machine")
    assert "unknown" not in describe_disk(plan)
    slap = plan_from_dict({"name": "d", "workload": {"mysqlslap": {"number_of_queries": 10}}})
    assert "the data sets of mysqlslap: size unknown" in describe_disk(slap)
    fileio = {"test": "fileio", "file_test_mode": "rndrd", "file_total_size": "1M", "time": 1}
    no_server = plan_from_dict({"name": "d", "workload": {"sysbench": fileio}})
    assert "unknown" not in describe_disk(no_server)  # its files are sized: no data set


def test_sysbench_sizes_its_oltp_tables_and_not_a_hardware_test() -> None:
    oltp = SysbenchTool(SysbenchParams(tables=3, table_size=1000))
    assert oltp.data_set_bytes() == 3 * 1000 * ROW_BYTES
    assert SysbenchTool(SysbenchParams(test="cpu")).data_set_bytes() is None
