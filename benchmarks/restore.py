#!/usr/bin/env python3
"""Restore time after a write workload: dbrig's restore vs ``rm -rf && cp -a``, alternating.

Prepares sysbench data in a sandbox, snapshots it, then repeats: run a short
write-only workload (so the datadir really differs from the snapshot), stop
the server, restore with method A or B (alternating which goes first), and
time it. dbrig's restore copies to a sibling and swaps it in by rename, so an
interrupted restore never leaves a half-copied datadir; this measures what
that safety costs against the plain shell idiom.

    .venv/bin/python benchmarks/restore.py --rounds 10 --tables 4 --table-size 50000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dbrig import proc
from dbrig.analysis.stats import summarize
from dbrig.host import probe
from dbrig.server import datadir as dd
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from dbrig.tools import sysbench

CONFIG = {"innodb_buffer_pool_size": "128M", "innodb_log_file_size": "48M"}


def dbrig_restore(snapshot: Path, datadir: Path) -> float:
    return dd.restore(snapshot, datadir).seconds


def shell_restore(snapshot: Path, datadir: Path) -> float:
    started = time.monotonic()
    shutil.rmtree(datadir)
    subprocess.run(["cp", "-a", str(snapshot), str(datadir)], check=True)
    return time.monotonic() - started


def dirty(box: Sandbox, p: sysbench.SysbenchParams, work: Path) -> None:
    box.start(CONFIG)
    try:
        write = p.model_copy(update={"test": "oltp_write_only", "time": 3, "threads": 2})
        argv = sysbench.build_command(write, box.endpoint(p.db), "run")
        proc.run(argv, timeout_s=60, stdout=work / "write.out", merge_stderr=True)
    finally:
        box.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--table-size", type=int, default=50000)
    ap.add_argument(
        "--dir", type=Path, default=None, help="work directory (put it on XFS/btrfs for reflink)"
    )
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds: at least 2 (a spread needs two)")
    p = sysbench.SysbenchParams(tables=args.tables, table_size=args.table_size, threads=2)
    with tempfile.TemporaryDirectory(prefix="dbrig-restore-", dir=args.dir) as tmp:
        work = Path(tmp)
        box = Sandbox("bench", find_server(), work / "server")
        try:
            box.initialize()
            box.start(CONFIG)
            box.prepare_accounts(p.db)
            argv = sysbench.build_command(p, box.endpoint(p.db), "prepare")
            if proc.run(argv, timeout_s=900, stdout=work / "prepare.out").returncode:
                sys.exit("prepare failed")
            box.stop()
            snapshot = work / "snapshot"
            dd.snapshot(box.datadir, snapshot)
            size_mb = sum(f.stat().st_size for f in snapshot.rglob("*") if f.is_file()) / 2**20
            print(f"datadir {size_mb:.0f} MiB, reflink: {probe.supports_reflink(work)}")
            times: dict[str, list[float]] = {"dbrig": [], "rm+cp": []}
            methods = {"dbrig": dbrig_restore, "rm+cp": shell_restore}
            for i in range(args.rounds):
                order = ["dbrig", "rm+cp"] if i % 2 == 0 else ["rm+cp", "dbrig"]
                for name in order:
                    dirty(box, p, work)
                    times[name].append(methods[name](snapshot, box.datadir))
                print(
                    f"round {i + 1}: dbrig {times['dbrig'][-1]:.3f} s  "
                    f"rm+cp {times['rm+cp'][-1]:.3f} s",
                    flush=True,
                )
        finally:
            box.close()
    ratios = [a / b for a, b in zip(times["dbrig"], times["rm+cp"], strict=True)]
    s = summarize(ratios)
    print(
        f"\nrestore time dbrig / rm+cp over {len(ratios)} rounds: median "
        f"{statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}), mean "
        f"{s.mean:.2f} (95 % CI {s.ci_low:.2f}-{s.ci_high:.2f}); medians "
        f"{statistics.median(times['dbrig']):.3f} s vs {statistics.median(times['rm+cp']):.3f} s"
    )


if __name__ == "__main__":
    main()
