"""Why a comparison came out as it did: the functions whose share of the CPU changed
most, and the wait events and statements whose time per transaction changed most,
baseline cell versus candidate cell, from each trial's profile.folded, waits.csv and
digests.csv (``sampling/profile.py``, ``sampling/internals.py``).

Pure: the caller reads the trials' files (``report/explain_inputs.py``).

Every figure is one value per trial, so each side has n values and the difference of
their means gets the same treatment as compare's verdicts (``analysis/stats.py``):
Welch's interval and test on the difference (in percentage points of the samples, or
microseconds per transaction: a function absent from the baseline has a share of 0,
so a relative change says nothing), no interval and no verdict from fewer than two
trials a side, and a correction over each table's tested rows.

The correction is Benjamini-Hochberg's (the false discovery rate), not the verdicts'
Holm (the family-wise rate): the verdicts gate a CI job, one false alarm in the family
is what they must hold; a table here screens up to hundreds of functions for the few
that moved, and what a DBA needs is that the rows it calls *more* or *less* are
rarely wrong (at most ``alpha`` of them, in expectation), not that none ever is. Holm
over 145 functions at three trials a side called nothing, even a function every
trial put at 26 % against 0 (docs/profiling.md, the shipped example).

* **self share**: of a trial's samples, those whose stack ends in the function;
  **total share**: those whose stack holds it. Frames perf could not name
  (``[unknown]``) are kept in the self table and left out of the total one, as
  :mod:`dbrig.analysis.profile` does. A trial with no samples has no share.
* **wait events**: a trial's wait time of the event (condition waits left out, as
  everywhere) in microseconds over its transactions; a trial without a transaction
  count adds nothing. An event a trial's waits.csv lacks did not wait there: 0. A
  trial without waits.csv (the sampler writes it only when it read both ends of the
  window) has unknown waits, not none: it is left out of the table's n, and a note
  says which trials and why (their internals.out, or what was wrong with the file).
* **statements** (by schema and digest): the same per transaction. digests.csv keeps
  each trial's top ``sampling.internals.digests`` statements only: one missing from a
  trial's list counts as 0 there while the list is shorter than that, and is unknown
  (that trial left out of the statement's n) when the list is full.

Rows are ranked by the absolute change of their means. Only rows whose mean over both
sides together reaches :data:`MIN_TESTED` of the whole (0.5 % of the samples, of the
wait time per transaction, of the statement time per transaction) are tested: filtering
on that overall mean, which does not depend on the difference, keeps the corrected family to
the rows that can matter (Bourgon et al. 2010, "independent filtering", which
holds for Benjamini-Hochberg as for Holm). A row under it
changed by less than twice that, so it never tops the table.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import false_discovery_control

from dbrig.analysis.internals import CONDITION, TrialInternals
from dbrig.analysis.profile import UNKNOWN, function_shares, merge
from dbrig.analysis.stats import ONE_TRIAL, Difference, compare_difference

MIN_TESTED = 0.005  # of the whole: the smallest overall mean a row needs to be tested
DEFAULT_ROWS = 10

SELF, TOTAL, WAITS, DIGESTS = "self", "total", "waits", "digests"
TITLES = {
    SELF: "CPU functions by self share",
    TOTAL: "CPU functions by total share",
    WAITS: "wait events by time per transaction",
    DIGESTS: "statements by time per transaction",
}
UNITS = {SELF: "% of samples", TOTAL: "% of samples", WAITS: "µs/txn", DIGESTS: "µs/txn"}

# A row's word: more / less (a change past the threshold, q after Benjamini-Hochberg below alpha),
# unchanged (significant but below the threshold, or identical), unclear (not
# significant), and the rows that got no test.
MORE, LESS, UNCHANGED, UNCLEAR = "more", "less", "unchanged", "unclear"
NO_VERDICT, SMALL, NO_TEST = "n < 2", "small: untested", "no test"


PROFILE = "profile"  # the part of a trial the SELF and TOTAL tables read


@dataclass(frozen=True)
class TrialEvidence:
    """One trial's saved profile and internals (None: the trial has none).
    ``warnings``: its internals.out lines; ``problems``: part (:data:`PROFILE`,
    :data:`WAITS`, :data:`DIGESTS`) -> what was wrong with its file, one line."""

    trial: str
    stacks: Mapping[str, int] | None = None
    internals: TrialInternals | None = None
    warnings: tuple[str, ...] = ()
    problems: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """One function, wait event or statement: its means per side and their difference.
    ``where`` is a statement's schema ("" otherwise)."""

    name: str
    stats: Difference
    verdict: str
    p_adjusted: float | None = None
    where: str = ""


@dataclass(frozen=True)
class ChangeTable:
    """The top rows of one kind (:data:`TITLES`), ``n_base``/``n_cand`` trials a side
    with the data, ``tested`` of ``seen`` rows tested (the corrected family)."""

    kind: str
    n_base: int
    n_cand: int
    seen: int
    tested: int
    rows: tuple[Change, ...]
    notes: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return TITLES[self.kind]

    @property
    def unit(self) -> str:
        return UNITS[self.kind]


@dataclass(frozen=True)
class CellExplanation:
    """The explanation of one matched pair of cells (compare's rows of ``label`` for
    ``candidate``); ``base_stacks``/``cand_stacks``: each side's trials merged, for the
    differential flame graph (empty: that side has no profile). ``notes``: what went
    wrong with files of a kind that got no table."""

    candidate: str
    label: str
    base_cell: str
    cand_cell: str
    tables: tuple[ChangeTable, ...]
    base_stacks: Mapping[str, int] = field(default_factory=dict)
    cand_stacks: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def has_profiles(self) -> bool:
        return bool(self.base_stacks) and bool(self.cand_stacks)


@dataclass(frozen=True)
class Rules:
    """compare's settings, as the tables use them."""

    alpha: float = 0.05
    threshold: float = 0.05
    correction: str = "holm"
    rows: int = DEFAULT_ROWS


# --------------------------------------------------------------------------- per trial

Values = dict[str, float]  # row name -> the trial's value


@dataclass(frozen=True)
class Partial:
    """A trial's values of which only the top ones were kept: a name missing there is
    unknown (not 0), and the trial is left out of that row."""

    values: Values


def _value(trial: Values | Partial, name: str) -> float:
    if isinstance(trial, Partial):
        return trial.values.get(name, math.nan)  # NaN: compare_difference leaves it out
    return trial.get(name, 0.0)


def _names(trial: Values | Partial) -> Values:
    return trial.values if isinstance(trial, Partial) else trial


def self_shares(stacks: Mapping[str, int]) -> Values:
    """Each function's self share of the trial's samples, in percent."""
    return {f.name: 100 * f.self_share for f in function_shares(stacks) if f.self_share}


def total_shares(stacks: Mapping[str, int]) -> Values:
    """Each named function's total share, in percent (``[unknown]`` left out)."""
    return {
        f.name: 100 * f.total_share
        for f in function_shares(stacks)
        if not f.name.startswith(UNKNOWN)
    }


def wait_us_per_txn(trial: TrialInternals) -> Values | None:
    """Each wait event's microseconds per transaction (None: no transaction count, or
    no waits.csv)."""
    if not trial.transactions or trial.waits is None:
        return None
    times: Counter[str] = Counter()
    for row in trial.waits:
        if not row["event"].startswith(CONDITION):
            times[row["event"]] += float(row["wait_ms"])
    return {event: 1000 * ms / trial.transactions for event, ms in times.items()}


def digest_key(row: Mapping[str, str]) -> str:
    return f"{row['schema']}\x1f{row['digest']}"


def digest_us_per_txn(trial: TrialInternals) -> Values | None:
    """Each statement's (schema and digest) microseconds per transaction (None: no
    transaction count, or no digests.csv)."""
    if not trial.transactions or trial.digests is None:
        return None
    times: Counter[str] = Counter()
    for row in trial.digests:
        times[digest_key(row)] += float(row["total_ms"])
    return {key: 1000 * ms / trial.transactions for key, ms in times.items()}


# --------------------------------------------------------------------------- tables


def change_table(
    kind: str,
    base: Sequence[Values | Partial],
    cand: Sequence[Values | Partial],
    rules: Rules,
    whole: float | None = None,
    notes: Sequence[str] = (),
) -> ChangeTable:
    """The ``rules.rows`` rows of ``kind`` whose mean changed most. ``whole`` is what
    :data:`MIN_TESTED` is a fraction of (default: the trials' mean sum of values)."""
    names = sorted(set().union(*(_names(v) for v in [*base, *cand])))
    if whole is None:
        sums = [sum(_names(v).values()) for v in [*base, *cand]]
        whole = float(np.mean(sums)) if names else 0.0
    diffs = {
        name: compare_difference(
            [_value(v, name) for v in base], [_value(v, name) for v in cand], alpha=rules.alpha
        )
        for name in names
    }
    family = [n for n in names if _testable(diffs[n], base, cand, n, whole)]
    raw = [p for n in family if (p := diffs[n].p_value) is not None]
    p_of = dict(zip(family, _adjust(raw, rules.correction), strict=True))
    ranked = sorted(names, key=lambda n: (-abs(diffs[n].delta or 0.0), n))[: rules.rows]
    rows = tuple(
        Change(name, diffs[name], _verdict(diffs[name], p_of.get(name), rules), p_of.get(name))
        for name in ranked
    )
    all_notes = list(notes)
    if len(base) < 2 or len(cand) < 2:
        all_notes.append(f"{len(base)}/{len(cand)} trials (baseline/candidate): {ONE_TRIAL}")
    return ChangeTable(kind, len(base), len(cand), len(names), len(family), rows, tuple(all_notes))


def _testable(
    diff: Difference,
    base: Sequence[Values | Partial],
    cand: Sequence[Values | Partial],
    name: str,
    whole: float,
) -> bool:
    if diff.p_value is None:
        return False
    values = [x for v in [*base, *cand] if not math.isnan(x := _value(v, name))]
    return bool(values) and float(np.mean(values)) >= MIN_TESTED * whole


def _adjust(p_values: list[float], correction: str) -> list[float]:
    """Benjamini-Hochberg's adjusted p-values (q), unless compare decides each alone."""
    if correction == "none" or len(p_values) < 2:
        return p_values
    return [float(q) for q in false_discovery_control(p_values, method="bh")]


def _verdict(diff: Difference, p_adjusted: float | None, rules: Rules) -> str:
    """The row's word; ``p_adjusted`` is None for a row outside the tested family."""
    if diff.reason == ONE_TRIAL:
        return NO_VERDICT
    if diff.p_value is None:
        return UNCHANGED if diff.delta == 0 else NO_TEST
    if p_adjusted is None:
        return SMALL
    if p_adjusted >= rules.alpha:
        return UNCLEAR
    assert diff.delta is not None and diff.mean_base is not None
    if diff.mean_base > 0 and abs(diff.delta) < rules.threshold * diff.mean_base:
        return UNCHANGED  # real, but smaller than the threshold of the baseline's level
    return MORE if diff.delta > 0 else LESS


# --------------------------------------------------------------------------- a cell pair

WAIT_NOTE = "condition waits (wait/synch/cond/) left out, as from server_wait_s"
PART_NAMES = {PROFILE: "CPU profile", WAITS: "wait events", DIGESTS: "statement digests"}


def _per_trial(
    trials: Sequence[TrialEvidence], read: Callable[[TrialInternals], Values | None]
) -> list[Values]:
    found = [read(t.internals) for t in trials if t.internals is not None]
    return [v for v in found if v is not None]


def _digests_per_trial(trials: Sequence[TrialEvidence]) -> list[Values | Partial]:
    found: list[Values | Partial] = []
    for trial in trials:
        if trial.internals is None or (values := digest_us_per_txn(trial.internals)) is None:
            continue
        found.append(Partial(values) if trial.internals.digests_full else values)
    return found


def _profiled(trials: Sequence[TrialEvidence]) -> list[Mapping[str, int]]:
    return [t.stacks for t in trials if t.stacks is not None and sum(t.stacks.values()) > 0]


def _lacking(trial: TrialEvidence, part: str) -> bool:
    """Whether the internals sampler ran in ``trial`` but left no ``part`` to read."""
    if trial.internals is None:
        return part in trial.problems  # an unreadable file of a trial without internals.out
    return (trial.internals.waits if part == WAITS else trial.internals.digests) is None


def missing_notes(trials: Sequence[TrialEvidence], part: str) -> list[str]:
    """Which sampled trials have no ``part`` (:data:`WAITS`, :data:`DIGESTS`) and why:
    what was wrong with its file, else their internals.out, one note per reason."""
    sampled = [t for t in trials if t.internals is not None or part in t.problems]
    by_reason: dict[str, list[str]] = {}
    for trial in sampled:
        if _lacking(trial, part):
            why = trial.problems.get(part) or "; ".join(trial.warnings) or "no reason saved"
            by_reason.setdefault(why, []).append(trial.trial)
    return [
        f"{len(names)} of {len(sampled)} trials have no {PART_NAMES[part]}, left out of n "
        f"({', '.join(names)}): {why}"
        for why, names in by_reason.items()
    ]


def problem_notes(trials: Sequence[TrialEvidence], part: str) -> list[str]:
    """What was wrong with the trials' files of ``part``, one line a trial."""
    return [f"{t.trial}/{t.problems[part]}" for t in trials if part in t.problems]


def explain_cells(
    base: Sequence[TrialEvidence],
    cand: Sequence[TrialEvidence],
    rules: Rules,
    *,
    candidate: str = "",
    label: str = "",
    base_cell: str = "",
    cand_cell: str = "",
) -> CellExplanation | None:
    """The tables of every kind both sides have data for (None: no kind, and no file
    of either side was unreadable)."""
    trials = [*base, *cand]
    tables: list[ChangeTable] = []
    orphans: list[str] = []  # notes of a part that got no table
    base_profiles, cand_profiles = _profiled(base), _profiled(cand)
    profile_notes = problem_notes(trials, PROFILE)
    if base_profiles and cand_profiles:
        for kind, read in ((SELF, self_shares), (TOTAL, total_shares)):
            b, c = [read(s) for s in base_profiles], [read(s) for s in cand_profiles]
            tables.append(change_table(kind, b, c, rules, whole=100.0, notes=profile_notes))
    else:
        orphans += profile_notes
    base_waits, cand_waits = _per_trial(base, wait_us_per_txn), _per_trial(cand, wait_us_per_txn)
    if base_waits and cand_waits:
        notes = [WAIT_NOTE, *missing_notes(trials, WAITS)]
        tables.append(change_table(WAITS, base_waits, cand_waits, rules, notes=notes))
    else:
        orphans += problem_notes(trials, WAITS)
    base_dig, cand_dig = _digests_per_trial(base), _digests_per_trial(cand)
    if base_dig and cand_dig:
        table = change_table(DIGESTS, base_dig, cand_dig, rules, notes=_digest_notes(trials))
        tables.append(_named_digests(table, trials))
    else:
        orphans += problem_notes(trials, DIGESTS)
    tables = [t for t in tables if t.rows]  # e.g. no statements in any trial's digests.csv
    if not tables and not orphans:
        return None
    both = bool(base_profiles) and bool(cand_profiles)
    return CellExplanation(
        candidate,
        label,
        base_cell,
        cand_cell,
        tuple(tables),
        merge(base_profiles) if both else {},
        merge(cand_profiles) if both else {},
        tuple(orphans),
    )


def _digest_notes(trials: Sequence[TrialEvidence]) -> list[str]:
    full = [t.trial for t in trials if t.internals is not None and t.internals.digests_full]
    note = "a statement missing from a trial's top statements (digests.csv) counts as 0 there"
    if full:
        note += (
            f", but as unknown where the list is full (sampling.internals.digests rows: "
            f"{', '.join(full)}): that trial is left out of the statement's n"
        )
    return [note, *missing_notes(trials, DIGESTS)]


def _named_digests(table: ChangeTable, trials: Sequence[TrialEvidence]) -> ChangeTable:
    """Statement rows named by their text, with their schema beside."""
    texts: dict[str, str] = {}
    for trial in trials:
        for row in (trial.internals.digests if trial.internals else None) or ():
            texts.setdefault(digest_key(row), row["text"])
    rows = tuple(
        Change(
            texts.get(row.name, row.name) or row.name.split("\x1f")[1],
            row.stats,
            row.verdict,
            row.p_adjusted,
            row.name.split("\x1f")[0],
        )
        for row in table.rows
    )
    return ChangeTable(
        table.kind, table.n_base, table.n_cand, table.seen, table.tested, rows, table.notes
    )


# --------------------------------------------------------------------------- frames


def frame_shares(stacks: Mapping[str, int]) -> dict[str, float]:
    """Each frame's share of the samples (0..1) by its path from the root
    (``root;caller;...;frame``): the width a flame graph gives it."""
    total = sum(stacks.values())
    counts: Counter[str] = Counter()
    for stack, count in stacks.items():
        path = ""
        for frame in stack.split(";"):
            path = f"{path};{frame}" if path else frame
            counts[path] += count
    return {path: n / total for path, n in counts.items()} if total else {}
