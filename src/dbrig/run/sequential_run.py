"""A run with ``repeat: {min, max, until}``: look after each round, stop when decided.

The plan holds rounds 1..max of every cell in the usual interleaved order. After
the last trial of a round from ``min`` on, :class:`Looks` reads every saved trial,
decides with :mod:`dbrig.analysis.sequential`'s design (compare's statistics at the
look's exact boundary, or each cell's interval width), and records the look in
run.json (``sequential.looks``). A look that decides, or the look at ``max``, ends
the run: ``sequential.stopped`` says why, and run.json's planned trials are cut to
the rounds that ran, so every reader sees a complete run. ``--resume`` reads the
looks so far from run.json and continues the same design: the boundaries of the
looks made are rebuilt from their recorded information fractions (the calibration's
paths are seeded, so they are the same), so the next one is right given them. A
design recorded with ``boundaries: exact`` (before the levels were calibrated for
Welch's t) goes on with exact z boundaries, as it began; one recorded without
``boundaries`` (before the boundaries were exact) with its recorded per-look alphas.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dbrig import store
from dbrig.analysis import sequential
from dbrig.analysis.calibration import CALIBRATED_UP_TO
from dbrig.analysis.cells import cell_values, headline_metrics
from dbrig.analysis.compare import RunInput, compare_groups, resolve_factor
from dbrig.errors import ConfigError
from dbrig.metrics import REGISTRY, Metric, metric
from dbrig.scenario import Plan, Trial
from dbrig.scenario.model import SequentialRepeat

KEY = "sequential"  # run.json's record of the design and its looks
BOUNDARIES = "calibrated"  # the design's "boundaries": how its looks' levels are found
KNOWN_BOUNDARIES = ("calibrated", "exact")
NEAR_ZERO = "about 0 by nature (a count of failures): a width relative to its mean means nothing"
ZERO_MEAN = "mean 0 in this cell: a width relative to it means nothing"


def design_of(spec: SequentialRepeat, boundaries: str = BOUNDARIES) -> sequential.Design:
    kind = "exact" if boundaries == "exact" else "calibrated"
    return sequential.Design(spec.min, spec.max, spec.alpha, spec.spending, kind)


def shown_looks(design: sequential.Design) -> tuple[sequential.Look, ...]:
    """The planned looks the dry run and run.json show: those whose level is calibrated
    (a longer design's later looks are exact z boundaries, found as the run goes)."""
    return design.looks_up_to(CALIBRATED_UP_TO)


def check_design(plan: Plan) -> None:
    """Refuse, before anything runs, an ``until`` that could never be decided."""
    spec = plan.scenario.sequential
    if spec is None:
        return
    if plan.shard is not None:
        raise ConfigError(
            f"--shard: {plan.source} has repeat.until, which looks at every cell; run it whole"
        )
    unknown = [m for m in spec.until.metrics if metric(m) is None]
    if unknown:
        raise ConfigError(
            f"{plan.source}: repeat.until.metrics: {', '.join(unknown)}: "
            "not a metric dbrig records "
            "(names as in results.csv: tps, latency_pct_ms, events_per_s, ...)"
        )
    if spec.until.decided_by is None:
        near_zero = [m for m in spec.until.metrics if _near_zero(m)]
        if near_zero:
            raise ConfigError(
                f"{plan.source}: repeat.until.metrics: {', '.join(near_zero)}: "
                "usually about 0, so ci_width (relative to the mean) cannot judge it; "
                "leave it out, or use decided_by"
            )
        return
    name = spec.until.decided_by
    try:
        factor = resolve_factor(name, plan.factor_names, plan.short_names())
    except ConfigError as exc:
        raise ConfigError(f"{plan.source}: repeat.until.decided_by: {exc}") from None
    values = {str(c.factor_dict.get(factor)) for c in plan.cells}
    if len(values) != 2:
        raise ConfigError(
            f"{plan.source}: repeat.until.decided_by: '{name}' has {len(values)} values; "
            "a decision compares exactly two"
        )


def design_lines(spec: SequentialRepeat) -> Iterator[str]:
    """The dry run's account of the design: rounds, rule, each look's alpha."""
    design = design_of(spec)
    until = spec.until
    what = ", ".join(until.metrics) or "headline"
    rule = (
        f"every {what} comparison of {until.decided_by} decided (better, worse or unchanged)"
        if until.decided_by is not None
        else f"every cell's {what} interval within +/-{100 * (until.ci_width or 0):g} %"
    )
    yield (
        f"sequential: rounds {spec.min}..{spec.max}, a look after each from {spec.min}; "
        f"stops when {rule}"
    )
    if until.decided_by is not None:
        yield (
            f"  alpha {spec.alpha:g} spent {spec.spending} (Lan-DeMets), levels calibrated "
            "for Welch's t; if every trial succeeds:"
        )
        for look in shown_looks(design):
            level = (
                f"p < {look.alpha:.3g} (|z| >= {look.z:.3f})"
                if look.alpha > 0
                else "nothing to spend yet"
            )
            yield f"    round {look.round}: t={look.fraction:.2f}, {level}"
        if design.max > CALIBRATED_UP_TO:
            yield (
                f"    rounds {CALIBRATED_UP_TO + 1}..{design.max}: exact z boundaries "
                "(Welch's t is the z statistic there), found as the run goes"
            )
    elif not until.metrics:
        yield (
            "  left out of ci_width: metrics whose mean is about 0 ("
            + ", ".join(m.name for m in near_zero_metrics())
            + "; and any metric whose mean is 0 in a cell)"
        )


def record(run: store.RunDir) -> dict[str, Any]:
    return dict(run.saved().extra.get(KEY) or {})


class Looks:
    """The run's looks: after each finished round from ``min``, decide, record, maybe stop."""

    def __init__(
        self, plan: Plan, run: store.RunDir, emit: Callable[[str], None] | None = None
    ) -> None:
        spec = plan.scenario.sequential
        assert spec is not None
        self.spec = spec
        self.plan = plan
        self.run = run
        self.emit = emit or (lambda _line: None)
        self.rounds = _rounds(plan)
        saved = record(run)
        self.looked = {int(look["round"]) for look in saved.get("looks", ())}
        kind = saved.get("design", {}).get("boundaries", BOUNDARIES if not saved else None)
        # An older record without "boundaries" kept its alphas with exact z looks.
        self.design = design_of(spec, str(kind) if kind in KNOWN_BOUNDARIES else "exact")
        self.spender = sequential.Spender(self.design)
        if not saved:
            self._write({"design": self._design_json(), "looks": []})
        design = record(run)["design"]
        self.legacy = {} if kind in KNOWN_BOUNDARIES else _saved_alphas(design)
        for look in saved.get("looks", ()):  # a resumed run: the looks made, as they were
            if look.get("fraction") is not None:
                self.spender.look(int(look["round"]), float(look["fraction"]))

    def after(self, trial: Trial, results: Mapping[str, store.TrialResult]) -> str | None:
        """Why the run stops after ``trial``, or None to go on. Every finished round not
        looked at yet is looked at in turn (a resumed run may have missed one)."""
        for round_ in range(self.spec.min, trial.repetition + 1):
            if round_ in self.looked:
                continue
            if not all(trial_id in results for trial_id in self.rounds.get(round_, ())):
                return None
            look = self._look(round_, results)
            self.emit(_progress_line(look))
            stop = self._record(look)
            if stop is not None:
                return stop
        return None

    def _record(self, look: dict[str, Any]) -> str | None:
        round_ = int(look["round"])
        self.looked.add(round_)
        saved = record(self.run)
        saved["looks"] = [*saved.get("looks", []), look]
        if look["stop"] is not None:
            saved["stopped"] = {"round": round_, "reason": look["stop"]}
            self._cut_to(round_)
        self._write(saved)
        return look["stop"]

    def _look(self, round_: int, results: Mapping[str, store.TrialResult]) -> dict[str, Any]:
        saved = self.run.saved()
        frame = store.results_frame(r for r in results.values() if r.repetition <= round_)
        run = RunInput(self.run.path.name, saved.to_json(), frame)
        metrics = tuple(self.spec.until.metrics) or headline_metrics(run)
        ok = frame[frame["status"] == "ok"]
        look: dict[str, Any] = {"round": round_, "n": _ok_per_cell(ok, self.plan)}
        if self.spec.until.decided_by is not None:
            decided = self._decide(look, run, metrics)
        else:
            named = bool(self.spec.until.metrics)
            judged = [m for m in metrics if named or not _near_zero(m)]
            look.update(
                width_look(
                    _intervals(run, judged),
                    left_out=[m for m in metrics if m not in judged],
                    cells=len(self.plan.cells),
                    limit=float(self.spec.until.ci_width or 0),
                )
            )
            decided = look.pop("decided")
        look["decided"] = decided
        look["stop"] = sequential.stop_reason(decided, round_, self.design, self.spec.until.rule)
        return look

    def _decide(self, look: dict[str, Any], run: RunInput, metrics: tuple[str, ...]) -> bool:
        """The look's boundary, at the information its sample sizes give, and its test."""
        round_ = int(look["round"])
        fraction = sequential.information_fraction(list(look["n"].values()), self.design.max)
        bound = self.spender.look(round_, fraction)
        alpha = self.legacy.get(round_, bound.alpha)
        look.update(fraction=bound.fraction, z=_number(bound.z), alpha=alpha, spent=bound.spent)
        if alpha <= 0:
            look["comparisons"] = []
            look["note"] = "no new information since the last look: nothing to spend"
            return False
        rows = _comparisons(run, str(self.spec.until.decided_by), metrics, alpha)
        look["comparisons"] = rows
        return sequential.all_decided([r["verdict"] for r in rows])

    def _cut_to(self, round_: int) -> None:
        """run.json's planned trials: the rounds that ran (readers then see a whole run)."""
        kept = {t for r, ids in self.rounds.items() if r <= round_ for t in ids}
        saved = self.run.saved()
        self.run.write_saved(saved.replace(trials=tuple(t for t in saved.trials if t in kept)))

    def _design_json(self) -> dict[str, Any]:
        return {
            "min": self.spec.min,
            "max": self.spec.max,
            "until": self.spec.until.model_dump(mode="json", exclude_none=True),
            "spending": self.spec.spending,
            "alpha": self.spec.alpha,
            "boundaries": self.design.boundaries,
            "looks": [{**vars(look), "z": _number(look.z)} for look in self._planned()],
        }

    def _planned(self) -> tuple[sequential.Look, ...]:
        """The planned looks' levels: only ``decided_by`` tests at them (a ``ci_width``
        run never does, and need not spend half a second calibrating them)."""
        return shown_looks(self.design) if self.spec.until.decided_by is not None else ()

    def _write(self, value: dict[str, Any]) -> None:
        saved = self.run.saved()
        self.run.write_saved(saved.replace(extra={**saved.extra, KEY: value}))


def stopped_round(run: store.RunDir) -> int | None:
    """The round a sequential run stopped after (its later trials are not to run)."""
    stopped = record(run).get("stopped")
    return int(stopped["round"]) if stopped else None


def width_look(
    found: list[dict[str, Any]], *, left_out: list[str], cells: int, limit: float
) -> dict[str, Any]:
    """A ``ci_width`` look from each cell x metric's interval (``found``): decided when
    every one is within ``limit`` of its mean and every one of ``cells`` has a value.
    A metric about 0 by nature (``left_out``) and one whose mean is 0 in a cell have no
    relative width: they are left out, and the look says so."""
    out = [{"metric": m, "reason": NEAR_ZERO} for m in left_out]
    out += [
        {"metric": c["metric"], "cell": c["cell"], "reason": ZERO_MEAN}
        for c in found
        if c["mean"] == 0
    ]
    judged = [c for c in found if c["mean"] != 0]
    widths = [c["half_width"] for c in judged]
    if len({c["cell"] for c in found}) < cells:
        widths.append(None)  # a cell with no successful value yet
    return {
        "cells": judged,
        "ci_width": limit,
        "left_out": out,
        "decided": sequential.narrow_enough(widths, limit),
    }


def near_zero_metrics() -> tuple[Metric, ...]:
    """The metrics whose usual value is 0, which ``ci_width`` cannot judge."""
    return tuple(m for m in REGISTRY if m.near_zero)


def _near_zero(name: str) -> bool:
    found = metric(name)
    return found is not None and found.near_zero


def _saved_alphas(design: Mapping[str, Any]) -> dict[int, float]:
    """A design recorded before exact boundaries: its looks' alphas, kept on resume
    (its looks are still carried by the spender, whose levels it does not use)."""
    return {int(look["round"]): float(look["alpha"]) for look in design.get("looks", ())}


def _progress_line(look: Mapping[str, Any]) -> str:
    """The look in one line: what it decided and, for ci_width, what it left out."""
    head = f"dbrig: look after round {look['round']}"
    if "comparisons" in look:
        rows = look["comparisons"]
        done = sum(r["verdict"] in sequential.DECIDED_VERDICTS for r in rows)
        z = "no alpha to spend" if look["z"] is None else f"|z| >= {look['z']:.2f}"
        return f"{head} ({z}, alpha {look['alpha']:.2g}): {done} of {len(rows)} decided"
    widths = [c["half_width"] for c in look["cells"]]
    known = [w for w in widths if w is not None]
    widest = f"+/-{100 * max(known):.1f} %" if known else "not known yet"
    line = f"{head}: widest interval {widest}, want +/-{100 * look['ci_width']:g} %"
    left = sorted({x["metric"] for x in look["left_out"]})
    if left:
        line += f"; left out (mean about 0, no relative width): {', '.join(left)}"
    return line


def _rounds(plan: Plan) -> dict[int, list[str]]:
    rounds: dict[int, list[str]] = {}
    for trial in plan.trials:
        rounds.setdefault(trial.repetition, []).append(trial.id)
    return rounds


def _ok_per_cell(ok: Any, plan: Plan) -> dict[str, int]:
    counts = ok["cell"].value_counts()
    return {c.id: int(counts.get(c.id, 0)) for c in plan.cells}


def _comparisons(
    run: RunInput, by: str, metrics: tuple[str, ...], alpha: float
) -> list[dict[str, Any]]:
    try:
        report = compare_groups(run, by, metrics=metrics, alpha=alpha)
    except ConfigError as exc:  # nothing to compare yet (a group's trials all failed)
        return [{"verdict": "insufficient data", "note": str(exc)}]
    return [
        {
            "cell": row.label,
            "metric": row.metric,
            "candidate": row.candidate,
            "verdict": row.verdict,
            "p_value": _number(row.p_value),
            "p_adjusted": _number(row.p_adjusted),
            "delta_pct": _number(row.stats.delta_pct),
            "ci_low_pct": _number(row.stats.ci_low_pct),
            "ci_high_pct": _number(row.stats.ci_high_pct),
        }
        for row in report.rows
    ]


def _intervals(run: RunInput, metrics: list[str]) -> list[dict[str, Any]]:
    found = []
    for value in cell_values(run, metrics):
        width = sequential.relative_half_width(value.mean, value.ci_low, value.ci_high)
        found.append(
            {
                "cell": value.cell,
                "metric": value.metric,
                "n": value.n,
                "mean": value.mean,
                "half_width": _number(width),
            }
        )
    return found


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
