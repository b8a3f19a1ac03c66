#!/usr/bin/env python3
"""dbrig's own memory over a long soak: does the orchestrator leak while a trial runs?

Runs one real soak trial (a managed MariaDB, sysbench oltp_read_only at a fixed
``rate`` with 1 thread on a tiny table, so the shared host is barely loaded) and
samples the resident memory of the dbrig process and of its Python children
(none today; counted if a future sampler forks one) every few seconds. The
server and sysbench are not dbrig's memory and are left out. Prints the RSS at
the start of the measured window, at the end, the maximum, and the OLS slope in
MiB/hour with its 95 % interval (batch means, as for the soak drift columns).

    .venv/bin/python benchmarks/soak_rss.py --minutes 60

The first ``--settle`` seconds (imports, prepare, server start) are left out of
the slope: they are start-up, not growth.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def scenario(seconds: int, rate: int) -> dict:
    return {
        "name": "soak-rss",
        "server": {"config": {"innodb_buffer_pool_size": "64M", "innodb_log_file_size": "16M"}},
        "workload": {
            "sysbench": {
                "test": "oltp_read_only",
                "tables": 1,
                "table_size": 1000,
                "threads": 1,
                "rate": rate,
                "time": seconds,
                "report_interval": 1,
            }
        },
        "repeat": 1,
        "warmup": 0,
    }


def dbrig_rss(proc: psutil.Process) -> float:
    """RSS in MiB of dbrig and of its Python children (not the server or the tools)."""
    total = 0.0
    for member in [proc, *proc.children(recursive=True)]:
        try:
            if member is proc or "python" in member.name().lower():
                total += member.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / MIB


def sample(proc: subprocess.Popen, every: float) -> list[tuple[float, float]]:
    handle = psutil.Process(proc.pid)
    start = time.monotonic()
    samples: list[tuple[float, float]] = []
    while proc.poll() is None:
        try:
            samples.append((time.monotonic() - start, dbrig_rss(handle)))
        except psutil.NoSuchProcess:
            break
        time.sleep(every)
    return samples


def slope_per_hour(samples: list[tuple[float, float]]) -> tuple[float, float, float]:
    from dbrig.analysis import drift

    t = np.array([s[0] for s in samples])
    y = np.array([s[1] for s in samples])
    fit = drift.fit_trend(t / 3600.0, y)
    if fit is None:
        return math.nan, math.nan, math.nan
    return fit.slope, fit.ci_low, fit.ci_high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="soak length (default 60)")
    parser.add_argument("--rate", type=int, default=20, help="sysbench --rate (default 20)")
    parser.add_argument("--every", type=float, default=5.0, help="RSS sampling period, s")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds left out at start")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))

    with tempfile.TemporaryDirectory(prefix="dbrig-soak-rss-") as tmp:
        out = Path(tmp)
        path = out / "soak-rss.yaml"
        path.write_text(yaml.safe_dump(scenario(int(args.minutes * 60), args.rate)))
        command = [sys.executable, "-c", "from dbrig.cli import main; main()", "run", str(path)]
        command += ["--out", str(out), "--no-report"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        child = subprocess.Popen(command, env=env)
        try:
            samples = sample(child, args.every)
        finally:
            if child.poll() is None:
                child.terminate()
            code = child.wait()
    kept = [s for s in samples if s[0] >= args.settle]
    if code != 0 or len(kept) < 3:
        sys.exit(f"soak_rss: dbrig exited {code} with {len(kept)} samples after settling")
    rss = [s[1] for s in kept]
    slope, low, high = slope_per_hour(kept)
    span = kept[-1][0] - kept[0][0]
    print(f"dbrig RSS over {span:.0f} s ({len(kept)} samples every {args.every} s)")
    print(f"  start {rss[0]:.1f} MiB, end {rss[-1]:.1f} MiB, max {max(rss):.1f} MiB")
    print(f"  slope {slope:+.2f} MiB/hour (95 % CI {low:+.2f} to {high:+.2f})")


if __name__ == "__main__":
    main()
