"""The report's Scalability section: where throughput stops scaling in a concurrency sweep.

A run sweeps concurrency when its matrix varies one of :data:`CONCURRENCY_FACTORS`
(each workload tool's ``concurrency_key``: sysbench and tpcc ``threads``, mysqlslap
``concurrency``). :func:`find_sweeps` fits the
Universal Scalability Law (:mod:`dbrig.analysis.scaling`) to the successful
repetitions' throughput, one fit per combination of the other varied factors,
and finds the latency knee:

- throughput: the run's headline throughput (:func:`dbrig.metrics.throughput_metrics`:
  TPS for sysbench, queries/s for mysqlslap);
- latency: the percentile latency (``latency_pct_ms``, p95 by default); without
  one, the swept tool's ``mean_latency`` (sysbench's mean when the percentile was
  turned off; mysqlslap, which reports no percentile, the mean time a client
  spends per query, ``avg_s / queries_per_client``), and the section says so.

:func:`scaling_chart` draws one sweep: every repetition and the mean per N, the
fitted curve, linear scaling from N = 1 (λN), N* and the latency knee; beside it
the latency per N with the straight line the knee is measured against. A refused
fit draws the points only, and the section shows the reason instead of a curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from dbrig.analysis.scaling import (
    KNEE_TOLERANCE,
    MIN_LEVELS,
    LatencyKnee,
    UslFit,
    fit_usl,
    latency_knee,
)
from dbrig.metrics import Metric, throughput_metrics
from dbrig.report import charts
from dbrig.report.data import RunData, plain_value
from dbrig.tools.base import MeanLatency, WorkloadTool
from dbrig.tools.registry import WORKLOAD_TOOLS

# Each tool's concurrency factor, and the tool whose sweep it makes.
_SWEPT: dict[str, type[WorkloadTool]] = {
    f"workload.{key}.{tool.concurrency_key}": tool
    for key, tool in WORKLOAD_TOOLS.items()
    if tool.concurrency_key
}
CONCURRENCY_FACTORS = tuple(_SWEPT)
MAX_SWEEP_CHARTS = 6
_COLORS = {
    "points": "#9cb9d9",
    "mean": charts.PALETTE[0],
    "fit": charts.PALETTE[1],
    "linear": "#7f7f7f",
    "peak": charts.PALETTE[2],
    "knee": charts.PALETTE[3],
}


@dataclass(frozen=True)
class Latency:
    """The latency a sweep's knee is found on: a column per repetition and its heading."""

    values: pd.Series
    heading: str  # "p95 latency (ms)"
    note: str = ""  # why it is not the percentile, when it is not


@dataclass(frozen=True)
class Sweep:
    """One concurrency sweep: its points, the USL fit and the latency knee."""

    factor: str  # the dotted path
    label: str  # its short name: threads
    group: str  # the other varied factors' values ("cpu=1"), "" when none vary
    throughput: Metric
    latency_heading: str
    latency_note: str
    points: pd.DataFrame  # one row per successful repetition: n, throughput, latency
    fit: UslFit
    knee: LatencyKnee

    @property
    def title(self) -> str:
        return f"{self.label} sweep" + (f", {self.group}" if self.group else "")


def concurrency_factor(data: RunData) -> str | None:
    """The concurrency factor the matrix varies, if any."""
    return next((f for f in CONCURRENCY_FACTORS if f in data.factors), None)


_last: tuple[RunData, list[Sweep]] | None = None  # the report and its warnings share one fit


def find_sweeps(data: RunData) -> list[Sweep]:
    """One sweep per combination of the other varied factors, when concurrency varies.

    The fits of the last run asked for are kept: a report fits once for its section and
    its warnings (200 fits of a 1000-cell sweep took 1.9 s each time).
    """
    global _last
    if _last is not None and _last[0] is data:
        return _last[1]
    sweeps = _find_sweeps(data)
    _last = (data, sweeps)
    return sweeps


def _find_sweeps(data: RunData) -> list[Sweep]:
    factor = concurrency_factor(data)
    ok = data.results[data.results["status"] == "ok"] if not data.results.empty else None
    if factor is None or ok is None or factor not in ok:
        return []
    throughput = _throughput_metric(ok)
    if throughput is None:
        return []
    n = pd.to_numeric(ok[factor], errors="coerce")
    if n.dropna().nunique() < 2:
        return []
    latency = _latency(ok, _SWEPT[factor].mean_latency)
    others = [
        f for f in data.factors if f != factor and f in ok and ok[f].astype(str).nunique() > 1
    ]
    frame = pd.DataFrame(
        {
            "n": n,
            "throughput": pd.to_numeric(ok[throughput.name], errors="coerce"),
            "latency": latency.values,
            "group": _group_labels(data, ok, others),
        }
    )
    return [
        _sweep(data, factor, group, rows, throughput, latency)
        for group, rows in frame.groupby("group", sort=False)
    ]


def _sweep(
    data: RunData,
    factor: str,
    group: str,
    rows: pd.DataFrame,
    throughput: Metric,
    latency: Latency,
) -> Sweep:
    points = rows[["n", "throughput", "latency"]].sort_values("n", kind="stable")
    points = points.reset_index(drop=True)
    return Sweep(
        factor=factor,
        label=data.labels.get(factor, factor),
        group=str(group),
        throughput=throughput,
        latency_heading=latency.heading,
        latency_note=latency.note,
        points=points,
        fit=fit_usl(points["n"], points["throughput"]),
        knee=latency_knee(points["n"], points["latency"]),
    )


def _throughput_metric(ok: pd.DataFrame) -> Metric | None:
    for metric in throughput_metrics():
        if metric.name in ok and pd.to_numeric(ok[metric.name], errors="coerce").notna().any():
            return metric
    return None


def _latency(ok: pd.DataFrame, mean: MeanLatency | None) -> Latency:
    """The percentile latency; else the tool's mean latency, saying so (``mean``)."""

    def column(name: str) -> pd.Series:
        if name not in ok:
            return pd.Series(np.nan, index=ok.index)
        return pd.to_numeric(ok[name], errors="coerce")

    percentile = column("percentile")
    if column("latency_pct_ms").notna().any() and (percentile.fillna(1) > 0).all():
        pct = percentile.dropna()
        name = f"p{plain_value(float(pct.iloc[0]))}" if not pct.empty else "percentile"
        return Latency(column("latency_pct_ms"), f"{name} latency (ms)")
    if mean is not None and column(mean.column).notna().any():
        values = mean.scale * column(mean.column)
        if mean.per is not None:
            values = values / column(mean.per)
        return Latency(values, mean.heading, mean.note)
    return Latency(column("latency_pct_ms"), "latency (ms)")


def _group_labels(data: RunData, ok: pd.DataFrame, others: list[str]) -> pd.Series:
    if not others:
        return pd.Series("", index=ok.index)
    parts = [ok[o].map(lambda v, o=o: f"{data.labels.get(o, o)}={plain_value(v)}") for o in others]
    return pd.concat(parts, axis=1).agg(" ".join, axis=1)


# --------------------------------------------------------------------------- the section


def section_rows(sweeps: list[Sweep]) -> list[dict[str, Any]]:
    """The parameters table: one row per sweep, every value as text."""
    return [_row(sweep) for sweep in sweeps]


def _row(sweep: Sweep) -> dict[str, Any]:
    fit, metric = sweep.fit, sweep.throughput
    levels = ", ".join(f"{v:g}" for v in fit.levels)
    row: dict[str, Any] = {
        "group": sweep.group or "all cells",
        "levels": levels,
        "points": fit.points,
        "measured_peak": _peak_text(fit.measured_peak_n, fit.measured_peak, metric),
        "knee": _knee_text(sweep),
        "ok": fit.ok,
        "reason": fit.reason or "",
        "r2": "" if fit.r2 is None else f"{fit.r2:.3f}",
        "lam": "",
        "sigma": "",
        "kappa": "",
        "n_star": "",
        "predicted_peak": "",
        "note": sweep.latency_note,
    }
    if fit.ok:
        row.update(
            lam=metric.format(fit.lam),
            sigma=_with_error(fit.sigma, fit.sigma_se),
            kappa=_with_error(fit.kappa, fit.kappa_se),
            n_star=f"{fit.n_star:.1f}" if fit.n_star is not None else "none",
            predicted_peak=metric.format(fit.predicted_peak)
            if fit.predicted_peak is not None
            else "",
        )
        if fit.no_peak_reason:
            row["note"] = "; ".join(filter(None, [fit.no_peak_reason, row["note"]]))
    return row


def _with_error(value: float | None, error: float | None) -> str:
    if value is None:
        return ""
    text = f"{value:.3g}"
    return text + (f" ± {error:.2g}" if error is not None and math.isfinite(error) else "")


def _peak_text(n: float | None, value: float | None, metric: Metric) -> str:
    if n is None or value is None:
        return ""
    return f"{metric.format(value)} at N = {n:g}"


def _knee_text(sweep: Sweep) -> str:
    knee = sweep.knee
    if knee.n is None:
        return f"none ({knee.reason})"
    return f"N = {knee.n:g} ({knee.latency:,.2f} ms against {knee.expected:,.2f} ms on the line)"


def chart_caption(sweep: Sweep) -> str:
    fit = sweep.fit
    text = (
        f"Left: {sweep.throughput.heading} of every successful repetition (light dots) and "
        f"their mean (dark dots) at each {sweep.label} value N"
    )
    if fit.ok:
        text += (
            f", the Universal Scalability Law fitted to the repetitions (red, R² {fit.r2:.3f}) "
            "and linear scaling from one client, λN (grey, dashed)"
        )
        text += f"; N* (green) is the fitted peak, {fit.n_star:.1f}" if fit.n_star else ""
        text += "."
    else:
        text += f". No curve: {fit.reason}."
    text += (
        f" Right: {sweep.latency_heading} against N and the straight line through "
        f"the first two means; the knee (orange) is the first mean more than "
        f"{100 * KNEE_TOLERANCE:.0f} % above it."
    )
    return text


# --------------------------------------------------------------------------- the chart


def scaling_chart(sweep: Sweep) -> Figure:
    """Throughput with the USL fit (left) and latency with its knee (right)."""
    with matplotlib.rc_context(charts.STYLE):
        fig = Figure(figsize=(9.0, 3.4), dpi=charts.DPI)
        fig.subplots_adjust(left=0.08, right=0.98, top=0.88, bottom=0.27, wspace=0.28)
        left, right = fig.subplots(1, 2)
        _throughput_panel(left, sweep)
        _latency_panel(right, sweep)
        for ax in (left, right):
            _concurrency_axis(ax, sweep)
        handles, names = [], []
        for ax in (left, right):
            h, n = ax.get_legend_handles_labels()
            handles += h
            names += n
        fig.legend(
            handles, names, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=4, fontsize=7.5
        )
    return fig


def _throughput_panel(ax: Axes, sweep: Sweep) -> None:
    points, fit = sweep.points, sweep.fit
    means = points.groupby("n")["throughput"].mean()
    ax.scatter(points["n"], points["throughput"], s=12, color=_COLORS["points"], label="repetition")
    ax.plot(means.index, means.to_numpy(), "o", color=_COLORS["mean"], label="mean per N")
    top = float(points["throughput"].max())
    if fit.ok and fit.lam is not None:
        end = max(means.index.max(), min(fit.n_star or 0, 4 * means.index.max()))
        grid = np.geomspace(max(means.index.min(), 1e-3), end, 200)
        ax.plot(grid, [fit.predict(v) for v in grid], color=_COLORS["fit"], label="USL fit")
        linear = grid[grid * fit.lam <= 1.3 * top]
        ax.plot(linear, fit.lam * linear, "--", color=_COLORS["linear"], lw=1, label="linear (λN)")
        if fit.n_star is not None:
            ax.axvline(fit.n_star, color=_COLORS["peak"], lw=1.1, label=f"N* = {fit.n_star:.1f}")
            top = max(top, fit.predicted_peak or 0)
    else:
        ax.text(
            0.02, 0.04, "no fit: see the table", transform=ax.transAxes, fontsize=7.5, color="#666"
        )
    _mark_knee(ax, sweep.knee)
    ax.set_ylim(0, 1.15 * top if top > 0 else 1)
    ax.set_title(sweep.throughput.heading)
    ax.set_ylabel(sweep.throughput.unit or sweep.throughput.label)


def _latency_panel(ax: Axes, sweep: Sweep) -> None:
    points = sweep.points.dropna(subset=["latency"])
    means = points.groupby("n")["latency"].mean()
    ax.scatter(points["n"], points["latency"], s=12, color=_COLORS["points"])
    ax.plot(means.index, means.to_numpy(), "o-", color=_COLORS["mean"], lw=1)
    if len(means) >= 2:
        n0, n1 = means.index[0], means.index[1]
        slope = max(0.0, (means.iloc[1] - means.iloc[0]) / (n1 - n0))
        grid = np.geomspace(n0, means.index.max(), 100)
        line = means.iloc[0] + slope * (grid - n0)
        ax.plot(grid, line, ":", color=_COLORS["linear"], lw=1, label="line through first two")
    _mark_knee(ax, sweep.knee, label=True)
    ax.set_ylim(bottom=0)
    ax.set_title(sweep.latency_heading)
    ax.set_ylabel("ms")


def _mark_knee(ax: Axes, knee: LatencyKnee, label: bool = False) -> None:
    if knee.n is not None:
        text = f"latency knee N = {knee.n:g}" if label else None
        ax.axvline(knee.n, color=_COLORS["knee"], lw=1.1, ls="--", label=text)


def _concurrency_axis(ax: Axes, sweep: Sweep) -> None:
    levels = sorted(set(sweep.points["n"]))
    if levels and levels[0] > 0 and levels[-1] / levels[0] >= 8:
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
    if levels and len(levels) <= 12:
        ax.set_xticks(levels, [f"{v:g}" for v in levels])
    ax.set_xlabel(sweep.label)


def drawable(sweep: Sweep) -> bool:
    """A chart and a terminal line are worth it from :data:`MIN_LEVELS` concurrencies:
    fewer are only the factor chart's line (the section still says why there is no fit)."""
    return len(sweep.fit.levels) >= MIN_LEVELS
