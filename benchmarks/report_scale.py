#!/usr/bin/env python3
"""How the run report scales: a synthetic run of 1000 cells x 600 s, rendered once.

Writes a run directory shaped like a real one (run.json, results.csv with every
column a sysbench run has, and one trial folder per repetition with trial.json,
intervals.csv and the sampler CSVs (procs.csv included) for ``--seconds`` of measurement after a
10 s warm-up), then renders it with ``write_report`` in a child process and prints
the time in ``write_report``, its CPU time (forked workers included) and the peak
RSS next to the targets (6 s, 1 GiB). With ``--baseline`` it renders the same run
alternately with another checkout's ``src/`` (A) and this tree (B), and prints
each round's ratios B/A of wall and CPU time (the CPU ratio moves less with the
load of a shared machine).

The per-second CSVs are generated with numpy for a few variants and hard-linked
into every trial folder, so generating 3000 trials takes seconds and little
disk; trial.json and the results rows are distinct per trial. The matrix:
threads (10 values, numeric) x stress-ng cpu workers (10, numeric) x
innodb_buffer_pool_size (10, categorical), 3 repetitions each.

    .venv/bin/python benchmarks/report_scale.py                 # 1000 cells, 600 s, repeat 3
    .venv/bin/python benchmarks/report_scale.py --keep --out /tmp/scale
    git archive HEAD~3 src | tar -x -C /tmp/old       # a baseline to compare with
    .venv/bin/python benchmarks/report_scale.py --baseline /tmp/old/src --rounds 6
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dbrig.store.model import SavedRun, TrialResult

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_RUN = ROOT / "tests/fixtures/runs/small-20261121-235548"
WARMUP_S = 10
CORES = 4
VARIANTS = 4
THREADS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
STRESS_CPU = list(range(10))
POOLS = ["128M", "256M", "384M", "512M", "768M", "1G", "2G", "4G", "8G", "16G"]
FACTORS = {
    "workload.sysbench.threads": "threads",
    "interference.stress-ng.cpu": "cpu",
    "server.config.innodb_buffer_pool_size": "innodb_buffer_pool_size",
}


def generate(run: Path, cells: int, seconds: int, repeat: int, rng: np.random.Generator) -> None:
    template = json.loads((TEMPLATE_RUN / "run.json").read_text())
    combos = list(itertools.product(THREADS, STRESS_CPU, POOLS))[:cells]
    cell_ids = [f"c{i:03d}" if cells <= 1000 else f"c{i:04d}" for i in range(len(combos))]
    trials = [f"{c}-r{r}" for r in range(1, repeat + 1) for c in cell_ids]
    run.mkdir(parents=True)
    (run / "trials").mkdir()
    (run / ".dbrig-owned").write_text("run\n")
    scenario = dict(template["scenario"], name="scale", description="synthetic, for timing")
    scenario["workload"]["sysbench"]["time"] = seconds
    scenario.update(repeat=repeat, warmup=WARMUP_S)
    meta = dict(
        template,
        scenario=scenario,
        factors=list(FACTORS),
        factor_labels=FACTORS,
        cells=[
            {"cell": c, "server": "default", "factors": dict(zip(FACTORS, combo, strict=True))}
            for c, combo in zip(cell_ids, combos, strict=True)
        ],
        trials=trials,
        trials_saved=len(trials),
    )
    current = SavedRun.from_json(meta, "run.json").to_json()  # the template is format 1
    (run / "run.json").write_text(json.dumps(current, indent=2))
    (run / "scenario.yaml").write_text((TEMPLATE_RUN / "scenario.yaml").read_text())
    results = results_frame(cell_ids, combos, repeat, seconds, rng)
    results.to_csv(run / "results.csv", index=False)
    variants = [sample_files(run / f".variant{v}", seconds, rng) for v in range(VARIANTS)]
    template_trial = json.loads((TEMPLATE_RUN / "trials/c000-r1/trial.json").read_text())
    trial_json = TrialResult.from_json(template_trial).to_json()
    identity = results[["trial", "cell", "repetition", *FACTORS]].to_numpy().tolist()
    for number, (trial, cell, repetition, *values) in enumerate(identity):
        folder = run / "trials" / trial
        folder.mkdir()
        for source in variants[number % VARIANTS]:
            os.link(source, folder / source.name)
        record = dict(trial_json, trial=trial, cell=cell, repetition=repetition)
        record["factors"] = dict(zip(FACTORS, values, strict=True))
        record["effective_config"] = {"innodb_buffer_pool_size": values[2]}
        (folder / "trial.json").write_text(json.dumps(record))
    for v in range(VARIANTS):
        shutil.rmtree(run / f".variant{v}")


def results_frame(
    cell_ids: list[str], combos: list[tuple], repeat: int, seconds: int, rng: np.random.Generator
) -> pd.DataFrame:
    template = pd.read_csv(TEMPLATE_RUN / "results.csv")
    n = len(cell_ids) * repeat
    frame = pd.DataFrame(
        {
            column: template[column].mean() * rng.normal(1.0, 0.06, n)
            for column in template.columns
            if pd.api.types.is_numeric_dtype(template[column])
            and column not in ("repetition", "reason", *FACTORS)
        }
    )
    frame.insert(0, "trial", [f"{c}-r{r}" for r in range(1, repeat + 1) for c in cell_ids])
    frame.insert(1, "cell", cell_ids * repeat)
    frame.insert(2, "repetition", np.repeat(np.arange(1, repeat + 1), len(cell_ids)))
    frame.insert(3, "server", "default")
    frame.insert(4, "status", "ok")
    frame.insert(5, "reason", "")
    for i, (factor, values) in enumerate(zip(FACTORS, zip(*combos, strict=True), strict=True)):
        frame.insert(6 + i, factor, list(values) * repeat)
    frame["measured_time_s"] = float(seconds)
    frame["percentile"] = 95.0
    return frame


def sample_files(folder: Path, seconds: int, rng: np.random.Generator) -> list[Path]:
    folder.mkdir()
    t = np.arange(-WARMUP_S + 1, seconds + 1, dtype=float)
    phase = np.where(t <= 0, "warmup", "measure")
    k = t.size
    frames = {
        "intervals": pd.DataFrame(
            {
                "phase": phase,
                "t_s": t,
                "threads": 8,
                "tps": 1000 * rng.normal(1, 0.05, k),
                "qps": 20000 * rng.normal(1, 0.05, k),
                "latency_pct_ms": 5 * rng.normal(1, 0.1, k),
                "errors_per_s": 0.0,
                "reconnects_per_s": 0.0,
            }
        ),
        "cpu": pd.DataFrame(
            {
                "t_s": np.repeat(t, CORES),
                "phase": np.repeat(phase, CORES),
                "interval_s": 1.0,
                "core": np.tile(np.arange(CORES), k),
                "user_pct": rng.uniform(40, 70, k * CORES),
                "system_pct": rng.uniform(5, 15, k * CORES),
                "iowait_pct": rng.uniform(0, 5, k * CORES),
                "steal_pct": 0.0,
                "busy_pct": rng.uniform(50, 95, k * CORES),
            }
        ),
        "disk": pd.DataFrame(
            {
                "t_s": t,
                "phase": phase,
                "interval_s": 1.0,
                "device": "vda",
                "reads_per_s": rng.uniform(0, 50, k),
                "writes_per_s": rng.uniform(1000, 3000, k),
                "await_ms": rng.uniform(0.05, 0.2, k),
                "util_pct": rng.uniform(10, 30, k),
            }
        ),
        "memory": pd.DataFrame(
            {"t_s": t, "phase": phase, "interval_s": 1.0, "used_mb": 700.0, "swap_in_mb_per_s": 0.0}
        ),
        "status": status_frame(t, phase, rng),
        "procs": pd.DataFrame(
            {
                "t_s": np.repeat(t, 3),
                "phase": np.repeat(phase, 3),
                "interval_s": 1.0,
                "role": np.tile(["server", "workload", "stress-ng"], k),
                "pids": np.tile([1, 1, 2], k),
                "cpu_pct": rng.uniform(10, 150, k * 3),
                "rss_mb": 100.0,
                "ctx_switches_per_s": rng.uniform(0, 500, k * 3),
                "read_mb_per_s": 0.0,
                "write_mb_per_s": rng.uniform(0, 10, k * 3),
            }
        ),
        "sampler": pd.DataFrame(
            {"t_s": t, "phase": phase, "interval_s": 1.0, "sampler": "host", "cpu_pct": 0.4}
        ),
    }
    paths = []
    for name, frame in frames.items():
        path = folder / f"{name}.csv"
        frame.to_csv(path, index=False, float_format="%.6g")
        paths.append(path)
    return paths


def status_frame(t: np.ndarray, phase: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    header = pd.read_csv(TEMPLATE_RUN / "trials/c000-r1/status.csv", nrows=1)
    columns = [c for c in header.columns if c not in ("t_s", "phase", "interval_s")]
    values = rng.uniform(0, 20000, (t.size, len(columns)))
    frame = pd.DataFrame(values, columns=columns)
    frame.insert(0, "t_s", t)
    frame.insert(1, "phase", phase)
    frame.insert(2, "interval_s", 1.0)
    return frame


RENDER = """\
import json, resource, sys, time
from pathlib import Path
from dbrig.report import write_report
start, cpu = time.perf_counter(), time.process_time()
write_report(Path(sys.argv[1]))
wall = time.perf_counter() - start
mine, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({
    "wall_s": wall,
    "cpu_s": time.process_time() - cpu + kids.ru_utime + kids.ru_stime,
    "peak_mib": max(mine.ru_maxrss, kids.ru_maxrss) / 1024,
}))
"""


@dataclass(frozen=True)
class Render:
    wall_s: float  # in write_report
    cpu_s: float  # user + system of write_report and the workers it forked
    peak_mib: float  # the largest resident set of the render process or a worker
    total_s: float  # the child's whole life, interpreter start included


def render_in_child(run: Path, src: Path | None = None) -> Render:
    """Render ``run`` in a fresh interpreter, with ``src`` (a tree's src/) first on the path."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RENDER, str(run)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    total = time.perf_counter() - start
    return Render(**json.loads(done.stdout.strip().splitlines()[-1]), total_s=total)


def compare(run: Path, baseline: Path, rounds: int) -> None:
    """Alternate this tree (B) and ``baseline`` (A), which goes first swapping per round."""
    here = ROOT / "src"
    ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
    for number in range(1, rounds + 1):
        order = [("A", baseline), ("B", here)]
        if number % 2 == 0:
            order.reverse()
        got = {name: render_in_child(run, src) for name, src in order}
        a, b = got["A"], got["B"]
        ratios["wall"].append(b.wall_s / a.wall_s)
        ratios["cpu"].append(b.cpu_s / a.cpu_s)
        load = os.getloadavg()[0]
        print(
            f"round {number}: A {a.wall_s:.2f} s wall {a.cpu_s:.2f} s CPU {a.peak_mib:.0f} MiB | "
            f"B {b.wall_s:.2f} s wall {b.cpu_s:.2f} s CPU {b.peak_mib:.0f} MiB | "
            f"B/A wall {ratios['wall'][-1]:.3f} CPU {ratios['cpu'][-1]:.3f} | load {load:.1f}"
        )
    for what, values in ratios.items():
        print(
            f"B/A {what}: median {statistics.median(values):.3f} "
            f"(range {min(values):.3f}-{max(values):.3f}, {len(values)} rounds)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, help="parent folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic run")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src/ folder of another checkout: render with it (A) and with this tree (B), "
        "alternating, and print the ratios B/A",
    )
    parser.add_argument("--rounds", type=int, default=5, help="with --baseline (default 5)")
    args = parser.parse_args()
    parent = args.out or Path(tempfile.mkdtemp(prefix="report-scale-"))
    run = parent / f"scale-{args.cells}x{args.seconds}s"
    if run.exists():
        shutil.rmtree(run)
    start = time.perf_counter()
    generate(run, args.cells, args.seconds, args.repeat, np.random.default_rng(5))
    generated = time.perf_counter() - start
    print(f"run:        {run}")
    print(
        f"generated:  {args.cells} cells x {args.repeat} repetitions x {args.seconds} s "
        f"in {generated:.1f} s"
    )
    if args.baseline:
        compare(run, args.baseline.resolve(), args.rounds)
    else:
        report(run)
    if not args.keep and args.out is None:
        shutil.rmtree(parent)


def report(run: Path) -> None:
    done = render_in_child(run)
    page = run / "report.html"
    plots = sorted((run / "plots").glob("*.png"))
    print(
        f"report:     {done.wall_s:.2f} s in write_report ({done.cpu_s:.2f} s CPU, workers "
        f"included), {done.total_s:.2f} s with interpreter start (target <= 6 s)"
    )
    print(f"peak RSS:   {done.peak_mib:.0f} MiB (target <= 1024 MiB)")
    print(
        f"outputs:    report.html {page.stat().st_size / 2**20:.1f} MiB, {len(plots)} PNGs "
        f"{sum(p.stat().st_size for p in plots) / 2**20:.1f} MiB, results_by_cell.csv "
        f"{(run / 'results_by_cell.csv').stat().st_size / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
