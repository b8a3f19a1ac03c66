"""``dbrig compare``: baseline versus candidate, with a verdict per cell and metric."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from dbrig.analysis import compare
from dbrig.analysis.explain import DEFAULT_ROWS, LESS, MORE, Rules
from dbrig.analysis.multiplicity import CORRECTIONS
from dbrig.commands._common import (
    ALPHA,
    CI_JSON_HELP,
    PERCENT,
    load_run_input,
    write_ci_json,
    write_output,
)
from dbrig.commands.completion import complete_run_dir
from dbrig.commands.console import err_console, out_console, print_line
from dbrig.errors import EXIT_CELLS_FAILED, ConfigError
from dbrig.report import ci_json, compare_explain, measurement_caveats
from dbrig.report import compare_text as output
from dbrig.report.explain_inputs import SavedSide, digests_kept, explain_report

_STYLES = {
    "worse": "bold red",
    "better": "green",
    "failed": "bold magenta",
    "incomparable": "yellow",
    "changed": "cyan",
    "inconclusive": "dim",
    "insufficient data": "dim",
}

_CHANGE_STYLES = {MORE: "red", LESS: "blue"}

_OUTPUT = click.Path(path_type=Path, dir_okay=False)


@click.command("compare")
@click.argument(
    "runs",
    nargs=-1,
    required=True,
    metavar="BASE_RUN [CAND_RUN]",
    type=click.Path(path_type=Path),
    shell_complete=complete_run_dir,
)
@click.option("--by", metavar="FACTOR", help="Compare two groups of one RUN split on FACTOR.")
@click.option("--baseline", metavar="VALUE", help="With --by: the FACTOR value to compare against.")
@click.option(
    "--threshold",
    type=PERCENT,
    default="5%",
    show_default=True,
    help="Smallest change that counts as better or worse.",
)
@click.option("--alpha", type=ALPHA, default=0.05, show_default=True, help="Significance level.")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="Metric column to compare (repeat, or comma-separate). Default: the headline metrics.",
)
@click.option(
    "--correction",
    type=click.Choice(CORRECTIONS),
    default="holm",
    show_default=True,
    help="Hold the error rate over all comparisons (holm), or decide each alone (none).",
)
@click.option(
    "--primary",
    metavar="NAME",
    help="Metric given half of alpha across cells (default: the first compared, e.g. tps).",
)
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when any verdict is worse.")
@click.option(
    "--allow-env-diff",
    is_flag=True,
    help="Give verdicts even when the environments differ (the differences are still listed).",
)
@click.option("--junit", type=_OUTPUT, help="Write JUnit XML (a testcase per cell and metric).")
@click.option("--markdown", type=_OUTPUT, help="Write Markdown (for a PR comment).")
@click.option("--json", "json_path", type=_OUTPUT, help="Write the full comparison as JSON.")
@click.option("--html", type=_OUTPUT, help="Write a self-contained HTML page.")
@click.option("--ci-json", "ci_targets", multiple=True, metavar="FORMAT=PATH", help=CI_JSON_HELP)
@click.option(
    "--explain-rows",
    type=click.IntRange(min=0),
    default=DEFAULT_ROWS,
    show_default=True,
    metavar="N",
    help="Rows of each 'why' table (functions, wait events, statements whose share or time "
    "per transaction changed most), where both sides have profiles or internals; 0: none.",
)
@click.option(
    "--explain-dir",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Write each cell pair's differential flame graph there as a standalone .svg "
    "(--html puts them in the page).",
)
def compare_command(
    runs: tuple[Path, ...],
    by: str | None,
    baseline: str | None,
    threshold: float,
    alpha: float,
    metrics: tuple[str, ...],
    correction: str,
    primary: str | None,
    fail_on_regression: bool,
    allow_env_diff: bool,
    junit: Path | None,
    markdown: Path | None,
    json_path: Path | None,
    html: Path | None,
    ci_targets: tuple[str, ...] = (),
    explain_rows: int = DEFAULT_ROWS,
    explain_dir: Path | None = None,
) -> None:
    """Compare BASE_RUN with CAND_RUN, or two groups of one RUN with --by FACTOR.

    \b
    dbrig compare BASE_RUN CAND_RUN [--threshold 5%] [--fail-on-regression]
    dbrig compare RUN --by server [--baseline VALUE]

    Where the trials saved CPU profiles or server internals (sampling.profile,
    sampling.internals), tables after the verdicts say why: the functions, wait
    events and statements whose share of the CPU or time per transaction changed
    most, with intervals (docs/profiling.md).
    """
    targets = ci_json.parse_targets(ci_targets)
    if explain_dir is not None and explain_rows == 0:
        raise ConfigError("--explain-dir: the explanation is off (--explain-rows 0)")
    report = build_report(
        runs,
        by=by,
        baseline=baseline,
        metrics=_split(metrics),
        threshold=threshold,
        alpha=alpha,
        allow_env_diff=allow_env_diff,
        correction=correction,
        primary=primary,
        explain_rows=explain_rows,
    )
    print_report(report)
    _write_flame_graphs(report, explain_dir, html is not None)
    for path, render, flag in (
        (junit, output.to_junit, "--junit"),
        (markdown, output.to_markdown, "--markdown"),
        (json_path, output.to_json, "--json"),
        (html, output.to_html, "--html"),
    ):
        if path is not None:
            write_output(path, render(report), flag)
    if targets:
        write_ci_json(targets, load_run_input(runs[-1]), verdicts_of(report))
    if fail_on_regression and report.regressions:
        print_line(
            err_console(),
            f"dbrig: {len(report.regressions)} regression(s) beyond "
            f"{100 * threshold:g} %: failing (--fail-on-regression)",
        )
        raise SystemExit(EXIT_CELLS_FAILED)


def build_report(
    runs: Sequence[Path],
    *,
    by: str | None,
    baseline: str | None,
    metrics: Sequence[str],
    threshold: float,
    alpha: float,
    allow_env_diff: bool,
    correction: str = "holm",
    primary: str | None = None,
    explain_rows: int = 0,
) -> compare.CompareReport:
    """Check the arguments, load the runs and compare them (and say why, in up to
    ``explain_rows`` rows a table, when the trials saved profiles or internals)."""
    rules = Rules(alpha, threshold, correction, explain_rows)
    options = {
        "metrics": metrics,
        "threshold": threshold,
        "alpha": alpha,
        "allow_env_diff": allow_env_diff,
        "correction": correction,
        "primary": primary,
    }
    if by is not None:
        if len(runs) != 1:
            raise ConfigError(f"compare --by {by}: give exactly one RUN (got {len(runs)})")
        run = load_run_input(runs[0])
        report = compare.compare_groups(run, by, baseline, **options)
        side = SavedSide(runs[0], run.results, digests_kept(run.meta))
        report = _explained(report, side, side, rules)
        return _with_caveats(report, [(run.label, runs[0])])
    if baseline is not None:
        raise ConfigError("--baseline: only with --by FACTOR")
    if len(runs) != 2:
        raise ConfigError(
            f"compare: give BASE_RUN and CAND_RUN (got {len(runs)} runs), or one RUN with --by"
        )
    base_path, cand_path = runs
    same_name = base_path.name == cand_path.name
    base = load_run_input(base_path, str(base_path) if same_name else None)
    cand = load_run_input(cand_path, str(cand_path) if same_name else None)
    report = compare.compare_runs(base, cand, **options)
    sides = (
        SavedSide(base_path, base.results, digests_kept(base.meta)),
        SavedSide(cand_path, cand.results, digests_kept(cand.meta)),
    )
    report = _explained(report, *sides, rules)
    labels = [(f"baseline {base.label}", base_path), (f"candidate {cand.label}", cand_path)]
    return _with_caveats(report, labels)


def _explained(
    report: compare.CompareReport, base: SavedSide, cand: SavedSide, rules: Rules
) -> compare.CompareReport:
    if rules.rows == 0:
        return report
    return dataclasses.replace(report, explanations=explain_report(report, base, cand, rules))


def _write_flame_graphs(report: compare.CompareReport, folder: Path | None, html: bool) -> None:
    """Each pair's differential flame graph as an .svg file in ``folder``, or a line
    saying where to get them."""
    files = compare_explain.svg_files(report) if folder is not None else []
    if folder is None:
        if not html and any(e.has_profiles for e in report.explanations):
            print_line(
                out_console(),
                "differential flame graphs: --explain-dir DIR writes them as .svg files, "
                "--html FILE puts them in the page",
            )
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = exc.strerror or exc
        raise ConfigError(f"--explain-dir {folder}: cannot create ({why})") from None
    for name, svg in files:
        write_output(folder / name, svg, "--explain-dir")
        print_line(out_console(), f"differential flame graph: {folder / name}")
    if not files:
        print_line(out_console(), "--explain-dir: no cell pair has CPU profiles on both sides")


def verdicts_of(report: compare.CompareReport) -> dict[tuple[str, str], str]:
    """(cell, metric) -> e.g. "worse (-12.3 %) vs base-run", for a two-run comparison
    (with --by a row's cell leaves the split factor out, so it names no cell of the run)."""
    if report.by is not None:
        return {}
    found = {}
    for row in report.rows:
        delta = row.stats.delta_pct
        shown = "" if delta is None else f" ({delta:+.1f} %)"
        found[(row.label, row.metric)] = f"{row.verdict}{shown} vs {report.baseline}"
    return found


def _with_caveats(
    report: compare.CompareReport, sides: Sequence[tuple[str, Path]]
) -> compare.CompareReport:
    """The report with each side's warnings about how the host disturbed it."""
    caveats = [f"{side}: {line}" for side, path in sides for line in measurement_caveats(path)]
    return dataclasses.replace(report, caveats=tuple(caveats))


def _split(metrics: Sequence[str]) -> list[str]:
    return [name.strip() for item in metrics for name in item.split(",") if name.strip()]


def print_report(report: compare.CompareReport) -> None:
    console = out_console()
    sides = f"{report.baseline} → {', '.join(report.candidates)}"
    table = Table(title=f"{sides}: candidate versus baseline (mean over repetitions)")
    headings = output.table_headings(report)
    for heading in headings:
        numeric = heading not in ("candidate group", "cell", "metric", "verdict")
        table.add_column(heading, justify="right" if numeric else "left", overflow="fold")
    previous = None
    for row, cells in zip(report.rows, output.table_rows(report), strict=True):
        group = (row.candidate, row.label)
        if previous is not None and group != previous:
            table.add_section()
        previous = group
        texts = [Text(c) for c in cells]
        texts[-1].stylize(_STYLES.get(row.verdict, ""))
        table.add_row(*texts)
    console.print(table)
    print_explanations(report)
    for diff in report.differences:
        style = "" if diff.explained_by or report.allow_env_diff else "yellow"
        print_line(console, "environment: " + output.difference_line(diff), style)
    for caveat in report.caveats:
        print_line(console, "caveat: " + caveat, "yellow")
    if report.unexplained and not report.allow_env_diff:
        print_line(
            console,
            "environments differ (see above): rows are incomparable; "
            "--allow-env-diff gives verdicts anyway",
            "yellow",
        )
    for label in report.only_baseline:
        print_line(console, f"only in baseline (not compared): {label}")
    for label in report.only_candidate:
        print_line(console, f"only in candidate (not compared): {label}")
    for metric, note in output.metric_notes(report).items():
        print_line(console, f"noise: {metric}: {note}")
    print_line(console, output.summary_line(report), "bold")


def print_explanations(report: compare.CompareReport) -> None:
    """The 'why' tables: per matched pair, what moved in its profiles and internals."""
    console = out_console()
    for explanation, table in compare_explain.tables_of(report):
        heads = compare_explain.headings(report, explanation, table)
        print_line(console, compare_explain.caption(report, explanation, table), "bold")
        rich = Table()
        for i, heading in enumerate(heads):
            justify = "left" if i in (0, len(heads) - 1) else "right"
            rich.add_column(heading, justify=justify, overflow="fold")
        for cells in compare_explain.rows(table):
            texts = [Text(c) for c in cells]
            texts[-1].stylize(_CHANGE_STYLES.get(cells[-1], ""))
            rich.add_row(*texts)
        console.print(rich)
        for note in table.notes:
            print_line(console, f"note: {note}", "dim")
    for explanation in report.explanations:
        for note in compare_explain.pair_notes(explanation):
            print_line(console, f"note: {note}", "dim")
