"""What the commands share: consoles, one-line output, opening saved runs, percent flags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import click
import pandas as pd

from dbrig import store
from dbrig.analysis import cells
from dbrig.analysis.compare import RunInput
from dbrig.commands.console import err_console, print_line
from dbrig.errors import ConfigError
from dbrig.report import ci_json
from dbrig.report.warnings import RunWarning


def print_warnings(warnings: Sequence[RunWarning]) -> None:
    console = err_console()
    for warning in warnings:
        print_line(console, f"warning: {warning.message}")


def load_run_input(path: Path, label: str | None = None) -> RunInput:
    """A complete saved run; ConfigError (exit 2) for anything else.

    Refused: a missing directory or run.json, a newer format_version, a run
    whose status is not "complete" (still running, interrupted or crashed),
    and a run with no trial results.
    """
    run = store.RunDir.open(path)
    saved = run.saved()
    status = saved.status
    if status != "complete":
        raise ConfigError(
            f"{path}: the run is {status or 'of unknown status'}, not complete "
            f"(finish it with: dbrig run --resume {path})"
        )
    try:
        results = run.results()
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path / 'results.csv'}: unreadable ({exc})") from None
    if results.empty or "cell" not in results:
        raise ConfigError(f"{path}: no trial results saved")
    return RunInput(label or path.name, saved.to_json(), results)


def write_output(path: Path, text: str, flag: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot write ({exc.strerror or exc})") from None


class Percent(click.ParamType):
    """A fraction given as ``5%``, ``5`` (percent) or ``0.05`` (a fraction below 1)."""

    name = "PERCENT"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            number = float(text.removesuffix("%").strip())
        except ValueError:
            self.fail(f"{value!r} is not a percentage (e.g. 5%)", param, ctx)
        fraction = number / 100 if text.endswith("%") or number >= 1 else number
        if not 0 < fraction < 1:
            self.fail(f"{value!r} must be between 0 and 100 %", param, ctx)
        return fraction


PERCENT = Percent()
ALPHA = click.FloatRange(0, 1, min_open=True, max_open=True)


CI_JSON_HELP = (
    "Also write the headline means for a CI tracker (repeatable): FORMAT=PATH, FORMAT one "
    "of customBiggerIsBetter, customSmallerIsBetter (github-action-benchmark) or bmf "
    "(Bencher)."
)


def write_ci_json(
    targets: Sequence[tuple[str, str]],
    run: RunInput,
    verdicts: Mapping[tuple[str, str], str] | None = None,
) -> None:
    """Each ``--ci-json`` file of one run (see :mod:`dbrig.report.ci_json`)."""
    if not targets:
        return
    values = cells.cell_values(run)
    scenario = str((run.meta.get("scenario") or {}).get("name") or run.label)
    for kind, path in targets:
        text = ci_json.render(kind, scenario, values, verdicts)
        write_output(Path(path), text, "--ci-json")
