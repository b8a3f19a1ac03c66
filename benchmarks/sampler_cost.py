#!/usr/bin/env python3
"""What sampling costs: the samplers' own CPU at 1 Hz and 10 Hz, and TPS with sampling on vs off.

dbrig measures itself: one scenario with three cells (sampling off, on at 1 s,
on at 0.1 s), repeated round-robin in a shuffled order so the shared host's
drift lands on every cell alike. Then it prints

- the samplers' CPU as a share of one core at each rate (target: <= 1 % at 1 Hz),
- the TPS ratio on/off with its 95 % CI and p-value (target: >= 0.99),
- and, since the same trials repeat, the spread (CV) of TPS against the spread
  of the server's CPU cost per transaction (see docs/sampling.md).

    .venv/bin/python benchmarks/sampler_cost.py --repeat 6 --time 10
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


def scenario(repeat: int, seconds: int) -> dict:
    return {
        "name": "sampler-cost",
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
        "matrix": {"sampling.enabled, sampling.interval": [[False, 1.0], [True, 1.0], [True, 0.1]]},
        "repeat": repeat,
        "warmup": 2,
    }


def run(repeat: int, seconds: int, out: Path) -> Path:
    path = out / "sampler-cost.yaml"
    path.write_text(yaml.safe_dump(scenario(repeat, seconds)))
    subprocess.run([str(ROOT / ".venv/bin/dbrig"), "run", str(path), "--out", str(out)], check=True)
    return next(p for p in out.iterdir() if p.is_dir())


def report(run_dir: Path) -> None:
    frame = pd.read_csv(run_dir / "results.csv")
    frame = frame[frame["status"] == "ok"]
    on = frame["sampling.enabled"].astype(str).str.lower() == "true"
    groups = {
        "off": frame[~on],
        "1 Hz": frame[on & (frame["sampling.interval"] == 1.0)],
        "10 Hz": frame[on & (frame["sampling.interval"] == 0.1)],
    }
    for name in ("1 Hz", "10 Hz"):
        cost = stats.summarize(groups[name]["sampler_cpu_pct"].tolist())
        print(
            f"sampler CPU at {name}: {cost.mean:.2f} % of one core "
            f"(95 % CI {cost.ci_low:.2f}-{cost.ci_high:.2f}, n={cost.n})"
        )
    for name in ("1 Hz", "10 Hz"):
        cmp = stats.compare_samples(
            groups["off"]["tps"].tolist(),
            groups[name]["tps"].tolist(),
            direction=stats.Direction.HIGHER_IS_BETTER,
            threshold=0.01,
        )
        ratio = cmp.mean_cand / cmp.mean_base
        ci = (
            f"{1 + cmp.ci_low_pct / 100:.3f}-{1 + cmp.ci_high_pct / 100:.3f}"
            if cmp.ci_low_pct is not None and cmp.ci_high_pct is not None
            else "unbounded"
        )
        print(
            f"TPS ratio sampling {name} / off: {ratio:.3f} (95 % CI {ci}, p={cmp.p_value:.2f}, "
            f"n={cmp.n_base}/{cmp.n_cand}): {cmp.verdict}; {stats.explain(cmp, 0.01)}"
        )
    sampled = pd.concat([groups["1 Hz"], groups["10 Hz"]])
    for column in ("tps", "server_cpu_us_per_txn", "server_cpu_us_per_query"):
        if column in sampled:
            cvs = [stats.summarize(g[column].tolist()).cv for _, g in sampled.groupby("cell")]
            shown = ", ".join(f"{cv * 100:.1f} %" for cv in cvs if cv is not None)
            print(f"CV across repetitions of {column}: {shown}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--time", type=int, default=10, help="measured seconds per trial")
    ap.add_argument("--run-dir", type=Path, help="report on an existing run instead of running")
    args = ap.parse_args()
    if args.run_dir:
        report(args.run_dir)
        return
    with tempfile.TemporaryDirectory(prefix="dbrig-sampler-cost-") as tmp:
        report(run(args.repeat, args.time, Path(tmp)))


if __name__ == "__main__":
    main()
