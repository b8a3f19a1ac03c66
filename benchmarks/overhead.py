#!/usr/bin/env python3
"""Does running through dbrig cost throughput? Bare sysbench vs ``dbrig run``, alternating.

Both sides run the same sysbench command against the same kind of freshly
restored sandbox with the same my.cnf: the bare side restores and starts the
server itself and runs sysbench alone; the dbrig side is a real ``dbrig run``
of a one-cell scenario (samplers on at 1 s, the server under dbrig's control).
Pairs alternate A/B, B/A so slow drift of the shared host lands on both sides.

Prints the TPS of every pair, then the ratio dbrig/bare as a median with its
interquartile range and a 95 % t-interval of the mean ratio. Target: >= 0.99.

    .venv/bin/python benchmarks/overhead.py --pairs 8 --time 10
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from dbrig import proc
from dbrig.analysis.stats import summarize
from dbrig.server import datadir as dd
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from dbrig.tools import sysbench

CONFIG = {"innodb_buffer_pool_size": "128M", "innodb_log_file_size": "32M"}
ROOT = Path(__file__).resolve().parent.parent


def params(seconds: int) -> sysbench.SysbenchParams:
    return sysbench.SysbenchParams(
        test="oltp_read_write", tables=2, table_size=10000, threads=2, time=seconds
    )


def prepare(work: Path, p: sysbench.SysbenchParams) -> tuple[Sandbox, Path]:
    box = Sandbox("bench", find_server(), work / "server")
    box.initialize()
    box.start(CONFIG)
    box.prepare_accounts(p.db)
    argv = sysbench.build_command(p, box.endpoint(p.db), "prepare")
    done = proc.run(argv, timeout_s=600, stdout=work / "prepare.out", merge_stderr=True)
    if done.returncode:
        sys.exit("prepare failed: see " + str(work / "prepare.out"))
    box.stop()
    snapshot = work / "snapshot"
    dd.snapshot(box.datadir, snapshot)
    return box, snapshot


def bare_tps(box: Sandbox, snapshot: Path, p: sysbench.SysbenchParams, work: Path) -> float:
    dd.restore(snapshot, box.datadir)
    box.start(CONFIG)
    try:
        out = work / "bare.out"
        out.unlink(missing_ok=True)
        argv = sysbench.build_command(p, box.endpoint(p.db), "run")
        proc.run(argv, timeout_s=p.time * 3 + 60, stdout=out, merge_stderr=True)
        return sysbench.parse(out.read_text()).summary["tps"]
    finally:
        box.stop()


def dbrig_tps(p: sysbench.SysbenchParams, work: Path) -> float:
    scenario = {
        "name": "overhead",
        "server": {"config": CONFIG},
        "workload": {"sysbench": p.model_dump(exclude_defaults=True)},
        "order": "sequential",
    }
    path = work / "overhead.yaml"
    path.write_text(yaml.safe_dump(scenario))
    runs = work / "runs"
    subprocess.run(
        [str(ROOT / ".venv/bin/dbrig"), "run", str(path), "--out", str(runs)],
        check=True,
        capture_output=True,
    )
    newest = max(runs.iterdir(), key=lambda d: d.stat().st_mtime)
    results = (newest / "results.csv").read_text().splitlines()
    header, row = results[0].split(","), results[1].split(",")
    return float(row[header.index("tps")])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--time", type=int, default=10, help="seconds per sysbench run")
    args = ap.parse_args()
    if args.pairs < 2:
        ap.error("--pairs: at least 2 (a spread needs two)")
    p = params(args.time)
    with tempfile.TemporaryDirectory(prefix="dbrig-overhead-") as tmp:
        work = Path(tmp)
        box, snapshot = prepare(work, p)
        ratios = []
        try:
            for i in range(args.pairs):
                first_bare = i % 2 == 0
                started = time.monotonic()
                if first_bare:
                    bare = bare_tps(box, snapshot, p, work)
                    through = dbrig_tps(p, work)
                else:
                    through = dbrig_tps(p, work)
                    bare = bare_tps(box, snapshot, p, work)
                ratios.append(through / bare)
                print(
                    f"pair {i + 1}: bare {bare:8.1f} tps  dbrig {through:8.1f} tps  "
                    f"ratio {through / bare:.3f}  ({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
        finally:
            box.close()
    summary = summarize(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"\nTPS ratio dbrig/bare over {len(ratios)} pairs: median {statistics.median(ratios):.3f} "
        f"(IQR {q1:.3f}-{q3:.3f}), mean {summary.mean:.3f} "
        f"(95 % CI {summary.ci_low:.3f}-{summary.ci_high:.3f}), CV of the ratio "
        f"{(summary.cv or 0) * 100:.1f} %"
    )


if __name__ == "__main__":
    main()
