"""compare's explanation (analysis/explain.py): per-trial shares and times per
transaction, their differences with compare's statistics, on hand-made folded stacks
and CSV rows."""

from __future__ import annotations

from collections import Counter

import pytest

from dbrig.analysis import explain
from dbrig.analysis.explain import Rules, TrialEvidence, explain_cells
from dbrig.analysis.internals import TrialInternals
from dbrig.analysis.stats import ONE_TRIAL, compare_difference
from dbrig.report import compare_explain

RULES = Rules(alpha=0.05, threshold=0.05, correction="holm", rows=10)


# --------------------------------------------------------------------------- stats


def test_the_difference_of_means_has_welchs_interval() -> None:
    diff = compare_difference([10.0, 11.0, 12.0], [14.0, 15.0, 16.0])
    assert diff.delta == pytest.approx(4.0)
    assert diff.mean_base == pytest.approx(11.0) and diff.mean_cand == pytest.approx(15.0)
    # equal variances 1, n 3 a side: se sqrt(2/3), df 4, t(0.975, 4) = 2.776
    half = 2.776445 * (2 / 3) ** 0.5
    assert diff.ci_low == pytest.approx(4 - half, rel=1e-4)
    assert diff.ci_high == pytest.approx(4 + half, rel=1e-4)
    assert diff.p_value is not None and diff.p_value < 0.01
    assert diff.reason is None


def test_one_trial_a_side_gives_means_and_no_interval() -> None:
    diff = compare_difference([10.0], [12.0, 13.0])
    assert diff.delta == pytest.approx(2.5)
    assert diff.ci_low is None and diff.p_value is None
    assert diff.reason == ONE_TRIAL


def test_constant_sides_get_no_test() -> None:
    assert compare_difference([0.0, 0.0], [0.0, 0.0]).reason == "both sides constant"
    assert compare_difference([1.0, 1.0], [2.0, 2.0]).p_value is None
    # one side constant (a function absent from every baseline trial) is testable
    assert compare_difference([0.0, 0.0, 0.0], [4.0, 5.0, 6.0]).p_value is not None


# --------------------------------------------------------------------------- per trial


STACKS = Counter(
    {
        "mariadbd;do_command;filesort;memcmp": 30,
        "mariadbd;do_command;filesort": 10,
        "mariadbd;do_command;[unknown] (mariadbd);[unknown] (mariadbd)": 20,
        "mariadbd;do_command;net_read": 40,
    }
)


def test_self_and_total_shares_of_a_trial_in_percent() -> None:
    own = explain.self_shares(STACKS)
    assert own == pytest.approx(
        {"memcmp": 30.0, "filesort": 10.0, "[unknown] (mariadbd)": 20.0, "net_read": 40.0}
    )
    total = explain.total_shares(STACKS)
    assert total["filesort"] == pytest.approx(40.0)
    assert total["do_command"] == pytest.approx(100.0)
    # as analysis/profile.py: an unnamed frame has a self share, never a total one
    assert "[unknown] (mariadbd)" not in total
    assert "mariadbd" not in total  # the root is the process, not a function


def _internals(waits: dict[str, float], txns: float | None, digests=()) -> TrialInternals:
    rows = [{"event": e, "count": "1", "wait_ms": str(ms)} for e, ms in waits.items()]
    return TrialInternals(rows, list(digests), txns)


def test_wait_time_per_transaction_leaves_condition_waits_out() -> None:
    trial = _internals(
        {"wait/io/file/innodb/innodb_log_file": 50.0, "wait/synch/cond/sql/COND_timer": 900.0},
        txns=1000,
    )
    assert explain.wait_us_per_txn(trial) == {"wait/io/file/innodb/innodb_log_file": 50.0}
    assert explain.wait_us_per_txn(_internals({"x": 1.0}, txns=None)) is None


# --------------------------------------------------------------------------- tables


def test_rows_rank_by_absolute_change_and_get_a_word() -> None:
    base = [{"a": 50.0, "b": 10.0, "c": 5.0}, {"a": 52.0, "b": 11.0, "c": 5.2}]
    base += [{"a": 51.0, "b": 10.5, "c": 4.9}]
    cand = [{"a": 40.0, "b": 30.0, "c": 5.1}, {"a": 41.0, "b": 31.0, "c": 5.0}]
    cand += [{"a": 39.0, "b": 29.0, "c": 4.8}]
    table = explain.change_table(explain.SELF, base, cand, RULES, whole=100.0)
    assert [r.name for r in table.rows] == ["b", "a", "c"]
    by_name = {r.name: r for r in table.rows}
    assert by_name["b"].verdict == explain.MORE
    assert by_name["a"].verdict == explain.LESS
    assert by_name["c"].verdict == explain.UNCLEAR
    assert by_name["b"].stats.delta == pytest.approx(30.0 - 10.5)
    assert table.tested == 3 and table.seen == 3
    # corrected over the three: every adjusted p at least the test's own
    assert all(r.p_adjusted >= r.stats.p_value for r in table.rows)


def test_a_table_screens_many_functions_by_false_discovery_rate_not_holm() -> None:
    """The shipped example's case: among a hundred functions that stay, five moved the
    same way in every trial. Holm over the hundred would call none of them at three
    trials a side; Benjamini-Hochberg calls the five and none of the others."""
    steady = [{f"f{i}": 0.8 + 0.05 * ((i + t) % 3) for i in range(100)} for t in range(3)]
    moved = [{f"m{i}": 5.0 + 0.7 * t for i in range(5)} for t in range(3)]
    gone = [{f"m{i}": 0.7 * t for i in range(5)} for t in range(3)]
    base = [{**s, **m} for s, m in zip(steady, moved, strict=True)]
    cand = [{**s, **g} for s, g in zip(steady, gone, strict=True)]
    table = explain.change_table(explain.SELF, base, cand, RULES, whole=100.0)
    called = {r.name for r in table.rows if r.verdict in (explain.MORE, explain.LESS)}
    assert called == {f"m{i}" for i in range(5)}
    raw = [r.stats.p_value for r in table.rows if r.name.startswith("m")]
    assert all(p * table.tested > RULES.alpha for p in raw)  # what Holm's first step needs


def test_a_function_absent_from_one_side_counts_as_zero_there() -> None:
    base = [{"a": 100.0}, {"a": 100.0}, {"a": 100.0}]
    cand = [{"a": 80.0, "new": 20.0}, {"a": 79.0, "new": 21.0}, {"a": 81.0, "new": 19.0}]
    table = explain.change_table(explain.SELF, base, cand, RULES, whole=100.0)
    new = next(r for r in table.rows if r.name == "new")
    assert new.stats.mean_base == 0.0 and new.stats.delta == pytest.approx(20.0)
    assert new.verdict == explain.MORE


def test_rows_too_small_to_matter_are_ranked_but_not_tested() -> None:
    base = [{"big": 99.8, "tiny": 0.2}, {"big": 99.7, "tiny": 0.3}, {"big": 99.9, "tiny": 0.1}]
    cand = [{"big": 99.9, "tiny": 0.1}, {"big": 99.8, "tiny": 0.2}, {"big": 99.95, "tiny": 0.05}]
    table = explain.change_table(explain.SELF, base, cand, RULES, whole=100.0)
    tiny = next(r for r in table.rows if r.name == "tiny")
    assert tiny.verdict == explain.SMALL and tiny.p_adjusted is None
    assert table.tested == 1


def test_a_significant_change_under_the_threshold_is_unchanged() -> None:
    base = [{"a": 50.0}, {"a": 50.1}, {"a": 49.9}]
    cand = [{"a": 51.0}, {"a": 51.1}, {"a": 50.9}]  # +2 % of the baseline's level
    (row,) = explain.change_table(explain.SELF, base, cand, RULES, whole=100.0).rows
    assert row.stats.p_value < 0.01
    assert row.verdict == explain.UNCHANGED


def test_the_table_keeps_the_asked_number_of_rows() -> None:
    base = [{f"f{i}": float(i) for i in range(30)}] * 2
    cand = [{f"f{i}": float(2 * i) for i in range(30)}] * 2
    rules = Rules(rows=4)
    table = explain.change_table(explain.SELF, base, cand, rules, whole=100.0)
    assert [r.name for r in table.rows] == ["f29", "f28", "f27", "f26"]
    assert table.seen == 30


# --------------------------------------------------------------------------- a cell pair


def _trial(name: str, stacks: dict[str, int] | None, internals=None) -> TrialEvidence:
    return TrialEvidence(name, Counter(stacks) if stacks is not None else None, internals)


def test_a_pair_of_cells_with_one_trial_a_side_says_so() -> None:
    base = [_trial("c000-r1", {"m;a": 90, "m;b": 10})]
    cand = [_trial("c001-r1", {"m;a": 60, "m;b": 40})]
    found = explain_cells(base, cand, RULES, candidate="x=2", label="(single cell)")
    assert found is not None and found.has_profiles
    assert [t.kind for t in found.tables] == [explain.SELF, explain.TOTAL]
    self_table = found.tables[0]
    assert [r.name for r in self_table.rows][:2] in (["a", "b"], ["b", "a"])
    assert {r.verdict for r in self_table.rows} == {explain.NO_VERDICT}
    assert any(ONE_TRIAL in note for note in self_table.notes)
    assert found.cand_stacks == Counter({"m;a": 60, "m;b": 40})


def test_trials_without_samples_or_files_are_left_out() -> None:
    base = [_trial("r1", {"m;a": 10}), _trial("r2", {}), _trial("r3", None)]
    cand = [_trial("r1", {"m;a": 5, "m;b": 5}), _trial("r2", {"m;b": 10})]
    found = explain_cells(base, cand, RULES)
    assert found is not None
    assert (found.tables[0].n_base, found.tables[0].n_cand) == (1, 2)


def test_nothing_to_explain_without_data_on_both_sides() -> None:
    base = [_trial("r1", {"m;a": 10})]
    cand = [_trial("r1", None, _internals({"w": 1.0}, 10))]
    assert explain_cells(base, cand, RULES) is None


def test_waits_and_statements_per_transaction() -> None:
    def digest(ms: float) -> dict[str, str]:
        return {"schema": "sbtest", "digest": "abc", "text": "COMMIT", "total_ms": str(ms)}

    base = [
        _trial(f"b{i}", None, _internals({"wait/io/file/log": ms}, 1000, [digest(2 * ms)]))
        for i, ms in enumerate((100.0, 110.0, 105.0))
    ]
    cand = [
        _trial(f"c{i}", None, _internals({"wait/io/file/log": ms}, 1000, [digest(2 * ms)]))
        for i, ms in enumerate((10.0, 12.0, 11.0))
    ]
    found = explain_cells(base, cand, RULES)
    assert found is not None and not found.has_profiles
    waits, digests = found.tables
    assert waits.kind == explain.WAITS and digests.kind == explain.DIGESTS
    (row,) = waits.rows
    assert row.stats.mean_base == pytest.approx(105.0)  # 105 ms over 1000 txn = 105 µs/txn
    assert row.verdict == explain.LESS
    (statement,) = digests.rows
    assert (statement.name, statement.where) == ("COMMIT", "sbtest")
    assert statement.stats.delta == pytest.approx(2 * (11.0 - 105.0))
    assert any("top statements" in n for n in digests.notes)


def test_frame_shares_are_the_widths_of_a_flame_graph() -> None:
    shares = explain.frame_shares(STACKS)
    assert shares["mariadbd"] == 1.0
    assert shares["mariadbd;do_command;filesort"] == pytest.approx(0.4)
    assert shares["mariadbd;do_command;filesort;memcmp"] == pytest.approx(0.3)
    assert explain.frame_shares({}) == {}


def test_an_untested_row_shows_no_p_value() -> None:
    base = [{"big": 99.8, "tiny": 0.2}, {"big": 99.7, "tiny": 0.3}, {"big": 99.9, "tiny": 0.1}]
    cand = [{"big": 99.9, "tiny": 0.1}, {"big": 99.8, "tiny": 0.2}, {"big": 99.95, "tiny": 0.05}]
    table = explain.change_table(explain.SELF, base, cand, RULES, whole=100.0)
    cells = {r[0]: r for r in compare_explain.rows(table)}
    assert table.rows[[r.name for r in table.rows].index("tiny")].stats.p_value is not None
    assert cells["tiny"][5] == "-" and cells["tiny"][-1] == explain.SMALL
    assert cells["big"][5] != "-"


def test_a_kind_without_rows_gives_no_table() -> None:
    base = [_trial(f"b{i}", None, _internals({"wait/io/x": 10.0 + i}, 1000)) for i in range(3)]
    cand = [_trial(f"c{i}", None, _internals({"wait/io/x": 20.0 + i}, 1000)) for i in range(3)]
    found = explain_cells(base, cand, RULES)  # waits, and empty digests.csv everywhere
    assert found is not None and [t.kind for t in found.tables] == [explain.WAITS]
    empty = [_trial("b", None, _internals({}, 1000))]
    assert explain_cells(empty, empty, RULES) is None


def test_a_trial_without_waits_is_left_out_not_counted_as_zero() -> None:
    base = [_trial(f"b{i}", None, _internals({"wait/io/x": 100.0 + i}, 1000)) for i in range(3)]
    cand = [_trial(f"c{i}", None, _internals({"wait/io/x": 100.0 + i}, 1000)) for i in range(2)]
    off = "performance_schema is OFF on the server: no wait events"
    cand.append(TrialEvidence("c2", None, TrialInternals(None, None, 1000), (off,)))
    found = explain_cells(base, cand, RULES)
    assert found is not None
    (waits,) = found.tables
    (row,) = waits.rows
    assert (waits.n_base, waits.n_cand) == (3, 2) and row.stats.n_cand == 2
    assert row.stats.mean_cand == pytest.approx(100.5) and row.verdict != explain.LESS
    assert f"1 of 6 trials have no wait events, left out of n (c2): {off}" in waits.notes


def test_a_statement_missing_from_a_full_top_list_is_unknown_there() -> None:
    base = [{"a": 10.0, "b": 5.0}, {"a": 11.0, "b": 6.0}, explain.Partial({"a": 12.0})]
    cand = [{"a": 20.0}, {"a": 21.0, "b": 6.0}, {"a": 22.0, "b": 5.0}]
    table = explain.change_table(explain.DIGESTS, base, cand, RULES)
    b = next(r for r in table.rows if r.name == "b")
    # left out of the full list's trial; 0 where the list was short and lacks it
    assert (b.stats.n_base, b.stats.n_cand) == (2, 3)
    assert b.stats.mean_base == pytest.approx(5.5) and b.stats.mean_cand == pytest.approx(11 / 3)
