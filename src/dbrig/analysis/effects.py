"""What a varied factor did, and what went with repetitions that disagree.

Two kinds of finding (:mod:`dbrig.analysis.findings`):

- ``effect``: each value of a factor the run varied against the factor's first
  value, the other factors fixed, judged by the statistics ``dbrig compare`` uses
  (:func:`dbrig.analysis.stats.compare_samples` at :data:`THRESHOLD`), with the
  smallest change the run could see when the verdict is "inconclusive";
- ``spread``: cells whose repetitions disagree (CV above
  :data:`~dbrig.analysis.run_facts.DISAGREE_CV`), with the measured cause that moved
  against the throughput between repetitions (:data:`CAUSES`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dbrig.analysis.run_facts import (
    DISAGREE_CV,
    Finding,
    RunFacts,
    by_cell,
    cell_name,
    measured_headline,
    texts,
    texts_frame,
)
from dbrig.analysis.stats import compare_samples, summarize
from dbrig.metrics import Direction, Metric, direction_of, metric

THRESHOLD = 0.05  # compare's default: a 5 % change is one worth calling
MAX_EFFECT_LINES = 6  # per factor; the rest are counted
# The measured causes of repetitions that disagree, with the spread that counts as a
# difference between repetitions (in the metric's own unit).
CAUSES: tuple[tuple[str, float], ...] = (
    ("other_cpu_pct", 5.0),
    ("steal_pct", 2.0),
    ("stress_achieved_ratio", 0.1),
)


def effects(ok: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    out = []
    for factor in facts.factors:
        if factor == facts.concurrency_factor and facts.sweeps:
            continue
        if factor not in ok or texts(ok[factor]).nunique() < 2:
            continue
        lines = _factor_effects(ok, facts, factor)
        if not lines:
            continue
        label = facts.labels.get(factor, factor)
        shown = lines[:MAX_EFFECT_LINES]
        more = len(lines) - len(shown)
        tail = f"; {more} more comparison(s) in dbrig compare --by {label}" if more else ""
        out.append(Finding("effect", "; ".join(shown) + tail + "."))
    return out


def _factor_effects(ok: pd.DataFrame, facts: RunFacts, factor: str) -> list[str]:
    """Each value of ``factor`` against its first value, the other factors held fixed."""
    others = [f for f in facts.factors if f != factor and f in ok]
    values = texts(ok[factor])
    keys = texts_frame(ok, others)
    lines = []
    groups = ok.groupby(keys, sort=False, dropna=False) if others else [(None, ok)]
    for _, group in groups:
        group_values = values.loc[group.index]
        present = [v for v in dict.fromkeys(group_values) if v is not None]
        if len(present) < 2:
            continue
        base = group[group_values == present[0]]
        fixed = _fixed_text(group, others, facts)
        for value in present[1:]:
            cand = group[group_values == value]
            line = _effect_line(base, cand, facts.labels.get(factor, factor), present[0], value)
            if line:
                lines.append(line + fixed)
    return lines


def _effect_line(
    base: pd.DataFrame, cand: pd.DataFrame, label: str, base_value: str, value: str
) -> str | None:
    entry = _shared_metric(base, cand)
    if entry is None:
        return None
    direction = direction_of(entry.name) or Direction.HIGHER_IS_BETTER
    result = compare_samples(
        pd.to_numeric(base[entry.name], errors="coerce").dropna().to_numpy(),
        pd.to_numeric(cand[entry.name], errors="coerce").dropna().to_numpy(),
        direction=direction,
        threshold=THRESHOLD,
    )
    head = f"{label}={value} against {base_value}: {entry.terminal_heading}"
    if result.delta_pct is None:
        return f"{head} not judged ({result.reason})"
    text = f"{head} {result.delta_pct:+.0f} %, {result.verdict} at n={_n(result)}"
    if result.verdict == "inconclusive" and result.mde_pct is not None:
        smallest = "no change" if math.isinf(result.mde_pct) else f"{result.mde_pct:.0f} %"
        text += f" ({smallest} is the smallest change this run could see)"
    elif result.verdict in ("better", "worse") and result.ci_low_pct is not None:
        text += f" (95 % CI {result.ci_low_pct:+.0f} to {result.ci_high_pct:+.0f} %)"
    return text


def _shared_metric(base: pd.DataFrame, cand: pd.DataFrame) -> Metric | None:
    """The headline metric both sides measured, throughput first; None when the two sides
    measured different things (a cpu test against a memory test)."""
    on_base, on_cand = measured_headline(base), measured_headline(cand)
    if [m.name for m in on_base] != [m.name for m in on_cand]:
        return None
    return on_base[0] if on_base else None


def _n(result: Any) -> str:
    if result.n_base == result.n_cand:
        return str(result.n_base)
    return f"{result.n_base}/{result.n_cand}"


def _fixed_text(group: pd.DataFrame, others: Sequence[str], facts: RunFacts) -> str:
    fixed = []
    for other in others:
        values = texts(group[other]).dropna().unique()
        if len(values) == 1 and texts(facts.results[other]).nunique() > 1:
            fixed.append(f"{facts.labels.get(other, other)}={values[0]}")
    return f" [{', '.join(fixed)}]" if fixed else ""


# --------------------------------------------------------------------------- spread


def spread(ok: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    """Cells whose repetitions disagree, with the measured cause that went with it."""
    cells = list(by_cell(ok, None))
    if not cells:
        return []
    disagreeing = []
    for cell, rows in cells:
        entry = next(iter(measured_headline(rows)), None)
        if entry is None or "repetition" not in rows:
            continue
        values = pd.to_numeric(rows[entry.name], errors="coerce")
        s = summarize(values.dropna().tolist())
        if s.cv is None or s.cv <= DISAGREE_CV or not s.min:
            continue
        disagreeing.append((cell, rows, entry, values, s))
    if not disagreeing:
        return []
    entry = disagreeing[0][2]
    described = ", ".join(
        f"{cell_name(cell, facts)}: {s.max / s.min:.1f}x (CV {100 * (s.cv or 0):.0f} %)"
        for cell, _, _, _, s in disagreeing[:MAX_EFFECT_LINES]
    )
    more = len(disagreeing) - MAX_EFFECT_LINES
    text = (
        f"Repetitions disagree in {len(disagreeing)} cell(s) on {entry.terminal_heading} "
        f"({described}{f', +{more} more' if more > 0 else ''})"
    )
    causes = _causes([(rows, values) for _, rows, _, values, _ in disagreeing])
    if causes:
        text += "; measured with it: " + "; ".join(causes)
    else:
        text += (
            "; no measured cause went with it (other processes' CPU, steal and the "
            "interference's share were steady)"
        )
    return [Finding("spread", text + ".")]


def _causes(cells: Sequence[tuple[pd.DataFrame, pd.Series]]) -> list[str]:
    """Each cause whose per-repetition values differ and move against the throughput,
    as its range per repetition over the disagreeing cells."""
    out = []
    for name, min_spread in CAUSES:
        entry = metric(name)
        if entry is None:
            continue
        per_rep: dict[int, list[float]] = {}
        moved = False
        for rows, values in cells:
            if name not in rows:
                continue
            cause = pd.to_numeric(rows[name], errors="coerce")
            pair = pd.DataFrame({"y": values, "x": cause, "r": rows["repetition"]}).dropna()
            if len(pair) < 2 or pair["x"].max() - pair["x"].min() < min_spread:
                continue
            if (
                pair["x"].std() > 0
                and pair["y"].std() > 0
                and np.corrcoef(pair["x"], pair["y"])[0, 1] < 0
            ):
                moved = True
                for r, x in zip(pair["r"], pair["x"], strict=True):
                    per_rep.setdefault(int(r), []).append(float(x))
        if moved:
            out.append(
                f"{entry.label} "
                + ", ".join(f"r{r} {_value_range(entry, xs)}" for r, xs in sorted(per_rep.items()))
            )
    return out


def _value_range(entry: Metric, values: list[float]) -> str:
    scale, unit = (100.0, "%") if entry.unit == "0..1" else (1.0, entry.unit)
    low, high = min(values) * scale, max(values) * scale
    text = f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}-{high:.0f}"
    return f"{text} {unit}".rstrip()
