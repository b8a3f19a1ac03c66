"""Renderings of a compare report (dbrig.analysis.compare): text, JSON, Markdown, JUnit, HTML.

Pure: each function returns a string or plain data; the caller writes files.

* :func:`to_json`: every row with every number (NaN and inf as null).
* :func:`to_markdown`: a PR comment: summary, regressions, environment
  differences, a noise line per metric, then every row (at most
  :data:`MARKDOWN_ROWS`) in a collapsed block.
* :func:`to_junit`: a testsuite per candidate and a testcase per cell x metric;
  worse is a <failure>, failed an <error>, incomparable and insufficient data
  are <skipped>.
* :func:`to_html`: one self-contained page (inline CSS, inline SVG), a chart of
  each metric's changes with their 95 % intervals and the full table.
"""

from __future__ import annotations

import html
import json
import math
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from typing import Any

from dbrig.analysis.compare import CompareReport, EnvDifference, Row
from dbrig.analysis.multiplicity import PRIMARY_SHARE
from dbrig.analysis.stats import explain
from dbrig.metrics import metric as registry_entry
from dbrig.report import compare_explain
from dbrig.report.compare_format import (
    format_ci,
    format_delta,
    format_mde,
    format_n,
    format_number,
    format_p,
)

# --------------------------------------------------------------------------- text helpers


def metric_notes(report: CompareReport) -> dict[str, str]:
    """One line per metric on the noise: the least resolving cell's stats.explain."""
    notes = {}
    for metric in report.metrics:
        rows = [r for r in report.rows if r.metric == metric]
        tested = [r for r in rows if r.stats.mde_pct is not None and r.stats.reason is None]
        if not tested:
            reasons = Counter(r.note for r in rows)
            notes[metric] = "; ".join(f"{text} ({n} cells)" for text, n in reasons.items())
            continue
        worst = max(tested, key=lambda r: r.stats.mde_pct or 0.0)
        text = explain(worst.stats, report.threshold)
        if len(tested) > 1:
            where = worst.label
            if len(report.candidates) > 1:
                where += f" versus {worst.candidate}"
            text += f" (least resolved of {len(tested)} cells: {where})"
        notes[metric] = text
    return notes


def summary_line(report: CompareReport) -> str:
    counts = ", ".join(f"{n} {verdict}" for verdict, n in report.counts().items())
    return f"{counts} ({correction_text(report)}, threshold {_pct(report.threshold)})"


def correction_text(report: CompareReport) -> str:
    """e.g. "50 comparisons, error rate held by Holm over all 50 (half of alpha on tps)"."""
    rows = f"{len(report.rows)} comparisons"
    if report.correction == "none" or report.comparisons <= 1:
        return f"{rows}, each at alpha {report.alpha:g} alone" if report.comparisons > 1 else rows
    share = ""
    if any(r.metric != report.primary for r in report.rows if r.p_adjusted is not None):
        share = f", half of alpha on {report.primary}"
    return f"{rows}, Holm over the {report.comparisons} tested{share}"


def shown_p(row: Row) -> float | None:
    """The p the verdict rests on: family-adjusted when the row was in the family."""
    return row.p_adjusted if row.p_adjusted is not None else row.stats.p_value


def p_heading(report: CompareReport) -> str:
    return "p (Holm)" if report.correction == "holm" and report.comparisons > 1 else "p"


def _pct(fraction: float) -> str:
    return f"{100 * fraction:g} %"


def difference_line(diff: EnvDifference) -> str:
    """e.g. "server default version: 10.11.19 -> 10.11.20 (explained by server)"."""
    what = diff.what
    if diff.server:
        what = f"server {diff.server} {what.removeprefix('server ')}"
    why = f" (explained by {diff.explained_by})" if diff.explained_by else ""
    return f"{what}: {diff.base or '(none)'} -> {diff.candidate or '(none)'}{why}"


_NUMBER_COLUMNS = 7  # baseline, candidate, delta, CI, p, n, MDE


def table_headings(report: CompareReport) -> list[str]:
    heads = [
        "cell",
        "metric",
        "baseline",
        "candidate",
        "Δ",
        "95 % CI of Δ",
        p_heading(report),
        "n",
        "MDE",
    ]
    return [*(["candidate group"] if len(report.candidates) > 1 else []), *heads, "verdict"]


def table_rows(report: CompareReport, rows: Sequence[Row] | None = None) -> list[list[str]]:
    """The comparison table as strings, columns as :func:`table_headings`."""
    multi = len(report.candidates) > 1
    return [
        [
            *([r.candidate] if multi else []),
            r.label,
            r.metric,
            format_number(r.stats.mean_base),
            format_number(r.stats.mean_cand),
            format_delta(r.stats.delta_pct),
            format_ci(r.stats),
            format_p(shown_p(r)),
            format_n(r),
            format_mde(r.stats.mde_pct),
            r.verdict,
        ]
        for r in (report.rows if rows is None else rows)
    ]


# --------------------------------------------------------------------------- JSON


def report_dict(report: CompareReport) -> dict[str, Any]:
    """The report as JSON-ready data (NaN and inf become null)."""
    return _clean(
        {
            "baseline": report.baseline,
            "candidates": list(report.candidates),
            "by": report.by,
            "factors": list(report.factors),
            "metrics": list(report.metrics),
            "threshold": report.threshold,
            "alpha": report.alpha,
            "correction": {
                "method": report.correction,
                "comparisons": report.comparisons,
                "primary": report.primary,
                "primary_share_of_alpha": PRIMARY_SHARE,
                "tests": dict(report.tests),
            },
            "summary": report.counts(),
            "environment": {
                "allowed": report.allow_env_diff,
                "differences": [
                    {
                        "what": d.what,
                        "server": d.server,
                        "baseline": d.base,
                        "candidate": d.candidate,
                        "explained_by": d.explained_by,
                    }
                    for d in report.differences
                ],
            },
            "caveats": list(report.caveats),
            "only_baseline": list(report.only_baseline),
            "only_candidate": list(report.only_candidate),
            "noise": metric_notes(report),
            "rows": [_row_dict(r) for r in report.rows],
            "explanations": compare_explain.explanations_dict(report),
        }
    )


def _row_dict(row: Row) -> dict[str, Any]:
    s = row.stats
    return {
        "candidate": row.candidate,
        "cell": dict(row.cell),
        "label": row.label,
        "baseline_cell": row.base_cell,
        "candidate_cell": row.cand_cell,
        "metric": row.metric,
        "unit": _unit(row.metric),
        "direction": row.direction,
        "verdict": row.verdict,
        "mean_baseline": s.mean_base,
        "mean_candidate": s.mean_cand,
        "delta_pct": s.delta_pct,
        "ci_low_pct": s.ci_low_pct,
        "ci_high_pct": s.ci_high_pct,
        "p_value": s.p_value,
        "p_test": row.p_value,
        "p_adjusted": row.p_adjusted,
        "n_baseline": s.n_base,
        "n_candidate": s.n_cand,
        "trials_baseline": row.trials_base,
        "trials_candidate": row.trials_cand,
        "cv": s.cv,
        "mde_pct": s.mde_pct,
        "n_needed": s.n_needed,
        "stats_verdict": s.verdict,
        "note": row.note,
    }


def _unit(name: str) -> str:
    """The unit of the row's means, as saved in results.csv (``0..1`` for a fraction the
    terminal and the report show as a percentage); empty for a column not in the registry."""
    entry = registry_entry(name)
    return entry.unit if entry is not None else ""


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(report: CompareReport) -> str:
    return json.dumps(report_dict(report), indent=2) + "\n"


# --------------------------------------------------------------------------- Markdown


# A GitHub comment holds at most 65536 characters; a table row takes about 150.
MARKDOWN_ROWS = 300
CAVEATS_HEADING = "Measurement caveats (the host disturbed a side: weigh its verdicts)"

_MARK = {"worse": "🔴", "better": "🟢", "failed": "❌", "incomparable": "⚠️", "changed": "🔵"}


def to_markdown(report: CompareReport) -> str:
    """A PR comment: verdict summary, regressions, environment, noise, full table."""
    sides = f"`{report.baseline}` → {', '.join(f'`{c}`' for c in report.candidates)}"
    lines = [f"### dbrig compare: {sides}", "", f"**{summary_line(report)}**", ""]
    if report.regressions:
        lines += ["#### Regressions", "", *_md_table(report, report.regressions), ""]
    if report.differences:
        lines += [_env_heading(report), ""]
        lines += [f"- {_md_escape(difference_line(d))}" for d in report.differences]
        lines.append("")
    if report.caveats:
        lines += [f"#### {CAVEATS_HEADING}", ""]
        lines += [f"- {_md_escape(c)}" for c in report.caveats]
        lines.append("")
    unmatched = [*report.only_baseline, *report.only_candidate]
    if unmatched:
        lines += [
            f"Not compared (in one side only): {_md_escape(', '.join(unmatched))}",
            "",
        ]
    lines += ["#### Noise", ""]
    lines += [f"- `{m}`: {_md_escape(t)}" for m, t in metric_notes(report).items()]
    shown = report.rows[:MARKDOWN_ROWS]
    lines += ["", f"<details><summary>All comparisons ({len(report.rows)})</summary>", ""]
    lines += _md_table(report, shown)
    if len(shown) < len(report.rows):
        lines += ["", f"({len(report.rows) - len(shown)} more rows in the JSON or HTML output)"]
    lines += ["", "</details>", "", *compare_explain.markdown_lines(report)]
    return "\n".join(lines)


def _env_heading(report: CompareReport) -> str:
    if not report.unexplained:
        return "#### Environment differences (all explained)"
    if report.allow_env_diff:
        return "#### Environment differences (allowed with --allow-env-diff)"
    return "#### Environment differences (rows marked incomparable)"


def _md_table(report: CompareReport, rows: Sequence[Row]) -> list[str]:
    heads = table_headings(report)
    body = []
    for cells in table_rows(report, rows):
        verdict = cells[-1]
        cells[-1] = f"{_MARK.get(verdict, '')} {verdict}".strip()
        body.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    return ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads), *body]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


# --------------------------------------------------------------------------- JUnit


def to_junit(report: CompareReport) -> str:
    """JUnit XML: a testsuite per candidate, a testcase per cell x metric.

    worse -> <failure>, failed -> <error>, incomparable and insufficient data
    -> <skipped>; the rest pass, with the note in <system-out>.
    """
    root = ET.Element("testsuites", name="dbrig compare")
    for candidate in report.candidates:
        rows = [r for r in report.rows if r.candidate == candidate]
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"{report.baseline} vs {candidate}",
            tests=str(len(rows)),
            failures=str(sum(r.verdict == "worse" for r in rows)),
            errors=str(sum(r.verdict == "failed" for r in rows)),
            skipped=str(sum(r.verdict in ("incomparable", "insufficient data") for r in rows)),
        )
        props = ET.SubElement(suite, "properties")
        for name, value in (
            ("threshold", report.threshold),
            ("alpha", report.alpha),
            ("correction", report.correction),
            ("comparisons", report.comparisons),
        ):
            ET.SubElement(props, "property", name=name, value=str(value))
        for row in rows:
            _junit_case(suite, row)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _junit_case(suite: ET.Element, row: Row) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"dbrig.compare.{row.metric}", name=row.label)
    summary = (
        f"{row.metric} {row.verdict}: {format_number(row.stats.mean_base)} -> "
        f"{format_number(row.stats.mean_cand)} ({format_delta(row.stats.delta_pct)}, "
        f"95 % CI {format_ci(row.stats)}, p {format_p(shown_p(row))}, n {format_n(row)})"
    )
    if row.verdict == "worse":
        ET.SubElement(case, "failure", message=summary, type="regression").text = row.note
    elif row.verdict == "failed":
        ET.SubElement(case, "error", message=row.note, type="failed")
    elif row.verdict in ("incomparable", "insufficient data"):
        ET.SubElement(case, "skipped", message=row.note)
    ET.SubElement(case, "system-out").text = f"{summary}\n{row.note}"


# --------------------------------------------------------------------------- HTML

_COLORS = {
    "worse": "#c62828",
    "better": "#2e7d32",
    "failed": "#6a1b9a",
    "incomparable": "#ef6c00",
    "changed": "#1565c0",
    "inconclusive": "#757575",
    "insufficient data": "#9e9e9e",
    "unchanged": "#455a64",
}

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.v{color:#fff;border-radius:3px;padding:1px 6px;white-space:nowrap}
.note{color:#555;font-size:.9em}svg text{font:11px system-ui,sans-serif}
"""


def to_html(report: CompareReport) -> str:
    """A self-contained page: summary, environment, a Δ chart per metric, the table."""
    title = f"dbrig compare: {report.baseline} → {', '.join(report.candidates)}"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_h(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_h(title)}</h1>",
        f"<p><b>{_h(summary_line(report))}</b>, alpha {report.alpha:g}</p>",
    ]
    if report.differences:
        parts.append(f"<h2>{_h(_env_heading(report).removeprefix('#### '))}</h2><ul>")
        parts += [f"<li>{_h(difference_line(d))}</li>" for d in report.differences]
        parts.append("</ul>")
    if report.caveats:
        parts.append(f"<h2>{_h(CAVEATS_HEADING)}</h2><ul>")
        parts += [f"<li>{_h(c)}</li>" for c in report.caveats]
        parts.append("</ul>")
    for metric in report.metrics:
        rows = [r for r in report.rows if r.metric == metric]
        parts.append(f"<h2>{_h(metric)}</h2>")
        parts.append(f'<p class="note">{_h(metric_notes(report)[metric])}</p>')
        parts.append(_delta_chart(rows, report.threshold))
    parts += compare_explain.html_parts(report)
    parts.append("<h2>All comparisons</h2>")
    parts.append(_html_table(report))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _h(text: Any) -> str:
    return html.escape(str(text))


def _html_table(report: CompareReport) -> str:
    heads = table_headings(report)
    text_columns = len(heads) - _NUMBER_COLUMNS - 1
    left = ' class="l"'

    def align(i: int) -> str:
        return left if i < text_columns or i == len(heads) - 1 else ""

    header = "".join(f"<th{align(i)}>{_h(h)}</th>" for i, h in enumerate(heads))
    out = [f"<table><tr>{header}</tr>"]
    for row, cells in zip(report.rows, table_rows(report), strict=True):
        tds = [f"<td{align(i)}>{_h(text)}</td>" for i, text in enumerate(cells[:-1])]
        color = _COLORS.get(row.verdict, "#555")
        badge = f'<span class="v" style="background:{color}">{_h(row.verdict)}</span>'
        tds.append(f'<td class="l" title="{_h(row.note)}">{badge}</td>')
        out.append("<tr>" + "".join(tds) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _delta_chart(rows: Sequence[Row], threshold: float) -> str:
    """An SVG forest plot: each row's Δ % with its CI, the ±threshold band shaded."""
    span = _chart_span(rows, threshold)
    left, width, line = 260, 460, 22
    height = line * len(rows) + 30

    def x(pct: float) -> float:
        return left + (max(-span, min(span, pct)) + span) / (2 * span) * width

    band = 100 * threshold
    parts = [
        f'<svg width="{left + width + 120}" height="{height}" role="img">',
        f'<rect x="{x(-band):.1f}" y="0" width="{x(band) - x(-band):.1f}" '
        f'height="{height - 24}" fill="#eee"/>',
        f'<line x1="{x(0):.1f}" y1="0" x2="{x(0):.1f}" y2="{height - 24}" stroke="#999"/>',
    ]
    for i, row in enumerate(rows):
        y = line * i + line / 2
        color = _COLORS.get(row.verdict, "#555")
        label = row.label if len(row.label) <= 40 else row.label[:39] + "…"
        parts.append(f'<text x="{left - 8}" y="{y + 4:.0f}" text-anchor="end">{_h(label)}</text>')
        s = row.stats
        if s.delta_pct is not None and math.isfinite(s.delta_pct):
            # a row without a test (both sides constant) has no interval: only its point
            if s.p_value is not None:
                low = s.ci_low_pct if s.ci_low_pct is not None else -span
                high = s.ci_high_pct if s.ci_high_pct is not None else span
                parts.append(
                    f'<line x1="{x(low):.1f}" y1="{y:.0f}" x2="{x(high):.1f}" y2="{y:.0f}" '
                    f'stroke="{color}" stroke-width="2"/>'
                )
            parts.append(f'<circle cx="{x(s.delta_pct):.1f}" cy="{y:.0f}" r="4" fill="{color}"/>')
        parts.append(
            f'<text x="{left + width + 8}" y="{y + 4:.0f}" fill="{color}">{_h(row.verdict)}</text>'
        )
    axis_y = height - 8
    ticks = (-span, -band, 0.0, band, span) if x(band) - x(0) > 30 else (-span, 0.0, span)
    for pct in ticks:
        parts.append(
            f'<text x="{x(pct):.1f}" y="{axis_y}" text-anchor="middle">{pct:+.0f} %</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _chart_span(rows: Sequence[Row], threshold: float) -> float:
    ends = [
        abs(v)
        for r in rows
        for v in (r.stats.delta_pct, r.stats.ci_low_pct, r.stats.ci_high_pct)
        if v is not None and math.isfinite(v)
    ]
    widest = max([200 * threshold, *ends])
    return float(min(100.0, math.ceil(widest / 10) * 10)) if widest > 10 else 10.0
