#!/usr/bin/env python3
"""What downsampling a soak's hour buys the report: one cell figure, bucketed vs every row.

Builds the cell figure of a synthetic one-hour soak (1 s intervals and 1 s samples of
a 2-core host: intervals, procs, cpu, disk and status rows, with noise and spikes) and
renders it to PNG, alternately with the bucketing on (A: MAX_PLOT_POINTS, 300) and off
(B: every row drawn), ``--rounds`` times. Prints each side's median time and PNG size
and the ratio B/A per round with its range.

    .venv/bin/python benchmarks/soak_chart.py --rounds 6
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from dbrig.report import charts


def hour_of_samples(seconds: int = 3600) -> charts.CellSamples:
    rng = np.random.default_rng(1)
    t = np.arange(1.0, seconds + 1.0)
    noisy = lambda level: level * (1 + 0.1 * rng.standard_normal(seconds))  # noqa: E731
    intervals = pd.DataFrame({"t_s": t, "tps": noisy(500), "latency_pct_ms": noisy(5)})
    stamp = {"t_s": t, "phase": "measure", "interval_s": 1.0}
    procs = pd.concat(
        pd.DataFrame({**stamp, "role": role, "cpu_pct": noisy(cpu), "rss_mb": noisy(rss)})
        for role, cpu, rss in (("server", 120, 400), ("workload", 40, 12))
    )
    cpu = pd.concat(
        pd.DataFrame({**stamp, "core": core, "busy_pct": noisy(70), "iowait_pct": noisy(2)})
        for core in (0, 1)
    )
    disk = pd.DataFrame(
        {
            **stamp,
            "device": "vda",
            "reads_per_s": noisy(50),
            "writes_per_s": noisy(300),
            "await_ms": noisy(1),
            "util_pct": noisy(30),
        }
    )
    status = pd.DataFrame(
        {
            **stamp,
            "questions_per_s": noisy(9000),
            "handler_read_key_per_s": noisy(5000),
            "handler_write_per_s": noisy(100),
            "innodb_buffer_pool_reads_per_s": noisy(3),
        }
    )
    return charts.CellSamples(
        intervals=[charts.Series("r1", intervals)],
        sample_label="r1",
        cpu=cpu,
        disk=disk,
        status=status,
        procs=procs,
        memory=True,
    )


def render(samples: charts.CellSamples) -> tuple[float, int]:
    start = time.perf_counter()
    fig = charts.cell_figure(
        samples,
        title="c000 soak",
        throughput=("tps", "TPS (txn/s)"),
        latency=("latency_pct_ms", "p95 latency (ms)"),
        warmup_s=60,
    )
    assert fig is not None
    size = len(charts.png_bytes(fig))
    return time.perf_counter() - start, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    samples = hour_of_samples()
    bucketed = charts.MAX_PLOT_POINTS
    times: dict[str, list[float]] = {"A": [], "B": []}
    sizes: dict[str, int] = {}
    render(samples)  # warm matplotlib's caches before timing either side
    for round_ in range(args.rounds):
        for side in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
            charts.MAX_PLOT_POINTS = bucketed if side == "A" else 10**9
            seconds, sizes[side] = render(samples)
            times[side].append(seconds)
    charts.MAX_PLOT_POINTS = bucketed
    ratios = [b / a for a, b in zip(times["A"], times["B"], strict=True)]
    for side, name in (("A", f"bucketed ({bucketed})"), ("B", "every row")):
        print(
            f"{name}: median {statistics.median(times[side]):.2f} s, "
            f"PNG {sizes[side] / 1024:.0f} KiB"
        )
    print(
        f"B/A per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"median {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
