"""Charts of the run report: pure functions from frames to matplotlib Figures, then PNG bytes.

Figures are built with matplotlib's object API (``Figure``, never pyplot) and
rendered by the Agg canvas: no display, no pyplot registry of open figures.
Every axis names its unit. Time axes are seconds since the start of the
measured window, so the warm-up is negative and shaded grey.

Inputs are plain frames:

- factor charts take one row per cell: the factor's value, a series label (the
  other factors' values) and ``<metric>`` (mean) plus ``<metric>_half`` (half
  width of the 95 % interval) per metric;
- time series take a trial's own CSV files (intervals.csv, cpu.csv, disk.csv,
  status.csv; columns in :mod:`dbrig.sampling` and :mod:`dbrig.tools.sysbench`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dbrig.metrics import Metric

DPI = 100
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9.5,
    "axes.titlelocation": "left",
    "axes.titley": 1.0,  # a fixed title position: finding one measures every tick label
    "axes.titlepad": 5.0,
    "axes.labelsize": 8.5,
    "axes.labelcolor": "#333333",
    "axes.edgecolor": "#999999",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "axes.prop_cycle": matplotlib.cycler(color=list(PALETTE)),
    "grid.color": "#e4e4e4",
    "grid.linewidth": 0.6,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "xtick.color": "#555555",
    "ytick.color": "#555555",
    "legend.fontsize": 8,
    "legend.title_fontsize": 8,
    "legend.frameon": False,
    "lines.linewidth": 1.3,
    "lines.markersize": 4,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}
WARMUP_SHADE = {"color": "#000000", "alpha": 0.07, "linewidth": 0}
TIME_LABEL = "time since measured window start (s)"
# A cell figure's half-width panel is ~430 px: 3600 one-second steps in it are a smear of
# noise. Longer series are drawn as this many bucket means inside a min..max band.
MAX_PLOT_POINTS = 300


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG at :data:`DPI`.

    zlib level 1, not Pillow's 6: the same pixels in files about 10 % larger, for a
    third of the encoding time (a sixth of the drawing time on large reports).
    """
    buffer = io.BytesIO()
    with matplotlib.rc_context(STYLE):
        _ReusedRendererCanvas(fig).print_png(buffer, pil_kwargs={"compress_level": 1})
    return buffer.getvalue()


class _ReusedRendererCanvas(FigureCanvasAgg):
    """An Agg canvas that draws on one renderer per figure size, kept across figures.

    A report draws many figures of one size (every cell figure, every scaling chart).
    A new renderer per figure allocates and clears a new pixel buffer and starts with
    an empty text-metrics cache (matplotlib keys it by renderer); reusing one measures
    each tick label, title and legend entry once: about 8 % of a cell figure's CPU.
    A renderer is one buffer: figures are drawn from one thread at a time (the report
    draws from its main thread; its second core is a forked process).
    """

    _renderers: ClassVar[dict[tuple[float, float, float], RendererAgg]] = {}
    _KEEP = 4  # sizes: a renderer of a cell figure holds a 6 MiB buffer

    def get_renderer(self) -> RendererAgg:
        width, height = self.get_width_height(physical=True)
        key = (width, height, self.figure.dpi)
        renderers = self._renderers
        renderer = renderers.pop(key, None)  # re-inserted last: the newest
        if renderer is None:
            renderer = RendererAgg(width, height, self.figure.dpi)
            while len(renderers) >= self._KEEP:
                del renderers[next(iter(renderers))]
        renderers[key] = renderer
        return renderer


# A renderer kept from before a fork holds parsed mathtext (log-axis labels) whose
# fonts read their glyphs through the parent's open font file: one file offset shared
# by both processes, so concurrent reads get each other's bytes ("FT_Load_Glyph
# failed: invalid outline"). A forked child starts with renderers of its own, as
# matplotlib's own font cache does.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ReusedRendererCanvas._renderers.clear)


def _figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(STYLE):
        return Figure(figsize=(width, height), dpi=DPI)


def _margins(
    fig: Figure,
    *,
    left: float,
    right: float,
    top: float,
    bottom: float,
    wspace: float = 0.0,
    hspace: float = 0.0,
) -> None:
    """Fixed margins in inches (wspace/hspace as fractions of an axes).

    A fixed layout, not matplotlib's constrained one: that measures every tick
    label of every axes and took most of the time on large runs.
    """
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / height,
        bottom=bottom / height,
        wspace=wspace,
        hspace=hspace,
    )


# --------------------------------------------------------------------------- factor charts


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
                    ax.set_title(_shorten(str(panel), 40))
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
    fig = _figure(width, (2.9 + label_h) * nrows + legend_h + 0.1)
    _margins(
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
    fig = _figure(width, 2.1 * len(metrics) + label_h + legend_h + 0.85)
    _margins(
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
    for i, (color, group) in enumerate(zip(_colors(len(groups)), groups, strict=False)):
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
    for i, (color, group) in enumerate(zip(_colors(len(groups)), groups, strict=False)):
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


def _colors(n: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(n)]


# --------------------------------------------------------------------------- time series


@dataclass(frozen=True)
class Series:
    """Per-interval rows of one repetition: ``label`` (``r1``) and its intervals.csv."""

    label: str
    frame: pd.DataFrame


def timeseries_grid(
    panels: Sequence[tuple[str, Sequence[Series]]],
    *,
    column: str,
    ylabel: str,
    warmup_s: float,
    ncols: int = 4,
) -> Figure:
    """Small multiples, one panel per cell (shared axes), one line per repetition."""
    ncols = max(1, min(ncols, len(panels)))
    nrows = max(1, -(-len(panels) // ncols))
    with matplotlib.rc_context(STYLE):
        fig = _figure(3.2 * ncols, 2.0 * nrows + 0.7)
        _margins(fig, left=0.75, right=0.15, top=0.3, bottom=0.6, wspace=0.12, hspace=0.45)
        axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True).ravel()
        for ax in axes:
            _defer_autoscale(ax, "xy")
        for ax, (title, series) in zip(axes, panels, strict=False):
            _lines(ax, series, column)
            _shade_warmup(ax, warmup_s)
            _few_ticks(ax)
            ax.set_title(_shorten(title, 40), fontsize=8.5)
        _autoscale_once(axes, "xy")
        axes[0].set_ylim(bottom=0)
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
        fig.text(0.5, 0.12 / fig.get_figheight(), TIME_LABEL, ha="center", va="bottom")
        fig.text(0.1 / fig.get_figwidth(), 0.5, ylabel, rotation=90, ha="left", va="center")
    return fig


@dataclass(frozen=True)
class CellSamples:
    """What one cell figure draws: every repetition's intervals, one repetition's samples."""

    intervals: Sequence[Series]
    sample_label: str  # the repetition the host and server panels show, e.g. "r2"
    cpu: pd.DataFrame | None
    disk: pd.DataFrame | None
    status: pd.DataFrame | None
    procs: pd.DataFrame | None = None  # procs.csv: CPU per process role
    role_labels: Mapping[str, str] = field(default_factory=dict)  # workload -> client (sysbench)
    memory: bool = False  # a panel of RSS per process role (a soak's leak check)


@dataclass(frozen=True)
class _Panel:
    title: str
    ylabel: str
    draw: Callable[[Axes], None]
    wide: bool = False


def cell_figure(
    samples: CellSamples,
    *,
    title: str,
    throughput: tuple[str, str],
    latency: tuple[str, str] | None,
    warmup_s: float,
) -> Figure | None:
    """Small multiples for one cell on one time axis; None when there is nothing to draw.

    ``throughput`` and ``latency`` are (intervals.csv column, axis label with unit).
    The host and server panels show ``samples.sample_label``, which the title names.
    """
    panels = _cell_panels(samples, throughput, latency)
    if not panels:
        return None
    rows: list[list[_Panel]] = []
    for panel in panels:
        if panel.wide or not rows or rows[-1][0].wide or len(rows[-1]) == 2:
            rows.append([panel])
        else:
            rows[-1].append(panel)
    with matplotlib.rc_context(STYLE):
        fig = _figure(11.0, 2.35 * len(rows) + 0.6)
        fig.text(
            0.1 / 11.0,
            1 - 0.12 / fig.get_figheight(),
            f"{title}: host and server samples of {samples.sample_label}",
            ha="left",
            va="top",
            fontsize=10,
            fontweight="bold",
        )
        height = fig.get_figheight()
        grid = fig.add_gridspec(
            len(rows),
            2,
            left=0.75 / 11.0,
            right=1 - 0.75 / 11.0,
            top=1 - 0.65 / height,
            bottom=0.5 / height,
            wspace=0.2,
            hspace=0.42,
        )
        first: Axes | None = None
        drawn: list[Axes] = []
        for r, row in enumerate(rows):
            for c, panel in enumerate(row):
                spec = grid[r, :] if panel.wide or len(row) == 1 else grid[r, c]
                ax = fig.add_subplot(spec, sharex=first)
                _defer_autoscale(ax, "x")
                drawn.append(ax)
                first = first or ax
                _few_ticks(ax)  # before drawing: a panel may set its own ticks or scale
                panel.draw(ax)
                _shade_warmup(ax, warmup_s)
                ax.set_title(panel.title)
                ax.set_ylabel(panel.ylabel)
                last = r == len(rows) - 1
                ax.set_xlabel(TIME_LABEL if last else "")
                ax.tick_params(axis="x", labelbottom=last)
        _autoscale_once(drawn, "x")
    return fig


def _defer_autoscale(ax: Axes, which: str) -> None:
    """No autoscale of a shared axis (``which``: "x", "y" or "xy") until
    :func:`_autoscale_once`.

    Each autoscale of a shared axis walks every panel sharing it, and matplotlib runs
    one whenever an artist is added after another changed the data limits: with ten
    panels that was most of a cell figure's build time.
    """
    if "x" in which:
        ax.set_autoscalex_on(False)
    if "y" in which:
        ax.set_autoscaley_on(False)


def _autoscale_once(axes: Sequence[Axes], which: str) -> None:
    """The limits matplotlib would have found for panels drawn with a deferred autoscale."""
    for ax in axes:
        if "x" in which:
            ax.set_autoscalex_on(True)
        if "y" in which:
            ax.set_autoscaley_on(True)
    if len(axes):
        axes[0].autoscale_view(scalex="x" in which, scaley="y" in which)


def _few_ticks(ax: Axes) -> None:
    """Fewer ticks: easier to read in small panels, and each tick costs time to draw."""
    if ax.get_yscale() == "linear":
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
    if ax.get_xscale() == "linear":
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 5, 10], integer=True))


def _cell_panels(
    samples: CellSamples, throughput: tuple[str, str], latency: tuple[str, str] | None
) -> list[_Panel]:
    panels: list[_Panel] = []
    intervals = [s for s in samples.intervals if throughput[0] in s.frame]
    if intervals:
        panels.append(
            _Panel(
                "Throughput, every repetition",
                throughput[1],
                lambda ax: _lines(ax, intervals, throughput[0], legend=True, from_zero=True),
            )
        )
    if latency and any(latency[0] in s.frame for s in samples.intervals):
        with_latency = [s for s in samples.intervals if latency[0] in s.frame]
        panels.append(
            _Panel(
                "Latency, every repetition",
                latency[1],
                lambda ax: _lines(ax, with_latency, latency[0], legend=True, from_zero=True),
            )
        )
    cpu = samples.cpu
    if cpu is not None and {"core", "busy_pct"} <= set(cpu.columns):
        panels.append(_Panel("CPU busy per core (%)", "core", lambda ax: _heatmap(ax, cpu), True))
    procs = samples.procs
    if procs is not None and {"role", "cpu_pct"} <= set(procs.columns):
        labels = samples.role_labels
        panels.append(
            _Panel(
                "CPU by process role",
                "% of one core",
                lambda ax: _role_cpu(ax, procs, labels),
            )
        )
    if samples.memory and procs is not None and {"role", "rss_mb"} <= set(procs.columns):
        labels = samples.role_labels
        panels.append(
            _Panel("Memory by process role", "RSS (MiB)", lambda ax: _role_rss(ax, procs, labels))
        )
    disk = samples.disk
    if disk is not None and "device" in disk:
        panels.append(_Panel("Disk I/O", "operations/s", lambda ax: _disk_iops(ax, disk)))
        panels.append(_Panel("Disk await", "ms per I/O", lambda ax: _disk_await(ax, disk)))
    if (cpu is not None and "iowait_pct" in cpu) or (disk is not None and "util_pct" in disk):
        panels.append(
            _Panel(
                "Disk utilisation, CPU iowait",
                "%",
                lambda ax: _util_iowait(ax, cpu, disk),
            )
        )
    status = samples.status
    if status is not None:
        panels += _status_panels(status)
    return panels


def _status_panels(status: pd.DataFrame) -> list[_Panel]:
    status = _with_handler_reads(status)
    panels = []
    if "questions_per_s" in status:
        panels.append(
            _Panel(
                "Server questions",
                "questions/s",
                lambda ax: _columns(ax, status, {"questions_per_s": "questions"}),
            )
        )
    rows, source = _row_counters(status)
    if rows:
        panels.append(
            _Panel(
                f"Rows {source}",
                "rows/s (log scale)",
                lambda ax: _columns(ax, status, rows, True),
            )
        )
    pool = {
        "innodb_buffer_pool_reads_per_s": "reads from disk",
        "innodb_data_reads_per_s": "data file reads",
    }
    pool = {k: v for k, v in pool.items() if k in status}
    if pool:
        panels.append(
            _Panel("Buffer pool misses", "reads/s", lambda ax: _columns(ax, status, pool))
        )
    return panels


@dataclass(frozen=True)
class Buckets:
    """A long series reduced for drawing: per bucket of consecutive rows, the time of its
    last row (a stairs step covers ``(previous end, end]``) and the mean, min and max."""

    end: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def downsample(times: np.ndarray, values: np.ndarray, max_points: int) -> Buckets:
    """At most ``max_points`` buckets of consecutive rows (all rows when there are fewer).

    The saved series stays whole; only the drawing is reduced, with the band min..max
    keeping every spike visible. NaN values are left out of a bucket's statistics (an
    all-NaN bucket is NaN)."""
    count = max(1, min(max_points, len(times)))
    starts = np.linspace(0, len(times), count + 1).astype(int)[:-1]
    ends = np.r_[starts[1:], len(times)] - 1
    known = ~np.isnan(values)
    filled = np.where(known, values, 0.0)
    counts = np.add.reduceat(known.astype(int), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.add.reduceat(filled, starts) / counts
    low = np.fmin.reduceat(values, starts)  # fmin/fmax skip NaN unless all are NaN
    high = np.fmax.reduceat(values, starts)
    return Buckets(np.asarray(times, dtype=float)[ends], mean, low, high)


def _stairs(ax: Axes, frame: pd.DataFrame, values: pd.Series, **style: object) -> None:
    """Each row's value over the interval it covers, ``(t_s - interval, t_s]``; a series
    longer than MAX_PLOT_POINTS is drawn as bucket means inside a min..max band."""
    # numpy, not a sorted DataFrame: this runs for every line of every cell figure
    times = frame["t_s"].to_numpy(dtype=float)
    if times.size == 0 or np.isnan(times).any():
        return _stairs_with_pandas(ax, frame, values, **style)
    order = np.argsort(times, kind="quicksort")  # as DataFrame.sort_values does
    times = times[order]
    last = np.r_[times[1:] != times[:-1], True]  # drop_duplicates(keep="last")
    order, times = order[last], times[last]
    if "interval_s" in frame and pd.notna(frame["interval_s"].iloc[0]):
        first = float(frame["interval_s"].iloc[order[0]])
    else:
        first = float(np.median(np.diff(times))) if times.size > 1 else 1.0
    values_ = pd.Series(values).to_numpy(dtype=float)[order]
    _draw_steps(ax, times, values_, first, **style)


def _stairs_with_pandas(ax: Axes, frame: pd.DataFrame, values: pd.Series, **style: object) -> None:
    """:func:`_stairs` for frames with missing sample times (NaN sorts last, once)."""
    rows = pd.DataFrame({"t": frame["t_s"].astype(float), "v": values}).sort_values("t")
    rows = rows.drop_duplicates("t", keep="last")
    if rows.empty:
        return
    times = rows["t"].to_numpy()
    if "interval_s" in frame and pd.notna(frame["interval_s"].iloc[0]):
        first = float(frame.loc[rows.index[0], "interval_s"])
    else:
        first = float(np.median(np.diff(times))) if times.size > 1 else 1.0
    values_ = rows["v"].to_numpy(dtype=float)
    _draw_steps(ax, times, values_, first, **style)


def _draw_steps(
    ax: Axes, times: np.ndarray, values: np.ndarray, first: float, **style: object
) -> None:
    """The step line of sorted ``times`` (the first step ``first`` s long), bucketed when long."""
    start = times[0] - first
    if len(times) > MAX_PLOT_POINTS:
        buckets = downsample(times, values, MAX_PLOT_POINTS)
        _band(ax, np.r_[start, buckets.end], buckets.low, buckets.high, style.get("color"))
        times, values = buckets.end, buckets.mean
    # steps-pre gives each point's value to the span on its left: (t_prev, t]
    ax.plot(np.r_[start, times], np.r_[values[:1], values], drawstyle="steps-pre", **style)


def _band(ax: Axes, edges: np.ndarray, low: np.ndarray, high: np.ndarray, color: object) -> None:
    """A filled step band, ``low[i]..high[i]`` over ``(edges[i], edges[i + 1]]``, with a
    gap where a bucket has no value.

    The polygons are built here and added as one collection, not through
    ``fill_between(step="pre")``: the same pixels, at a fraction of its cost on the
    long series of a cell figure. Draw the step line after it: that line's autoscale
    takes the band in.
    """
    known = ~(np.isnan(low) | np.isnan(high))
    change = np.flatnonzero(np.diff(np.r_[0, known.astype(np.int8), 0]))
    polygons = []
    for first, end in zip(change[::2], change[1::2], strict=True):  # runs of known buckets
        x = np.repeat(edges[first : end + 1], 2)[1:-1]  # each bucket's left and right edge
        upper = np.repeat(high[first:end], 2)
        lower = np.repeat(low[first:end], 2)
        polygons.append(np.column_stack([np.r_[x, x[::-1]], np.r_[upper, lower[::-1]]]))
    if not polygons:
        return
    band = PolyCollection(polygons, facecolors=color, edgecolors=color, alpha=0.18, linewidths=0)
    # autolim=False and the limits by hand: matplotlib 3.11's add_collection autoscales
    # every panel sharing the axis first, at each call. The step line drawn next asks
    # for the autoscale, once.
    ax.add_collection(band, autolim=False)
    ax.update_datalim(np.concatenate(polygons))


def _legend(ax: Axes, entries: int) -> None:
    if entries > 1:
        ax.legend(
            loc="lower right",
            bbox_to_anchor=(1.0, 1.0),
            ncols=min(entries, 6),
            fontsize=7.5,
            borderaxespad=0.2,
            handlelength=1.4,
            columnspacing=1.0,
        )


def _row_counters(status: pd.DataFrame) -> tuple[dict[str, str], str]:
    """InnoDB row counters when the server has them (MySQL), else the handler counters."""
    innodb = {
        f"innodb_rows_{kind}_per_s": kind
        for kind in ("read", "inserted", "updated", "deleted")
        if f"innodb_rows_{kind}_per_s" in status
    }
    if innodb:
        return innodb, "(InnoDB)"
    handler = {
        "handler_read_total_per_s": "read",
        "handler_write_per_s": "written",
        "handler_update_per_s": "updated",
        "handler_delete_per_s": "deleted",
    }
    return {k: v for k, v in handler.items() if k in status}, "(Handler_*)"


def _with_handler_reads(status: pd.DataFrame) -> pd.DataFrame:
    """Adds ``handler_read_total_per_s``: rows read by key, next in index and by scan."""
    parts = [
        c
        for c in (
            "handler_read_key_per_s",
            "handler_read_next_per_s",
            "handler_read_rnd_next_per_s",
        )
        if c in status
    ]
    if not parts or "innodb_rows_read_per_s" in status:
        return status
    total = status[parts].astype(float).sum(axis=1, min_count=1)
    return status.assign(handler_read_total_per_s=total)


def _lines(
    ax: Axes,
    series: Sequence[Series],
    column: str,
    *,
    legend: bool = False,
    from_zero: bool = False,
) -> None:
    for color, item in zip(_colors(len(series)), series, strict=False):
        frame = item.frame
        if column in frame:
            values = pd.to_numeric(frame[column], errors="coerce")
            width = 1.3 if len(frame) <= 120 else 0.7  # long series: thin lines stay readable
            _stairs(ax, frame, values, color=color, label=item.label, linewidth=width)
    if from_zero:
        ax.set_ylim(bottom=0)
    if legend:
        _legend(ax, len(series))


def _columns(ax: Axes, frame: pd.DataFrame, names: dict[str, str], log: bool = False) -> None:
    names = {column: label for column, label in names.items() if column in frame}
    drawn = 0
    for color, (column, label) in zip(_colors(len(names)), names.items(), strict=False):
        values = pd.to_numeric(frame[column], errors="coerce")
        if log:
            values = values.where(values > 0)
        _stairs(ax, frame, values, color=color, label=label, linewidth=1.3)
        drawn += 1
    if log and _has_positive(frame, names):
        ax.set_yscale("log")
    elif _has_positive(frame, names):
        ax.set_ylim(bottom=0)
    else:
        ax.set_ylim(0, 1)  # all zero: a flat line on the floor, not a magnified axis
    _legend(ax, drawn)


def _has_positive(frame: pd.DataFrame, names: dict[str, str]) -> bool:
    return any(pd.to_numeric(frame[c], errors="coerce").gt(0).any() for c in names)


def _heatmap(ax: Axes, cpu: pd.DataFrame) -> None:
    grid = cpu.pivot_table(index="core", columns="t_s", values="busy_pct", aggfunc="mean")
    times = grid.columns.to_numpy(dtype=float)
    if "interval_s" in cpu:
        first = float(cpu.loc[cpu["t_s"] == times[0], "interval_s"].iloc[0])
    else:
        first = float(np.diff(times).mean()) if times.size > 1 else 1.0
    # samples sit on a fixed grid, so an image (much faster than a mesh) is exact enough
    mesh = ax.imshow(
        grid.to_numpy(),
        aspect="auto",
        origin="lower",
        interpolation="nearest",
        cmap="magma",
        vmin=0,
        vmax=100,
        extent=(times[0] - first, times[-1], -0.5, grid.shape[0] - 0.5),
    )
    cores = grid.index.to_numpy()
    step = max(1, len(cores) // 8)
    ax.set_yticks(np.arange(len(cores))[::step], [str(c) for c in cores[::step]])
    ax.grid(False)
    bar = ax.inset_axes((1.006, 0.0, 0.008, 1.0))
    ax.figure.colorbar(mesh, cax=bar, label="busy %")
    bar.tick_params(labelsize=7)


def _per_time(frame: pd.DataFrame, columns: list[str], how: str) -> pd.DataFrame:
    """One row per sample time: ``how`` over devices or cores (interval_s kept as is)."""
    present = [c for c in columns if c in frame and c != "interval_s"]
    grouped = frame.groupby("t_s", sort=True)
    out = grouped[present].agg(how)
    if "interval_s" in frame:
        out["interval_s"] = grouped["interval_s"].first()
    return out.reset_index()


def _role_cpu(ax: Axes, procs: pd.DataFrame, labels: Mapping[str, str]) -> None:
    """User + system CPU of each role's process group (200 = two full cores)."""
    drawn = 0
    for color, (role, rows) in zip(PALETTE, procs.groupby("role", sort=False), strict=False):
        values = pd.to_numeric(rows["cpu_pct"], errors="coerce")
        label = labels.get(str(role), str(role))
        _stairs(ax, rows, values, color=color, label=label, linewidth=1.3)
        drawn += 1
    ax.set_ylim(bottom=0)
    _legend(ax, drawn)


def _role_rss(ax: Axes, procs: pd.DataFrame, labels: Mapping[str, str]) -> None:
    drawn = 0
    for color, (role, rows) in zip(PALETTE, procs.groupby("role", sort=False), strict=False):
        values = pd.to_numeric(rows["rss_mb"], errors="coerce")
        _stairs(ax, rows, values, color=color, label=labels.get(str(role), str(role)))
        drawn += 1
    ax.set_ylim(bottom=0)
    _legend(ax, drawn)


def _disk_iops(ax: Axes, disk: pd.DataFrame) -> None:
    totals = _per_time(disk, ["interval_s", "reads_per_s", "writes_per_s"], "sum")
    _columns(ax, totals, {"reads_per_s": "reads", "writes_per_s": "writes"})


def _disk_await(ax: Axes, disk: pd.DataFrame) -> None:
    devices = 0
    for color, (device, rows) in zip(PALETTE, disk.groupby("device", sort=True), strict=False):
        if "await_ms" in rows:
            values = pd.to_numeric(rows["await_ms"], errors="coerce")
            _stairs(ax, rows, values, color=color, label=str(device), linewidth=1.3)
            devices += 1
    ax.set_ylim(bottom=0)
    _legend(ax, devices)


def _util_iowait(ax: Axes, cpu: pd.DataFrame | None, disk: pd.DataFrame | None) -> None:
    drawn = 0
    if disk is not None and "util_pct" in disk:
        util = _per_time(disk, ["interval_s", "util_pct"], "max")
        _stairs(ax, util, util["util_pct"], color=PALETTE[0], label="disk util (busiest)")
        drawn += 1
    if cpu is not None and "iowait_pct" in cpu:
        means = _per_time(cpu, ["interval_s", "iowait_pct", "steal_pct"], "mean")
        _stairs(ax, means, means["iowait_pct"], color=PALETTE[1], label="iowait")
        drawn += 1
        if "steal_pct" in means and means["steal_pct"].fillna(0).gt(0).any():
            _stairs(ax, means, means["steal_pct"], color=PALETTE[4], label="steal")
            drawn += 1
    ax.set_ylim(0, max(5.0, ax.get_ylim()[1]))
    _legend(ax, drawn)


def _shade_warmup(ax: Axes, warmup_s: float) -> None:
    if warmup_s > 0:
        ax.axvspan(-warmup_s, 0, **WARMUP_SHADE)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
