"""``dbrig report``: report.html, plots/*.png and results_by_cell.csv for a saved run."""

from __future__ import annotations

from pathlib import Path

import click

from dbrig import store
from dbrig.commands._common import print_warnings
from dbrig.commands.completion import complete_run_dir
from dbrig.commands.console import out_console, print_line
from dbrig.report import run_warnings, write_report


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path), shell_complete=complete_run_dir)
@click.option(
    "--cell-figures",
    type=click.IntRange(0, 1000),
    default=8,
    show_default=True,
    help="Per-cell time-series figures to draw (the first N cells).",
)
def report_command(run_dir: Path, cell_figures: int) -> None:
    """Write report.html, plots/*.png and results_by_cell.csv for a saved run."""
    page = write_report(store.RunDir.open(run_dir).path, max_cell_figures=cell_figures)
    print_warnings(run_warnings(run_dir))
    print_line(out_console(), f"report: {page}")
