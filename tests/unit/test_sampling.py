"""Sampling math on hand-made psutil snapshots, phase marking on a fake clock, the summary."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from dbrig import sampling
from dbrig.sampling import (
    MIB,
    HostSampler,
    ProcSample,
    SampleTiming,
    StatusSampler,
    cpu_percentages,
    cpu_rows,
    descendants,
    disk_rows,
    disk_values,
    memory_row,
    next_tick_s,
    phase_for,
    proc_rows,
    status_row,
    status_variables,
    summarize_cell,
)
from dbrig.tools.base import column_prefixes
from dbrig.tools.stress_ng import StressNgParams, StressNgTool
from tests.helpers.files import read_rows

SCpuTimes = type(psutil.cpu_times())


def cpu_times(**values: float) -> tuple:
    return SCpuTimes(**{field: float(values.get(field, 0.0)) for field in SCpuTimes._fields})


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- timing ---------------------------------------------------------------------------------


def test_phase_is_measure_from_t0_on() -> None:
    assert phase_for(-0.5) == "warmup"
    assert phase_for(0.0) == "measure"
    assert phase_for(3.0) == "measure"


@pytest.mark.parametrize(
    ("now_s", "expected"),
    [
        (-2.0, -1.0),  # baseline at warm-up start
        (-1.0004, 0.0),  # fired a little late on the grid
        (-0.9999, 0.0),  # float noise just before the grid point
        (-0.01, 0.0),  # t0 is never skipped, however close
        (0.0003, 1.0),
        (2.4, 3.0),  # overran: the next point is still half an interval away
        (2.6, 4.0),
    ],
)
def test_next_tick_stays_on_the_grid(now_s: float, expected: float) -> None:
    assert next_tick_s(now_s, 1.0) == expected


def test_next_tick_with_a_fractional_interval() -> None:
    assert next_tick_s(0.0, 0.2) == 0.2
    assert next_tick_s(-0.5, 0.2) == pytest.approx(-0.2)


# --- cpu ------------------------------------------------------------------------------------


def test_cpu_percentages_are_shares_of_the_interval() -> None:
    before = cpu_times(user=10, system=5, idle=80, iowait=5)
    after = cpu_times(user=40, system=15, idle=130, iowait=10, steal=5)
    shares = cpu_percentages(before, after)
    assert shares == {
        "user_pct": 30.0,
        "nice_pct": 0.0,
        "system_pct": 10.0,
        "iowait_pct": 5.0,
        "irq_pct": 0.0,
        "softirq_pct": 0.0,
        "steal_pct": 5.0,
        "idle_pct": 50.0,
        "busy_pct": 45.0,
    }


def test_guest_time_is_not_counted_twice() -> None:
    before = cpu_times()
    after = cpu_times(user=50, idle=50, guest=40)  # guest is already inside user
    shares = cpu_percentages(before, after)
    assert shares["user_pct"] == 50.0
    assert shares["busy_pct"] == 50.0


def test_a_cpu_field_going_backwards_counts_as_zero() -> None:
    before = cpu_times(user=10, idle=10, iowait=7)
    after = cpu_times(user=60, idle=60, iowait=6)  # iowait can go backwards on Linux
    shares = cpu_percentages(before, after)
    assert shares["iowait_pct"] == 0.0
    assert shares["user_pct"] == 50.0


def test_no_cpu_time_elapsed_gives_empty_values() -> None:
    same = cpu_times(user=1, idle=1)
    assert set(cpu_percentages(same, same).values()) == {None}


def test_cpu_percentages_accept_plain_dicts() -> None:
    assert cpu_percentages({"user": 0, "idle": 0}, {"user": 1, "idle": 3})["busy_pct"] == 25.0


def test_cpu_rows_are_numbered_by_core() -> None:
    before = [cpu_times(), cpu_times()]
    after = [cpu_times(user=100), cpu_times(idle=100)]
    rows = cpu_rows(before, after)
    assert [(row["core"], row["busy_pct"]) for row in rows] == [(0, 100.0), (1, 0.0)]


# --- disk -----------------------------------------------------------------------------------


def disk(**values: int) -> dict[str, int]:
    fields = (
        "read_count",
        "write_count",
        "read_bytes",
        "write_bytes",
        "read_time",
        "write_time",
        "busy_time",
    )
    return {field: values.get(field, 0) for field in fields}


def test_disk_values_over_two_seconds() -> None:
    before = disk(read_count=100, write_count=50)
    after = disk(
        read_count=300,
        write_count=250,
        read_bytes=4 * MIB,
        write_bytes=8 * MIB,
        read_time=600,
        write_time=200,
        busy_time=1000,
    )
    assert disk_values(before, after, 2.0) == {
        "reads_per_s": 100.0,
        "writes_per_s": 100.0,
        "read_mb_per_s": 2.0,
        "write_mb_per_s": 4.0,
        "await_ms": 2.0,  # 800 ms of I/O time over 400 I/Os
        "util_pct": 50.0,
    }


def test_disk_values_from_psutil_namedtuples() -> None:
    counters = psutil.disk_io_counters(perdisk=True)
    if not counters:
        pytest.skip("no block devices visible")
    sdiskio = type(next(iter(counters.values())))
    zero = sdiskio(**dict.fromkeys(sdiskio._fields, 0))
    after = zero._replace(read_count=10, read_time=50)
    values = disk_values(zero, after, 1.0)
    assert values["reads_per_s"] == 10.0
    assert values["await_ms"] == 5.0


def test_disk_util_is_capped_at_100() -> None:
    assert disk_values(disk(), disk(busy_time=3000), 2.0)["util_pct"] == 100.0


def test_disk_await_is_empty_without_io() -> None:
    values = disk_values(disk(read_count=5), disk(read_count=5), 1.0)
    assert values["await_ms"] is None
    assert values["reads_per_s"] == 0.0


def test_disk_counter_going_backwards_is_empty() -> None:
    values = disk_values(disk(write_count=10), disk(write_count=3), 1.0)
    assert values["writes_per_s"] is None
    assert values["await_ms"] is None


def test_disk_without_busy_time_has_empty_util() -> None:
    before, after = disk(), disk(read_count=1)
    del before["busy_time"], after["busy_time"]
    assert disk_values(before, after, 1.0)["util_pct"] is None


def test_disk_rows_keep_listed_devices_seen_twice() -> None:
    before = {"vda": disk(), "vdb": disk()}
    after = {"vda": disk(read_count=1), "vdb": disk(), "vdc": disk()}
    assert [row["device"] for row in disk_rows(before, after, 1.0)] == ["vda", "vdb"]
    assert [row["device"] for row in disk_rows(before, after, 1.0, {"vda"})] == ["vda"]


# --- memory ---------------------------------------------------------------------------------


def test_memory_row_in_mib_and_mib_per_second() -> None:
    virtual = {"used": 512 * MIB, "cached": 256 * MIB, "available": 1024 * MIB}
    swap_before = {"used": MIB, "sin": 0, "sout": 4 * MIB}
    swap_after = {"used": 2 * MIB, "sin": 2 * MIB, "sout": 4 * MIB}
    assert memory_row(virtual, swap_before, swap_after, 2.0) == {
        "used_mb": 512.0,
        "cached_mb": 256.0,
        "available_mb": 1024.0,
        "swap_used_mb": 2.0,
        "swap_in_mb_per_s": 1.0,
        "swap_out_mb_per_s": 0.0,
    }


def test_memory_row_from_live_psutil_has_every_column() -> None:
    swap = psutil.swap_memory()
    row = memory_row(psutil.virtual_memory(), swap, swap, 1.0)
    assert tuple(row) == sampling.MEMORY_VALUE_COLUMNS
    assert row["used_mb"] > 0


# --- processes ------------------------------------------------------------------------------


def proc(cpu_s: float, rss_mb: int = 1, ctx: int = 0, io: int | None = 0) -> ProcSample:
    return ProcSample(cpu_s, rss_mb * MIB, ctx, io, io)


def test_proc_rows_sum_the_group_over_the_interval() -> None:
    before = {"server": {(10, 1.0): proc(1.0, ctx=100, io=0), (11, 1.0): proc(0.5, io=0)}}
    after = {
        "server": {
            (10, 1.0): proc(2.0, rss_mb=100, ctx=300, io=2 * MIB),
            (11, 1.0): proc(1.5, rss_mb=50, io=2 * MIB),
        }
    }
    assert proc_rows(before, after, 2.0) == [
        {
            "role": "server",
            "pids": 2,
            "cpu_pct": 100.0,  # 2 CPU seconds in 2 s: one full core
            "rss_mb": 150.0,
            "ctx_switches_per_s": 100.0,
            "read_mb_per_s": 2.0,
            "write_mb_per_s": 2.0,
        }
    ]


def test_a_new_process_counts_in_pids_and_rss_but_not_in_rates() -> None:
    before = {"stress-ng": {(20, 5.0): proc(1.0)}}
    after = {"stress-ng": {(20, 5.0): proc(1.5), (21, 9.0): proc(30.0, rss_mb=7)}}
    [row] = proc_rows(before, after, 1.0)
    assert row["pids"] == 2
    assert row["rss_mb"] == 8.0
    assert row["cpu_pct"] == 50.0


def test_a_reused_pid_is_another_process() -> None:
    before = {"workload": {(30, 1.0): proc(100.0)}}
    after = {"workload": {(30, 2.0): proc(0.2)}}  # same pid, later create time
    [row] = proc_rows(before, after, 1.0)
    assert row["cpu_pct"] == 0.0
    assert row["pids"] == 1


def test_vanished_processes_and_empty_roles() -> None:
    before = {"server": {(40, 1.0): proc(1.0)}, "workload": {}}
    after = {"server": {}, "workload": {}}
    rows = {row["role"]: row for row in proc_rows(before, after, 1.0)}
    assert rows["server"]["pids"] == 0
    assert rows["server"]["cpu_pct"] == 0.0
    assert rows["workload"]["rss_mb"] == 0.0


def test_unreadable_io_counters_make_the_io_rates_empty() -> None:
    before = {"server": {(1, 1.0): proc(0.0, io=0), (2, 1.0): proc(0.0, io=None)}}
    after = {"server": {(1, 1.0): proc(1.0, io=MIB), (2, 1.0): proc(1.0, io=None)}}
    [row] = proc_rows(before, after, 1.0)
    assert row["read_mb_per_s"] is None
    assert row["cpu_pct"] == 200.0


def test_descendants_walk_the_whole_tree() -> None:
    parent_of = {1: 0, 0: 0, 10: 1, 11: 10, 12: 10, 13: 11, 20: 1}
    assert sorted(descendants([10], parent_of)) == [11, 12, 13]
    assert descendants([99], parent_of) == []
    assert sorted(descendants([10, 11], parent_of)) == [12, 13]


def test_snapshot_processes_sees_this_process() -> None:
    snapshot = sampling.snapshot_processes({"me": [os.getpid()], "gone": [2**22 + 7]})
    [key] = snapshot["me"]  # pytest here has no children
    assert key[0] == os.getpid()
    assert snapshot["me"][key].rss_bytes > 0
    assert snapshot["gone"] == {}


# --- status ---------------------------------------------------------------------------------


def test_status_row_rates_counters_and_keeps_gauges() -> None:
    before = {"Questions": "100", "Threads_running": "3", "Innodb_buffer_pool_reads": "7"}
    after = {"Questions": "300", "Threads_running": "5", "Innodb_buffer_pool_reads": "7"}
    variables = ["questions", "threads_running", "innodb_buffer_pool_reads"]
    assert status_row(before, after, 2.0, variables) == {
        "questions_per_s": 100.0,
        "threads_running": 5.0,
        "innodb_buffer_pool_reads_per_s": 0.0,
    }


def test_a_counter_going_backwards_is_empty_not_negative() -> None:
    row = status_row({"Questions": "5000"}, {"Questions": "12"}, 1.0, ["questions"])
    assert row == {"questions_per_s": None}


def test_status_values_that_are_not_numbers_are_empty() -> None:
    row = status_row({}, {"Memory_used": "ON"}, 1.0, ["memory_used"])
    assert row == {"memory_used": None}


def test_status_variables_are_the_known_ones_present() -> None:
    snapshot = {"QUESTIONS": "1", "Threads_running": "1", "Uptime": "9", "Wsrep_ready": "ON"}
    assert status_variables(snapshot) == ["questions", "threads_running"]


def test_counters_and_gauges_do_not_overlap() -> None:
    assert not {n.lower() for n in sampling.COUNTERS} & {n.lower() for n in sampling.GAUGES}


# --- samplers on a fake clock ---------------------------------------------------------------


def statuses(*questions: int) -> list[dict[str, str]]:
    return [{"Questions": str(q), "Threads_running": "2", "Uptime": "1"} for q in questions]


def test_status_sampler_marks_phases_by_the_schedule(tmp_path: Path) -> None:
    clock = FakeClock(8.0)
    feed = iter(statuses(0, 10, 30, 60, 70))
    sampler = StatusSampler(
        tmp_path, timing=SampleTiming(interval=1.0, clock=clock, t0=10.0), fetch=lambda: next(feed)
    )
    sampler.open()
    for now, scheduled in ((9.0, -1.0), (10.25, 0.0), (11.0, 1.0), (11.5, None)):
        clock.now = now
        sampler.sample(scheduled)
    sampler.close()

    rows = read_rows(tmp_path / "status.csv")
    assert list(rows[0]) == ["t_s", "phase", "interval_s", "questions_per_s", "threads_running"]
    assert [(float(r["t_s"]), r["phase"], float(r["interval_s"])) for r in rows] == [
        (-1.0, "warmup", 1.0),
        (0.25, "warmup", 1.25),  # the interval (-1, 0] ends on the t0 tick, a bit late
        (1.0, "measure", 0.75),  # starts on the t0 tick by the schedule
        (1.5, "measure", 0.5),
    ]
    assert [float(r["questions_per_s"]) for r in rows] == [10.0, 16.0, 40.0, 20.0]
    sampler_rows = read_rows(tmp_path / "sampler.csv")
    assert [r["sampler"] for r in sampler_rows] == ["status"] * 4
    assert all(float(r["cpu_s"]) >= 0 for r in sampler_rows)


def test_status_sampler_writes_an_empty_rate_after_a_server_restart(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    feed = iter(statuses(500, 600, 3))
    sampler = StatusSampler(
        tmp_path, timing=SampleTiming(clock=clock, t0=0.0), fetch=lambda: next(feed)
    )
    sampler.open()
    for now in (1.0, 2.0):
        clock.now = now
        sampler.sample(now)
    sampler.close()
    assert [r["questions_per_s"] for r in read_rows(tmp_path / "status.csv")] == ["100.0", ""]


def test_without_t0_the_window_starts_after_the_warmup(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    sampler = StatusSampler(
        tmp_path, timing=SampleTiming(clock=clock, warmup_s=5.0), fetch=lambda: {"Questions": 1}
    )
    sampler.open()
    assert sampler.t0 == 105.0
    sampler.close()


def test_host_sampler_rows_carry_the_stamp(tmp_path: Path) -> None:
    clock = FakeClock(50.0)
    sampler = HostSampler(
        tmp_path,
        timing=SampleTiming(interval=1.0, clock=clock, t0=51.0),
        processes=lambda: {"server": [os.getpid()]},
        devices=None,
    )
    sampler.open()
    for now in (51.0, 52.0):
        clock.now = now
        sampler.sample(now - 51.0)
    sampler.close()

    cpu = read_rows(tmp_path / "cpu.csv")
    assert tuple(cpu[0]) == sampling.CPU_COLUMNS
    assert len(cpu) == 2 * psutil.cpu_count()
    assert {(r["t_s"], r["phase"], r["interval_s"]) for r in cpu} == {
        ("0.0", "warmup", "1.0"),
        ("1.0", "measure", "1.0"),
    }
    memory = read_rows(tmp_path / "memory.csv")
    assert [r["phase"] for r in memory] == ["warmup", "measure"]
    procs = read_rows(tmp_path / "procs.csv")
    assert [(r["role"], r["pids"]) for r in procs if r["role"] != "kernel"] == [
        ("server", "1"),
        ("server", "1"),
    ]
    kernel = [r for r in procs if r["role"] == "kernel"]  # every kernel thread, as one row
    assert len(kernel) == 2 and all(int(r["pids"]) > 1 and r["cpu_pct"] for r in kernel)
    whole = sampling.whole_disks()
    if whole is not None and (tmp_path / "disk.csv").exists():
        assert {r["device"] for r in read_rows(tmp_path / "disk.csv")} <= whole
    assert {r["sampler"] for r in read_rows(tmp_path / "sampler.csv")} == {"host"}


def test_both_samplers_share_one_sampler_csv_header(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    timing = SampleTiming(clock=clock, t0=0.0)
    host = HostSampler(tmp_path, timing=timing, devices=[])
    status = StatusSampler(tmp_path, timing=timing, fetch=lambda: {"Questions": "1"})
    host.open()
    status.open()
    clock.now = 1.0
    host.sample(1.0)
    status.sample(1.0)
    host.close()
    status.close()
    lines = (tmp_path / "sampler.csv").read_text().splitlines()
    assert lines[0] == ",".join(sampling.SAMPLER_COLUMNS)
    assert len(lines) == 3
    assert not (tmp_path / "disk.csv").exists()  # devices=[] records none
    assert not (tmp_path / "procs.csv").exists()  # no processes given


# --- samplers as threads (short real waits, no timing assertions) ----------------------------


def wait_until_stopped(sampler: StatusSampler, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while sampler.running and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_failing_fetch_ends_the_thread_with_a_one_line_error(tmp_path: Path) -> None:
    calls = iter([{"Questions": "1"}, {"Questions": "2"}])

    def fetch() -> dict[str, str]:
        try:
            return next(calls)
        except StopIteration:
            raise ConnectionError("Lost connection\nto server during query") from None

    sampler = StatusSampler(
        tmp_path, timing=SampleTiming(interval=0.01, t0=time.monotonic()), fetch=fetch
    )
    sampler.start()
    wait_until_stopped(sampler)
    sampler.stop()
    assert sampler.error == "server status query failed: Lost connection to server during query"
    assert len(read_rows(tmp_path / "status.csv")) == 1


def test_a_thread_stops_and_keeps_its_rows(tmp_path: Path) -> None:
    counter = iter(range(0, 10**6, 10))
    sampler = StatusSampler(
        tmp_path,
        timing=SampleTiming(interval=0.02, t0=time.monotonic() + 0.05),
        fetch=lambda: {"Questions": str(next(counter))},
    )
    sampler.start()
    with pytest.raises(RuntimeError):
        sampler.start()
    time.sleep(0.2)
    sampler.stop()
    assert not sampler.running
    assert sampler.error is None
    rows = read_rows(tmp_path / "status.csv")
    times = [float(r["t_s"]) for r in rows]
    assert times == sorted(times)
    assert {r["phase"] for r in rows} <= {"warmup", "measure"}
    assert rows[-1]["phase"] == "measure"


@pytest.mark.parametrize("interval", [0.0, -1.0])
def test_a_sampling_interval_must_be_positive(interval: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        SampleTiming(interval)


def test_stop_before_start_is_harmless(tmp_path: Path) -> None:
    sampler = StatusSampler(tmp_path, fetch=dict)
    sampler.stop()
    assert sampler.error is None


# --- summary --------------------------------------------------------------------------------


def write_csv(path: Path, text: str) -> None:
    path.write_text("\n".join(line.strip() for line in text.strip().splitlines()) + "\n")


@pytest.fixture
def cell(tmp_path: Path) -> Path:
    write_csv(
        tmp_path / "cpu.csv",
        """
        t_s,phase,interval_s,core,user_pct,nice_pct,system_pct,iowait_pct,irq_pct,softirq_pct,steal_pct,idle_pct,busy_pct
        0.0,warmup,1.0,0,0,0,0,0,0,0,0,0,100
        0.0,warmup,1.0,1,0,0,0,0,0,0,0,0,100
        1.0,measure,1.0,0,80,0,10,0,0,0,0,10,90
        1.0,measure,1.0,1,20,0,0,10,0,0,2,68,20
        3.0,measure,2.0,0,60,0,0,0,0,0,0,40,60
        3.0,measure,2.0,1,30,0,10,4,0,0,2,54,40
        """,
    )
    write_csv(
        tmp_path / "disk.csv",
        """
        t_s,phase,interval_s,device,reads_per_s,writes_per_s,read_mb_per_s,write_mb_per_s,await_ms,util_pct
        0.0,warmup,1.0,vda,999,999,999,999,999,99
        1.0,measure,1.0,vda,100,100,1,2,2.0,40
        1.0,measure,1.0,vdb,0,0,0,0,,0
        2.0,measure,1.0,vda,50,50,3,4,8.0,60
        2.0,measure,1.0,vdb,10,0,1,0,1.0,10
        """,
    )
    write_csv(
        tmp_path / "memory.csv",
        """
        t_s,phase,interval_s,used_mb,cached_mb,available_mb,swap_used_mb,swap_in_mb_per_s,swap_out_mb_per_s
        1.0,measure,1.0,500,100,900,0,0,1
        2.0,measure,1.0,520,100,880,0,2,3
        """,
    )
    write_csv(
        tmp_path / "procs.csv",
        """
        t_s,phase,interval_s,role,pids,cpu_pct,rss_mb,ctx_switches_per_s,read_mb_per_s,write_mb_per_s
        0.0,warmup,1.0,server,1,900,9000,9,9,9
        1.0,measure,1.0,server,1,150,400,1000,1,2
        2.0,measure,1.0,server,1,50,420,3000,3,
        1.0,measure,1.0,stress-ng,3,190,30,10,0,0
        2.0,measure,1.0,stress-ng,3,,30,10,0,0
        2.0,measure,1.0,workload,1,80,20,5,0,0
        """,
    )
    write_csv(
        tmp_path / "status.csv",
        """
        t_s,phase,interval_s,questions_per_s,innodb_buffer_pool_read_requests_per_s,innodb_buffer_pool_reads_per_s,threads_running
        0.0,warmup,1.0,1,1,1,1
        1.0,measure,1.0,1000,900,10,4
        3.0,measure,2.0,2500,50,,4
        4.0,measure,1.0,,100,10,4
        """,
    )
    write_csv(
        tmp_path / "sampler.csv",
        """
        t_s,phase,interval_s,sampler,cpu_s,cpu_pct
        0.0,warmup,1.0,host,0.9,90
        1.0,measure,1.0,host,0.01,1
        2.0,measure,1.0,host,0.03,3
        1.0,measure,1.0,status,0.005,0.5
        """,
    )
    return tmp_path


def test_summarize_cell_means_over_the_measured_window(cell: Path) -> None:
    summary = summarize_cell(cell, pinned_cores=[1], role_prefixes={"stress-ng": "stress"})
    expected = {
        "cpu_busy_pct_core0": (90 * 1 + 60 * 2) / 3,  # 70
        "cpu_busy_pct_core1": (20 * 1 + 40 * 2) / 3,
        "cpu_busy_pct": ((90 + 120) / 3 + (20 + 80) / 3) / 2,
        "pinned_cores_busy_pct": (20 + 80) / 3,
        "iowait_pct": (0 + (10 + 8) / 3) / 2,
        "steal_pct": (0 + 2) / 2,
        "disk_iops": 150 + 5,
        "disk_read_mb_per_s": 2 + 0.5,
        "disk_write_mb_per_s": 3 + 0,
        "disk_await_ms": (2.0 * 200 + 8.0 * 100 + 1.0 * 10) / 310,
        "disk_util_pct": (50 + 5) / 2,
        "swap_in_mb_per_s": 1.0,
        "swap_out_mb_per_s": 2.0,
        "mem_available_mb_min": 880.0,
        "server_cpu_pct": 100.0,
        "server_cpu_s": 2.0,
        "server_rss_mb_max": 420.0,
        "server_ctx_switches": 4000.0,
        "server_read_mb_per_s": 2.0,
        "server_write_mb_per_s": 2.0,
        "stress_cpu_pct": 190.0,
        "stress_cpu_s": 1.9,
        "stress_rss_mb_max": 30.0,
        "stress_ctx_switches": 20.0,
        "stress_read_mb_per_s": 0.0,
        "stress_write_mb_per_s": 0.0,
        "workload_cpu_pct": 80.0,
        "workload_cpu_s": 0.8,
        "workload_rss_mb_max": 20.0,
        "workload_ctx_switches": 5.0,
        "workload_read_mb_per_s": 0.0,
        "workload_write_mb_per_s": 0.0,
        "questions_per_s": (1000 + 2500 * 2) / 3,
        "buffer_pool_hit_ratio": 1 - (10 + 10) / (900 + 100),
        "sampler_cpu_pct": 2.0 + 0.5,
        "other_cpu_pct": 0.0,  # the followed processes account for more than all of it
    }
    assert summary.keys() == expected.keys()
    for key, value in expected.items():
        assert summary[key] == pytest.approx(value), key


def test_other_cpu_is_the_busy_time_no_followed_process_steal_or_interrupt_explains(
    tmp_path: Path,
) -> None:
    write_csv(
        tmp_path / "cpu.csv",
        """
        t_s,phase,interval_s,core,user_pct,nice_pct,system_pct,iowait_pct,irq_pct,softirq_pct,steal_pct,idle_pct,busy_pct
        1.0,measure,1.0,0,90,0,0,0,0,5,5,0,100
        1.0,measure,1.0,1,60,0,0,0,1,4,0,35,65
        """,
    )
    write_csv(
        tmp_path / "procs.csv",
        """
        t_s,phase,interval_s,role,pids,cpu_pct,rss_mb,ctx_switches_per_s,read_mb_per_s,write_mb_per_s
        1.0,measure,1.0,server,1,50,400,1000,1,2
        1.0,measure,1.0,workload,1,18,20,5,0,0
        """,
    )
    write_csv(
        tmp_path / "sampler.csv",
        """
        t_s,phase,interval_s,sampler,cpu_s,cpu_pct
        1.0,measure,1.0,host,0.02,2
        """,
    )
    # busy less steal and interrupts: (90 + 60) / 2 = 75 % of the host; the server, the
    # client and the sampler: (50 + 18 + 2) / 2 = 35 %; the rest, 40 %, is someone else's.
    assert summarize_cell(tmp_path)["other_cpu_pct"] == pytest.approx(40.0)
    # With the server on another host cpu.csv is that host's: no claim about it.
    assert "other_cpu_pct" not in summarize_cell(tmp_path, processes_here=False)


def test_a_process_that_ran_half_the_window_counts_half_in_other_cpu(tmp_path: Path) -> None:
    write_csv(
        tmp_path / "cpu.csv",
        """
        t_s,phase,interval_s,core,iowait_pct,steal_pct,busy_pct
        1.0,measure,1.0,0,0,0,100
        2.0,measure,1.0,0,0,0,100
        """,
    )
    write_csv(
        tmp_path / "procs.csv",
        """
        t_s,phase,interval_s,role,pids,cpu_pct,rss_mb,ctx_switches_per_s,read_mb_per_s,write_mb_per_s
        1.0,measure,1.0,stress-ng,1,100,1,1,0,0
        """,
    )
    (tmp_path / "sampler.csv").write_text(
        "t_s,phase,interval_s,sampler,cpu_s,cpu_pct\n1.0,measure,1.0,host,0,0\n"
    )
    # stress-ng took the core for the first second only: the second is someone else's.
    assert summarize_cell(tmp_path)["other_cpu_pct"] == pytest.approx(50.0)


def test_a_role_without_a_declared_prefix_is_named_after_its_key(cell: Path) -> None:
    summary = summarize_cell(cell)
    assert summary["stress_ng_cpu_pct"] == 190.0
    assert not any(key.startswith("stress_cpu") for key in summary)


def test_stress_ng_declares_the_historic_stress_prefix() -> None:
    assert column_prefixes([StressNgTool(StressNgParams(cpu=1))]) == {"stress-ng": "stress"}


def test_summarize_cell_without_pinned_cores_has_no_pinned_key(cell: Path) -> None:
    assert "pinned_cores_busy_pct" not in summarize_cell(cell)
    assert "pinned_cores_busy_pct" not in summarize_cell(cell, pinned_cores=[7])


def test_summarize_cell_leaves_out_what_is_missing(tmp_path: Path) -> None:
    assert summarize_cell(tmp_path) == {}
    write_csv(
        tmp_path / "status.csv",
        """
        t_s,phase,interval_s,threads_running
        -1.0,warmup,1.0,3
        """,
    )
    (tmp_path / "disk.csv").write_text("")
    assert summarize_cell(tmp_path) == {}


def test_summarize_cell_reads_what_the_samplers_wrote(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    feed = iter(
        {
            "Questions": str(q),
            "Innodb_buffer_pool_read_requests": str(r),
            "Innodb_buffer_pool_reads": "5",
        }
        for q, r in ((0, 0), (100, 1000), (300, 3000))
    )
    sampler = StatusSampler(
        tmp_path, timing=SampleTiming(clock=clock, t0=0.0), fetch=lambda: next(feed)
    )
    sampler.open()
    for now in (1.0, 2.0):
        clock.now = now
        sampler.sample(now)
    sampler.close()
    summary = summarize_cell(tmp_path)
    assert summary["questions_per_s"] == 150.0
    assert summary["buffer_pool_hit_ratio"] == 1.0
    assert "sampler_cpu_pct" in summary


def test_parent_map_reads_real_parents_from_proc() -> None:
    import os
    import subprocess

    child = subprocess.Popen(["sleep", "5"])
    try:
        parents = sampling.parent_map()
        assert parents[os.getpid()] == os.getppid()
        assert parents[child.pid] == os.getpid()
    finally:
        child.kill()
        child.wait()


def test_snapshot_processes_follows_a_role_into_its_children() -> None:
    import os
    import subprocess

    child = subprocess.Popen(["sleep", "5"])
    try:
        snapshot = sampling.snapshot_processes({"workload": [os.getpid()]})
        pids = {pid for pid, _ in snapshot["workload"]}
        assert {os.getpid(), child.pid} <= pids
    finally:
        child.kill()
        child.wait()


def test_context_switches_count_every_thread_not_just_the_main_one() -> None:
    import threading

    done = threading.Event()

    def nap() -> None:
        while not done.is_set():
            time.sleep(0.001)

    threads = [threading.Thread(target=nap) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.2)
        me = psutil.Process()
        main_only = sum(me.num_ctx_switches())
        assert sampling._ctx_switches(me) > main_only
    finally:
        done.set()
        for thread in threads:
            thread.join()
