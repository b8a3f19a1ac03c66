"""The pages of ``dbrig publish``'s site: an index, and a page per scenario.

Charts are inline SVG written here, not a JavaScript library: a line of per-run
means with their 95 % intervals is a few dozen elements, an SVG ``<a>`` makes each
point a link to its run's report, and the page then needs no bundled code, no
licence to carry and nothing that could be fetched. The only script is a dozen lines
that show the charts the cell and metric filters select. Pure: text in, text out.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dbrig.analysis import history
from dbrig.analysis.history import History, Series, step_line
from dbrig.metrics import Direction, metric
from dbrig.report.compare_text import format_number

WIDTH, HEIGHT = 760, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 22, 58
# As in the run report: at n = 2 the t interval is 12.7 standard errors wide, so a run
# of two repetitions is drawn as its mean alone.
MIN_INTERVAL_N = 3
COLORS = {"worse": "#c0392b", "better": "#1e8449", "unknown": "#7d3c98"}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 64em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
td { vertical-align: top; }
.chart { margin: 1em 0 1.8em; } .chart h3 { font-size: 1em; margin: 0 0 0.3em; }
.steps { margin: 0.2em 0; padding-left: 1.2em; font-size: 0.9em; }
.worse { color: #c0392b; } .better { color: #1e8449; } .changed { color: #1f618d; }
.filters { position: sticky; top: 0; background: #fff; padding: 0.5em 0; }
.filters { border-bottom: 1px solid #ddd; }
.muted { color: #777; } svg a circle:hover { r: 6; }
"""

_FILTER_SCRIPT = """
function dbrigFilter() {
  var cell = document.getElementById('cell').value;
  var metric = document.getElementById('metric').value;
  document.querySelectorAll('figure.chart').forEach(function (f) {
    var shown = (cell === '' || f.dataset.cell === cell) &&
                (metric === '' || f.dataset.metric === metric);
    f.style.display = shown ? '' : 'none';
  });
}
document.getElementById('cell').addEventListener('change', dbrigFilter);
document.getElementById('metric').addEventListener('change', dbrigFilter);
"""


@dataclass(frozen=True)
class RunEntry:
    """One published run as the pages show it."""

    key: str
    created_at: str
    label: str  # --label, else the short commit and branch, else the time
    commit: str
    report: str | None
    compare: str | None
    changes: tuple[str, ...]
    trials_failed: int | None = None


@dataclass(frozen=True)
class ScenarioPage:
    """A scenario's runs and, per metric, its histories (one series per cell)."""

    name: str
    runs: tuple[RunEntry, ...]
    histories: tuple[history.History, ...]

    @property
    def regressions(self) -> list[tuple[history.History, history.Series, Any]]:
        return [(h, s, step) for h in self.histories for s, step in h.current_regressions()]


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def scenario_file(name: str) -> str:
    """The page of a scenario: ``scenario-<name>.html``, the name made safe for a URL."""
    return "scenario-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "unnamed") + ".html"


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_h(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def index_html(pages: Sequence[ScenarioPage]) -> str:
    """The scenarios, each with its number of runs, newest run and current regressions."""
    rows = []
    for page in pages:
        newest = page.runs[-1] if page.runs else None
        worse = page.regressions
        status = (
            f'<span class="worse">{len(worse)} cell(s) worse since a step</span>'
            if worse
            else '<span class="muted">no current regression</span>'
        )
        rows.append(
            f'<tr><td><a href="{_h(scenario_file(page.name))}">{_h(page.name)}</a></td>'
            f"<td>{len(page.runs)}</td>"
            f"<td>{_h(newest.label if newest else '-')}</td>"
            f"<td>{_h(_time(newest.created_at) if newest else '-')}</td><td>{status}</td></tr>"
        )
    table = (
        "<table><thead><tr><th>scenario</th><th>runs</th><th>newest run</th><th>at</th>"
        "<th>status</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    return _page("dbrig: benchmark history", f"<h1>Benchmark history</h1>\n{table}")


def scenario_html(page: ScenarioPage) -> str:
    """Filters, a chart per metric and cell over the runs, and the table of runs."""
    cells = list(dict.fromkeys(s.label for h in page.histories for s in h.series))
    metrics = [h.metric for h in page.histories]
    filters = (
        '<div class="filters">'
        + _select("cell", "cell", cells)
        + " "
        + _select("metric", "metric", metrics)
        + "</div>"
    )
    charts = "\n".join(_figure(h, series, page.runs) for h in page.histories for series in h.series)
    body = (
        f'<p><a href="index.html">all scenarios</a></p><h1>{_h(page.name)}</h1>\n'
        f"<p>{len(page.runs)} runs, oldest first. Each point is a run's mean over its "
        "repetitions, with its 95 % interval from three repetitions on; click it for "
        "that run's report. A dashed "
        "vertical line is a step (as <code>dbrig history</code> finds it), a blue diamond "
        "a run whose settings, versions or host changed.</p>\n"
        f"{filters}\n<h2>Charts</h2>\n{charts}\n<h2>Runs</h2>\n{_runs_table(page.runs)}\n"
        f"<script>{_FILTER_SCRIPT}</script>"
    )
    return _page(f"dbrig: {page.name}", body)


def _select(name: str, label: str, values: Sequence[str]) -> str:
    options = '<option value="">all</option>' + "".join(
        f'<option value="{_h(v)}">{_h(v)}</option>' for v in values
    )
    return f'<label>{_h(label)} <select id="{name}">{options}</select></label>'


def _runs_table(runs: Sequence[RunEntry]) -> str:
    rows = []
    for number, run in enumerate(runs, start=1):
        report = f'<a href="{_h(run.report)}">report</a>' if run.report else "-"
        compare = (
            f'<a href="{_h(run.compare)}">compare with #{number - 1}</a>' if run.compare else "-"
        )
        changed = "; ".join(run.changes)
        rows.append(
            f'<tr id="run-{number}"><td>{number}</td><td>{_h(run.label)}</td>'
            f"<td>{_h(_time(run.created_at))}</td><td>{_h(run.key)}</td><td>{report}</td>"
            f'<td>{compare}</td><td class="changed">{_h(changed)}</td></tr>'
        )
    return (
        "<table><thead><tr><th>#</th><th>run</th><th>at</th><th>directory</th>"
        "<th>report</th><th>compare</th><th>changed since the run before</th></tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table>"
    )


def _time(text: str) -> str:
    return text[:19].replace("T", " ")


def _verdict(found: History, step) -> str:
    bad = found.is_bad(step)
    return "unknown" if bad is None else ("worse" if bad else "better")


def _figure(found: History, series: Series, runs: Sequence[RunEntry]) -> str:
    known = metric(found.metric)
    unit = f" ({known.unit})" if known and known.unit else ""
    way = {
        Direction.HIGHER_IS_BETTER: ", higher is better",
        Direction.LOWER_IS_BETTER: ", lower is better",
    }
    title = f"{found.metric}{unit} · {series.label}{way.get(found.direction, '')}"
    steps = "".join(
        f'<li class="{_verdict(found, step)}">{_h(step_line(found, series, step))}</li>'
        for step in series.steps
    )
    listed = f'<ul class="steps">{steps}</ul>' if steps else ""
    return (
        f'<figure class="chart" data-cell="{_h(series.label)}" data-metric="{_h(found.metric)}">'
        f"<h3>{_h(title)}</h3>{chart_svg(found, series, runs)}{listed}</figure>"
    )


def chart_svg(found: History, series: Series, runs: Sequence[RunEntry]) -> str:
    """One cell's means over the runs: points linked to reports, intervals, steps, changes."""
    points = series.points
    values = [
        v
        for p in points
        if p.mean is not None
        for v in ((p.mean, p.ci_low, p.ci_high) if p.n >= MIN_INTERVAL_N else (p.mean,))
        if v is not None and math.isfinite(v)
    ]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    means = [p.mean for p in points if p.mean is not None]
    if means and min(means) >= 0:
        low = max(low, 0.0)  # rates and times: a t interval of 2 runs reaches below zero
    if high == low:
        low, high = low - abs(low) * 0.05 - 1e-9, high + abs(high) * 0.05 + 1e-9
    pad = (high - low) * 0.08
    low, high = (low - pad if low != 0 else 0.0), high + pad
    count = max(len(points), 1)
    span = WIDTH - LEFT - RIGHT

    def x(i: float) -> float:
        return LEFT + (span * (i + 0.5) / count)

    def y(v: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (high - v) / (high - low)

    def clipped(v: float) -> float:
        return y(min(max(v, low), high))

    parts = [_axes(low, high, y)]
    parts += _levels(found, series, x, y)
    parts += _change_marks(runs, x)
    line = [f"{x(i):.1f},{y(p.mean):.1f}" for i, p in enumerate(points) if p.mean is not None]
    if len(line) > 1:
        parts.append(
            f'<polyline points="{" ".join(line)}" fill="none" stroke="#2e86c1" stroke-width="1.5"/>'
        )
    for i, (point, run) in enumerate(zip(points, runs, strict=True)):
        parts.append(_point(i + 1, point, run, found.metric, x(i), clipped))
    parts += _x_labels(runs, x)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" overflow="visible" role="img" '
        f'aria-label="{_h(found.metric)} of {_h(series.label)} over {len(points)} runs">'
        + "".join(parts)
        + "</svg>"
    )


def _axes(low: float, high: float, y) -> str:
    parts = [
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#999"/>',
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" '
        f'y2="{HEIGHT - BOTTOM}" stroke="#999"/>',
    ]
    for k in range(5):
        value = low + (high - low) * k / 4
        at = y(value)
        parts.append(
            f'<line x1="{LEFT}" y1="{at:.1f}" x2="{WIDTH - RIGHT}" y2="{at:.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{at + 4:.1f}" font-size="11" text-anchor="end">'
            f"{_h(format_number(value))}</text>"
        )
    return "".join(parts)


def _levels(found: History, series: Series, x, y) -> list[str]:
    """Each level between steps as a dashed line; each step as a dashed vertical line."""
    if not series.steps:
        return []
    parts = []
    levels = [series.steps[0].before_mean, *(s.after_mean for s in series.steps)]
    bounds = [0, *(s.index for s in series.steps), len(series.points)]
    for level, start, stop in zip(levels, bounds, bounds[1:], strict=False):
        parts.append(
            f'<line x1="{x(start - 0.4):.1f}" y1="{y(level):.1f}" x2="{x(stop - 0.6):.1f}" '
            f'y2="{y(level):.1f}" stroke="#888" stroke-dasharray="5,4"/>'
        )
    for step in series.steps:
        color = COLORS[_verdict(found, step)]
        at = x(step.index - 0.5)
        delta = "" if step.delta_pct is None else f"{step.delta_pct:+.1f} %"
        parts.append(
            f'<g class="step"><title>{_h(step_line(found, series, step))}</title>'
            f'<line x1="{at:.1f}" y1="{TOP}" x2="{at:.1f}" y2="{HEIGHT - BOTTOM}" '
            f'stroke="{color}" stroke-dasharray="3,3"/>'
            f'<text x="{at + 3:.1f}" y="{TOP + 10}" font-size="11" fill="{color}">'
            f"step {_h(delta)}</text></g>"
        )
    return parts


def _change_marks(runs: Sequence[RunEntry], x) -> list[str]:
    parts = []
    for i, run in enumerate(runs):
        if not run.changes:
            continue
        cx, cy = x(i), TOP - 10
        text = f"changed at run {i + 1}: " + "; ".join(run.changes)
        parts.append(
            f'<g class="change"><title>{_h(text)}</title>'
            f'<path d="M{cx:.1f},{cy - 6} l6,6 l-6,6 l-6,-6 z" fill="#1f618d"/></g>'
        )
    return parts


def _point(number: int, point, run: RunEntry, name: str, cx: float, y) -> str:
    if point.mean is None:
        return ""
    whisker = ""
    if point.n >= MIN_INTERVAL_N and point.ci_low is not None and point.ci_high is not None:
        whisker = (
            f'<line x1="{cx:.1f}" y1="{y(point.ci_low):.1f}" x2="{cx:.1f}" '
            f'y2="{y(point.ci_high):.1f}" stroke="#5dade2" stroke-width="2"/>'
        )
    tip = f"run {number} ({run.label}): {name} {format_number(point.mean)} (n={point.n})"
    circle = (
        f'<circle class="point" cx="{cx:.1f}" cy="{y(point.mean):.1f}" r="4" fill="#1b4f72">'
        f"<title>{_h(tip)}</title></circle>"
    )
    if run.report:
        circle = f'<a href="{_h(run.report)}">{circle}</a>'
    return whisker + circle


def _x_labels(runs: Sequence[RunEntry], x) -> list[str]:
    every = max(1, math.ceil(len(runs) / 16))
    parts = []
    for i, run in enumerate(runs):
        if i % every:
            continue
        at = x(i)
        parts.append(
            f'<text x="{at:.1f}" y="{HEIGHT - BOTTOM + 14}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {at:.1f} {HEIGHT - BOTTOM + 14})">'
            f"{i + 1}: {_h(run.label[:14])}</text>"
        )
    return parts
