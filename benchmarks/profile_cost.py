#!/usr/bin/env python3
"""What a CPU profile costs: TPS with perf record at 49 and 99 Hz against no profile.

dbrig measures itself: one scenario with three cells (sampling.profile.cpu.frequency
0, 49 and 99), repeated in a shuffled order so the shared host's drift lands on every
cell alike (the run's ``order: shuffled``). Then it prints, for 49 and 99 Hz,

- the TPS ratio profiled / off with its 95 % interval (Fieller's, as compare gives
  it) and p-value, and
- the samples a trial got, against what the server's CPU time allows (frequency x
  server CPU seconds): how much of its CPU the profile saw.

    .venv/bin/python benchmarks/profile_cost.py --repeat 6 --time 10
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from dbrig.analysis import stats

ROOT = Path(__file__).resolve().parent.parent
KEY = "sampling.profile.cpu.frequency"
FREQUENCIES = (49, 99)


def scenario(repeat: int, seconds: int) -> dict:
    return {
        "name": "profile-cost",
        "server": {"config": {"innodb_buffer_pool_size": "128M", "innodb_log_file_size": "32M"}},
        "workload": {
            "sysbench": {
                "test": "oltp_read_write",
                "tables": 2,
                "table_size": 10000,
                "threads": 2,
                "time": seconds,
            }
        },
        "matrix": {KEY: [0, *FREQUENCIES]},
        "repeat": repeat,
        "warmup": 2,
    }


def run(repeat: int, seconds: int, out: Path) -> Path:
    path = out / "profile-cost.yaml"
    path.write_text(yaml.safe_dump(scenario(repeat, seconds)))
    dbrig = str(ROOT / ".venv/bin/dbrig")
    subprocess.run([dbrig, "run", str(path), "--out", str(out), "--no-report"], check=True)
    return next(p for p in out.iterdir() if p.is_dir())


def report(run_dir: Path) -> None:
    frame = pd.read_csv(run_dir / "results.csv")
    frame = frame[frame["status"] == "ok"]
    off = frame[frame[KEY] == 0]
    for hz in FREQUENCIES:
        on = frame[frame[KEY] == hz]
        cmp = stats.compare_samples(
            off["tps"].tolist(),
            on["tps"].tolist(),
            direction=stats.Direction.HIGHER_IS_BETTER,
            threshold=0.01,
        )
        if cmp.mean_base is None or cmp.mean_cand is None:
            print(f"{hz} Hz: {cmp.verdict} ({cmp.reason})")
            continue
        ratio = cmp.mean_cand / cmp.mean_base
        ci = (
            f"{1 + cmp.ci_low_pct / 100:.3f}-{1 + cmp.ci_high_pct / 100:.3f}"
            if cmp.ci_low_pct is not None and cmp.ci_high_pct is not None
            else "unbounded"
        )
        p = f"{cmp.p_value:.2f}" if cmp.p_value is not None else "n/a"
        print(
            f"TPS ratio profile at {hz} Hz / off: {ratio:.3f} (95 % CI {ci}, p={p}, "
            f"n={cmp.n_base}/{cmp.n_cand}): {cmp.verdict}; {stats.explain(cmp, 0.01)}"
        )
        if "profile_samples" in on and "server_cpu_s" in on:
            seen = on["profile_samples"] / (hz * on["server_cpu_s"])
            print(f"  samples / ({hz} Hz x server CPU s): median {seen.median():.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--time", type=int, default=10, help="measured seconds per trial")
    ap.add_argument("--run-dir", type=Path, help="report on an existing run instead of running")
    args = ap.parse_args()
    if args.run_dir:
        report(args.run_dir)
        return
    with tempfile.TemporaryDirectory(prefix="dbrig-profile-cost-") as tmp:
        report(run(args.repeat, args.time, Path(tmp)))


if __name__ == "__main__":
    main()
