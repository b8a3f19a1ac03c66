#!/usr/bin/env python3
"""Saving one trial as a run grows: trial.json and the results files, at 10 to 5000 trials saved.

For each size N, a run directory is filled with N trials (copies of a real
trial.json from ``tests/fixtures/runs/v1``: 70 metrics, two commands) and then,
round after round, one more trial is saved the way the runner saves it and
timed: the trial folder written and renamed into place, then the results
updated (after one untimed save per directory). The sizes are interleaved
within each round (in a rotating order), so the ratio to the 10-trial time
compares saves made moments apart.

Three ways of updating the results are measured, each in its own directories:

- ``append`` (what dbrig does): the row appended to results.csv; results.parquet
  is written when the run ends (that once-per-run cost is printed too).
- ``append+parquet``: the same, plus results.parquet rewritten from the rows
  held in memory after every trial.
- ``rebuild`` (dbrig before): both files rebuilt from every trial.json.

    .venv/bin/python benchmarks/store_scale.py --rounds 15
    .venv/bin/python benchmarks/store_scale.py --rounds 5 --methods append --sizes 10 5000
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dbrig import store
from dbrig.analysis.stats import summarize

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_RUN = ROOT / "tests/fixtures/runs/v1/small-20261121-235548"
SIZES = (10, 100, 1000, 5000)

Save = Callable[[store.RunDir, store.ResultsLog, store.TrialResult], None]


def write_trial(run: store.RunDir, result: store.TrialResult) -> None:
    with run.writing_trial(result.trial) as folder:
        run.write_trial(folder, result)


def save_append(run: store.RunDir, log: store.ResultsLog, result: store.TrialResult) -> None:
    write_trial(run, result)
    log.add(result)


def save_append_parquet(
    run: store.RunDir, log: store.ResultsLog, result: store.TrialResult
) -> None:
    save_append(run, log, result)
    frame = store.results_frame(log.results.values())
    tmp = run.path / ".results.parquet.tmp"
    store.parquet_safe(frame).to_parquet(tmp, index=False)
    tmp.replace(run.path / "results.parquet")


def save_rebuild(run: store.RunDir, log: store.ResultsLog, result: store.TrialResult) -> None:
    write_trial(run, result)
    run.write_results(store.results_frame(run.trials().values()))


METHODS: dict[str, Save] = {
    "append": save_append,
    "append+parquet": save_append_parquet,
    "rebuild": save_rebuild,
}


def trial(template: store.TrialResult, cell: int, repetition: int) -> store.TrialResult:
    cell_id = f"c{cell:04d}"
    return dataclasses.replace(
        template, trial=f"{cell_id}-r{repetition}", cell=cell_id, repetition=repetition
    )


def filled_run(root: Path, name: str, n: int, template: store.TrialResult) -> store.RunDir:
    """A run directory holding ``n`` saved trials (10 repetitions per cell)."""
    run = store.RunDir.create(root, name, dt.datetime(2026, 1, 1))
    run.write_saved(store.SavedRun(status="running", scenario={"name": name}))
    for i in range(n):
        result = trial(template, i // 10, i % 10 + 1)
        folder = run.trial_path(result.trial)
        folder.mkdir()
        run.write_trial(folder, result)
    return run


def measure(
    method: str, sizes: list[int], rounds: int, root: Path, template: store.TrialResult
) -> tuple[dict[int, list[float]], dict[int, float]]:
    runs = {n: filled_run(root, f"{method.replace('+', '-')}-{n}", n, template) for n in sizes}
    logs = {n: store.ResultsLog.open(run) for n, run in runs.items()}  # the run (re)starting
    for n in sizes:  # untimed: the first save of a process pays for imports and caches
        METHODS[method](runs[n], logs[n], trial(template, 8999, 1))
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(rounds):
        order = sizes[r % len(sizes) :] + sizes[: r % len(sizes)]
        for n in order:
            result = trial(template, 9000 + r, 1)  # a new cell: never a retry
            started = time.perf_counter()
            METHODS[method](runs[n], logs[n], result)
            times[n].append(time.perf_counter() - started)
    return times, {n: end_of_run(logs[n]) for n in sizes}


def end_of_run(log: store.ResultsLog) -> float:
    """What the run pays once, when it ends: both files written whole, sorted."""
    started = time.perf_counter()
    log.finish()
    return time.perf_counter() - started


def report(
    method: str, sizes: list[int], times: dict[int, list[float]], ends: dict[int, float]
) -> None:
    base = sizes[0]
    print(f"\n{method}: time to save one trial, median over {len(times[base])} rounds")
    print(f"  {base:>5} saved: {1000 * statistics.median(times[base]):8.2f} ms  (reference)")
    for n in sizes[1:]:
        ratios = [t / b for t, b in zip(times[n], times[base], strict=True)]
        s = summarize(ratios)
        print(
            f"  {n:>5} saved: {1000 * statistics.median(times[n]):8.2f} ms  "
            f"ratio to {base}: median {statistics.median(ratios):6.2f} "
            f"(range {min(ratios):.2f}-{max(ratios):.2f}), mean {s.mean:.2f} "
            f"(95 % CI {s.ci_low:.2f}-{s.ci_high:.2f})"
        )
    if method == "append":
        ends_text = ", ".join(f"{ends[n]:.3f} s at {n}" for n in sizes)
        print(f"  once, at the end of the run (both files written sorted): {ends_text}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir)")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds: at least 2 (a spread needs two)")
    if len(args.sizes) < 2 or min(args.sizes) < 1:
        ap.error("--sizes: at least two sizes of 1 or more (the first is the reference)")
    sizes = sorted(args.sizes)
    template = store.read_trial(TEMPLATE_RUN / "trials" / "c001-r1")
    print(f"trial.json of {len(template.metrics)} metrics; sizes {sizes}; {args.rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="dbrig-store-", dir=args.dir) as tmp:
        for method in args.methods:
            times, ends = measure(method, sizes, args.rounds, Path(tmp), template)
            report(method, sizes, times, ends)


if __name__ == "__main__":
    main()
