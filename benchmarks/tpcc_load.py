#!/usr/bin/env python3
"""The TPC-C-like workload on this machine: load rate, and NOPM beside sysbench's TPS.

1. Load: rows per second of the tpcc prepare for W = 1, 2, 4 warehouses with 1 and
   2 prepare threads, each from the same freshly initialised datadir, the cases
   interleaved in every round. Prints each case's median rows/s, the ratio
   2 threads / 1 thread per round (median and range), and the bytes one warehouse
   takes on disk (the schema folder, measured with ``du`` after each load).
2. Throughput: NOPM and TPM of tpcc (W warehouses) beside TPS of sysbench
   oltp_read_write on tables of about the same size, by client threads, the two
   alternating (A/B, B/A) on freshly restored snapshots. Prints medians and the
   per-round ratio TPM / (TPS x 60) (transactions of either kind per minute).

    .venv/bin/python benchmarks/tpcc_load.py --rounds 2 --time 10
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dbrig import proc
from dbrig.server import datadir as dd
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from dbrig.tools import sysbench, tpcc

CONFIG = {
    "innodb_buffer_pool_size": "1G",
    "innodb_log_file_size": "256M",
    "innodb_flush_log_at_trx_commit": 1,
}
TABLES = ("warehouse", "district", "customer", "history", "orders", "new_order", "order_line")


def run_checked(argv: list[str], out: Path, timeout_s: float = 1800) -> str:
    done = proc.run(argv, timeout_s=timeout_s, stdout=out, merge_stderr=True)
    if done.returncode:
        sys.exit(f"failed ({done.exit_text}): see {out}")
    return out.read_text()


def rows_loaded(box: Sandbox) -> int:
    total = 0
    with contextlib.closing(box.connect("tpcc")) as conn, conn.cursor() as cur:
        for table in (*TABLES, "item", "stock"):
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            total += int(cur.fetchone()[0])
    return total


def du_bytes(path: Path) -> int:
    done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def load_once(box: Sandbox, base: Path, warehouses: int, threads: int, work: Path) -> dict:
    dd.restore(base, box.datadir)
    box.start(CONFIG)
    try:
        box.prepare_accounts("tpcc")
        params = tpcc.TpccParams(warehouses=warehouses, prepare_threads=threads)
        started = time.monotonic()
        run_checked(tpcc.build_command(params, box.endpoint("tpcc"), "prepare"), work / "p.out")
        seconds = time.monotonic() - started
        rows = rows_loaded(box)
    finally:
        box.stop()
    return {"rows_per_s": rows / seconds, "s": seconds, "bytes": du_bytes(box.datadir / "tpcc")}


def load_rates(box: Sandbox, base: Path, rounds: int, work: Path) -> None:
    cases = [(w, t) for w in (1, 2, 4) for t in (1, 2)]
    results: dict[tuple[int, int], list[dict]] = {c: [] for c in cases}
    for r in range(rounds):
        for case in cases if r % 2 == 0 else reversed(cases):
            results[case].append(load_once(box, base, *case, work))
            print(f"  round {r + 1} W={case[0]} threads={case[1]}: {results[case][-1]}")
    print("\nload rate (median over rounds):")
    print("| W | 1 thread rows/s | 2 threads rows/s | ratio 2/1 median (range) | MiB on disk |")
    for w in (1, 2, 4):
        one, two = results[(w, 1)], results[(w, 2)]
        ratios = [b["rows_per_s"] / a["rows_per_s"] for a, b in zip(one, two, strict=True)]
        mib = statistics.median(x["bytes"] for x in one + two) / 2**20
        print(
            f"| {w} | {statistics.median(x['rows_per_s'] for x in one):,.0f} "
            f"| {statistics.median(x['rows_per_s'] for x in two):,.0f} "
            f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
            f"| {mib:.0f} |"
        )
    w1 = statistics.median(x["bytes"] for x in results[(1, 1)] + results[(1, 2)])
    w4 = statistics.median(x["bytes"] for x in results[(4, 1)] + results[(4, 2)])
    print(f"bytes per warehouse (W=4 minus W=1, / 3): {(w4 - w1) / 3 / 2**20:.1f} MiB")


def prepared_snapshot(box: Sandbox, base: Path, argv_of: Callable, db: str, work: Path) -> Path:
    dd.restore(base, box.datadir)
    box.start(CONFIG)
    try:
        box.prepare_accounts(db)
        run_checked(argv_of(box.endpoint(db)), work / f"{db}-prepare.out")
    finally:
        box.stop()
    snapshot = work / f"{db}-snapshot"
    dd.snapshot(box.datadir, snapshot)
    return snapshot


def measured(box: Sandbox, snapshot: Path, argv: list[str], work: Path) -> str:
    dd.restore(snapshot, box.datadir)
    box.start(CONFIG)
    try:
        return run_checked(argv, work / "run.out")
    finally:
        box.stop()


def throughput(box: Sandbox, base: Path, args: argparse.Namespace, work: Path) -> None:
    w = args.warehouses
    tp = tpcc.TpccParams(warehouses=w, prepare_threads=min(w, 2), time=args.time)
    # oltp tables of the same order of size: 4 x 150,000 rows per warehouse
    sb = sysbench.SysbenchParams(tables=4, table_size=150_000 * w, threads=2, time=args.time)
    tp_snap = prepared_snapshot(
        box, base, lambda e: tpcc.build_command(tp, e, "prepare"), tp.db, work
    )
    sb_snap = prepared_snapshot(
        box, base, lambda e: sysbench.build_command(sb, e, "prepare"), sb.db, work
    )
    rows = []
    for threads in args.threads:
        tpc = tp.model_copy(update={"threads": threads})
        sbc = sb.model_copy(update={"threads": threads})
        nopm, tpm, tps = [], [], []
        for r in range(args.rounds):
            order = ("tpcc", "sysbench") if r % 2 == 0 else ("sysbench", "tpcc")
            for side in order:
                if side == "tpcc":
                    argv = tpcc.build_command(tpc, box.endpoint(tp.db), "run")
                    m = tpcc.tpcc_metrics(tpcc.parse(measured(box, tp_snap, argv, work)), 95)
                    nopm.append(m["nopm"])
                    tpm.append(m["tpm"])
                else:
                    argv = sysbench.build_command(sbc, box.endpoint(sb.db), "run")
                    tps.append(sysbench.parse(measured(box, sb_snap, argv, work)).summary["tps"])
            print(f"  threads={threads} round {r + 1}: NOPM {nopm[-1]:.0f} TPS {tps[-1]:.1f}")
        ratios = [a / (b * 60) for a, b in zip(tpm, tps, strict=True)]
        rows.append((threads, nopm, tpm, tps, ratios))
    print(f"\nthroughput, W={w}, {args.time} s per run, medians over {args.rounds} rounds:")
    print("| threads | NOPM (range) | TPM | oltp_read_write TPS (range) | TPM/(TPS*60) (range) |")
    for threads, nopm, tpm, tps, ratios in rows:
        print(
            f"| {threads} | {statistics.median(nopm):,.0f} ({min(nopm):,.0f}-{max(nopm):,.0f}) "
            f"| {statistics.median(tpm):,.0f} "
            f"| {statistics.median(tps):,.1f} ({min(tps):,.1f}-{max(tps):,.1f}) "
            f"| {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--time", type=int, default=10, help="seconds per measured run")
    parser.add_argument("--warehouses", type=int, default=2, help="W of the throughput part")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tpcc-bench-", dir="/tmp") as tmp:
        work = Path(tmp)
        box = Sandbox("bench", find_server(), work / "server")
        box.initialize()
        base = work / "base"
        dd.snapshot(box.datadir, base)
        try:
            if not args.skip_load:
                load_rates(box, base, args.rounds, work)
            if not args.skip_throughput:
                throughput(box, base, args, work)
        finally:
            box.close()


if __name__ == "__main__":
    main()
