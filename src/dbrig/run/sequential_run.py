"""A run with ``repeat: {min, max, until}``: look after each round, stop when decided.

The plan holds rounds 1..max of every cell in the usual interleaved order. After
the last trial of a round from ``min`` on, :class:`Looks` reads every saved trial,
decides with :mod:`dbrig.analysis.sequential`'s design (compare's statistics at the
look's spent alpha, or each cell's interval width), and records the look in
run.json (``sequential.looks``). A look that decides, or the look at ``max``, ends
the run: ``sequential.stopped`` says why, and run.json's planned trials are cut to
the rounds that ran, so every reader sees a complete run. ``--resume`` reads the
looks so far from run.json and continues the same design.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from dbrig import store
from dbrig.analysis import sequential
from dbrig.analysis.cells import cell_values, headline_metrics
from dbrig.analysis.compare import RunInput, compare_groups, resolve_factor
from dbrig.errors import ConfigError
from dbrig.metrics import metric
from dbrig.scenario import Plan, Trial
from dbrig.scenario.model import SequentialRepeat

KEY = "sequential"  # run.json's record of the design and its looks


def design_of(spec: SequentialRepeat) -> sequential.Design:
    return sequential.Design(spec.min, spec.max, spec.alpha, spec.spending)


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
        yield f"  alpha {spec.alpha:g} spent {spec.spending} (Lan-DeMets) over the looks:"
        for look in design.looks:
            yield f"    round {look.round}: t={look.fraction:.2f}, nominal alpha {look.alpha:.3g}"


def record(run: store.RunDir) -> dict[str, Any]:
    return dict(run.saved().extra.get(KEY) or {})


class Looks:
    """The run's looks: after each finished round from ``min``, decide, record, maybe stop."""

    def __init__(self, plan: Plan, run: store.RunDir) -> None:
        spec = plan.scenario.sequential
        assert spec is not None
        self.spec = spec
        self.design = design_of(spec)
        self.plan = plan
        self.run = run
        self.rounds = _rounds(plan)
        saved = record(run)
        self.looked = {int(look["round"]) for look in saved.get("looks", ())}
        if not saved:
            self._write({"design": self._design_json(), "looks": []})

    def after(self, trial: Trial, results: Mapping[str, store.TrialResult]) -> str | None:
        """Why the run stops after ``trial``, or None to go on. Every finished round not
        looked at yet is looked at in turn (a resumed run may have missed one)."""
        for round_ in range(self.spec.min, trial.repetition + 1):
            if round_ in self.looked:
                continue
            if not all(trial_id in results for trial_id in self.rounds.get(round_, ())):
                return None
            stop = self._record(self._look(round_, results))
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
            nominal = self.design.look(round_)
            look.update(fraction=nominal.fraction, alpha=nominal.alpha)
            rows = _comparisons(run, self.spec.until.decided_by, metrics, nominal.alpha)
            look["comparisons"] = rows
            decided = sequential.all_decided([r["verdict"] for r in rows])
        else:
            limit = float(self.spec.until.ci_width or 0)
            cells = _intervals(run, metrics)
            look["cells"] = cells
            look["ci_width"] = limit
            widths = [c["half_width"] for c in cells]
            if len({c["cell"] for c in cells}) < len(self.plan.cells):
                widths.append(None)  # a cell with no successful value yet
            decided = sequential.narrow_enough(widths, limit)
        look["decided"] = decided
        look["stop"] = sequential.stop_reason(decided, round_, self.design, self.spec.until.rule)
        return look

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
            "looks": [vars(look) for look in self.design.looks],
        }

    def _write(self, value: dict[str, Any]) -> None:
        saved = self.run.saved()
        self.run.write_saved(saved.replace(extra={**saved.extra, KEY: value}))


def stopped_round(run: store.RunDir) -> int | None:
    """The round a sequential run stopped after (its later trials are not to run)."""
    stopped = record(run).get("stopped")
    return int(stopped["round"]) if stopped else None


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


def _intervals(run: RunInput, metrics: tuple[str, ...]) -> list[dict[str, Any]]:
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
