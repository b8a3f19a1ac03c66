"""A run's headline numbers in the JSON that CI benchmark trackers read (``--ci-json``).

Two formats, one entry per cell and headline metric (the mean over the repetitions
that succeeded, with its 95 % t interval, :mod:`dbrig.analysis.cells`):

* github-action-benchmark's custom tools: ``customBiggerIsBetter`` takes the
  higher-is-better metrics, ``customSmallerIsBetter`` the lower-is-better ones (the
  action reads one direction per file). A JSON list of ``{"name", "unit", "value",
  "range", "extra"}``: ``name`` is ``"<scenario> <cell> <metric>"``, ``range`` the
  interval's half-width as ``"± 12.3"`` (the action shows it as text), ``extra`` the
  repetitions and, from ``compare``, the verdict against the baseline.
* Bencher's Metric Format (``bmf``): ``{benchmark: {measure: {"value", "lower_value",
  "upper_value"}}}``, the benchmark ``"<scenario> <cell>"``, the measure the metric's
  column name (a Bencher slug: at most 64 characters).

Pure: :func:`render` returns the text; the command writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from dbrig.analysis.cells import CellValue
from dbrig.errors import ConfigError
from dbrig.metrics import Direction, direction_of, metric

BIGGER = "customBiggerIsBetter"
SMALLER = "customSmallerIsBetter"
BMF = "bmf"
FORMATS = (BIGGER, SMALLER, BMF)
_WANTED = {BIGGER: Direction.HIGHER_IS_BETTER, SMALLER: Direction.LOWER_IS_BETTER}


def parse_targets(items: Sequence[str], flag: str = "--ci-json") -> list[tuple[str, str]]:
    """``["bmf=out.json"]`` -> ``[("bmf", "out.json")]``; ConfigError naming the flag."""
    targets = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path.strip():
            raise ConfigError(f"{flag} {item}: expected FORMAT=PATH ({', '.join(FORMATS)})")
        if name.strip() not in FORMATS:
            raise ConfigError(
                f"{flag} {item}: unknown format {name.strip()!r} (expected {', '.join(FORMATS)})"
            )
        targets.append((name.strip(), path.strip()))
    return targets


def render(
    kind: str,
    scenario: str,
    values: Sequence[CellValue],
    verdicts: Mapping[tuple[str, str], str] | None = None,
) -> str:
    """The file of format ``kind`` for these values; ``verdicts`` ((cell, metric) -> text)
    go into github-action-benchmark's ``extra``."""
    if kind == BMF:
        return json.dumps(bmf(scenario, values), indent=2) + "\n"
    return json.dumps(custom(kind, scenario, values, verdicts or {}), indent=2) + "\n"


def custom(
    kind: str,
    scenario: str,
    values: Sequence[CellValue],
    verdicts: Mapping[tuple[str, str], str],
) -> list[dict[str, object]]:
    """github-action-benchmark's custom entries of one direction."""
    entries = []
    for value in values:
        if direction_of(value.metric) is not _WANTED[kind]:
            continue
        entry: dict[str, object] = {
            "name": f"{scenario} {value.cell} {value.metric}",
            "unit": _unit(value.metric),
            "value": value.mean,
        }
        if value.ci_high is not None:
            entry["range"] = f"± {value.ci_high - value.mean:.4g}"
        extra = [f"n={value.n} repetitions"]
        if verdict := verdicts.get((value.cell, value.metric)):
            extra.append(verdict)
        entry["extra"] = "; ".join(extra)
        entries.append(entry)
    return entries


def bmf(scenario: str, values: Sequence[CellValue]) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: benchmark -> measure -> value and its interval."""
    found: dict[str, dict[str, dict[str, float]]] = {}
    for value in values:
        measure: dict[str, float] = {"value": value.mean}
        if value.ci_low is not None and value.ci_high is not None:
            measure["lower_value"] = value.ci_low
            measure["upper_value"] = value.ci_high
        found.setdefault(f"{scenario} {value.cell}", {})[value.metric[:64]] = measure
    return found


def _unit(name: str) -> str:
    known = metric(name)
    return known.unit if known and known.unit else "count"
