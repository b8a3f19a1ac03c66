#!/usr/bin/env python3
"""What a client over ssh costs: TPS with sysbench here against sysbench "remote".

One scenario, one managed server, a matrix over ``workload.sysbench.host``: this
machine (A), or ``load1`` (B), a throwaway sshd on 127.0.0.1 (the test suite's,
``tests/integration/sshd.py``). Side B goes through everything a remote client
does: the multiplexed connection, the wrapper, and the server's port forwarded
back through ssh, so its TPS carries the tunnel's cost (no network: loopback).
The order is shuffled per repetition, so A and B alternate and drift of the
shared host lands on both.

``--side server``: the client stays here and the managed server moves instead
(a matrix over ``server``: ``here``, or ``remote`` with ``host: load1``, run by
dbrig's agent over the same sshd). Side B then pays the agent's sampling over ssh
and the server's TCP port on 127.0.0.1 instead of the tunnel.

Prints each repetition's TPS of both sides and the ratio B/A, then the ratio's
median with its range and interquartile range.

    .venv/bin/python benchmarks/remote_overhead.py --rounds 6 --time 4 --threads 2
    .venv/bin/python benchmarks/remote_overhead.py --side server --rounds 6 --time 4
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


def server_scenario(host_entry: dict, rounds: int, seconds: int, threads: int) -> dict:
    """The same load, the client here; the server here (A) or on load1 through the agent (B)."""
    data = scenario(host_entry, rounds, seconds, threads)
    config = data.pop("server")["config"]
    # load1's dbrig is this one: sshd gives its sessions no PYTHONPATH.
    source = Path(__file__).resolve().parents[1] / "src"
    data["hosts"]["load1"]["python"] = f"env PYTHONPATH={source} {sys.executable}"
    data["servers"] = {"here": {"config": config}, "remote": {"config": config, "host": "load1"}}
    data["matrix"] = {"server": ["here", "remote"]}
    return data


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
    parser.add_argument(
        "--side", choices=["client", "server"], default="client", help="which one goes remote"
    )
    args = parser.parse_args()
    build = server_scenario if args.side == "server" else scenario
    factor = "server" if args.side == "server" else "workload.sysbench.host"
    remote = "remote" if args.side == "server" else "load1"
    sshd = start_sshd()
    try:
        with tempfile.TemporaryDirectory(prefix="dbrig-bench-", dir="/tmp") as tmp:
            data = build(sshd.hosts_entry(), args.rounds, args.time, args.threads)
            results = run(data, Path(tmp))
    finally:
        stop_sshd(sshd)
    side = results[factor].fillna("here")
    tps = results.assign(side=side).pivot(index="repetition", columns="side", values="tps")
    ratios = []
    for repetition, row in tps.iterrows():
        ratio = row[remote] / row["here"]
        ratios.append(ratio)
        print(
            f"repetition {repetition}: here {row['here']:.0f} TPS, "
            f"{args.side} over ssh {row[remote]:.0f} TPS, ratio {ratio:.3f}"
        )
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(
        f"{args.side} over ssh / here: median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}, IQR {quartiles[0]:.3f}-{quartiles[2]:.3f}, "
        f"{len(ratios)} rounds, {args.threads} threads, {args.time} s each)"
    )


if __name__ == "__main__":
    main()
