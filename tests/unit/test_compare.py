"""dbrig.analysis.compare on real saved runs and their synthetic variants.

The runs are in tests/fixtures/runs/compare.
"""

from __future__ import annotations

import copy
import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from dbrig.analysis import compare
from dbrig.analysis.compare import RunInput, compare_groups, compare_runs, normalize_value
from dbrig.commands._common import load_run_input
from dbrig.errors import ConfigError
from dbrig.metrics import SYSBENCH, compared
from dbrig.report import compare_text as output
from tests.helpers.files import COMPARE_RUNS as RUNS
from tests.helpers.html import parse_html

THREADS = "workload.sysbench.threads"
CPU = "interference.stress-ng.cpu"


def run(name: str) -> RunInput:
    return load_run_input(RUNS / name)


def rows_of(report: compare.CompareReport, metric: str) -> list[compare.Row]:
    return [r for r in report.rows if r.metric == metric]


def edited(name: str, edit) -> RunInput:
    """A fixture run with its run.json changed in memory."""
    original = run(name)
    meta = copy.deepcopy(dict(original.meta))
    edit(meta)
    return RunInput(f"{name}-edited", meta, original.results)


# --------------------------------------------------------------------------- matching


def test_aa_pair_matches_every_cell_and_finds_no_regression():
    report = compare_runs(run("base"), run("aa"))
    assert report.factors == (THREADS, CPU)
    # The fixture runs predate the KiB-per-transaction costs and the server's waits per
    # transaction: only metrics a run has are compared.
    costs = tuple(m for m in compare.COST_METRICS if not m.startswith(("kb_", "wait_")))
    # Nor the hardware tests' throughputs (issue 9): an OLTP run has none of them.
    headline = tuple(m for m in compared(SYSBENCH) if m in run("base").results.columns)
    assert report.metrics == headline + costs
    assert {r.label for r in report.rows} == {
        "threads=1 cpu=0",
        "threads=1 cpu=1",
        "threads=2 cpu=0",
        "threads=2 cpu=1",
    }
    assert len(report.rows) == 4 * 8
    assert not report.regressions
    assert "worse" not in report.counts()
    assert report.differences == ()  # ports, sockets and run paths are not differences
    assert all(r.stats.n_base == 3 and r.stats.n_cand == 3 for r in report.rows)
    assert report.only_baseline == report.only_candidate == ()


def test_aa_rows_carry_the_stats_numbers():
    row = rows_of(compare_runs(run("base"), run("aa")), "tps")[0]
    base = run("base").results
    expected = base.loc[base["cell"] == "c000", "tps"].mean()
    assert row.stats.mean_base == pytest.approx(expected)
    assert row.base_cell == row.cand_cell == "c000"
    assert row.direction == "higher"
    assert row.stats.mde_pct > 5
    assert "cannot be resolved" in row.note


def test_scaled_quiet_candidate_is_worse_for_tps_only():
    report = compare_runs(run("quiet-base"), run("quiet-worse"), threshold=0.05)
    tps = rows_of(report, "tps")
    assert [r.verdict for r in tps] == ["worse"] * 4
    for row in tps:
        assert row.stats.delta_pct == pytest.approx(-20, abs=0.5)
        assert row.stats.ci_high_pct < 0
        assert row.stats.p_value < 0.05
    assert all(r.metric == "tps" for r in report.regressions)


def test_same_drop_is_not_worse_when_the_threshold_is_above_it():
    report = compare_runs(run("quiet-base"), run("quiet-worse"), threshold=0.25)
    assert {r.verdict for r in rows_of(report, "tps")} <= {"unchanged", "inconclusive"}


def test_twenty_percent_drop_in_noisy_three_second_runs_is_inconclusive():
    """The brief's literal case: tps x 0.8 of the real run; CV 10-40 % at n=3 hides it."""
    report = compare_runs(run("base"), run("tps-x0.8"))
    tps = rows_of(report, "tps")
    assert [r.verdict for r in tps] == ["inconclusive"] * 4
    assert all(r.stats.delta_pct == pytest.approx(-20) for r in tps)
    assert all(r.stats.mde_pct > 20 for r in tps)


def test_no_common_cells_is_an_error_naming_both_runs():
    with pytest.raises(ConfigError, match="base and disjoint have no cell in common"):
        compare_runs(run("base"), run("disjoint"))


def test_cells_match_across_int_and_float_columns():
    base = run("base")
    floats = base.results.copy()
    floats[THREADS] = floats[THREADS].astype(float)
    report = compare_runs(base, RunInput("floats", base.meta, floats))
    assert len({r.label for r in report.rows}) == 4


def test_cell_in_one_run_only_is_listed_not_compared():
    base = run("base")
    fewer = base.results[base.results["cell"] != "c003"]
    report = compare_runs(base, RunInput("fewer", base.meta, fewer))
    assert report.only_baseline == ("threads=2 cpu=1",)
    assert len({r.label for r in report.rows}) == 3


@pytest.mark.parametrize(
    ("value", "text"),
    [(2, "2"), (2.0, "2"), ("2", "2"), (np.int64(2), "2"), (0.5, "0.5"), ("old", "old")],
)
def test_normalize_value(value, text):
    assert normalize_value(value) == text


def test_normalize_value_missing():
    assert normalize_value(float("nan")) is None
    assert normalize_value(None) is None


def test_resolve_factor_by_path_label_and_suffix():
    factors = [THREADS, CPU, "interference.stress-ng.cpu_load"]
    labels = {THREADS: "threads", CPU: "cpu"}
    assert compare.resolve_factor(THREADS, factors, labels) == THREADS
    assert compare.resolve_factor("threads", factors, labels) == THREADS
    assert compare.resolve_factor("stress-ng.cpu", factors, labels) == CPU
    assert compare.resolve_factor("cpu_load", factors, {}) == "interference.stress-ng.cpu_load"
    with pytest.raises(ConfigError, match="no such factor"):
        compare.resolve_factor("rate", factors, labels)


# --------------------------------------------------------------------------- metrics


def test_requested_metrics_are_compared_in_order():
    report = compare_runs(run("base"), run("aa"), metrics=["latency_pct_ms", "tps"])
    assert report.metrics == ("latency_pct_ms", "tps")
    assert rows_of(report, "latency_pct_ms")[0].direction == "lower"


def test_unknown_metric_is_an_error_listing_metrics():
    with pytest.raises(ConfigError, match=r"--metric nope: no such column.*tps"):
        compare_runs(run("base"), run("aa"), metrics=["nope"])


def test_metric_missing_on_one_side_is_insufficient_data():
    aa = run("aa")
    report = compare_runs(
        run("base"), RunInput("aa", aa.meta, aa.results.drop(columns="tps")), metrics=["tps"]
    )
    assert {r.verdict for r in report.rows} == {"insufficient data"}
    assert "tps was not recorded in the candidate" in report.rows[0].note


def test_cost_per_query_is_lower_is_better():
    assert compare.direction_of("server_cpu_us_per_query") is compare.Direction.LOWER_IS_BETTER


def synthetic(label: str, values: dict[str, list[float]]) -> RunInput:
    rows = [
        {"trial": f"c000-r{i + 1}", "cell": "c000", "repetition": i + 1, "server": "default"}
        | {"status": "ok", "reason": None}
        | {metric: series[i] for metric, series in values.items()}
        for i in range(len(next(iter(values.values()))))
    ]
    return RunInput(label, {"factors": []}, pd.DataFrame(rows))


def test_unknown_direction_gives_changed_not_better_or_worse():
    base = synthetic("a", {"cpu_busy_pct": [50.0, 51.0, 49.0, 50.5]})
    cand = synthetic("b", {"cpu_busy_pct": [70.0, 71.0, 69.0, 70.5]})
    (row,) = compare_runs(base, cand, metrics=["cpu_busy_pct"]).rows
    assert row.verdict == "changed"
    assert row.stats.verdict in ("better", "worse")
    assert row.direction is None
    assert row.label == "(single cell)"


def test_failed_side_gives_failed_with_the_reason():
    report = compare_runs(run("base"), run("failed"))
    failed = [r for r in report.rows if r.verdict == "failed"]
    assert {r.label for r in failed} == {"threads=1 cpu=1"}
    assert len(failed) == len(report.metrics)
    assert "candidate: all 3 trials failed (sysbench exited with code 1)" in failed[0].note
    others = [r for r in report.rows if r.label != "threads=1 cpu=1"]
    assert "failed" not in {r.verdict for r in others}


# --------------------------------------------------------------------------- environment


def test_environment_difference_makes_rows_incomparable():
    report = compare_runs(run("base"), run("env"))
    assert {r.verdict for r in report.rows} == {"incomparable"}
    whats = {d.what: d for d in report.differences}
    assert set(whats) == {"CPU model", "server version", "innodb_flush_log_at_trx_commit"}
    assert whats["CPU model"].candidate == "AMD EPYC 7B13"
    assert whats["CPU model"].server is None
    assert whats["innodb_flush_log_at_trx_commit"].server == "default"
    assert all(d.explained_by is None for d in report.differences)
    assert "CPU model" in report.rows[0].note


def test_allow_env_diff_gives_verdicts_and_still_lists_differences():
    report = compare_runs(run("base"), run("env"), allow_env_diff=True)
    assert "incomparable" not in report.counts()
    assert len(report.differences) == 3
    assert report.allow_env_diff


def test_a_variable_the_scenarios_set_differently_is_explained():
    def tune(meta):
        meta["scenario"]["server"]["config"]["innodb_flush_log_at_trx_commit"] = 2
        meta["servers"]["default"]["variables"]["innodb_flush_log_at_trx_commit"] = "2"

    report = compare_runs(run("base"), edited("aa", tune))
    (diff,) = report.differences
    assert diff.explained_by == "scenario server config"
    assert "incomparable" not in report.counts()


def test_a_variable_varied_by_the_matrix_is_not_an_environment_difference():
    def vary(meta):
        meta["factors"] = [*meta["factors"], "server.config.innodb_flush_log_at_trx_commit"]
        meta["servers"]["default"]["variables"]["innodb_flush_log_at_trx_commit"] = "2"

    differences = compare.environment_differences(
        run("base").meta,
        edited("aa", vary).meta,
        [("default", "default")],
        ignore_variables=compare.factor_variables(edited("aa", vary).meta["factors"]),
    )
    assert differences == []


def test_tool_versions_compare_by_version_number_only():
    def newer_kernel_in_banner(meta):
        tools = meta["environment"]["tools"]
        tools["stress-ng"] = tools["stress-ng"].replace("Linux 6.18.44", "Linux 6.19.0")

    assert compare_runs(run("base"), edited("aa", newer_kernel_in_banner)).differences == ()


# --------------------------------------------------------------------------- --by


def test_by_splits_one_run_on_a_factor():
    report = compare_groups(run("base"), "cpu")
    assert report.by == CPU
    assert report.baseline == "cpu=0"
    assert report.candidates == ("cpu=1",)
    assert report.factors == (THREADS,)
    assert {r.label for r in report.rows} == {"threads=1", "threads=2"}
    tps = rows_of(report, "tps")[0]
    assert (tps.base_cell, tps.cand_cell) == ("c000", "c001")


def test_by_accepts_the_full_path_and_a_suffix():
    assert compare_groups(run("base"), CPU).by == CPU
    assert compare_groups(run("base"), "stress-ng.cpu").by == CPU


def test_by_server_explains_server_differences():
    report = compare_groups(run("two-servers"), "server")
    assert (report.baseline, report.candidates) == ("server=old", ("server=new",))
    assert {d.what for d in report.differences} == {
        "server version",
        "innodb_flush_log_at_trx_commit",
    }
    assert {d.explained_by for d in report.differences} == {"server"}
    assert "incomparable" not in report.counts()
    assert len({r.label for r in report.rows}) == 4


def test_by_with_three_values_needs_a_baseline():
    with pytest.raises(ConfigError, match=r"3 values \(1, 2, 4\).*--baseline"):
        compare_groups(run("threads3"), "threads")


def test_by_with_a_baseline_compares_every_other_value():
    report = compare_groups(run("threads3"), "threads", baseline="2")
    assert report.baseline == "threads=2"
    assert report.candidates == ("threads=1", "threads=4")
    assert {r.candidate for r in report.rows} == {"threads=1", "threads=4"}
    assert output.table_headings(report)[0] == "candidate group"


def test_by_baseline_must_be_a_value():
    with pytest.raises(ConfigError, match=r"--baseline 3: not a value"):
        compare_groups(run("threads3"), "threads", baseline="3")


def test_by_unknown_factor():
    with pytest.raises(ConfigError, match="factor 'rate': no such factor"):
        compare_groups(run("base"), "rate")


def test_by_factor_with_one_value():
    with pytest.raises(ConfigError, match="single value"):
        compare_groups(run("base"), "server")


# --------------------------------------------------------------------------- outputs


@pytest.fixture(scope="module")
def worse_report() -> compare.CompareReport:
    return compare_runs(run("quiet-base"), run("quiet-worse"))


def test_json_output_parses_and_has_every_row(worse_report):
    data = json.loads(output.to_json(worse_report))
    assert data["baseline"] == "quiet-base"
    assert data["summary"]["worse"] == 4
    assert len(data["rows"]) == len(worse_report.rows)
    row = data["rows"][0]
    assert row["cell"] == {THREADS: "1", CPU: "0"}
    assert row["verdict"] == "worse"
    assert set(data["noise"]) == set(worse_report.metrics)
    constant = next(r for r in data["rows"] if r["metric"] == "ctx_switches_per_txn")
    assert constant["p_value"] is None
    tps = next(r for r in data["rows"] if r["metric"] == "tps")
    assert tps["unit"] == "txn/s"  # each row names the unit its means are in


def test_json_names_a_fraction_as_0_to_1() -> None:
    assert output._unit("stress_achieved_ratio") == "0..1"
    assert output._unit("not_a_registered_column") == ""


def test_json_has_no_nan(worse_report):
    text = output.to_json(worse_report)
    assert "NaN" not in text and "Infinity" not in text


def test_junit_output_has_a_testcase_per_row_and_failures_for_worse(worse_report):
    root = ET.fromstring(output.to_junit(worse_report))
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(worse_report.rows) == int(suite.get("tests"))
    failures = [c for c in cases if c.find("failure") is not None]
    assert len(failures) == 4 == int(suite.get("failures"))
    assert {c.get("classname") for c in failures} == {"dbrig.compare.tps"}
    assert "-20.0 %" in failures[0].find("failure").get("message")


def test_junit_marks_failed_and_incomparable():
    failed = ET.fromstring(output.to_junit(compare_runs(run("base"), run("failed"))))
    assert len(failed.findall(".//testcase/error")) == 8
    env = ET.fromstring(output.to_junit(compare_runs(run("base"), run("env"))))
    assert len(env.findall(".//testcase/skipped")) == 32


def test_markdown_output_lists_regressions_and_the_full_table(worse_report):
    text = output.to_markdown(worse_report)
    assert text.startswith("### dbrig compare: `quiet-base` → `quiet-worse`")
    assert "4 worse" in text
    regressions = text.split("#### Regressions")[1].split("####")[0]
    assert regressions.count("🔴 worse") == 4
    assert text.count("\n| threads=") == 4 + len(worse_report.rows)
    assert "#### Noise" in text


def test_markdown_lists_environment_differences():
    text = output.to_markdown(compare_runs(run("base"), run("env")))
    assert "rows marked incomparable" in text
    assert "CPU model: Intel(R) Xeon(R) Processor @ 2.10GHz -> AMD EPYC 7B13" in text


def test_html_output_is_self_contained(worse_report):
    text = output.to_html(worse_report)
    parser = parse_html(text)
    assert parser.tags.count("svg") == len(worse_report.metrics)
    assert "style" in parser.tags and "table" in parser.tags
    assert parser.links == []
    assert text.count(">worse</span>") == 4


def test_html_escapes_labels():
    base = synthetic("<a>", {"tps": [1.0, 2.0, 3.0]})
    text = output.to_html(compare_runs(base, synthetic("b&c", {"tps": [1.0, 2.0, 3.0]})))
    assert "&lt;a&gt;" in text and "b&amp;c" in text


def test_metric_notes_use_the_least_resolved_cell(worse_report):
    notes = output.metric_notes(worse_report)
    worst = max(rows_of(worse_report, "tps"), key=lambda r: r.stats.mde_pct)
    assert notes["tps"].endswith(f"(least resolved of 4 cells: {worst.label})")
    assert "no test was run" in notes["ctx_switches_per_txn"]


def test_formatting_helpers():
    assert output.format_number(None) == "-"
    assert output.format_number(math.nan) == "-"
    assert output.format_number(1234.56) == "1234.6"
    assert output.format_number(2.345) == "2.35"
    assert output.format_delta(-20.04) == "-20.0 %"
    assert output.format_p(0.0001) == "<0.001"
    assert output.format_mde(math.inf) == "any"


def test_every_interference_tools_version_is_compared_not_only_stress_ngs() -> None:
    def meta(version: str) -> dict:
        tools = {"workload": "sysbench 1.0.20", "stress-ng": "stress-ng, version 0.15.06"}
        tools["io-hog"] = f"io-hog {version}"
        tools["server:db"] = f"mariadbd {version}"  # servers are compared by their variables
        return {"environment": {"tools": tools}}

    differences = compare.environment_differences(meta("1.2"), meta("1.3"), [])
    assert [(d.what, d.base, d.candidate) for d in differences] == [("io-hog", "1.2", "1.3")]
