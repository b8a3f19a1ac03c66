"""What a run prints: the per-cell table, derived per-unit costs and the progress lines."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dbrig.analysis.costs import derived_costs as costs_of
from dbrig.analysis.stats import summarize
from dbrig.errors import ConfigError
from dbrig.report.result_table import cell_table, format_cell, markdown, pivot, render
from dbrig.run.progress import Progress
from dbrig.scenario import plan_from_dict
from dbrig.tools.sysbench import SysbenchTool
from dbrig.tools.tpcc import TpccTool
from tests.helpers.files import COMPLETE

THREADS = "workload.sysbench.threads"


def trial(cell: str, rep: int, threads: int, tps: float | None, p95: float | None, reason=None):
    return {
        "trial": f"{cell}-r{rep}",
        "cell": cell,
        "repetition": rep,
        "server": "default",
        "status": "failed" if reason else "ok",
        "reason": reason,
        THREADS: threads,
        "tps": tps,
        "latency_pct_ms": p95,
    }


@pytest.fixture
def results() -> pd.DataFrame:
    return pd.DataFrame(
        [
            trial("c000", 1, 1, 100.0, 5.0),
            trial("c000", 2, 1, 110.0, 6.0),
            trial("c001", 1, 2, 200.0, 4.0),
            # a failed trial's partial numbers must not reach the stats
            trial("c001", 2, 2, 5.0, 90.0, reason="sysbench exited with status 1"),
            trial("c001", 3, 2, None, None, reason="server died"),
        ]
    )


# -- cell_table ------------------------------------------------------------------------------


def test_cell_table_has_one_row_per_cell_with_mean_ci_cv(results: pd.DataFrame) -> None:
    table = cell_table(results, [THREADS], {THREADS: "threads"})
    assert list(table.columns) == [
        "cell",
        "server",
        "threads",
        "n",
        "tps",
        "latency_pct_ms",
        "failed",
    ]
    first = table.iloc[0]
    assert (first["cell"], first["threads"], first["n"], first["failed"]) == ("c000", 1, "2/2", "")
    expected = summarize([100.0, 110.0])
    mean, half, cv = first["tps"]
    assert mean == pytest.approx(105.0)
    assert half == pytest.approx(expected.ci_high - 105.0)
    assert half == pytest.approx(12.7062 * math.sqrt(50) / math.sqrt(2), rel=1e-4)
    assert cv == pytest.approx(math.sqrt(50) / 105.0)


def test_failed_trials_count_in_n_but_not_in_the_stats(results: pd.DataFrame) -> None:
    row = cell_table(results, [THREADS], {}).iloc[1]
    assert row["n"] == "1/3"
    assert row["tps"] == (200.0, None, None)  # one ok trial: no spread
    assert row["latency_pct_ms"] == (4.0, None, None)
    assert row["failed"] == "sysbench exited with status 1; server died"
    assert row[THREADS] == 2


def test_a_cell_where_every_trial_failed(results: pd.DataFrame) -> None:
    results = pd.concat(
        [results, pd.DataFrame([trial("c002", 1, 4, None, None, reason="server died")])]
    )
    table = cell_table(results, [THREADS], {THREADS: "threads"})
    row = table.iloc[2]
    assert (row["n"], row["failed"]) == ("0/1", "server died")
    assert pd.isna(row["tps"])
    assert render(table)[1][2][3] == ""


def test_cell_table_of_no_results_is_empty() -> None:
    assert cell_table(pd.DataFrame(), [THREADS], {}).empty
    assert render(pd.DataFrame()) == ([], [])


# -- render ----------------------------------------------------------------------------------


def test_render_formats_mean_half_width_and_cv(results: pd.DataFrame) -> None:
    headings, rows = render(cell_table(results, [THREADS], {THREADS: "threads"}), percentile=99)
    assert headings == ["cell", "threads", "n", "TPS", "p99 ms", "failed"]  # one server: hidden
    assert rows == [
        ["c000", "1", "2/2", "105.0 ±63.5 (6.7%)", "5.50 ±6.35 (12.9%)", ""],
        ["c001", "2", "1/3", "200.0", "4.00", "sysbench exited with status 1; server died"],
    ]


def test_render_hides_an_empty_failed_column_and_shows_several_servers(
    results: pd.DataFrame,
) -> None:
    ok = results[results["status"] == "ok"].copy()
    ok.loc[ok["cell"] == "c001", "server"] = "large"
    headings, rows = render(cell_table(ok, [THREADS], {}))
    assert headings == ["cell", "server", THREADS, "n", "TPS", "p95 ms"]
    assert rows[1][:3] == ["c001", "large", "2"]


def test_format_cell() -> None:
    assert format_cell((1234.5, 10.25, 0.031), "{:.1f}") == "1234.5 ±10.2 (3.1%)"
    assert format_cell((2.0, None, None), "{:.2f}") == "2.00"
    assert format_cell((2.0, float("nan"), float("nan")), "{:.2f}") == "2.00"
    assert format_cell(float("nan"), "{}") == ""
    assert format_cell(None, "{}") == ""
    assert format_cell("3/3", "{}") == "3/3"


# -- derived_costs ---------------------------------------------------------------------------


def derived_costs(metrics: dict[str, float]) -> dict[str, float]:
    """The costs of a sysbench trial: per transaction and per query."""
    return costs_of(metrics, SysbenchTool.units_of_work)


def test_derived_costs_per_transaction_and_per_query() -> None:
    metrics = {
        "transactions": 1000.0,
        "queries_total": 20000.0,
        "server_cpu_s": 2.5,
        "server_ctx_switches": 4000.0,
    }
    assert derived_costs(metrics) == pytest.approx(
        {
            "server_cpu_us_per_txn": 2500.0,
            "server_cpu_us_per_query": 125.0,
            "ctx_switches_per_txn": 4.0,
        }
    )


def test_kib_read_and_written_per_transaction_over_the_measured_window() -> None:
    metrics = {
        "transactions": 2048.0,
        "measured_time_s": 10.0,
        "server_read_mb_per_s": 0.5,
        "server_write_mb_per_s": 2.0,
    }
    costs = derived_costs(metrics)
    assert costs["kb_read_per_txn"] == pytest.approx(0.5 * 10 * 1024 / 2048)
    assert costs["kb_written_per_txn"] == pytest.approx(2.0 * 10 * 1024 / 2048)


def test_no_per_transaction_costs_without_transactions() -> None:
    metrics = {"transactions": 0.0, "queries_total": 0.0, "server_cpu_s": 2.5}
    assert derived_costs({**metrics, "server_ctx_switches": 10.0}) == {}
    assert derived_costs({"server_cpu_s": 1.0}) == {}
    only_queries = derived_costs({**metrics, "queries_total": 500.0})
    assert only_queries == pytest.approx({"server_cpu_us_per_query": 5000.0})


def test_no_costs_without_server_measurements() -> None:
    assert derived_costs({"transactions": 10.0, "queries_total": 100.0}) == {}


def test_a_tpcc_trial_puts_costs_per_committed_new_order_too() -> None:
    metrics = {
        "transactions": 1000.0,
        "queries_total": 20000.0,
        "nopm": 600.0,  # 100 New-Orders in the 10 s window
        "measured_time_s": 10.0,
        "server_cpu_s": 2.5,
        "server_ctx_switches": 4000.0,
        "server_write_mb_per_s": 2.0,
    }
    costs = costs_of(metrics, TpccTool.units_of_work)
    assert costs["server_cpu_us_per_new_order"] == pytest.approx(2.5e6 / 100)
    assert costs["kb_written_per_new_order"] == pytest.approx(2.0 * 10 * 1024 / 100)
    assert "ctx_switches_per_new_order" not in costs  # New-Orders count CPU and writes only
    # in the registry's order, as trial.json and results.csv have always had them
    assert list(costs) == [
        "server_cpu_us_per_txn",
        "server_cpu_us_per_query",
        "ctx_switches_per_txn",
        "kb_written_per_txn",
        "server_cpu_us_per_new_order",
        "kb_written_per_new_order",
    ]
    assert costs_of({**metrics, "nopm": 0.0}, TpccTool.units_of_work) == derived_costs(metrics)


def test_a_tool_without_units_of_work_gets_no_costs() -> None:
    assert costs_of({"transactions": 10.0, "server_cpu_s": 1.0}, ()) == {}


# -- progress --------------------------------------------------------------------------------


def test_progress_prints_one_line_per_trial_with_an_eta() -> None:
    plan = plan_from_dict(
        {
            "name": "t",
            "workload": {"sysbench": {}},
            "matrix": {THREADS: [1, 2]},
            "order": "sequential",
        }
    )
    first, second = plan.trials
    lines: list[str] = []
    now = [100.0]
    progress = Progress(2, lines.append, clock=lambda: now[0])
    progress.starting(first, "threads=1")
    now[0] += 75.0
    progress.finished(first, "ok", "tps 101.0")
    progress.starting(second, "threads=2")
    progress.finished(second, "failed", "server died")
    assert lines == [
        "[1/2] c000-r1 threads=1",
        "    ok: tps 101.0",
        "[2/2] c001-r1 threads=2  (ETA 1m15s)",
        "    FAILED: server died",
    ]


def test_markdown_table_has_a_header_rule_and_escapes_pipes() -> None:
    text = markdown(["cell", "TPS"], [["c000", "1 | 2"]])
    assert text.splitlines() == ["| cell | TPS |", "| --- | --- |", "| c000 | 1 \\| 2 |"]


def test_pivot_puts_one_factor_down_and_one_across() -> None:
    from dbrig.store import RunDir

    run = RunDir.open(COMPLETE)
    labels = dict(run.saved().factor_labels)
    table = pivot(run.results(), "threads", "cpu", "tps", labels, factors=run.saved().factors)
    assert table.headings == ["threads \\ cpu", "0", "1"]
    assert [r[0] for r in table.rows] == ["1", "2"]
    assert all("±" in cell for row in table.rows for cell in row[1:])
    assert table.pooled_over == {}


def test_pivot_names_the_factors_when_one_is_unknown() -> None:
    frame = pd.DataFrame({"status": ["ok"], "a.b": [1], "tps": [1.0]})
    with pytest.raises(ConfigError, match=r"'nope': not a factor of this run \(factors: b\)"):
        pivot(frame, "nope", "b", "tps", {"a.b": "b"})


ENGINE, CONC, LOAD = "server.config.engine", "workload.mysqlslap.concurrency", "load"
SLAP_LABELS = {ENGINE: "engine", CONC: "concurrency", LOAD: "load"}


def slap_results() -> pd.DataFrame:
    rows = []
    for engine in ("InnoDB", "MyISAM"):
        for conc in (10, 50):
            for load in ("write", "mixed"):
                for rep in (1, 2):
                    rows.append(
                        {"status": "ok", ENGINE: engine, CONC: conc, LOAD: load,
                         "avg_s": 1.0 + rep / 10 + (conc / 100) + (load == "mixed")}
                    )  # fmt: skip
    return pd.DataFrame(rows)


def test_pivot_refuses_to_pool_unlike_cells_and_names_the_factor() -> None:
    with pytest.raises(ConfigError, match=r"average over concurrency \(2 values\).*--pool"):
        pivot(slap_results(), "engine", "load", "avg_s", SLAP_LABELS, factors=[ENGINE, CONC, LOAD])


def test_pivot_pools_when_asked_and_says_over_what() -> None:
    table = pivot(
        slap_results(), "engine", "load", "avg_s", SLAP_LABELS,
        factors=[ENGINE, CONC, LOAD], pool=True,
    )  # fmt: skip
    assert table.pooled_over == {CONC: 2}


def test_several_factors_across_are_one_joint_factor() -> None:
    table = pivot(
        slap_results(), "load", ["engine,concurrency"], "avg_s", SLAP_LABELS,
        factors=[ENGINE, CONC, LOAD],
    )  # fmt: skip
    assert table.headings == [
        "load \\ engine, concurrency", "InnoDB, 10", "InnoDB, 50", "MyISAM, 10", "MyISAM, 50"
    ]  # fmt: skip
    assert [r[0] for r in table.rows] == ["write", "mixed"]


def test_where_fixes_a_factor_so_nothing_is_pooled() -> None:
    from dbrig.report.result_table import where

    fixed = where(slap_results(), ["concurrency=50.0"], SLAP_LABELS)
    assert set(fixed[CONC]) == {50}
    table = pivot(fixed, "engine", "load", "avg_s", SLAP_LABELS, factors=[ENGINE, CONC, LOAD])
    assert table.pooled_over == {}


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("concurrency", "expected FACTOR=VALUE"),
        ("concurrency=7", r"no trial has concurrency=7 \(values: 10, 50\)"),
        ("nope=1", "'nope': not a factor"),
    ],
)
def test_bad_where_is_one_line(condition: str, message: str) -> None:
    from dbrig.report.result_table import where

    with pytest.raises(ConfigError, match=message):
        where(slap_results(), [condition], SLAP_LABELS)


def test_a_factor_varied_together_with_a_shown_one_pools_nothing() -> None:
    frame = slap_results().assign(queries=lambda f: f[LOAD].map({"write": 10, "mixed": 100}))
    labels = {**SLAP_LABELS, "queries": "queries"}
    factors = [ENGINE, CONC, LOAD, "queries"]
    table = pivot(frame, ["engine", "concurrency"], "load", "avg_s", labels, factors=factors)
    assert table.pooled_over == {}


def test_the_cell_table_carries_context_columns_where_they_apply() -> None:
    from dbrig.store import RunDir

    run = RunDir.open(COMPLETE)
    saved = run.saved()
    headings, rows = render(cell_table(run.results(), saved.factors, dict(saved.factor_labels)))
    for heading in ("stress got %", "stress CPU s", "server CPU %", "client CPU %", "client usr s"):
        assert heading in headings, heading
    got = headings.index("stress got %")
    by_cpu = {row[headings.index("cpu")]: row[got] for row in rows}
    assert by_cpu["0"] == ""  # no stress-ng in that cell: nothing to show
    assert by_cpu["1"].endswith("%") and "±" not in by_cpu["1"]


def test_a_warning_points_at_a_column_the_table_shows() -> None:
    from dbrig.report.warnings import see

    assert "'stress got %' column" in see("stress_achieved_ratio")
    assert "'err/s' column" in see("errors_per_s")
    assert "column steal_pct of results.csv" in see("steal_pct")


def test_a_narrow_terminal_drops_context_columns_first_and_says_which() -> None:
    from dbrig.report.result_table import fit_width

    headings = ["cell", "TPS", "server CPU %", "client usr s"]
    rows = [["c000", "459.5 ±244.8 (21.4%)", "51", "0.23"]]
    kept, kept_rows, dropped = fit_width(headings, rows, 40)
    assert kept == ["cell", "TPS"] and kept_rows == [["c000", "459.5 ±244.8 (21.4%)"]]
    assert dropped == ["server CPU %", "client usr s"]
    assert fit_width(headings, rows, 200)[2] == []
