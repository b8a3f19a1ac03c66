"""The Charts section: each factor a block of the matrix varies, against the headline metrics."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dbrig.metrics import Metric
from dbrig.report import charts
from dbrig.report.data import RunData
from dbrig.report.experiments import EffectJudge, Experiment, FactorGroup, group_rows
from dbrig.report.sections import LoadedRun, Part, Plot, png, render
from dbrig.report.tables import CellStats, is_numeric

MAX_FACTOR_CHARTS = 6
MAX_SERIES = 8
MAX_PANELS = 4  # small multiples: panels across
MAX_FACET_SERIES = 4  # small multiples: colours per panel
MAX_FACET_METRICS = 3  # small multiples: rows


def section(run: LoadedRun) -> Part:
    """Per block of the matrix, one chart per factor that varies in it."""
    plots = _factor_plots(run.data, run.overview, run.stats, run.headline)
    page = render("factors.html.j2", factor_plots=plots)
    return Part("charts", page, links=(("charts", "Charts"),), plots=tuple(plots))


def _factor_plots(
    data: RunData, overview: pd.DataFrame, stats: CellStats, headline: list[Metric]
) -> list[Plot]:
    """Per block of the matrix, one chart per factor that varies in it."""
    drawable = overview[overview["ok"] > 0]
    if drawable.empty or not headline:
        return []
    factors = _cell_factors(data, drawable)
    judge = EffectJudge(data.scenario)
    several = len([e for e in data.experiments if any(c in factors for c in e.cells)]) > 1
    plots: list[Plot] = []
    for experiment in data.experiments:
        cells = [c for c in experiment.cells if c in factors]
        varying = [g for g in experiment.groups if len({g.value(factors[c]) for c in cells}) > 1]
        for group in varying:
            if len(plots) == MAX_FACTOR_CHARTS:
                return plots
            chart = _FactorChart(data, experiment, group, varying, cells, factors, several)
            plot = chart.plot(judge, overview, stats, headline, len(plots) + 1)
            if plot is not None:
                plots.append(plot)
    return plots


def _cell_factors(data: RunData, cells: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each drawable cell's factor values, as planned (absent when its block does not set it)."""
    planned = {c.cell: dict(c.factors) for c in data.saved.cells}
    out = {}
    for row in cells.to_dict("records"):
        cell = str(row["cell"])
        out[cell] = planned.get(cell) or {f: row[f] for f in data.factors if _present(row[f])}
    return out


def _present(value: Any) -> bool:
    return isinstance(value, list | dict) or not pd.isna(value)


@dataclass(frozen=True)
class _FactorChart:
    """One factor of one block: which cells, which panels and colours, and the caption."""

    data: RunData
    experiment: Experiment
    group: FactorGroup
    varying: list[FactorGroup]
    cells: list[str]
    factors: dict[str, dict[str, Any]]
    several_blocks: bool

    def plot(
        self,
        judge: EffectJudge,
        overview: pd.DataFrame,
        stats: CellStats,
        headline: list[Metric],
        number: int,
    ) -> Plot | None:
        values = group_rows(self.group, [self.factors[c] for c in self.cells])
        kept = [c for c in self.cells if judge.has_effect(self.group, self.factors[c], values)]
        if len({self.group.value(self.factors[c]) for c in kept}) < 2:
            return None
        numeric = not self.group.joint and is_numeric(
            pd.Series([self.factors[c].get(self.group.paths[0]) for c in kept], dtype=object)
        )
        ok = overview.set_index("cell")["ok"]
        means = self._frame(kept, numeric)
        means["n"] = [int(ok.get(c, 0)) for c in kept]
        for metric in headline:
            means[metric.column] = _stat(stats.mean, metric.column, kept)
            means[f"{metric.column}_half"] = _stat(stats.half, metric.column, kept)
        means = self._capped(means)
        metrics = _drawn_metrics(means, headline)
        if not metrics:
            return None
        facets = means["panel"].nunique() > 1
        if facets:
            metrics = _facet_metrics(metrics)
        reps = self._reps(means, metrics, numeric)
        categories = list(dict.fromkeys(means["x"].astype(str)))
        fig = charts.factor_chart(
            charts.FactorPoints(means, reps, categories),
            x_label=self.group.label,
            series_label=self._series_group.label if self._series_group else "",
            metrics=metrics,
            numeric=numeric,
        )
        spread = charts.spread_kind(means["n"])
        caption = self._caption(numeric, spread, facets, len(metrics) < len(headline), kept)
        return Plot(f"factor_{number}.png", self._title(numeric), caption, png(fig), spread=spread)

    @property
    def _others(self) -> list[FactorGroup]:
        return [g for g in self.varying if g is not self.group]

    @property
    def _panel_groups(self) -> list[FactorGroup]:
        """The other factors that get a panel each: all of them, or all but the colour one."""
        others = self._others
        return others if len(others) < 2 else others[:-1]

    @property
    def _series_group(self) -> FactorGroup | None:
        others = self._others
        return others[-1] if len(others) >= 2 else None

    def _frame(self, cells: list[str], numeric: bool) -> pd.DataFrame:
        rows = [self.factors[c] for c in cells]
        x: list[Any] = [
            float(r[self.group.paths[0]]) if numeric else self.group.value(r) for r in rows
        ]
        panel = [_labelled(self._panel_groups, r) for r in rows]
        series_group = self._series_group
        series = [series_group.value(r) if series_group else "all" for r in rows]
        return pd.DataFrame({"cell": cells, "x": x, "panel": panel, "series": series})

    def _capped(self, means: pd.DataFrame) -> pd.DataFrame:
        panels = list(dict.fromkeys(means["panel"]))[:MAX_PANELS]
        limit = MAX_FACET_SERIES if len(panels) > 1 else MAX_SERIES
        series = list(dict.fromkeys(means["series"]))[:limit]
        keep = means["panel"].isin(panels) & means["series"].isin(series)
        return means[keep].reset_index(drop=True)

    def _reps(self, means: pd.DataFrame, metrics: list[Metric], numeric: bool) -> pd.DataFrame:
        """Every successful repetition of the cells drawn as points (too few for an interval)."""
        few = means[means["n"] < charts.MIN_INTERVAL_N].set_index("cell")
        results = self.data.results
        ok = results[(results["status"] == "ok") & results["cell"].isin(few.index)]
        columns = [m.column for m in metrics if m.column in ok]
        reps = ok[["cell", *columns]].reset_index(drop=True)
        for column in ("x", "panel", "series"):
            reps[column] = reps["cell"].map(few[column])
        for metric in metrics:
            if metric.column not in reps:
                reps[metric.column] = float("nan")
        return reps

    def _title(self, numeric: bool) -> str:
        kind = "line" if numeric else "bar"
        title = f"Headline metrics by {self.group.label} ({kind})"
        if self.several_blocks:
            fixed = self._fixed()
            where = f" ({fixed})" if fixed else ""
            block = f"Block {self.experiment.number} of the matrix{where}"
            title = f"{block}: {title[0].lower()}{title[1:]}"
        return title

    def _fixed(self) -> str:
        """What one block holds constant, ``cpu_load=90``."""
        constant = [g for g in self.experiment.groups if g not in self.varying]
        first = self.factors[self.cells[0]]
        return " ".join(f"{g.label}={g.value(first)}" for g in constant)

    def _caption(
        self, numeric: bool, spread: str, facets: bool, fewer_metrics: bool, kept: list[str]
    ) -> str:
        paths = ", ".join(self.group.paths)
        parts = [
            f"Mean of the successful repetitions of each cell against {self.group.label} ({paths})."
        ]
        if self.group.joint:
            parts.append("These keys vary together in the matrix, so they are one factor.")
        if self.several_blocks:
            parts.append(
                f"Only the cells of block {self.experiment.number} of the matrix"
                + (f", where {self._fixed()}" if self._fixed() else "")
                + "; each block is its own experiment."
            )
        parts.append(_spread_sentence(spread, numeric))
        panel_groups = self._panel_groups
        if facets:
            names = ", ".join(g.label for g in panel_groups)
            parts.append(
                f"One panel per value of {names}, a row per metric, same y axis along a row."
            )
            if fewer_metrics:
                parts.append("The other headline metrics are in the result table.")
        elif panel_groups:
            parts.append(f"{', '.join(g.label for g in panel_groups)} has one value here.")
        if self._series_group:
            parts.append(
                f"One {'line' if numeric else 'colour'} per value of {self._series_group.label}."
            )
        dropped = [c for c in self.cells if c not in kept]
        if dropped:
            parts.append(
                f"Left out: {len(dropped)} cell{'s' if len(dropped) > 1 else ''} where "
                f"{self.group.label} has no effect (the interference it sets does not run): "
                + ", ".join(dropped[:8])
                + (" …" if len(dropped) > 8 else "")
                + "."
            )
        panels = {_labelled(panel_groups, self.factors[c]) for c in kept}
        series = (
            {self._series_group.value(self.factors[c]) for c in kept}
            if self._series_group
            else set()
        )
        if len(panels) > MAX_PANELS:
            parts.append(f"The first {MAX_PANELS} of {len(panels)} panels are drawn.")
        limit = MAX_FACET_SERIES if facets else MAX_SERIES
        if len(series) > limit:
            parts.append(f"The first {limit} of {len(series)} colours are drawn.")
        return " ".join(parts)


def _stat(frame: pd.DataFrame, column: str, cells: list[str]) -> list[float]:
    if column not in frame.columns:
        return [math.nan] * len(cells)
    return frame[column].reindex(cells).astype(float).tolist()


def _labelled(groups: list[FactorGroup], factors: dict[str, Any]) -> str:
    return " ".join(f"{g.label}={g.value(factors)}" for g in groups)


def _spread_sentence(spread: str, numeric: bool) -> str:
    points = (
        f"Cells with fewer than {charts.MIN_INTERVAL_N} successful repetitions show every "
        "repetition as a hollow dot beside the mean and no interval (with 2 repetitions a "
        "95 % t-interval is ±12.7 standard errors wide and says nothing)."
    )
    interval = (
        f"{'Error bars' if numeric else 'Whiskers'} are the 95 % confidence interval of the "
        f"mean (Student's t) of cells with {charts.MIN_INTERVAL_N} or more repetitions."
    )
    return {"points": points, "interval": interval}.get(spread, f"{interval} {points}")


def _drawn_metrics(means: pd.DataFrame, headline: list[Metric]) -> list[Metric]:
    """The headline metrics with a non-zero mean somewhere (an all-zero error rate says
    nothing a chart needs to show)."""
    out = []
    for metric in headline:
        values = pd.to_numeric(means[metric.column], errors="coerce")
        if values.fillna(0).ne(0).any():
            out.append(metric)
    return out


def _facet_metrics(metrics: list[Metric]) -> list[Metric]:
    """Small multiples draw a row per metric: the first (the throughput), the latencies,
    then the rest, at most :data:`MAX_FACET_METRICS`."""
    latency = [m for m in metrics[1:] if "latency" in m.column]
    rest = [m for m in metrics[1:] if m not in latency]
    return [*metrics[:1], *latency, *rest][:MAX_FACET_METRICS]
