"""Drawing one sampled quantity on one axes of a cell figure: steps, bands, columns, heat maps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection

from dbrig.report.chart_base import MAX_PLOT_POINTS, PALETTE, palette_colors


@dataclass(frozen=True)
class Series:
    """Per-interval rows of one repetition: ``label`` (``r1``) and its intervals.csv."""

    label: str
    frame: pd.DataFrame


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


def row_counters(status: pd.DataFrame) -> tuple[dict[str, str], str]:
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


def with_handler_reads(status: pd.DataFrame) -> pd.DataFrame:
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


def lines(
    ax: Axes,
    series: Sequence[Series],
    column: str,
    *,
    legend: bool = False,
    from_zero: bool = False,
) -> None:
    for color, item in zip(palette_colors(len(series)), series, strict=False):
        frame = item.frame
        if column in frame:
            values = pd.to_numeric(frame[column], errors="coerce")
            width = 1.3 if len(frame) <= 120 else 0.7  # long series: thin lines stay readable
            _stairs(ax, frame, values, color=color, label=item.label, linewidth=width)
    if from_zero:
        ax.set_ylim(bottom=0)
    if legend:
        _legend(ax, len(series))


def columns(ax: Axes, frame: pd.DataFrame, names: dict[str, str], log: bool = False) -> None:
    names = {column: label for column, label in names.items() if column in frame}
    drawn = 0
    for color, (column, label) in zip(palette_colors(len(names)), names.items(), strict=False):
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


def heatmap(ax: Axes, cpu: pd.DataFrame) -> None:
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


def role_cpu(ax: Axes, procs: pd.DataFrame, labels: Mapping[str, str]) -> None:
    """User + system CPU of each role's process group (200 = two full cores)."""
    drawn = 0
    for color, (role, rows) in zip(PALETTE, procs.groupby("role", sort=False), strict=False):
        values = pd.to_numeric(rows["cpu_pct"], errors="coerce")
        label = labels.get(str(role), str(role))
        _stairs(ax, rows, values, color=color, label=label, linewidth=1.3)
        drawn += 1
    ax.set_ylim(bottom=0)
    _legend(ax, drawn)


def role_rss(ax: Axes, procs: pd.DataFrame, labels: Mapping[str, str]) -> None:
    drawn = 0
    for color, (role, rows) in zip(PALETTE, procs.groupby("role", sort=False), strict=False):
        values = pd.to_numeric(rows["rss_mb"], errors="coerce")
        _stairs(ax, rows, values, color=color, label=labels.get(str(role), str(role)))
        drawn += 1
    ax.set_ylim(bottom=0)
    _legend(ax, drawn)


def disk_iops(ax: Axes, disk: pd.DataFrame) -> None:
    totals = _per_time(disk, ["interval_s", "reads_per_s", "writes_per_s"], "sum")
    columns(ax, totals, {"reads_per_s": "reads", "writes_per_s": "writes"})


def disk_await(ax: Axes, disk: pd.DataFrame) -> None:
    devices = 0
    for color, (device, rows) in zip(PALETTE, disk.groupby("device", sort=True), strict=False):
        if "await_ms" in rows:
            values = pd.to_numeric(rows["await_ms"], errors="coerce")
            _stairs(ax, rows, values, color=color, label=str(device), linewidth=1.3)
            devices += 1
    ax.set_ylim(bottom=0)
    _legend(ax, devices)


def util_iowait(ax: Axes, cpu: pd.DataFrame | None, disk: pd.DataFrame | None) -> None:
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
