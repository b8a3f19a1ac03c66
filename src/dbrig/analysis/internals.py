"""Server internals (waits.csv, digests.csv of each trial: ``sampling/internals.py``)
merged over a cell's trials, per transaction.

A cell's wait event costs its trials' wait time summed, over their transactions
summed: microseconds per transaction, so cells of different throughput compare. A
trial without a transaction count (a tool that counts none) adds its waits to the
totals and nothing to the transactions, so per-transaction figures are left out
when no trial has one. A trial without waits.csv (or digests.csv: the sampler writes
them only when it read both ends of the window) is left out of that table, its
transactions too: its waits are unknown, not none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# Condition waits (threads asleep until signalled, mostly background ones) are left out
# of the tables, as of server_wait_s (sampling/internals.py, CONDITION).
CONDITION = "wait/synch/cond/"


@dataclass(frozen=True)
class TrialInternals:
    """One trial's rows, as read from its files (column name -> text); None: the trial
    has no such file (or an unreadable one)."""

    waits: Sequence[Mapping[str, str]] | None
    digests: Sequence[Mapping[str, str]] | None
    transactions: float | None  # in its measured window
    # digests.csv holds sampling.internals.digests rows, its cap: a statement missing from
    # it may have run, below the cut (sampling/internals.py, digest_deltas).
    digests_full: bool = False


@dataclass(frozen=True)
class WaitShare:
    event: str
    count: int
    wait_ms: float
    us_per_txn: float | None
    share: float  # of the cell's wait time, 0..1


@dataclass(frozen=True)
class DigestTotal:
    text: str
    schema: str
    count: int
    total_ms: float
    mean_us: float
    rows_examined_per_call: float
    us_per_txn: float | None


def _transactions(trials: Iterable[TrialInternals]) -> float | None:
    counted = [t.transactions for t in trials if t.transactions]
    return sum(counted) if counted else None


def _per_txn(total_ms: float, txns: float | None) -> float | None:
    return 1000 * total_ms / txns if txns else None


def top_waits(trials: Sequence[TrialInternals], n: int = 15) -> list[WaitShare]:
    """The ``n`` wait events with the most time over the cell's trials (condition waits
    left out); ``share``: of the cell's wait time but condition waits."""
    trials = [t for t in trials if t.waits is not None]
    counts: dict[str, int] = {}
    times: dict[str, float] = {}
    for trial in trials:
        for row in trial.waits or ():
            event = row["event"]
            if event.startswith(CONDITION):
                continue
            counts[event] = counts.get(event, 0) + int(row["count"])
            times[event] = times.get(event, 0.0) + float(row["wait_ms"])
    total = sum(times.values())
    txns = _transactions(trials)
    ranked = sorted(times, key=lambda e: (-times[e], e))[:n]
    return [
        WaitShare(
            e, counts[e], times[e], _per_txn(times[e], txns), times[e] / total if total else 0
        )
        for e in ranked
    ]


def top_digests(trials: Sequence[TrialInternals], n: int = 10) -> list[DigestTotal]:
    """The ``n`` statements with the most time over the cell's trials (by digest)."""
    merged: dict[tuple[str, str], list[float]] = {}
    texts: dict[tuple[str, str], str] = {}
    trials = [t for t in trials if t.digests is not None]
    for trial in trials:
        for row in trial.digests or ():
            key = (row["schema"], row["digest"])
            sums = merged.setdefault(key, [0, 0.0, 0])
            sums[0] += int(row["count"])
            sums[1] += float(row["total_ms"])
            sums[2] += int(row["rows_examined"])
            texts[key] = row["text"]
    txns = _transactions(trials)
    ranked = sorted(merged, key=lambda k: (-merged[k][1], k))[:n]
    return [
        DigestTotal(
            texts[key],
            key[0],
            int(merged[key][0]),
            merged[key][1],
            1000 * merged[key][1] / merged[key][0] if merged[key][0] else 0.0,
            merged[key][2] / merged[key][0] if merged[key][0] else 0.0,
            _per_txn(merged[key][1], txns),
        )
        for key in ranked
    ]
