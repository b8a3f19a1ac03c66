#!/usr/bin/env python3
"""What a client over ssh costs: TPS with sysbench here against sysbench "remote".

One scenario, one managed server, a matrix over ``workload.sysbench.host``: this
machine (A), or ``load1`` (B), a throwaway sshd on 127.0.0.1 (the test suite's,
``tests/integration/sshd.py``). Side B goes through everything a remote client
does: the multiplexed connection, the wrapper, and the server's port forwarded
back through ssh, so its TPS carries the tunnel's cost (no network: loopback).
The order is shuffled per repetition, so A and B alternate and drift of the
shared host lands on both.

Prints each repetition's TPS of both sides and the ratio B/A, then the ratio's
median with its range and interquartile range.

    .venv/bin/python benchmarks/remote_overhead.py --rounds 6 --time 4 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.integration.sshd

from dbrig.cli import main as dbrig_main
from tests.integration.sshd import start_sshd, stop_sshd


def scenario(host_entry: dict, rounds: int, seconds: int, threads: int) -> dict:
    return {
        "name": "remote-overhead",
        "server": {"config": {"innodb_buffer_pool_size": "128M"}},
        "hosts": {"load1": host_entry},
        "workload": {
            "sysbench": {
                "test": "oltp_read_only",
                "tables": 1,
                "table_size": 10000,
                "time": seconds,
                "threads": threads,
            }
        },
        "matrix": {"workload.sysbench.host": [None, "load1"]},
        "repeat": rounds,
        "warmup": 1,
        "seed": 5,
    }


def run(data: dict, folder: Path) -> pd.DataFrame:
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        dbrig_main(["run", str(path), "--out", str(folder / "runs"), "--no-report"])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise SystemExit(f"dbrig run failed: exit {exc.code}") from None
    (run_dir,) = (folder / "runs").iterdir()
    return pd.read_csv(run_dir / "results.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--time", type=int, default=4, help="seconds measured per trial")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    sshd = start_sshd()
    try:
        with tempfile.TemporaryDirectory(prefix="dbrig-bench-", dir="/tmp") as tmp:
            data = scenario(sshd.hosts_entry(), args.rounds, args.time, args.threads)
            results = run(data, Path(tmp))
    finally:
        stop_sshd(sshd)
    host = results["workload.sysbench.host"].fillna("here")
    tps = results.assign(side=host).pivot(index="repetition", columns="side", values="tps")
    ratios = []
    for repetition, row in tps.iterrows():
        ratio = row["load1"] / row["here"]
        ratios.append(ratio)
        print(
            f"repetition {repetition}: here {row['here']:.0f} TPS, "
            f"over ssh {row['load1']:.0f} TPS, ratio {ratio:.3f}"
        )
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(
        f"over ssh / here: median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}, IQR {quartiles[0]:.3f}-{quartiles[2]:.3f}, "
        f"{len(ratios)} rounds, {args.threads} threads, {args.time} s each)"
    )


if __name__ == "__main__":
    main()
