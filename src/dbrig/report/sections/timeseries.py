"""The Time series section: the throughput overview and one figure of panels per cell.

To stay fast on large matrices, per-cell figures are drawn for the first
``max_cell_figures`` cells that have saved trials and the throughput overview for
the first :data:`MAX_GRID_CELLS` (the page says so). The figures are :func:`jobs`:
build.py draws them in a forked child (:mod:`dbrig.util.background`) while the other
sections are computed: on 2 cores that halves the time of a large report.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from dbrig.metrics import HEADLINE, REGISTRY, Metric, throughput_metrics
from dbrig.report import charts, faults
from dbrig.report.data import RunData, read_samples
from dbrig.report.sections import Job, LoadedRun, Part, Plot, png, render

MAX_CELL_FIGURES = 8  # one figure of nine panels per cell: about 0.5 s each
MAX_GRID_CELLS = 16  # panels of the throughput overview
MARKER_NOTE = (
    "Dashed lines: the fault's events in the repetition whose samples are shown (its signal, "
    "the server gone, the restart, the first query, throughput recovered; every repetition's "
    "timeline is in the Faults section)."
)


def jobs(run: LoadedRun) -> list[Job]:
    """The throughput overview, then one figure per drawn cell: one job per figure."""
    grid_cells, detail_cells = _drawn_cells(run)
    return _timeseries_jobs(run.data, grid_cells, detail_cells, run.headline)


def section(run: LoadedRun) -> Part:
    grid_cells, detail_cells = _drawn_cells(run)
    plots = [p for p in run.drawn.get(__name__, []) if p is not None]
    page = render(
        "timeseries.html.j2",
        timeseries_plots=plots,
        cells_in_grid=len(grid_cells),
        cells_drawn=len(detail_cells),
        cells_with_trials=int((run.overview["trials"] > 0).sum()),
    )
    return Part("timeseries", page, links=(("timeseries", "Time series"),), plots=tuple(plots))


def _drawn_cells(run: LoadedRun) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    grid_cells = _cells_with_trials(run.overview, max(MAX_GRID_CELLS, run.max_cell_figures))
    return grid_cells, grid_cells[: run.max_cell_figures]


def _cells_with_trials(overview: pd.DataFrame, limit: int) -> list[dict[str, Any]]:
    with_trials = overview[overview["trials"] > 0]
    return with_trials.head(max(limit, 0)).to_dict("records")


@dataclass(frozen=True)
class _SeriesColumns:
    throughput: str  # intervals.csv column
    throughput_label: str
    latency: tuple[str, str]  # column, axis label


def _series_columns(data: RunData, headline: list[Metric]) -> _SeriesColumns:
    throughput = _interval_column(data, throughput_metrics(per_interval=True))
    # The run's percentile when it measured one, else the default's heading.
    latency = next(m for m in (*headline, *HEADLINE) if m.name == "latency_pct_ms")
    return _SeriesColumns(throughput.name, throughput.heading, (latency.name, latency.heading))


def _timeseries_jobs(
    data: RunData,
    grid_cells: list[dict[str, Any]],
    detail_cells: list[dict[str, Any]],
    headline: list[Metric],
) -> list[Callable[[], Plot | None]]:
    """The throughput overview of ``grid_cells``, then one figure per cell of ``detail_cells``:
    one job per figure. A cell's intervals files are read once in whichever process
    draws both the overview and that cell's figure (each process has its own cache)."""
    columns = _series_columns(data, headline)

    @functools.cache
    def series(cell: str) -> list[charts.Series]:
        return _interval_series(data, data.trials_by_cell.get(cell, []))

    jobs: list[Callable[[], Plot | None]] = []
    if len(grid_cells) > 1:
        jobs.append(lambda: _grid_plot(data, grid_cells, columns, series))
    jobs += [functools.partial(_cell_plot, data, cell, columns, series) for cell in detail_cells]
    return jobs


def _grid_plot(
    data: RunData,
    grid_cells: list[dict[str, Any]],
    columns: _SeriesColumns,
    series: Callable[[str], list[charts.Series]],
) -> Plot | None:
    panels = [(f"{c['cell']} {c['label']}", series(c["cell"])) for c in grid_cells]
    if not any(s for _, s in panels):
        return None
    fig = charts.timeseries_grid(
        panels,
        column=columns.throughput,
        ylabel=columns.throughput_label,
        warmup_s=max(_warmup(data, c) for c in grid_cells),
        markers=[_markers(data, c["cell"], columns) for c in grid_cells],
    )
    caption = (
        "Per-interval throughput of every repetition (one line each), same axes in every "
        "panel. Grey: warm-up, discarded."
    )
    if any(_markers(data, c["cell"], columns) for c in grid_cells):
        caption += f" {MARKER_NOTE}"
    return Plot("timeseries_throughput.png", "Throughput over time, per cell", caption, png(fig))


def _cell_plot(
    data: RunData,
    cell: dict[str, Any],
    columns: _SeriesColumns,
    series: Callable[[str], list[charts.Series]],
) -> Plot | None:
    columns = _cell_columns(columns, series(cell["cell"]))
    sample_trial = _representative_trial(data, cell["cell"], columns.throughput)
    sample_dir = data.trial_dir(sample_trial)
    samples = charts.CellSamples(
        intervals=series(cell["cell"]),
        sample_label=_rep_label(data, sample_trial),
        cpu=read_samples(sample_dir, "cpu"),
        disk=read_samples(sample_dir, "disk"),
        status=read_samples(sample_dir, "status"),
        procs=read_samples(sample_dir, "procs"),
        role_labels=_role_labels(data),
        memory=isinstance(data.scenario.get("soak"), dict),
        markers=faults.markers(faults.read(sample_dir)),
    )
    title = f"{cell['cell']} {cell['label']}"
    fig = charts.cell_figure(
        samples,
        title=title,
        throughput=(columns.throughput, columns.throughput_label),
        latency=columns.latency,
        warmup_s=_warmup(data, cell),
    )
    if fig is None:
        return None
    caption = _cell_caption(fig, samples, columns)
    return Plot(f"cell_{cell['cell']}.png", title, caption, png(fig))


# What a cell's throughput panel may draw, in order: the run's measures (TPS, events/s, a
# memory test's MiB/s), then a fileio test's MiB/s and operations per second.
_CELL_THROUGHPUT = (
    *throughput_metrics(per_interval=True),
    *(m for m in REGISTRY if m.per_interval and m.name.endswith("_mib_per_s")),
    *(m for m in REGISTRY if m.per_interval and m.name in ("reads_per_s", "writes_per_s")),
)


def _cell_columns(columns: _SeriesColumns, series: list[charts.Series]) -> _SeriesColumns:
    """The run's throughput column, or the first this cell's intervals have (a matrix of
    hardware tests: the cpu cells' events/s, the memory cells' MiB/s, fileio's read or
    written MiB/s): its rate over time, not its latency alone."""
    if _has_values(series, columns.throughput):
        return columns
    for candidate in _CELL_THROUGHPUT:
        if _has_values(series, candidate.name):
            return replace(columns, throughput=candidate.name, throughput_label=candidate.heading)
    return columns


def _has_values(series: list[charts.Series], column: str) -> bool:
    """Some repetition's intervals have a non-zero value in ``column``."""
    return any(
        column in s.frame and pd.to_numeric(s.frame[column], errors="coerce").fillna(0).ne(0).any()
        for s in series
    )


def _role_labels(data: RunData) -> dict[str, str]:
    tool = data.workload_tool
    return {"workload": f"client ({tool})" if tool else "client", "server": "server"}


def _cell_caption(fig: Any, samples: charts.CellSamples, columns: _SeriesColumns) -> str:
    """What the figure has: its panels' titles, not a list of panels it might have had."""
    titles = [t for ax in fig.axes if (t := ax.get_title(loc="left"))]
    per_rep = [t for t in titles if t.endswith("every repetition")]
    sampled = [t for t in titles if t not in per_rep]
    parts = []
    if per_rep:
        names = [t.split(",")[0].lower() for t in per_rep]
        parts.append(f"{' and '.join(names).capitalize()} of every repetition")
    if sampled:
        parts.append(
            f"{', '.join(sampled)} of {samples.sample_label} (the successful repetition with "
            f"the median {columns.throughput})"
        )
    if not per_rep:
        parts.append("no per-interval throughput: the workload tool reports only a final summary")
    marked = f" {MARKER_NOTE}" if samples.markers else ""
    return "; ".join(parts) + f". Grey: warm-up, discarded.{marked}"


def _markers(data: RunData, cell: str, columns: _SeriesColumns) -> tuple[charts.Marker, ...]:
    """The fault events of the cell's representative trial (each repetition's own are in
    the Faults section)."""
    trials = data.trials_by_cell.get(cell)
    if not trials:
        return ()
    trial = _representative_trial(data, cell, columns.throughput)
    return faults.markers(faults.read(data.trial_dir(trial)))


def _interval_column(data: RunData, candidates: tuple[Metric, ...]) -> Metric:
    for candidate in candidates:
        column = candidate.name
        if column in data.results and data.results[column].notna().any():
            return candidate
    return candidates[0]


def _interval_series(data: RunData, trials: list[str]) -> list[charts.Series]:
    series = []
    for trial in trials:
        frame = read_samples(data.trial_dir(trial), "intervals")
        if frame is not None:
            series.append(charts.Series(_rep_label(data, trial), frame))
    return series


def _representative_trial(data: RunData, cell: str, metric: str) -> str:
    """The successful repetition with the median throughput, else the first saved one."""
    rows = data.results[data.results["cell"] == cell]
    ok = rows[rows["status"] == "ok"]
    if metric in ok and ok[metric].notna().any():
        values = ok[metric].dropna()
        nearest = (values - values.median()).abs().sort_values(kind="stable").index[0]
        return str(ok.at[nearest, "trial"])
    return str((ok if not ok.empty else rows)["trial"].iloc[0])


def _rep_label(data: RunData, trial: str) -> str:
    return "r" + trial.rsplit("-r", 1)[-1] if "-r" in trial else trial


def _warmup(data: RunData, cell: dict[str, Any]) -> float:
    value = data.setting(cell, "warmup")
    return float(value) if isinstance(value, int | float) else 0.0
