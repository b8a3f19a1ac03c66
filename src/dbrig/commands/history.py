"""``dbrig history``: a metric over every saved run of a scenario, with step changes flagged."""

from __future__ import annotations

import math
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from dbrig import store
from dbrig.analysis import history
from dbrig.analysis.compare import RunInput
from dbrig.commands._common import ALPHA, PERCENT, load_run_input
from dbrig.commands.console import err_console, out_console, print_line
from dbrig.errors import EXIT_CELLS_FAILED, ConfigError, DbrigError
from dbrig.metrics import throughput_metrics
from dbrig.report.compare_format import format_number


@click.command("history")
@click.argument("runs_dir", type=click.Path(path_type=Path))
@click.option(
    "--scenario",
    "scenario_name",
    metavar="NAME",
    help="Scenario whose runs to read (default: the only one in RUNS_DIR).",
)
@click.option(
    "--metric",
    default=None,
    metavar="NAME",
    help="Metric column to follow (default: the runs' throughput, tps first, else "
    "queries_per_s, events_per_s, qps, mib_per_s).",
)
@click.option(
    "--cell",
    "cells",
    multiple=True,
    metavar="FACTOR=VALUE",
    help="Only cells with this factor value (repeatable), e.g. --cell threads=4.",
)
@click.option("--png", type=click.Path(path_type=Path, dir_okay=False), help="Write a chart.")
@click.option(
    "--threshold",
    type=PERCENT,
    default="5%",
    show_default=True,
    help="Smallest level change reported as a step.",
)
@click.option("--alpha", type=ALPHA, default=0.05, show_default=True, help="Significance level.")
@click.option(
    "--min-size",
    type=click.IntRange(min=2),
    default=3,
    show_default=True,
    help="Fewest runs on each side of a step.",
)
@click.option(
    "--fail-on-step",
    is_flag=True,
    help="Exit 1 when a cell's newest run sits after a step in the bad direction.",
)
def history_command(
    runs_dir: Path,
    scenario_name: str | None,
    metric: str | None,
    cells: tuple[str, ...],
    png: Path | None,
    threshold: float,
    alpha: float,
    min_size: int,
    fail_on_step: bool,
) -> None:
    """Show METRIC per run for every cell of a scenario's runs in RUNS_DIR, oldest first."""
    name, runs = load_scenario_runs(runs_dir, scenario_name)
    metric = metric or throughput_of(runs)
    found = history.build_history(
        runs,
        metric,
        scenario=name,
        cells=history.parse_cell_filters(cells),
        threshold=threshold,
        alpha=alpha,
        min_size=min_size,
    )
    if fail_on_step and found.direction is None:
        raise ConfigError(f"--fail-on-step: the good direction of {metric} is unknown")
    print_history(found)
    if png is not None:
        try:
            history.plot_png(found, png)
        except OSError as exc:
            raise ConfigError(f"--png {png}: cannot write ({exc.strerror or exc})") from None
    regressions = found.current_regressions()
    if fail_on_step and regressions:
        print_line(
            err_console(),
            f"dbrig: {len(regressions)} cell(s) are at a worse level since a step: "
            "failing (--fail-on-step)",
        )
        raise SystemExit(EXIT_CELLS_FAILED)


def load_scenario_runs(runs_dir: Path, scenario: str | None) -> tuple[str, list[RunInput]]:
    """Every complete run of the scenario under ``runs_dir``; others are skipped with a warning."""
    if not runs_dir.is_dir():
        raise ConfigError(f"{runs_dir}: no such directory")
    by_name: dict[str, list[Path]] = {}
    for path in store.find_runs(runs_dir):
        try:
            name = store.RunDir.open(path).saved().name
        except DbrigError as exc:  # unreadable, or written by a newer dbrig
            print_line(err_console(), f"dbrig: skipped: {exc}")
            continue
        by_name.setdefault(name, []).append(path)
    by_name.pop("", None)
    if scenario is None:
        if len(by_name) != 1:
            names = ", ".join(sorted(by_name)) or "none"
            raise ConfigError(f"{runs_dir}: name the scenario with --scenario (found: {names})")
        scenario = next(iter(by_name))
    if scenario not in by_name:
        names = ", ".join(sorted(by_name)) or "none"
        raise ConfigError(f"{runs_dir}: no runs of scenario {scenario} (found: {names})")
    runs = []
    for path in by_name[scenario]:
        try:
            runs.append(load_run_input(path))
        except DbrigError as exc:
            print_line(err_console(), f"dbrig: skipped: {exc}")
    if not runs:
        raise ConfigError(f"{runs_dir}: no complete run of scenario {scenario}")
    return scenario, runs


def print_history(found: history.History) -> None:
    console = out_console()
    starts = {(s.label, step.index): step for s in found.series for step in s.steps}
    table = Table(title=f"{found.scenario}: {found.metric} per run, mean ±95 % CI (n)")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("run", no_wrap=True)
    table.add_column("created", no_wrap=True)
    for series in found.series:
        table.add_column(series.label, justify="right")
    for i, (run, created) in enumerate(zip(found.runs, found.created_at, strict=True)):
        row = [Text(str(i + 1)), Text(run), Text(created[:19].replace("T", " "))]
        for series in found.series:
            step = starts.get((series.label, i))
            row.append(_point_text(series.points[i], step, found))
        table.add_row(*row)
    console.print(table)
    for index, changed in enumerate(found.changes):
        if changed:
            print_line(
                console,
                f"changed at run {index + 1} ({found.runs[index]}): " + "; ".join(changed),
                "cyan",
            )
    steps = [(s, step) for s in found.series for step in s.steps]
    if not steps:
        print_line(
            console,
            f"no step changes of {100 * found.threshold:g} % or more "
            f"(needs at least {2 * found.min_size} runs per cell)",
        )
    for series, step in steps:
        bad = found.is_bad(step)
        style = "bold red" if bad else ("green" if bad is False else "")
        print_line(console, "step: " + history.step_line(found, series, step), style)


def _point_text(point: history.Point, step, found: history.History) -> Text:
    if point.mean is None:
        return Text("-")
    text = format_number(point.mean)
    if point.ci_high is not None and math.isfinite(point.ci_high):
        text += f" ±{format_number(point.ci_high - point.mean)}"
    text += f" ({point.n})"
    if step is None:
        return Text(text)
    bad = found.is_bad(step)
    marker = "▼ " if step.after_mean < step.before_mean else "▲ "
    return Text(marker + text, style="bold red" if bad else ("green" if bad is False else "bold"))


def throughput_of(runs: list[RunInput]) -> str:
    """The first throughput measure the runs have (a hardware test has no tps)."""
    columns = {c for run in runs for c in run.results.columns}
    return next((m.name for m in throughput_metrics() if m.name in columns), "tps")
