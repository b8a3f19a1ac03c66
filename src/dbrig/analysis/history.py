"""One metric's level, run after run, for every cell of a scenario, and its step changes.

A single A/B comparison cannot see a slow drift: each step between neighbouring
runs is inside the noise. Here every saved run of a scenario becomes one point
per cell (the mean of the repetitions that succeeded, with its 95 % t interval),
points are ordered by ``run.json`` ``created_at``, and
:func:`dbrig.analysis.stats.detect_steps` looks for level shifts in each cell's series.

Pure except :func:`plot_png`, which writes a file. Means and intervals are in
the metric's unit; ``delta_pct`` of a step is in percent of the level before it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dbrig.analysis.compare import (
    RunInput,
    cell_groups,
    cell_label,
    environment_differences,
    factor_variables,
    merged_labels,
    normalize_value,
    ok_values,
    resolve_factor,
)
from dbrig.analysis.stats import Step, detect_steps, summarize
from dbrig.errors import ConfigError
from dbrig.metrics import Direction, direction_of


@dataclass(frozen=True)
class Point:
    """One run's value for one cell; n == 0 when the run lacks the cell or all its trials failed."""

    run: str
    created_at: str
    n: int
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class Series:
    """One cell over time: a point per run (same order as History.runs) and its steps.

    A step's ``index`` is the position of the first run of the new level.
    """

    label: str
    cell: tuple[tuple[str, str | None], ...]
    points: tuple[Point, ...]
    steps: tuple[Step, ...]

    @property
    def means(self) -> list[float]:
        return [math.nan if p.mean is None else p.mean for p in self.points]


@dataclass(frozen=True)
class History:
    scenario: str
    metric: str
    direction: Direction | None
    runs: tuple[str, ...]
    created_at: tuple[str, ...]
    series: tuple[Series, ...]
    threshold: float
    alpha: float
    min_size: int
    # per run, what changed since the run before it (see :func:`run_changes`); () for the first
    changes: tuple[tuple[str, ...], ...] = field(default=())

    def changes_at(self, index: int) -> tuple[str, ...]:
        return self.changes[index] if index < len(self.changes) else ()

    def is_bad(self, step: Step) -> bool | None:
        """Whether the step goes the wrong way for this metric; None if the direction is unknown."""
        if self.direction is None:
            return None
        went_up = step.after_mean > step.before_mean
        return went_up != (self.direction is Direction.HIGHER_IS_BETTER)

    def current_regressions(self) -> list[tuple[Series, Step]]:
        """Cells whose newest run has a value and whose latest step went the wrong way."""
        found = []
        for series in self.series:
            if series.steps and series.points and series.points[-1].n > 0:
                last = series.steps[-1]
                if self.is_bad(last):
                    found.append((series, last))
        return found


def created_key(run: RunInput) -> tuple[dt.datetime, str]:
    """Sort key: run.json created_at (aware times in UTC), then the label."""
    text = str(run.meta.get("created_at") or "")
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        when = dt.datetime.min
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC).replace(tzinfo=None)
    return when, run.label


def build_history(
    runs: Sequence[RunInput],
    metric: str,
    *,
    scenario: str,
    cells: Mapping[str, str] | None = None,
    threshold: float = 0.05,
    alpha: float = 0.05,
    min_size: int = 3,
) -> History:
    """Per-run means of ``metric`` for each cell, oldest run first, with detected steps.

    ``cells`` keeps only cells whose factor (full path, short label or dotted
    suffix) has the given value. ConfigError when no run has the metric or no
    cell matches the filter.
    """
    if not runs:
        raise ConfigError(f"no saved runs of scenario {scenario}")
    ordered = sorted(runs, key=created_key)
    if not any(metric in run.results.columns for run in ordered):
        raise ConfigError(f"--metric {metric}: no such column in the runs of {scenario}")
    factors = list(dict.fromkeys(f for run in ordered for f in run.factors))
    labels = merged_labels(factors, ordered)
    wanted = _resolve_filters(cells or {}, factors, labels)
    per_run = [cell_groups(run.results, factors) for run in ordered]
    keys = [k for k in dict.fromkeys(k for groups in per_run for k in groups) if _keep(k, wanted)]
    if not keys:
        shown = ", ".join(f"{k}={v}" for k, v in (cells or {}).items())
        raise ConfigError(f"--cell {shown}: no cell of {scenario} matches")
    series = []
    for key in keys:
        points = tuple(
            _point(run, groups.get(key), metric)
            for run, groups in zip(ordered, per_run, strict=True)
        )
        series.append(
            make_series(
                cell_label(factors, key, labels),
                tuple(zip(factors, key, strict=True)),
                points,
                threshold=threshold,
                alpha=alpha,
                min_size=min_size,
            )
        )
    return History(
        scenario=scenario,
        metric=metric,
        direction=direction_of(metric),
        runs=tuple(run.label for run in ordered),
        created_at=tuple(str(run.meta.get("created_at") or "") for run in ordered),
        series=tuple(series),
        threshold=threshold,
        alpha=alpha,
        min_size=min_size,
        changes=changes_between([run.meta for run in ordered]),
    )


def make_series(
    label: str,
    cell: tuple[tuple[str, str | None], ...],
    points: Sequence[Point],
    *,
    threshold: float = 0.05,
    alpha: float = 0.05,
    min_size: int = 3,
) -> Series:
    """One cell's points (oldest first) and the steps :func:`detect_steps` finds in them."""
    means = [math.nan if p.mean is None else p.mean for p in points]
    steps = detect_steps(means, min_size=min_size, threshold=threshold, alpha=alpha)
    return Series(label, cell, tuple(points), tuple(steps))


def changes_between(metas: Sequence[Mapping]) -> tuple[tuple[str, ...], ...]:
    """For each run (run.json, oldest first), what changed since the one before it."""
    if not metas:
        return ()
    return ((), *(run_changes(a, b) for a, b in itertools.pairwise(metas)))


def run_changes(before: Mapping, after: Mapping) -> tuple[str, ...]:
    """What differs between two runs of a scenario, as ``compare`` sees it, one line each.

    The scenario as written with its ``--set`` overrides (``raw_scenario``, each changed key
    as ``path a -> b``), the host's name, CPU, kernel, I/O scheduler and tool versions, and
    each server both runs started: flavor, version and every variable the matrix does not
    vary. A config key whose server variable changed too is named once, as the variable.
    """
    lines = []
    host = ("environment", "host", "hostname")
    if (a := _dig(before, host)) != (b := _dig(after, host)):
        lines.append(f"host {a} -> {b}")
    servers = sorted(set(before.get("servers") or {}) & set(after.get("servers") or {}))
    factors = [*(before.get("factors") or []), *(after.get("factors") or [])]
    differences = environment_differences(
        before, after, [(s, s) for s in servers], ignore_variables=factor_variables(factors)
    )
    shown = {d.what for d in differences}
    for key, a, b in _scenario_differences(before, after):
        variable = key.rsplit(".config.", 1)[-1].lower().replace("-", "_")
        if ".config." not in key or variable not in shown:
            lines.append(f"{key} {a} -> {b}")
    for diff in differences:
        lines.append(f"{diff.what} {diff.base or '(none)'} -> {diff.candidate or '(none)'}")
    return tuple(lines)


def _dig(meta: Mapping, path: Sequence[str]) -> str | None:
    node = meta
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return None if node is None else str(node)


def _scenario_differences(before: Mapping, after: Mapping) -> list[tuple[str, str, str]]:
    """(dotted key, before, after) of every scenario key whose value changed."""
    a = dict(_flatten(before.get("raw_scenario") or before.get("scenario") or {}))
    b = dict(_flatten(after.get("raw_scenario") or after.get("scenario") or {}))
    return [
        (key, a.get(key, "(none)"), b.get(key, "(none)"))
        for key in dict.fromkeys([*a, *b])
        if a.get(key) != b.get(key)
    ]


def _flatten(node: object, prefix: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            yield from _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif prefix:
        text = node if isinstance(node, str) else json.dumps(node, sort_keys=True, default=str)
        yield prefix, text


def _resolve_filters(
    cells: Mapping[str, str], factors: Sequence[str], labels: Mapping[str, str]
) -> list[tuple[int, str | None]]:
    resolved = []
    for name, value in cells.items():
        factor = resolve_factor(name, factors, labels)
        resolved.append((factors.index(factor), normalize_value(value)))
    return resolved


def _keep(key: tuple, wanted: Sequence[tuple[int, str | None]]) -> bool:
    return all(key[i] == value for i, value in wanted)


def _point(run: RunInput, frame, metric: str) -> Point:
    created = str(run.meta.get("created_at") or "")
    if frame is None:
        return Point(run.label, created, 0)
    s = summarize(ok_values(frame, metric))
    return Point(run.label, created, s.n, s.mean, s.ci_low, s.ci_high)


def parse_cell_filters(items: Sequence[str]) -> dict[str, str]:
    """``["threads=2", "cpu=0"]`` -> ``{"threads": "2", "cpu": "0"}``; ConfigError otherwise."""
    found = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--cell {item}: expected FACTOR=VALUE")
        found[name.strip()] = value.strip()
    return found


def step_line(history: History, series: Series, step: Step) -> str:
    """e.g. "threads=1: step at run 7 (small-20261121-...): 450 -> 360 (-20.0 %), worse",
    followed by "— settings changed at run 7: ..." when the run's settings changed."""
    bad = history.is_bad(step)
    verdict = "direction unknown" if bad is None else ("worse" if bad else "better")
    delta = "" if step.delta_pct is None else f" ({step.delta_pct:+.1f} %)"
    line = (
        f"{series.label}: step at run {step.index + 1} ({history.runs[step.index]}): "
        f"{step.before_mean:.4g} -> {step.after_mean:.4g}{delta}, {verdict}"
    )
    changed = history.changes_at(step.index)
    if changed:
        line += f" \N{EM DASH} settings changed at run {step.index + 1}: " + "; ".join(changed)
    return line


def plot_png(history: History, path: Path) -> None:
    """A line per cell (mean with 95 % CI bars) over the runs; levels after a step dashed."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 0.5 * len(history.runs) + 3), 4.5), layout="constrained")
    axes = figure.add_subplot()
    x = list(range(len(history.runs)))
    for series in history.series:
        means = series.means
        low = [
            m - p.ci_low if p.ci_low is not None else 0.0
            for m, p in zip(means, series.points, strict=True)
        ]
        high = [
            p.ci_high - m if p.ci_high is not None else 0.0
            for m, p in zip(means, series.points, strict=True)
        ]
        line = axes.errorbar(x, means, yerr=[low, high], marker="o", capsize=3, label=series.label)
        color = line[0].get_color()
        _draw_levels(axes, series, len(x), color)
    axes.set_xticks(x, [_short_time(t) for t in history.created_at], rotation=45, ha="right")
    unit = {
        Direction.HIGHER_IS_BETTER: " (higher is better)",
        Direction.LOWER_IS_BETTER: " (lower is better)",
    }
    axes.set_ylabel(history.metric + unit.get(history.direction, ""))
    axes.set_title(f"{history.scenario}: {history.metric} per run, mean and 95 % CI")
    axes.grid(alpha=0.3)
    if len(history.series) > 1:
        axes.legend(fontsize="small")
    figure.savefig(path, dpi=100)


def _draw_levels(axes, series: Series, count: int, color: str) -> None:
    """Each level between steps as a dashed line, each step as a faint vertical line."""
    if not series.steps:
        return
    levels = [series.steps[0].before_mean, *(s.after_mean for s in series.steps)]
    bounds = [0, *(s.index for s in series.steps), count]
    for level, start, stop in zip(levels, bounds, bounds[1:], strict=False):
        axes.hlines(level, start - 0.3, stop - 0.7, colors=color, linestyles="dashed")
    for step in series.steps:
        axes.axvline(step.index - 0.5, color=color, alpha=0.3)


def _short_time(text: str) -> str:
    return text[:16].replace("T", " ") if text else "?"
