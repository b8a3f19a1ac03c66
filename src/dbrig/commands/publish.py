"""``dbrig publish``: a static site of saved runs, a chart per metric and cell over the runs."""

from __future__ import annotations

from pathlib import Path

import click

from dbrig.commands.console import err_console, out_console, print_line
from dbrig.report import site


@click.command("publish")
@click.argument("runs_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="The site's folder: made, or updated when it holds a site already.",
)
def publish_command(runs_dirs: tuple[Path, ...], out: Path) -> None:
    """Add every complete run under RUNS_DIR... to the static site in --out.

    \b
    dbrig publish runs/ --out site/
    Open site/index.html, or serve the folder (GitHub Pages). Runs already in the site
    are kept as they are; only new runs are read, and the pages are rebuilt.
    """
    result = site.publish(
        list(runs_dirs), out, warn=lambda line: print_line(err_console(), f"dbrig: {line}")
    )
    console = out_console()
    print_line(
        console,
        f"published {len(result.added)} new run(s), {result.kept} already there, "
        f"{len(result.scenarios)} scenario(s): {result.site / 'index.html'}",
    )
