"""The findings of a saved run (:mod:`dbrig.analysis.findings`), read from its directory.

The report's first block, the lines after the terminal result table of ``dbrig run``
and ``dbrig show`` (every ``--format``) all come from :func:`run_findings`, so they
say the same sentences. This module gathers what the pure analysis needs from the
run directory (the sweeps of :mod:`dbrig.report.scaling`, each trial's faults.json,
the soak block) and renders the lines for each output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dbrig.analysis.findings import Finding, RunFacts, SweepFacts, findings
from dbrig.report import scaling
from dbrig.report.data import RunData

FAULTS_FILE = "faults.json"
HEADING = "Findings"


def run_findings(data: RunData) -> list[Finding]:
    """The run's findings, in the order :func:`dbrig.analysis.findings.findings` gives."""
    soak = data.scenario.get("soak")
    facts = RunFacts(
        results=data.results,
        factors=data.factors,
        labels=data.labels,
        cell_labels=dict(zip(data.cells["cell"], data.cells["label"], strict=True)),
        faults=_faults(data),
        sweeps=[_sweep_facts(s) for s in scaling.find_sweeps(data) if len(s.fit.levels) > 1],
        soak=soak if isinstance(soak, dict) else None,
        concurrency_factor=scaling.concurrency_factor(data),
    )
    return findings(facts)


def section(data: RunData) -> list[dict[str, str]]:
    """The report's findings block: one item per finding (its topic and sentence)."""
    return [{"topic": f.topic, "text": f.text} for f in run_findings(data)]


def lines(found: list[Finding], fmt: str = "table") -> list[str]:
    """The findings as lines for a terminal format: plain for ``table``, a bulleted list
    under a heading for ``markdown``, ``#`` comment lines after the rows for ``csv``."""
    if not found:
        return []
    if fmt == "markdown":
        return ["", f"**{HEADING}**", "", *(f"- {f.text}" for f in found)]
    if fmt == "csv":
        return [f"# {f.text}" for f in found]
    return [f"{HEADING}:", *(f"  {f.text}" for f in found)]


def _sweep_facts(sweep: scaling.Sweep) -> SweepFacts:
    return SweepFacts(
        title=sweep.title,
        label=sweep.label,
        throughput=sweep.throughput,
        fit=sweep.fit,
        knee=sweep.knee,
        latency_heading=sweep.latency_heading,
    )


def _faults(data: RunData) -> dict[str, dict[str, Any]]:
    """Each saved trial's faults.json (trials without one, or with an unreadable one, left out)."""
    if data.results.empty or "trial" not in data.results:
        return {}
    out = {}
    for trial in data.results["trial"].astype(str):
        path: Path = data.trial_dir(trial) / FAULTS_FILE
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict):
            out[trial] = loaded
    return out
