"""How compare's explanation (``analysis/explain.py``) is written: the tables as text
for the terminal, Markdown and HTML, the JSON entry, and the differential flame graphs'
file names. Pure: the caller prints and writes.

Each table names its rows (functions, wait events, statements) with their mean in each
group, the baseline's column headed by its name and the candidate's by its own, so
``compare RUN --by FACTOR`` reads "function, FACTOR=a, FACTOR=b, change".
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from typing import Any

from dbrig.analysis.compare import CompareReport
from dbrig.analysis.explain import SELF, TOTAL, CellExplanation, Change, ChangeTable
from dbrig.report.compare_format import format_number, format_p
from dbrig.report.diff_flamegraph import render_diff_svg

NAME_CHARS = 90  # a longer name is cut in the text tables (the JSON keeps it whole)
_ROW_NAMES = {SELF: "function", TOTAL: "function", "waits": "wait event", "digests": "statement"}


def caption(report: CompareReport, explanation: CellExplanation, table: ChangeTable) -> str:
    """e.g. "why, threads=1: CPU functions by self share (% of samples), 3/3 trials"."""
    sides = f"{report.baseline} → {explanation.candidate}"
    tested = f"{table.tested} of {table.seen} tested"
    return (
        f"why, {explanation.label} ({sides}): {table.title} ({table.unit}), "
        f"{table.n_base}/{table.n_cand} trials, {tested}"
    )


def headings(report: CompareReport, explanation: CellExplanation, table: ChangeTable) -> list[str]:
    points = "Δ points" if table.kind in (SELF, TOTAL) else "Δ"
    p = "q (BH)" if report.correction != "none" and table.tested > 1 else "p"
    name = _ROW_NAMES[table.kind]
    if table.kind == "digests":
        name = "statement (schema)"
    return [name, report.baseline, explanation.candidate, points, "95 % CI of Δ", p, "n", "change"]


def short(name: str, limit: int = NAME_CHARS) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _name(row: Change, limit: int | None) -> str:
    text = row.name if limit is None else short(row.name, limit)
    return f"{text} ({row.where})" if row.where else text


def _signed(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return "+" + format_number(value) if value >= 0 else format_number(value)


def _interval(row: Change) -> str:
    s = row.stats
    if s.ci_low is None or s.ci_high is None:
        return "-"
    return f"[{_signed(s.ci_low)}, {_signed(s.ci_high)}]"


def rows(table: ChangeTable, limit: int | None = NAME_CHARS) -> list[list[str]]:
    """The table as strings, columns as :func:`headings`."""
    return [
        [
            _name(row, limit),
            format_number(row.stats.mean_base),
            format_number(row.stats.mean_cand),
            _signed(row.stats.delta),
            _interval(row),
            format_p(row.p_adjusted),  # a row outside the tested family has none: "-"
            f"{row.stats.n_base}/{row.stats.n_cand}",
            row.verdict,
        ]
        for row in table.rows
    ]


# --------------------------------------------------------------------------- files


def svg_name(explanation: CellExplanation, taken: set[str]) -> str:
    """A file name for a pair's differential flame graph, unique among ``taken``."""
    stem = re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{explanation.candidate}-{explanation.label}")
    name, n = f"diff-{stem.strip('_')}.svg", 2
    while name in taken:
        name, n = f"diff-{stem.strip('_')}-{n}.svg", n + 1
    taken.add(name)
    return name


def svg_title(report: CompareReport, explanation: CellExplanation) -> str:
    return (
        f"{explanation.label}: {explanation.candidate} (widths) against {report.baseline} "
        f"(cells {explanation.cand_cell} / {explanation.base_cell})"
    )


def svg_files(report: CompareReport) -> list[tuple[str, str]]:
    """(file name, standalone SVG) per pair with profiles on both sides."""
    taken: set[str] = set()
    return [
        (
            svg_name(e, taken),
            render_diff_svg(
                e.base_stacks,
                e.cand_stacks,
                f"diff-{i}",
                svg_title(report, e),
                standalone=True,
            ),
        )
        for i, e in enumerate(x for x in report.explanations if x.has_profiles)
    ]


# --------------------------------------------------------------------------- JSON


def explanations_dict(report: CompareReport) -> list[dict[str, Any]]:
    """The explanations as JSON-ready data (every row shown, names whole)."""
    return [
        {
            "candidate": e.candidate,
            "label": e.label,
            "baseline_cell": e.base_cell,
            "candidate_cell": e.cand_cell,
            "tables": [_table_dict(t) for t in e.tables],
            "notes": list(e.notes),
        }
        for e in report.explanations
    ]


def _table_dict(table: ChangeTable) -> dict[str, Any]:
    return {
        "kind": table.kind,
        "title": table.title,
        "unit": table.unit,
        "trials_baseline": table.n_base,
        "trials_candidate": table.n_cand,
        "rows_seen": table.seen,
        "rows_tested": table.tested,
        "notes": list(table.notes),
        "rows": [
            {
                "name": r.name,
                "schema": r.where or None,
                "mean_baseline": r.stats.mean_base,
                "mean_candidate": r.stats.mean_cand,
                "delta": r.stats.delta,
                "ci_low": r.stats.ci_low,
                "ci_high": r.stats.ci_high,
                "p_value": r.stats.p_value,
                "p_adjusted": r.p_adjusted,
                "n_baseline": r.stats.n_base,
                "n_candidate": r.stats.n_cand,
                "change": r.verdict,
                "reason": r.stats.reason,
            }
            for r in table.rows
        ],
    }


# --------------------------------------------------------------------------- Markdown


def markdown_lines(report: CompareReport) -> list[str]:
    """A collapsed "Why" block per pair (nothing without explanations)."""
    lines: list[str] = []
    for e in report.explanations:
        lines += [f"<details><summary>Why: {_md(e.label)} ({_md(e.candidate)})</summary>", ""]
        for table in e.tables:
            heads = headings(report, e, table)
            lines += [f"**{_md(caption(report, e, table))}**", ""]
            lines += ["| " + " | ".join(_md(h) for h in heads) + " |", "|" + "---|" * len(heads)]
            lines += ["| " + " | ".join(_md(c) for c in cells) + " |" for cells in rows(table)]
            lines += [*(f"- {_md(n)}" for n in table.notes), ""]
        if e.notes:
            lines += [*(f"- {_md(n)}" for n in e.notes), ""]
        lines += ["</details>", ""]
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


# --------------------------------------------------------------------------- HTML


def html_parts(report: CompareReport) -> list[str]:
    """The "Why" section: per pair its tables and, with profiles, its differential
    flame graph inline."""
    if not report.explanations:
        return []
    parts = ["<h2>Why: CPU profiles and server internals, baseline versus candidate</h2>"]
    for i, e in enumerate(report.explanations):
        parts.append(f"<h3>{_h(e.label)} ({_h(e.candidate)} against {_h(report.baseline)})</h3>")
        if e.has_profiles:
            parts.append(
                render_diff_svg(e.base_stacks, e.cand_stacks, f"diff-{i}", svg_title(report, e))
            )
        parts += [_html_table(report, e, t) for t in e.tables]
        parts += [f'<p class="note">{_h(n)}</p>' for n in e.notes]
    return parts


def _html_table(report: CompareReport, e: CellExplanation, table: ChangeTable) -> str:
    heads = headings(report, e, table)
    out = [f'<p class="note">{_h(caption(report, e, table))}</p><table>']
    out.append("<tr>" + "".join(f'<th class="l">{_h(h)}</th>' for h in heads) + "</tr>")
    for cells in rows(table, None):
        tds = [f'<td class="l">{_h(cells[0])}</td>']
        tds += [f"<td>{_h(c)}</td>" for c in cells[1:-1]]
        tds.append(f'<td class="l">{_h(cells[-1])}</td>')
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</table>")
    out += [f'<p class="note">{_h(n)}</p>' for n in table.notes]
    return "\n".join(out)


def _h(text: Any) -> str:
    return html.escape(str(text))


def tables_of(report: CompareReport) -> Sequence[tuple[CellExplanation, ChangeTable]]:
    """Every (pair, table) in order, as the terminal prints them."""
    return [(e, t) for e in report.explanations for t in e.tables]


def pair_notes(explanation: CellExplanation) -> list[str]:
    """The pair's notes that belong to no table, e.g. "why, threads=1: c000-r1/..."."""
    return [f"why, {explanation.label}: {n}" for n in explanation.notes]
