"""HostSampler on this machine for about two seconds, with a busy child pinned to core 0.

The machine is shared and noisy, so this checks behaviour only (rows, columns, order,
the child's CPU seen, a prompt and clean stop), never speed or exact shares.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dbrig import sampling
from dbrig.sampling import HostSampler, SampleTiming, summarize_cell
from tests.helpers.files import read_rows

pytestmark = pytest.mark.integration

BUSY_LOOP = "while True:\n    pass\n"


def test_host_sampler_follows_a_busy_child(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        os.sched_setaffinity(child.pid, {0})
        warmup_s = 0.6
        sampler = HostSampler(
            tmp_path,
            timing=SampleTiming(interval=0.2, t0=time.monotonic() + warmup_s, warmup_s=warmup_s),
            processes=lambda: {"workload": [child.pid], "stress-ng": []},
        )
        sampler.start()
        time.sleep(2.0)
        sampler.stop(timeout=5.0)
        thread = sampler._thread
        assert thread is not None and not thread.is_alive()
        assert sampler.error is None
    finally:
        child.kill()
        child.wait()

    cpu = read_rows(tmp_path / "cpu.csv")
    assert tuple(cpu[0]) == sampling.CPU_COLUMNS
    cores = {int(row["core"]) for row in cpu}
    assert cores == set(range(psutil.cpu_count()))
    core0_times = [float(row["t_s"]) for row in cpu if row["core"] == "0"]
    assert len(core0_times) >= 3
    assert all(a < b for a, b in itertools.pairwise(core0_times))
    assert {row["phase"] for row in cpu} == {"warmup", "measure"}

    memory = read_rows(tmp_path / "memory.csv")
    assert tuple(memory[0]) == sampling.MEMORY_COLUMNS
    assert float(memory[0]["used_mb"]) > 0

    procs = read_rows(tmp_path / "procs.csv")
    assert tuple(procs[0]) == sampling.PROCS_COLUMNS
    workload = [row for row in procs if row["role"] == "workload"]
    assert all(row["pids"] == "1" for row in workload)
    assert max(float(row["cpu_pct"]) for row in workload) > 0
    assert {row["pids"] for row in procs if row["role"] == "stress-ng"} == {"0"}

    if (tmp_path / "disk.csv").exists():
        assert tuple(read_rows(tmp_path / "disk.csv")[0]) == sampling.DISK_COLUMNS
    assert {row["sampler"] for row in read_rows(tmp_path / "sampler.csv")} == {"host"}

    summary = summarize_cell(tmp_path, pinned_cores=[0])
    assert summary["workload_cpu_pct"] > 0
    assert "pinned_cores_busy_pct" in summary
    assert "sampler_cpu_pct" in summary
