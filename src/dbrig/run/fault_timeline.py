"""The timeline of a trial's faults: its events on the measured window's clock, and the
spans read from it (how long the client was out, what part of the window it ran over)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Event:
    t_s: float  # on the measured window's clock
    what: str
    detail: dict[str, Any] = field(default_factory=dict)


FAULT_METRIC_NAMES = frozenset(
    {
        "fault_at_s",
        "server_exit_s",
        "restart_to_query_s",
        "downtime_s",
        "client_out_s",
        "throughput_recovered_s",
        "client_errors",
        "fault_window_tps",
        "innodb_recovery_s",
        "innodb_redo_s",
        "innodb_rollback_s",
        "innodb_redo_mb",
        "innodb_pages_recovered",
        "innodb_trx_rolled_back",
        "disk_fill_mb",
        "disk_full_s",
        "server_log_errors",
    }
)


def client_out_s(events: list[Event]) -> float | None:
    """From the fault that ended the client's run to its restart."""
    ends = ("client killed", "signal sent", "client run ended")
    ended = next((e.t_s for e in sorted(events, key=lambda e: e.t_s) if e.what in ends), None)
    resumed = next((e.t_s for e in events if e.what == "client restarted"), None)
    if ended is None or resumed is None:
        return None
    return resumed - ended


def client_window_s(
    events: list[Event], ends: list[float], window_s: float, interval_s: float
) -> float:
    """The part of the window the client was run over. A client started again runs
    whole seconds, the window's rest rounded down: its last interval ends where the
    window ends for it, and the fraction of a second after it is no outage. The window
    starts where the first measured interval does (the tool's clock starts a little
    after its launch: ``t_s`` carries that delay)."""
    if not ends or not any(e.what == "client restarted" for e in events):
        return window_s
    return max(ends) - max(0.0, min(ends) - interval_s)
