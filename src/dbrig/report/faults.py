"""Each trial's faults.json as the report reads it: its events as chart markers, its
figures as one row of the Faults section.

faults.json (written by the run's fault controller, docs/reliability.md) holds the
faults as configured, the ``timeline`` of events on the measured window's clock
(0 = end of the warm-up: the time series' clock), InnoDB's recovery and the
``metrics`` computed from them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from dbrig.metrics import metric
from dbrig.report.chart_base import Marker

FAULTS_FILE = "faults.json"

# Timeline events drawn on the time series, and their labels ("signal sent" names the signal).
EVENT_LABELS = {
    "signal sent": "",
    "server gone": "server gone",
    "restart": "restart",
    "first query": "first query",
    "throughput recovered": "recovered",
    "client killed": "client killed",
    "disk filled": "disk filled",
    "disk freed": "disk freed",
    "file deleted": "file deleted",
}

# The Faults table: (faults.json metric, heading, unit); counts are whole numbers.
COLUMNS = (
    ("downtime_s", "downtime", "s"),
    ("restart_to_query_s", "restart to first query", "s"),
    ("innodb_recovery_s", "InnoDB recovery", "s"),
    ("innodb_redo_mb", "redo scanned", "MiB"),
    ("innodb_pages_recovered", "pages recovered", "count"),
    ("innodb_trx_rolled_back", "transactions rolled back", "count"),
    ("throughput_recovered_s", "throughput back at 90 %", "s"),
    ("fault_window_tps", "TPS in the fault window", "txn/s"),
)


def read(trial_dir: Path) -> dict[str, Any] | None:
    """A trial's faults.json, or None (no fault in the trial, or a file that cannot be read)."""
    try:
        loaded = json.loads((trial_dir / FAULTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def markers(record: dict[str, Any] | None) -> tuple[Marker, ...]:
    """The drawn events of one trial's timeline, in order."""
    out = []
    for event in (record or {}).get("timeline") or []:
        if not isinstance(event, dict) or event.get("event") not in EVENT_LABELS:
            continue
        t_s = event.get("t_s")
        if not isinstance(t_s, int | float) or not math.isfinite(t_s):
            continue
        label = EVENT_LABELS[event["event"]] or f"SIG{event.get('signal', '?')}"
        out.append(Marker(float(t_s), label))
    return tuple(out)


def values(record: dict[str, Any]) -> list[str]:
    """The row's figures in :data:`COLUMNS` order ('' where the trial has none)."""
    figures = record.get("metrics") or {}
    out = []
    for name, _, unit in COLUMNS:
        value = figures.get(name)
        if not isinstance(value, int | float) or not math.isfinite(value):
            out.append("")
        elif unit == "count":
            out.append(f"{value:.0f}")
        else:
            entry = metric(name)
            out.append(entry.format(float(value)) if entry else f"{value:.2f}")
    return out


def timeline_text(record: dict[str, Any]) -> str:
    """The whole timeline, ``3.03 s signal sent (KILL), 3.03 s server gone, ...``."""
    parts = []
    for event in record.get("timeline") or []:
        if not isinstance(event, dict):
            continue
        detail = event.get("signal") or ""
        name = str(event.get("event", "?")) + (f" ({detail})" if detail else "")
        t_s = event.get("t_s")
        parts.append(f"{t_s:.2f} s {name}" if isinstance(t_s, int | float) else name)
    return ", ".join(parts)
