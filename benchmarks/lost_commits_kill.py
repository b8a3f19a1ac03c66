#!/usr/bin/env python3
"""Lost acknowledged commits after a SIGKILL of the server, per durability setting.

Until the scenario's ``faults:`` block runs it (scenarios/durability-loss.yaml), this
measures the same thing by hand, through the real parts: a sandbox with the binary log
on, the packaged acked_writes script run by sysbench, the server killed with SIGKILL
``--kill-at`` seconds into the run and restarted on the same datadir (crash recovery)
while the client keeps going, then the run side's own ``check_client_logs``.

Cells are innodb_flush_log_at_trx_commit x sync_binlog, visited in an order that
alternates direction each round. Prints one line per trial, then per cell the median
and range of lost commits and of acknowledged commits.

    .venv/bin/python benchmarks/lost_commits_kill.py --rounds 3 --time 6 --kill-at 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from dbrig import proc
from dbrig.run.trial_outcome import check_client_logs
from dbrig.server import datadir as dd
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from dbrig.tools.acked_writes import AckedWritesParams, AckedWritesTool, build_command

BASE = {
    "innodb_buffer_pool_size": "64M",
    "innodb_log_file_size": "48M",
    "log_bin": None,  # the binary log on, so sync_binlog matters
    "server_id": 1,
}
CELLS = [(flush, sync) for flush in (0, 1, 2) for sync in (0, 1)]


def prepared_template(root: Path, params: AckedWritesParams) -> Path:
    sandbox = Sandbox("template", find_server(), root / "template")
    sandbox.initialize()
    sandbox.start(BASE)
    try:
        sandbox.prepare_accounts(params.db)
        out = root / "prepare.out"
        argv = build_command(params, sandbox.endpoint(params.db), "prepare")
        done = proc.run(argv, timeout_s=120, stdout=out, merge_stderr=True)
        assert done.returncode == 0, out.read_text()
    finally:
        sandbox.close()
    return sandbox.datadir


def one_trial(
    template: Path, home: Path, config: dict, params: AckedWritesParams, kill_at: float
) -> dict[str, float]:
    sandbox = Sandbox("cell", find_server(), home)
    dd.copy_tree(template, sandbox.datadir)
    sandbox.start(config)
    try:
        work = home / "client-log"
        work.mkdir()
        argv = build_command(params, sandbox.endpoint(params.db), "run")
        child = proc.spawn(argv, stdout=home / "run.out", merge_stderr=True, cwd=work)
        try:
            time.sleep(kill_at)
            assert sandbox.pid is not None
            os.kill(sandbox.pid, signal.SIGKILL)
            while sandbox.died() is None:
                time.sleep(0.01)
            sandbox.stop()
            started = time.monotonic()
            sandbox.start(config)
            recovery_s = time.monotonic() - started
            done = child.wait(params.time + params.reconnect_timeout + 60)
        finally:
            child.stop(grace_s=5)
        assert done is not None and done.returncode == 0, (home / "run.out").read_text()[-1500:]
        with contextlib.closing(sandbox.connect(params.db)) as conn:
            metrics = check_client_logs(AckedWritesTool(params), work, conn).metrics
        return {**metrics, "recovery_s": recovery_s}
    finally:
        sandbox.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--time", type=int, default=6)
    parser.add_argument("--kill-at", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    params = AckedWritesParams(threads=args.threads, time=args.time, reconnect_timeout=60)
    results: dict[tuple[int, int], list[dict[str, float]]] = {cell: [] for cell in CELLS}
    with tempfile.TemporaryDirectory(prefix="lost-") as tmp:
        root = Path(tmp)
        template = prepared_template(root, params)
        for r in range(args.rounds):
            for i, (flush, sync) in enumerate(CELLS if r % 2 == 0 else CELLS[::-1]):
                config = {
                    **BASE,
                    "innodb_flush_log_at_trx_commit": flush,
                    "sync_binlog": sync,
                }
                m = one_trial(template, root / f"r{r}-{i}", config, params, args.kill_at)
                results[(flush, sync)].append(m)
                print(
                    f"round {r} flush={flush} sync_binlog={sync}: acked {m['acked_commits']:.0f} "
                    f"lost {m['lost_commits']:.0f} unacked_present {m['unacked_present']:.0f} "
                    f"recovery {m['recovery_s']:.1f} s",
                    flush=True,
                )
    print("\nflush  sync_binlog  lost median [min..max]  acked median")
    for (flush, sync), trials in results.items():
        lost = [t["lost_commits"] for t in trials]
        acked = [t["acked_commits"] for t in trials]
        print(
            f"{flush:>5}  {sync:>11}  {statistics.median(lost):>11.0f} "
            f"[{min(lost):.0f}..{max(lost):.0f}]  {statistics.median(acked):>12.0f}"
        )


if __name__ == "__main__":
    main()
