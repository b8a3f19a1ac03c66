"""Time series: the throughput overview of every cell and one figure of panels per cell.

Inputs are a trial's own CSV files (intervals.csv, cpu.csv, disk.csv, status.csv,
procs.csv; columns in :mod:`dbrig.sampling` and :mod:`dbrig.tools.sysbench`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import matplotlib
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dbrig.report import panels as draw
from dbrig.report.chart_base import (
    STYLE,
    TIME_LABEL,
    Marker,
    mark_events,
    new_figure,
    set_margins,
    shade_warmup,
    shorten,
)
from dbrig.report.panels import Series

# --------------------------------------------------------------------------- time series


def timeseries_grid(
    panels: Sequence[tuple[str, Sequence[Series]]],
    *,
    column: str,
    ylabel: str,
    warmup_s: float,
    ncols: int = 4,
    markers: Sequence[Sequence[Marker]] = (),
) -> Figure:
    """Small multiples, one panel per cell (shared axes), one line per repetition;
    ``markers[i]``: the events of panel i's faults, as unlabelled lines."""
    ncols = max(1, min(ncols, len(panels)))
    nrows = max(1, -(-len(panels) // ncols))
    with matplotlib.rc_context(STYLE):
        fig = new_figure(3.2 * ncols, 2.0 * nrows + 0.7)
        set_margins(fig, left=0.75, right=0.15, top=0.3, bottom=0.6, wspace=0.12, hspace=0.45)
        axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True).ravel()
        for ax in axes:
            _defer_autoscale(ax, "xy")
        for ax, (title, series) in zip(axes, panels, strict=False):
            draw.lines(ax, series, column)
            shade_warmup(ax, warmup_s)
            _few_ticks(ax)
            ax.set_title(shorten(title, 40), fontsize=8.5)
        _autoscale_once(axes, "xy")
        axes[0].set_ylim(bottom=0)
        for ax, events in zip(axes, markers, strict=False):
            mark_events([ax], events, labelled=False)
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
    markers: Sequence[Marker] = ()  # events of the trial's faults (report/faults.py)


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
        fig = new_figure(11.0, 2.35 * len(rows) + 0.6)
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
                shade_warmup(ax, warmup_s)
                ax.set_title(panel.title)
                ax.set_ylabel(panel.ylabel)
                last = r == len(rows) - 1
                ax.set_xlabel(TIME_LABEL if last else "")
                ax.tick_params(axis="x", labelbottom=last)
        _autoscale_once(drawn, "x")
        mark_events(drawn, samples.markers, labelled=True)
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
                lambda ax: draw.lines(ax, intervals, throughput[0], legend=True, from_zero=True),
            )
        )
    if latency and any(latency[0] in s.frame for s in samples.intervals):
        with_latency = [s for s in samples.intervals if latency[0] in s.frame]
        panels.append(
            _Panel(
                "Latency, every repetition",
                latency[1],
                lambda ax: draw.lines(ax, with_latency, latency[0], legend=True, from_zero=True),
            )
        )
    cpu = samples.cpu
    if cpu is not None and {"core", "busy_pct"} <= set(cpu.columns):
        panels.append(
            _Panel("CPU busy per core (%)", "core", lambda ax: draw.heatmap(ax, cpu), True)
        )
    procs = samples.procs
    if procs is not None and {"role", "cpu_pct"} <= set(procs.columns):
        labels = samples.role_labels
        panels.append(
            _Panel(
                "CPU by process role",
                "% of one core",
                lambda ax: draw.role_cpu(ax, procs, labels),
            )
        )
    if samples.memory and procs is not None and {"role", "rss_mb"} <= set(procs.columns):
        labels = samples.role_labels
        panels.append(
            _Panel(
                "Memory by process role", "RSS (MiB)", lambda ax: draw.role_rss(ax, procs, labels)
            )
        )
    disk = samples.disk
    if disk is not None and "device" in disk:
        panels.append(_Panel("Disk I/O", "operations/s", lambda ax: draw.disk_iops(ax, disk)))
        panels.append(_Panel("Disk await", "ms per I/O", lambda ax: draw.disk_await(ax, disk)))
    if (cpu is not None and "iowait_pct" in cpu) or (disk is not None and "util_pct" in disk):
        panels.append(
            _Panel(
                "Disk utilisation, CPU iowait",
                "%",
                lambda ax: draw.util_iowait(ax, cpu, disk),
            )
        )
    status = samples.status
    if status is not None:
        panels += _status_panels(status)
    return panels


def _status_panels(status: pd.DataFrame) -> list[_Panel]:
    status = draw.with_handler_reads(status)
    panels = []
    if "questions_per_s" in status:
        panels.append(
            _Panel(
                "Server questions",
                "questions/s",
                lambda ax: draw.columns(ax, status, {"questions_per_s": "questions"}),
            )
        )
    rows, source = draw.row_counters(status)
    if rows:
        panels.append(
            _Panel(
                f"Rows {source}",
                "rows/s (log scale)",
                lambda ax: draw.columns(ax, status, rows, True),
            )
        )
    pool = {
        "innodb_buffer_pool_reads_per_s": "reads from disk",
        "innodb_data_reads_per_s": "data file reads",
    }
    pool = {k: v for k, v in pool.items() if k in status}
    if pool:
        panels.append(
            _Panel("Buffer pool misses", "reads/s", lambda ax: draw.columns(ax, status, pool))
        )
    return panels
