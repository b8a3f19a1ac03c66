#!/usr/bin/env python3
"""What a CPU profile and performance_schema cost: TPS with each against everything off.

dbrig measures itself: one scenario with five cells, repeated in rounds that each run
every cell once in a shuffled order (the run's ``order: shuffled``), so the shared
host's drift lands on every cell alike:

- ``off``: no profile, performance_schema OFF (MariaDB's default), no internals;
- ``perf 49 Hz`` and ``perf 99 Hz``: ``sampling.profile.cpu.frequency`` 49 and 99;
- ``pfs``: ``server.config.performance_schema: ON``, nothing read from it;
- ``pfs + internals``: performance_schema ON and ``sampling.internals.enabled``
  (every ``wait/%`` instrument timed, all INNODB_METRICS counters on, read at both
  ends of the window).

Then it prints, for each against ``off``:

- the TPS ratio with its 95 % interval (Fieller's, as ``dbrig compare`` gives it) and
  p-value, treating the two sides as independent samples, and the same for the
  server's CPU per transaction (perf's own CPU is not in it, performance_schema's is);
- the same ratio paired by round (the geometric mean of each round's ratio, with a t
  interval on their logarithms): a round's trials run minutes apart, so the host's slow
  drift cancels within a pair and the interval is usually narrower;
- for the profiles, the samples a trial got against what the server's CPU time allows
  (frequency x server CPU seconds): how much of its CPU the profile saw.

    .venv/bin/python benchmarks/profile_cost.py --repeat 12 --time 15
"""

from __future__ import annotations

import argparse
import math
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats as scipy_stats

from dbrig.analysis import stats

ROOT = Path(__file__).resolve().parent.parent
FREQUENCY = "sampling.profile.cpu.frequency"
PFS = "server.config.performance_schema"
INTERNALS = "sampling.internals.enabled"
OFF = "off"
# Each cell's settings on top of the scenario's (everything off).
CELLS: dict[str, dict[str, object]] = {
    OFF: {},
    "perf 49 Hz": {FREQUENCY: 49},
    "perf 99 Hz": {FREQUENCY: 99},
    "pfs": {PFS: "ON"},
    "pfs + internals": {PFS: "ON", INTERNALS: True},
}
# TPS, and the server's CPU per transaction: other jobs on a shared host move the
# second far less, so it resolves a cost the first cannot (perf's own CPU is not in it).
METRICS = {
    "tps": stats.Direction.HIGHER_IS_BETTER,
    "server_cpu_us_per_txn": stats.Direction.LOWER_IS_BETTER,
}


def scenario(repeat: int, seconds: int) -> dict:
    return {
        "name": "profile-cost",
        "description": "TPS with perf at 49/99 Hz and with performance_schema against all off",
        "server": {
            "config": {
                "innodb_buffer_pool_size": "128M",
                "innodb_log_file_size": "32M",
                "performance_schema": "OFF",
            }
        },
        "workload": {
            "sysbench": {
                "test": "oltp_read_write",
                "tables": 2,
                "table_size": 10000,
                "threads": 2,
                "time": seconds,
            }
        },
        "sampling": {"internals": {"enabled": False, "digests": 20}},
        # One sub-matrix per cell: each sets its own keys, everything else stays off.
        "matrix": [{key: [value] for key, value in sets.items()} for sets in CELLS.values()],
        "repeat": repeat,
        "warmup": 2,
    }


def run(repeat: int, seconds: int, out: Path) -> Path:
    path = out / "profile-cost.yaml"
    path.write_text(yaml.safe_dump(scenario(repeat, seconds), sort_keys=False))
    dbrig = str(ROOT / ".venv/bin/dbrig")
    subprocess.run([dbrig, "run", str(path), "--out", str(out), "--no-report"], check=True)
    return next(p for p in out.iterdir() if p.is_dir())


def cell_names(frame: pd.DataFrame) -> pd.Series:
    """Each row's cell name (CELLS), read from the matrix columns it ran with."""

    def name(row: pd.Series) -> str:
        for label, sets in CELLS.items():
            if all(_same(row.get(key), sets.get(key)) for key in (FREQUENCY, PFS, INTERNALS)):
                return label
        raise ValueError(f"trial {row['trial']}: no cell of CELLS ran with these settings")

    return frame.apply(name, axis=1)


def _same(saved: object, wanted: object) -> bool:
    """A matrix column's value against a cell's setting; absent or empty means off."""
    if saved is None or (isinstance(saved, float) and math.isnan(saved)):
        return wanted is None
    if wanted is None:
        return str(saved).lower() in {"0", "0.0", "off", "false"}
    return str(saved).lower() == str(wanted).lower() or saved == wanted


def paired_ratio(
    frame: pd.DataFrame, label: str, metric: str
) -> tuple[float, float, float, int] | None:
    """Geometric mean of the per-round ratio ``label`` / off of ``metric``, its 95 % t
    interval, and the rounds it comes from."""
    by_round = frame.pivot_table(index=["run", "repetition"], columns="cell_name", values=metric)
    if label not in by_round or OFF not in by_round:
        return None
    logs = np.log(by_round[label] / by_round[OFF]).dropna().to_numpy()
    if len(logs) < 2:
        return None
    mean = logs.mean()
    half = scipy_stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs)


def report(run_dirs: list[Path]) -> None:
    """The ratios of every run's trials pooled (a round is one run's repetition)."""
    frame = pd.concat(
        [pd.read_csv(d / "results.csv").assign(run=d.name) for d in run_dirs], ignore_index=True
    )
    frame = frame[frame["status"] == "ok"].copy()
    frame["cell_name"] = cell_names(frame)
    off = frame[frame["cell_name"] == OFF]
    print(f"off: mean TPS {off['tps'].mean():.1f}, CV {off['tps'].std() / off['tps'].mean():.1%}")
    for label in list(CELLS)[1:]:
        on = frame[frame["cell_name"] == label]
        print(f"{label}:")
        for metric, direction in METRICS.items():
            if metric not in frame:
                continue
            print(f"  {metric}: {_independent(off[metric], on[metric], direction)}")
            paired = paired_ratio(frame, label, metric)
            if paired is not None:
                ratio, low, high, n = paired
                print(f"    paired by round: {ratio:.3f} (95 % CI {low:.3f}-{high:.3f}, n={n})")
        hz = CELLS[label].get(FREQUENCY)
        if hz and "profile_samples" in on and "server_cpu_s" in on:
            seen = on["profile_samples"] / (float(hz) * on["server_cpu_s"])  # type: ignore[arg-type]
            print(f"  samples / ({hz} Hz x server CPU s): median {seen.median():.2f}")


def _independent(off: pd.Series, on: pd.Series, direction: stats.Direction) -> str:
    cmp = stats.compare_samples(
        off.dropna().tolist(), on.dropna().tolist(), direction=direction, threshold=0.01
    )
    if cmp.mean_base is None or cmp.mean_cand is None:
        return f"{cmp.verdict} ({cmp.reason})"
    ratio = cmp.mean_cand / cmp.mean_base
    ci = (
        f"{1 + cmp.ci_low_pct / 100:.3f}-{1 + cmp.ci_high_pct / 100:.3f}"
        if cmp.ci_low_pct is not None and cmp.ci_high_pct is not None
        else "unbounded"
    )
    p = f"{cmp.p_value:.2f}" if cmp.p_value is not None else "n/a"
    return (
        f"ratio against off {ratio:.3f} (95 % CI {ci}, p={p}, "
        f"n={cmp.n_base}/{cmp.n_cand}): {cmp.verdict}; {stats.explain(cmp, 0.01)}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=12, help="rounds (each runs every cell once)")
    ap.add_argument("--time", type=int, default=15, help="measured seconds per trial")
    ap.add_argument(
        "--run-dir",
        type=Path,
        nargs="+",
        help="report on existing runs instead of running (several: their trials pooled)",
    )
    ap.add_argument("--keep", type=Path, help="run into this folder and keep it (default: a temp)")
    args = ap.parse_args()
    if args.run_dir:
        report(args.run_dir)
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        report([run(args.repeat, args.time, args.keep)])
        return
    with tempfile.TemporaryDirectory(prefix="dbrig-profile-cost-") as tmp:
        report([run(args.repeat, args.time, Path(tmp))])


if __name__ == "__main__":
    main()
