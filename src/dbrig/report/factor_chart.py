"""Factor charts: one row per cell, the factor's value against each headline metric.

Input: the factor's value, a series label (the other factors' values) and
``<metric>`` (mean) plus ``<metric>_half`` (half width of the 95 % interval) per
metric; cells with few repetitions draw each repetition as a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from dbrig.metrics import Metric
from dbrig.report.chart_base import STYLE, new_figure, palette_colors, set_margins, shorten

MIN_INTERVAL_N = 4  # below this, a t-interval is mostly t (12.7 at n=2): draw the points


@dataclass(frozen=True)
class FactorPoints:
    """What one factor chart draws.

    ``means``: one row per cell with ``x``, ``panel``, ``series``, ``n`` (successful
    repetitions) and, per metric, ``<metric>`` (mean) and ``<metric>_half`` (half-width
    of the 95 % interval). ``reps``: one row per successful repetition of the cells
    with fewer than :data:`MIN_INTERVAL_N` of them, with ``x``, ``panel``, ``series``
    and the metric values. ``categories``: the x values in matrix order (bars only).
    """

    means: pd.DataFrame
    reps: pd.DataFrame
    categories: list[str]

    def of(self, panel: object, series: object) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The means and the repetitions of one series in one panel."""
        means, reps = self._by_series
        return means.get((panel, series), self.means.iloc[:0]), reps.get(
            (panel, series), self.reps.iloc[:0]
        )

    @cached_property
    def _by_series(self) -> tuple[dict[tuple, pd.DataFrame], dict[tuple, pd.DataFrame]]:
        # split once, not once per panel and metric: a chart has up to twelve panels
        return _split(self.means), _split(self.reps)


def _split(frame: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    if frame.empty:
        return {}
    groups = frame.groupby(["panel", "series"], sort=False, dropna=False)
    return {key: rows for key, rows in groups}


def spread_kind(n: pd.Series) -> str:
    """``points``, ``interval`` or ``mixed``: how a chart shows the spread of its cells."""
    few = n < MIN_INTERVAL_N
    return "points" if few.all() else "interval" if not few.any() else "mixed"


def factor_chart(
    points: FactorPoints,
    *,
    x_label: str,
    series_label: str,
    metrics: Sequence[Metric],
    numeric: bool,
) -> Figure:
    """Each metric against one factor: lines (numeric factor) or bars (categories).

    One panel per metric; with a ``panel`` column of more than one value, small
    multiples instead: a row per metric, a column per panel value, shared axes.
    A cell with :data:`MIN_INTERVAL_N` or more repetitions shows the 95 % interval
    of its mean; one with fewer shows every repetition as a dot beside the mean.
    """
    means = points.means
    panels = list(dict.fromkeys(means["panel"]))
    groups = list(dict.fromkeys(means["series"]))
    with matplotlib.rc_context(STYLE):
        if len(panels) > 1:
            fig, cells = _facet_axes(len(panels), metrics, groups, numeric, points)
        else:
            fig, cells = _metric_axes(metrics, groups, numeric, points)
        draw = _draw_lines if numeric else _draw_bars
        for ax, panel, metric, first_col, last_row in cells:
            draw(ax, points, panel, groups, metric)
            if len(panels) > 1:
                if ax.get_subplotspec().is_first_row():
                    ax.set_title(shorten(str(panel), 40))
                ax.set_ylabel(metric.heading if first_col else "")
            else:
                ax.set_title(metric.heading)
                ax.set_ylabel(metric.unit or metric.label)
            ax.set_xlabel(x_label if last_row else "")
        if len(panels) > 1:
            _same_limits(cells)
        else:
            for ax, *_ in cells:
                ax.set_ylim(bottom=0)
        if len(groups) > 1:
            handles, names = cells[0][0].get_legend_handles_labels()
            fig.legend(
                handles,
                names,
                loc="lower center",
                bbox_to_anchor=(0.5, 0.02),
                ncols=_legend_columns([str(g) for g in groups], fig.get_figwidth()),
                title=series_label,
            )
    return fig


_AxesCell = tuple[Axes, object, Metric, bool, bool]  # axes, panel, metric, first col, last row


def _legend_height(groups: list, width: float) -> float:
    if len(groups) < 2:
        return 0.0
    rows = -(-len(groups) // _legend_columns([str(g) for g in groups], width))
    return 0.35 + 0.2 * rows


def _metric_axes(
    metrics: Sequence[Metric], groups: list, numeric: bool, points: FactorPoints
) -> tuple[Figure, list[_AxesCell]]:
    ncols = min(3, len(metrics)) or 1
    nrows = -(-len(metrics) // ncols) or 1
    width = 3.9 * ncols
    rotated = not numeric and _crowded(points.categories)
    label_h = 0.35 if rotated else 0.0
    legend_h = _legend_height(groups, width)
    fig = new_figure(width, (2.9 + label_h) * nrows + legend_h + 0.1)
    set_margins(
        fig,
        left=0.7,
        right=0.2,
        top=0.35,
        bottom=0.55 + label_h + legend_h,
        wspace=0.38,
        hspace=0.78 if rotated else 0.62,
    )
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    panel = points.means["panel"].iloc[0] if len(points.means) else None
    return fig, [(ax, panel, m, True, True) for ax, m in zip(axes, metrics, strict=False)]


def _facet_axes(
    npanels: int, metrics: Sequence[Metric], groups: list, numeric: bool, points: FactorPoints
) -> tuple[Figure, list[_AxesCell]]:
    """A row per metric, a column per panel value; y shared along a row, x along all."""
    panels = list(dict.fromkeys(points.means["panel"]))
    rotated = not numeric and _crowded(points.categories)
    label_h = 0.35 if rotated else 0.0
    width = 0.9 + npanels * (3.0 if npanels <= 2 else 2.35)
    legend_h = _legend_height(groups, width)
    fig = new_figure(width, 2.1 * len(metrics) + label_h + legend_h + 0.85)
    set_margins(
        fig,
        left=0.85,
        right=0.15,
        top=0.35,
        bottom=0.5 + label_h + legend_h,
        wspace=0.1,
        hspace=0.25,
    )
    # Not sharex/sharey: shared axes rescale each other at every artist added (slow on
    # large runs); _same_limits gives them the same limits once everything is drawn.
    axes = fig.subplots(len(metrics), npanels, squeeze=False)
    cells = []
    for r, metric in enumerate(metrics):
        for c, panel in enumerate(panels):
            cells.append((axes[r, c], panel, metric, c == 0, r == len(metrics) - 1))
    return fig, cells


def _same_limits(cells: list[_AxesCell]) -> None:
    """Small multiples: one x range for all, one y range per row from 0, outer labels only."""
    lows, highs = zip(*(ax.get_xlim() for ax, *_ in cells), strict=True)
    rows: dict[str, list[_AxesCell]] = {}
    for cell in cells:
        rows.setdefault(cell[2].column, []).append(cell)
    for row in rows.values():
        top = max(ax.get_ylim()[1] for ax, *_ in row)
        for ax, _, _, first_col, last_row in row:
            ax.set_xlim(min(lows), max(highs))
            ax.set_ylim(0, top)
            ax.tick_params(labelleft=first_col, labelbottom=last_row)


def _legend_columns(labels: list[str], width_in: float) -> int:
    """As many legend columns as fit across the figure (about 14 characters an inch at 8 pt)."""
    longest = max((len(label) for label in labels), default=1)
    fit = int(width_in * 14 / (longest + 6))
    return max(1, min(len(labels), 5, fit))


def _draw_lines(
    ax: Axes, points: FactorPoints, panel: object, groups: list, metric: Metric
) -> None:
    means = points.means
    values = pd.to_numeric(means["x"], errors="coerce").dropna()
    log = bool(len(values)) and values.min() > 0 and values.max() / values.min() >= 8
    for i, (color, group) in enumerate(zip(palette_colors(len(groups)), groups, strict=False)):
        rows, dots = points.of(panel, group)
        rows = rows.sort_values("x")
        if rows.empty:
            continue
        xs = _dodge(rows["x"].astype(float), values, i, len(groups), log)
        ax.plot(xs, rows[metric.column], marker="o", color=color, label=str(group))
        wide = rows[rows["n"] >= MIN_INTERVAL_N]
        _interval_bars(
            ax, xs[wide.index], wide[metric.column], wide[f"{metric.column}_half"], color
        )
        if not dots.empty:
            shift = _dodge(dots["x"].astype(float), values, i, len(groups), log)
            _rep_dots(ax, _beside(shift, values, log), dots[metric.column], color)
    if log:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(values))
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    elif values.nunique() <= 12:
        ticks = sorted(set(values))
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])


def _beside(x: pd.Series, every: pd.Series, log: bool) -> pd.Series:
    """A little to the right of the mean's marker, so the dots do not hide it."""
    if every.nunique() < 2:
        return x + 0.04 * max(abs(float(every.max())) if len(every) else 1.0, 1.0)
    if log:
        return x * 2 ** (0.03 * np.log2(every.max() / every.min()))
    return x + 0.03 * (every.max() - every.min())


def _rep_dots(ax: Axes, x: object, values: pd.Series, color: str) -> None:
    """Each repetition as a hollow dot (one line artist without a line: cheaper than scatter)."""
    ax.plot(
        np.asarray(x, dtype=float),
        pd.to_numeric(values, errors="coerce").to_numpy(dtype=float),
        linestyle="none",
        marker="o",
        markersize=3.8,
        markerfacecolor="none",
        markeredgecolor=color,
        markeredgewidth=0.9,
        zorder=3,
    )


def _interval_bars(ax: Axes, x: object, mean: pd.Series, half: pd.Series, color: str) -> None:
    """The 95 % interval of each mean as one vertical segment (one artist, unlike errorbar)."""
    low = (mean - half).to_numpy(dtype=float)
    high = (mean + half).to_numpy(dtype=float)
    keep = np.isfinite(low) & np.isfinite(high)
    if keep.any():
        ax.vlines(np.asarray(x, dtype=float)[keep], low[keep], high[keep], colors=color, lw=1.1)


def _dodge(x: pd.Series, every: pd.Series, index: int, count: int, log: bool) -> pd.Series:
    """Shift each series a little sideways so that error bars at one x do not hide each other."""
    if count < 2 or every.nunique() < 2:
        return x
    offset = (index - (count - 1) / 2) * min(0.025, 0.12 / count)
    if log:
        return x * 2 ** (offset * np.log2(every.max() / every.min()))
    return x + offset * (every.max() - every.min())


def _draw_bars(ax: Axes, points: FactorPoints, panel: object, groups: list, metric: Metric) -> None:
    categories = points.categories
    index = {c: i for i, c in enumerate(categories)}
    width = 0.8 / max(len(groups), 1)
    for i, (color, group) in enumerate(zip(palette_colors(len(groups)), groups, strict=False)):
        rows, dots = points.of(panel, group)
        offset = -0.4 + width * (i + 0.5)
        xs = rows["x"].astype(str).map(index).to_numpy(dtype=float) + offset
        ax.bar(xs, rows[metric.column], width=width * 0.92, color=color, label=str(group))
        wide = (rows["n"] >= MIN_INTERVAL_N).to_numpy()
        _interval_bars(
            ax,
            xs[wide],
            rows[metric.column][wide],
            rows[f"{metric.column}_half"][wide],
            "#333333",
        )
        if not dots.empty:
            dx = dots["x"].astype(str).map(index).to_numpy(dtype=float) + offset
            _rep_dots(ax, dx, dots[metric.column], "#222222")
    crowded = _crowded(categories)
    ax.set_xticks(
        np.arange(len(categories)),
        categories,
        rotation=40 if crowded else 0,
        ha="right" if crowded else "center",
    )
    ax.grid(axis="x", visible=False)


def _crowded(categories: list[str]) -> bool:
    """Whether category labels need turning to fit under their bars."""
    return len(categories) > 6 or max((len(c) for c in categories), default=0) > 8
