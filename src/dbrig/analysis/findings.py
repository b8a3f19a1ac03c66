"""What each experiment of a run found, in one or two sentences with numbers, n and how sure.

The report's first screen, the lines after the terminal's result table and every
format of ``dbrig show`` print these sentences (docs/cli.md, "Findings"). Pure:
the caller passes the tidy results frame, the factors and their labels, each
trial's ``faults.json`` data, the sweeps it found (the fits of
:mod:`dbrig.analysis.scaling`) and the soak block; nothing here reads a file.

One :class:`Finding` per answer, in this order:

- ``scalability``: a concurrency sweep's USL fit (σ, κ, N*, predicted peak) or
  why there is none, the measured peak and the latency knee;
- ``faults``: per fault kind, downtime, restart to first query, InnoDB crash
  recovery, throughput back at 90 % and the window's throughput with the fault;
- ``durability``: acknowledged commits lost, per cell;
- ``tpc-c-like``: NOPM per cell, the consistency conditions, New-Order rollbacks and
  the caveat that the workload is TPC-C-like and not audited;
- ``soak``: the drift verdict, or "not judged" under :data:`MIN_SOAK_WINDOW_S`;
- ``figures``: each cell's headline figures, for runs none of the above
  describe (hardware baselines, a single cell);
- ``effect``: each varied factor's effect on the headline metric, judged by the
  statistics ``dbrig compare`` uses (:func:`dbrig.analysis.stats.compare_samples`);
- ``spread``: cells whose repetitions disagree, with the measured cause that
  went with it (other processes' CPU, steal, the interference's achieved share).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from dbrig.analysis import drift, effects
from dbrig.analysis.run_facts import (
    DISAGREE_CV,
    Finding,
    RunFacts,
    SweepFacts,
    as_float,
    by_cell,
    measured_headline,
    prefixed,
    short_number,
    where,
)
from dbrig.analysis.stats import summarize
from dbrig.metrics import (
    SOAK_DRIFT_THRESHOLD_PCT_PER_H,
    SOAK_RSS_THRESHOLD_MIB_PER_H,
    Direction,
    Metric,
    metric,
)

__all__ = ["Finding", "RunFacts", "SweepFacts", "fault_kind", "findings"]

MIN_SOAK_WINDOW_S = 600.0  # under 10 minutes a per-hour slope extrapolates start-up
MAX_FIGURE_CELLS = 12
FAULT_FIGURES = (
    "downtime_s",
    "restart_to_query_s",
    "innodb_recovery_s",
    "throughput_recovered_s",
    "fault_window_tps",
)
CAVEAT = "TPC-C-like, not audited: not comparable with published TPC-C results"


def findings(facts: RunFacts) -> list[Finding]:
    """The run's findings in the order of the module docstring (empty without results)."""
    results = facts.results
    if results.empty or "status" not in results:
        return []
    ok = results[results["status"] == "ok"]
    found: list[Finding] = []
    found += [_sweep(s, _peak_disagreement(ok, facts, s)) for s in facts.sweeps]
    found += _faults(ok, facts)
    found += _durability(ok, facts)
    found += _tpcc(ok, facts)
    found += _soak(ok, facts)
    if all(f.topic == "scalability" for f in found) and not _any_fit(facts):
        found += _figures(ok, facts)
    found += effects.effects(ok, facts)
    found += effects.spread(ok, facts)
    if not found and ok.empty:
        found.append(Finding("figures", "nothing to report: no trial succeeded"))
    return found


# --------------------------------------------------------------------------- scalability


def _any_fit(facts: RunFacts) -> bool:
    return any(s.fit.ok for s in facts.sweeps)


def _peak_disagreement(ok: pd.DataFrame, facts: RunFacts, sweep: SweepFacts) -> str:
    """A note when the repetitions at the measured peak disagree: that peak may be noise."""
    factor, peak = facts.concurrency_factor, sweep.fit.measured_peak_n
    metric_name = sweep.throughput.name
    if factor is None or peak is None or factor not in ok or metric_name not in ok:
        return ""
    at_peak = ok[pd.to_numeric(ok[factor], errors="coerce") == peak]
    worst = 0.0
    for _, rows in by_cell(at_peak, metric_name):
        cv = summarize(pd.to_numeric(rows[metric_name], errors="coerce").dropna().tolist()).cv
        worst = max(worst, cv or 0.0)
    if worst <= DISAGREE_CV:
        return ""
    return (
        f" (its repetitions disagree, CV {100 * worst:.0f} %: the peak's place may be noise, "
        "see below)"
    )


def _sweep(sweep: SweepFacts, peak_note: str = "") -> Finding:
    fit, unit = sweep.fit, sweep.throughput
    levels = (
        f"{sweep.label} {short_number(fit.levels[0])}-{short_number(fit.levels[-1])}"
        if fit.levels
        else ""
    )
    head = f"{sweep.title} ({levels}, n={fit.points} repetitions): "
    if not fit.ok:
        text = head + f"no USL fit: {fit.reason}"
    else:
        text = head + (
            f"USL fit R² {fit.r2:.3f}, σ {_pm(fit.sigma, fit.sigma_se)}, "
            f"κ {_pm(fit.kappa, fit.kappa_se)}"
        )
        if fit.n_star is not None and fit.predicted_peak is not None:
            text += (
                f"; peak N* = {fit.n_star:.1f} at {unit.format(fit.predicted_peak)} "
                f"{unit.terminal_heading}"
            )
        else:
            text += f"; no peak: {fit.no_peak_reason}"
    if fit.measured_peak is not None and fit.measured_peak_n is not None:
        text += (
            f". Measured peak {unit.format(fit.measured_peak)} {unit.terminal_heading} at "
            f"{sweep.label}={short_number(fit.measured_peak_n)}{peak_note}"
        )
    knee = sweep.knee
    if knee.n is not None and knee.latency is not None and knee.expected is not None:
        text += (
            f"; latency knee at {sweep.label}={short_number(knee.n)} ({sweep.latency_heading} "
            f"{knee.latency:,.2f} against {knee.expected:,.2f} on the line)"
        )
    else:
        text += f"; no latency knee ({knee.reason})" if knee.reason else "; no latency knee"
    return Finding("scalability", text)


def _pm(value: float | None, error: float | None) -> str:
    text = f"{value:.3g}" if value is not None else "?"
    return text + (f" ±{error:.2g}" if error is not None and math.isfinite(error) else "")


# --------------------------------------------------------------------------- faults


def fault_kind(data: Mapping[str, Any]) -> str:
    """What a trial injected, from its faults.json's ``faults`` block: ``kill_server
    SIGKILL at 8 s``, ``kill_server SIGSTOP at 4 s for 3 s`` (the findings and the
    report's Faults table say it alike)."""
    parts = []
    for key, spec in (data.get("faults") or {}).items():
        spec = spec if isinstance(spec, Mapping) else {}
        text = key
        if spec.get("signal"):
            text += f" SIG{spec['signal']}"
        if spec.get("at") is not None:
            text += f" at {short_number(spec['at'])} s"
        if spec.get("for") is not None:
            text += f" for {short_number(spec['for'])} s"
        parts.append(text)
    return " + ".join(parts) or "fault"


def _faults(ok: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    if not facts.faults or "trial" not in ok:
        return []
    kinds: dict[str, list[str]] = {}
    for trial in ok["trial"].astype(str):
        if trial in facts.faults:
            kinds.setdefault(fault_kind(facts.faults[trial]), []).append(trial)
    failed = len(facts.results) - len(ok)
    out = []
    for kind, trials in kinds.items():
        rows = ok[ok["trial"].astype(str).isin(trials)]
        figures = []
        for name in FAULT_FIGURES:
            entry = metric(name)
            if entry is None or name not in rows or not rows[name].notna().any():
                continue
            text = _spread_text(entry, rows[name])
            figures.append(text + (_innodb_detail(rows) if name == "innodb_recovery_s" else ""))
        text = f"{kind} (n={len(rows)}): " + ("; ".join(figures) or "no recovery figures")
        out.append(Finding("faults", text + "."))
    if failed and out:
        out.append(Finding("faults", f"{failed} trial(s) with a fault failed: see the report."))
    return out


def _innodb_detail(rows: pd.DataFrame) -> str:
    parts = []
    for name, what, spec in (
        ("innodb_redo_mb", "MiB of redo", ".3g"),
        ("innodb_pages_recovered", "pages recovered", ",.0f"),
        ("innodb_trx_rolled_back", "transactions rolled back", ",.0f"),
    ):
        if name in rows and rows[name].notna().any():
            shown = _range(rows[name], spec)
            parts.append(f"{shown} {_singular(what) if shown == '1' else what}")
    return f" ({', '.join(parts)})" if parts else ""


def _singular(what: str) -> str:
    """``transaction rolled back`` for one of them."""
    first, _, rest = what.partition(" ")
    return f"{first.removesuffix('s')} {rest}".strip()


def _spread_text(entry: Metric, values: pd.Series) -> str:
    """``downtime 3.12 s (2.9-3.3)``: the mean and, with several trials, the range."""
    clean = pd.to_numeric(values, errors="coerce").dropna()
    text = f"{entry.label} {entry.format(float(clean.mean()))} {entry.unit}".rstrip()
    if len(clean) > 1 and clean.min() != clean.max():
        text += f" ({entry.format(float(clean.min()))}-{entry.format(float(clean.max()))})"
    return text


def _range(values: pd.Series, spec: str) -> str:
    clean = pd.to_numeric(values, errors="coerce").dropna()
    low, high = float(clean.min()), float(clean.max())
    return format(low, spec) if low == high else f"{format(low, spec)}-{format(high, spec)}"


# --------------------------------------------------------------------------- durability


def _durability(ok: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    if "lost_commits" not in ok or not ok["lost_commits"].notna().any():
        return []
    parts = []
    for cell, rows in by_cell(ok, "lost_commits"):
        lost = rows["lost_commits"].dropna()
        losing = int((lost > 0).sum())
        text = prefixed(cell, facts, f"{_range(lost, ',.0f')} lost")
        if "acked_commits" in rows and rows["acked_commits"].notna().any():
            text += f" of {_range(rows['acked_commits'], ',.0f')} acknowledged"
        parts.append(text + f" (lost in {losing} of {len(lost)} trials)")
    return [Finding("durability", "Acknowledged commits lost: " + "; ".join(parts) + ".")]


# --------------------------------------------------------------------------- TPC-C-like


def _tpcc(ok: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    entry = metric("nopm")
    if entry is None or "nopm" not in ok or not ok["nopm"].notna().any():
        return []
    parts = [
        prefixed(cell, facts, _figure(entry, rows["nopm"])) for cell, rows in by_cell(ok, "nopm")
    ]
    trials = ok[ok["nopm"].notna()]
    text = "; ".join(parts) + "."
    checks = [f"consistency_{n}_violations" for n in range(1, 5)]
    if all(c in trials for c in checks):
        held = int((trials[checks].fillna(0) == 0).all(axis=1).sum())
        text += f" Consistency conditions 1-4 held in {held} of {len(trials)} trials."
    if {"new_order_rollbacks", "new_order_count"} <= set(trials):
        count = float(trials["new_order_count"].sum())
        if count > 0:
            share = 100 * float(trials["new_order_rollbacks"].sum()) / count
            text += f" New-Order rollbacks {share:.1f} % (the workload asks for 1 %)."
    return [Finding("tpc-c-like", f"{text} {CAVEAT}.")]


# --------------------------------------------------------------------------- soak


def _soak(ok: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    if facts.soak is None or "measured_time_s" not in ok:
        return []
    drift_limit = as_float(facts.soak.get("drift_threshold_pct_per_h"))
    rss_limit = as_float(facts.soak.get("rss_threshold_mib_per_h"))
    drift_limit = SOAK_DRIFT_THRESHOLD_PCT_PER_H if drift_limit is None else drift_limit
    rss_limit = SOAK_RSS_THRESHOLD_MIB_PER_H if rss_limit is None else rss_limit
    out = []
    for row in ok.sort_values(["cell", "repetition"], kind="stable").to_dict("records"):
        window = as_float(row.get("measured_time_s")) or 0.0
        name = "soak" + where(str(row["cell"]), facts) + f" r{row.get('repetition')}"
        if window < MIN_SOAK_WINDOW_S:
            out.append(
                Finding(
                    "soak",
                    f"{name}: not judged: the window of {window:.0f} s is under "
                    f"{MIN_SOAK_WINDOW_S / 60:.0f} minutes (a per-hour slope would "
                    "extrapolate the start-up)",
                )
            )
            continue
        out.append(
            Finding(
                "soak",
                f"{name} ({window / 60:.0f} min): " + _soak_verdict(row, drift_limit, rss_limit),
            )
        )
    return out


def _soak_verdict(row: Mapping[str, Any], drift_limit: float, rss_limit: float) -> str:
    parts = []
    for prefix, what in (("tps", "TPS"), ("latency_pct", "latency")):
        bounds = [
            as_float(row.get(f"{prefix}_drift{s}_pct_per_h")) for s in ("", "_ci_low", "_ci_high")
        ]
        if any(b is None for b in bounds):
            continue
        found = drift.Drift.from_bounds(*bounds)  # type: ignore[arg-type]
        verdict = "drifts" if drift.is_real_trend(found, drift_limit) else "steady"
        parts.append(
            f"{what} {verdict} ({found.pct_per_h:+.1f} %/h, 95 % CI {found.ci_low_pct_per_h:+.1f} "
            f"to {found.ci_high_pct_per_h:+.1f}; limit {drift_limit:g} %/h)"
        )
    growth = as_float(row.get("server_rss_growth_mib"))
    slope, low = (
        as_float(row.get("server_rss_slope_mib_per_h")),
        as_float(row.get("server_rss_slope_ci_low_mib_per_h")),
    )
    if growth is not None:
        text = f"server RSS {growth:+.0f} MiB over the window"
        if slope is not None and low is not None:
            grows = low > 0 and slope >= rss_limit
            verdict = "beyond" if grows else "within"
            text += (
                f", {slope:+.1f} MiB/h over its second half ({verdict} the "
                f"{rss_limit:g} MiB/h limit)"
            )
        parts.append(text)
    return "; ".join(parts) or "no drift figures saved"


# --------------------------------------------------------------------------- figures


def _figures(ok: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    """Each cell's headline figures (hardware baselines, a single cell)."""
    cells = list(by_cell(ok, None))
    if not cells:
        return []
    parts = []
    for cell, rows in cells[:MAX_FIGURE_CELLS]:
        shown = [_figure(entry, rows[entry.name]) for entry in _figure_metrics(rows)]
        if shown:
            parts.append(prefixed(cell, facts, ", ".join(shown)))
    if len(cells) > MAX_FIGURE_CELLS:
        parts.append(f"{len(cells) - MAX_FIGURE_CELLS} more cells in the table")
    return [Finding("figures", "; ".join(parts) + ".")] if parts else []


def _figure_metrics(rows: pd.DataFrame, limit: int = 3) -> list[Metric]:
    """The figures of a cell: its throughput, then its other rates (a fileio test's
    reads/s and MiB/s), then its latency; none whose mean is 0 (writes in a read test)."""
    measured = measured_headline(rows)
    rates = [m for m in measured[1:] if m.direction is Direction.HIGHER_IS_BETTER]
    ordered = dict.fromkeys([*measured[:1], *rates, *measured[1:]])
    nonzero = [m for m in ordered if pd.to_numeric(rows[m.name], errors="coerce").mean() != 0]
    return nonzero[:limit]


def _figure(entry: Metric, values: pd.Series) -> str:
    """``TPS 1,234.5 ±2.1 % (n=3)``: the mean and its 95 % CI half-width in percent."""
    clean = pd.to_numeric(values, errors="coerce").dropna().tolist()
    s = summarize(clean)
    if s.mean is None:
        return f"{entry.terminal_heading}: no value"
    text = f"{entry.terminal_heading} {entry.format(s.mean)}"
    if s.ci_high is not None and s.mean:
        text += f" ±{100 * (s.ci_high - s.mean) / abs(s.mean):.0f} %"
    return text + f" (n={s.n})"
