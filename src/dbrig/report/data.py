"""A saved run as the report sees it: run.json, the results table and the trial folders.

Only the run directory is read. Nothing here starts a process, opens a
connection or looks at the clock, so a run can be reported years later on
another machine.

``RunData.cells`` has one row per planned cell (from run.json ``cells``, plus
any cell found only in the results), with columns ``cell``, ``server``,
``label`` (``threads=2 cpu=1``), ``planned`` (repetitions planned for it) and
one column per factor, named by its full dotted path. ``RunData.results`` is
results.csv: one row per saved trial (see :mod:`dbrig.store`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from dbrig import store
from dbrig.errors import DbrigError
from dbrig.report.experiments import Experiment, experiments, plain_value

SAMPLE_FILES = ("intervals", "cpu", "disk", "memory", "procs", "status", "sampler")


@dataclass(frozen=True)
class RunData:
    path: Path
    saved: store.SavedRun
    results: pd.DataFrame
    cells: pd.DataFrame
    factors: tuple[str, ...]
    labels: dict[str, str]

    @property
    def name(self) -> str:
        return str(self.scenario.get("name") or self.path.name)

    @property
    def status(self) -> str:
        return self.saved.status or "unknown"

    @property
    def scenario(self) -> dict[str, Any]:
        return dict(self.saved.scenario)

    @property
    def planned_trials(self) -> int:
        return len(self.saved.trials) or len(self.results)

    @property
    def workload_tool(self) -> str | None:
        workload = self.scenario.get("workload") or {}
        return next((tool for tool, block in workload.items() if block), None)

    @property
    def workload_params(self) -> dict[str, Any]:
        tool = self.workload_tool
        if tool is None:
            return {}
        return (self.scenario.get("workload") or {}).get(tool) or {}

    def setting(self, cell: dict[str, Any], path: str) -> Any:
        """A scenario value for a cell: its factor if the matrix varies it, else the scenario's."""
        if path in cell:
            return cell[path]
        node: Any = self.scenario
        for key in path.split("."):
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    def trial_dir(self, trial_id: str) -> Path:
        return self.path / "trials" / trial_id

    @cached_property
    def experiments(self) -> list[Experiment]:
        """The matrix's blocks, each with its factors (joint keys as one) and cells."""
        return experiments(self.saved, self.labels)

    @cached_property
    def trials_by_cell(self) -> dict[str, list[str]]:
        """Saved trial ids per cell, by repetition."""
        if self.results.empty:
            return {}
        ordered = self.results.sort_values(["cell", "repetition"], kind="stable")
        return {str(c): list(g["trial"]) for c, g in ordered.groupby("cell", sort=True)}


def load_run(run_dir: Path) -> RunData:
    """Read a run directory (complete, interrupted or still running)."""
    run = store.RunDir.open(Path(run_dir))
    saved = run.saved()
    results = _normalise_results(run.results())
    factors = saved.factors
    labels = {f: saved.factor_labels.get(f, f) for f in factors}
    cells = _cells_frame(saved, results, factors, labels)
    return RunData(run.path, saved, results, cells, factors, labels)


def _normalise_results(results: pd.DataFrame) -> pd.DataFrame:
    if results.empty:
        columns = ["trial", "cell", "repetition", "server", "status", "reason"]
        return pd.DataFrame(columns=columns)
    results = results.copy()
    results["cell"] = results["cell"].astype(str)
    results["trial"] = results["trial"].astype(str)
    results["reason"] = results["reason"].astype(object).where(results["reason"].notna(), None)
    return results


def _cells_frame(
    saved: store.SavedRun,
    results: pd.DataFrame,
    factors: tuple[str, ...],
    labels: dict[str, str],
) -> pd.DataFrame:
    rows = [{"cell": c.cell, "server": c.server, **c.factors} for c in saved.cells]
    known = {row["cell"] for row in rows}
    if not results.empty:
        extra = results[~results["cell"].isin(known)].drop_duplicates("cell")
        for _, rec in extra.iterrows():
            rows.append(
                {"cell": rec["cell"], "server": rec.get("server", "")}
                | {f: rec.get(f) for f in factors}
            )
    # The matrix key "server" is a factor and the "server" column at once.
    cells = pd.DataFrame(rows, columns=list(dict.fromkeys(["cell", "server", *factors])))
    # From the rows, not the frame: a matrix of blocks leaves a cell without the factors of
    # the other blocks, and its label should not say "cpu_max_prime=nan".
    cells["label"] = [
        " ".join(f"{labels[f]}={plain_value(row[f])}" for f in factors if f in row)
        or "(single cell)"
        for row in rows
    ]
    cells["planned"] = cells["cell"].map(_planned_per_cell(saved)).fillna(0).astype(int)
    # matrix order: c999 before c1000
    ids = [str(c) for c in cells["cell"]]
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), ids[i]))
    return cells.iloc[order].reset_index(drop=True)


def _planned_per_cell(saved: store.SavedRun) -> dict[str, int]:
    planned: dict[str, int] = {}
    for trial_id in saved.trials:
        cell = trial_id.rsplit("-r", 1)[0]
        planned[cell] = planned.get(cell, 0) + 1
    return planned


def read_samples(trial_dir: Path, name: str) -> pd.DataFrame | None:
    """One of a trial's CSV files (``intervals``, ``cpu``, ...), or None when absent or empty."""
    path = trial_dir / f"{name}.csv"
    try:
        frame = pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return None
    return None if frame.empty or "t_s" not in frame else frame


def read_trial(trial_dir: Path) -> store.TrialResult | None:
    """A trial's trial.json, or None when absent or unreadable (the report shows the rest)."""
    try:
        return store.read_trial(trial_dir)
    except DbrigError:
        return None
