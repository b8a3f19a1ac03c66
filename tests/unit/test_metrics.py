"""Tests for dbrig.metrics: the registry is valid, complete, and says what the old tables said."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from dbrig import metrics
from dbrig.analysis.costs import derived_costs
from dbrig.metrics import (
    HEADLINE,
    HIGHER,
    LOWER,
    METRIC_DIRECTIONS,
    REGISTRY,
    Direction,
    Metric,
    compared,
    direction_of,
    format_value,
    headline,
    metric,
    produced_by,
    progress_line,
    throughput_metrics,
)
from dbrig.tools import mysqlslap, sysbench
from dbrig.tools.registry import WORKLOAD_TOOLS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
IDENTITY = {"trial", "cell", "repetition", "server", "status", "reason"}

# The tables the registry replaced, as they were.
OLD_TERMINAL = (
    ("tps", "TPS", "{:.1f}"),
    ("qps", "QPS", "{:.0f}"),
    ("latency_avg_ms", "avg ms", "{:.2f}"),
    ("latency_pct_ms", "p{pct} ms", "{:.2f}"),
    ("errors_per_s", "err/s", "{:.2f}"),
    ("events_per_s", "events/s", "{:.1f}"),
    ("avg_s", "avg s", "{:.3f}"),
    ("queries_per_s", "queries/s", "{:.0f}"),
)
OLD_REPORT = (
    ("tps", "TPS", "txn/s", "{:,.1f}"),
    ("qps", "QPS", "queries/s", "{:,.0f}"),
    ("latency_avg_ms", "avg latency", "ms", "{:,.2f}"),
    ("latency_pct_ms", "p95 latency", "ms", "{:,.2f}"),
    ("errors_per_s", "error rate", "errors/s", "{:,.2f}"),
    ("events_per_s", "event rate", "events/s", "{:,.1f}"),
    ("avg_s", "avg run time", "s", "{:,.3f}"),
    ("queries_per_s", "query rate", "queries/s", "{:,.0f}"),
)
OLD_DIRECTIONS = {
    **dict.fromkeys(("tps", "qps", "events_per_s", "queries_per_s"), HIGHER),
    **dict.fromkeys(
        (
            "latency_avg_ms",
            "latency_pct_ms",
            "latency_max_ms",
            "avg_s",
            "errors_per_s",
            "reconnects_per_s",
            "server_cpu_us_per_txn",
            "server_cpu_us_per_query",
            "ctx_switches_per_txn",
            "kb_read_per_txn",
            "kb_written_per_txn",
            "wait_us_per_txn",
        ),
        LOWER,
    ),
}
OLD_COMPARED = (
    "tps",
    "qps",
    "latency_avg_ms",
    "latency_pct_ms",
    "errors_per_s",
    "server_cpu_us_per_txn",
    "server_cpu_us_per_query",
    "ctx_switches_per_txn",
    "kb_read_per_txn",
    "kb_written_per_txn",
    "wait_us_per_txn",
    "avg_s",
    "queries_per_s",
)
OLD_PROGRESS = (
    ("tps", "{:.1f} tps"),
    ("qps", "{:.0f} qps"),
    ("latency_avg_ms", "avg {:.2f} ms"),
    ("avg_s", "avg {:.3f} s"),
    ("queries_per_s", "{:.0f} q/s"),
)


# Issue 9: the hardware tests' throughputs became headline metrics, higher is better.
HARDWARE_HEADLINE = (
    "mib_per_s",
    "reads_per_s",
    "writes_per_s",
    "fsyncs_per_s",
    "read_mib_per_s",
    "written_mib_per_s",
)
OLD_DIRECTIONS = {**OLD_DIRECTIONS, **dict.fromkeys(HARDWARE_HEADLINE, HIGHER)}


def without_hardware(metrics: tuple) -> list:
    return [m for m in metrics if m.name not in HARDWARE_HEADLINE]


def old_direction_of(name: str) -> Direction | None:
    key = name.strip().lower()
    if key in OLD_DIRECTIONS:
        return OLD_DIRECTIONS[key]
    if key.startswith("latency_") or key.endswith(("_per_txn", "_per_query")):
        return LOWER
    return None


# --------------------------------------------------------------------------- every entry


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda m: m.name)
def test_every_entry_is_valid(entry: metrics.Metric) -> None:
    assert entry.name and entry.label
    assert entry.unit in metrics.UNITS
    assert entry.source in metrics.SOURCES
    assert entry.direction is None or isinstance(entry.direction, Direction)
    for value in (0.0, 1234567.891, -0.5):
        assert entry.format(value, grouped=False) == format(value, entry.fmt)
        assert entry.format(value) == format(value, "," + entry.fmt)
    if entry.progress is not None:
        assert entry.progress.count("{}") == 1
    assert "{pct}" not in entry.at_percentile(99).label + entry.at_percentile(99).short


def test_names_are_unique_and_lookups_find_them() -> None:
    names = [m.name for m in REGISTRY]
    assert len(names) == len(set(names))
    for entry in REGISTRY:
        assert metric(entry.name.replace("<N>", "12")) is entry
    assert metric("cpu_busy_pct_core3").name == "cpu_busy_pct_core<N>"
    assert metric("cpu_busy_pct_corex") is None
    assert metric("threads") is None


def test_throughput_ranks_are_distinct() -> None:
    ranks = [m.throughput for m in REGISTRY if m.throughput is not None]
    assert len(ranks) == len(set(ranks))


# --------------------------------------------------------------------------- the old tables


NEWER_SOURCES = (metrics.TPCC, metrics.ACKED_WRITES, metrics.FAULTS)


def _before_tpcc(chosen: tuple[Metric, ...]) -> list[Metric]:
    """The metrics as they were before the tpcc, acked_writes and faults sources added theirs."""
    return [
        m for m in chosen if m.source not in (metrics.TPCC, metrics.ACKED_WRITES, metrics.FAULTS)
    ]


def test_terminal_headings_and_formats_are_unchanged() -> None:
    new = without_hardware(tuple(_before_tpcc(headline(percentile=99))))
    assert [m.name for m in new] == [c for c, _, _ in OLD_TERMINAL]
    for m, (_, heading, fmt) in zip(new, OLD_TERMINAL, strict=True):
        assert m.terminal_heading == heading.format(pct=99)
        assert m.terminal_format == fmt


def test_report_headings_and_formats_are_unchanged() -> None:
    old = [
        (m.name, m.label, m.unit, m.report_format)
        for m in without_hardware(tuple(_before_tpcc(HEADLINE)))
    ]
    assert old == list(OLD_REPORT)
    assert HEADLINE[0].heading == "TPS (txn/s)"
    assert HEADLINE[0].format(12345.67) == "12,345.7"
    assert HEADLINE[0].format(math.nan) == HEADLINE[0].format(None) == ""


def test_headline_keeps_only_the_measured_ones() -> None:
    chosen = headline({"avg_s", "queries_per_s", "threads"}, "99.9")
    assert [m.name for m in chosen] == ["avg_s", "queries_per_s"]
    pct = headline({"latency_pct_ms"}, "99.9")[0]
    assert (pct.label, pct.short) == ("p99.9 latency", "p99.9 ms")
    assert pct.heading == "p99.9 latency (ms)"


def test_directions_agree_with_the_old_table_and_rules() -> None:
    tpcc = {m.name for m in produced_by(metrics.TPCC)}
    tpcc |= {"server_cpu_us_per_new_order", "kb_written_per_new_order"}
    tpcc |= {m.name for m in produced_by(metrics.ACKED_WRITES)}  # newer still: issue 11
    tpcc |= {m.name for m in produced_by(metrics.FAULTS)}  # issue 11, after the old table
    assert {k: v for k, v in METRIC_DIRECTIONS.items() if k not in tpcc} == OLD_DIRECTIONS
    unknown = ["latency_p99_ms", "page_faults_per_txn", "disk_reads_per_query", "threads", " TPS "]
    for name in [m.name for m in REGISTRY if m.name not in tpcc] + unknown:
        assert direction_of(name) is old_direction_of(name), name


def test_compared_by_default_in_the_old_order() -> None:
    hardware = ("events_per_s", *HARDWARE_HEADLINE)  # issue 9: compared when a run has them
    assert compared(metrics.TPCC)[:2] == ("nopm", "tpm")  # issue 10
    # issue 11: lost_commits is mostly 0, a change from 0 has no relative size; fail_on_loss gates
    assert compared(metrics.ACKED_WRITES) == ()
    assert compared(metrics.FAULTS) == ("downtime_s", "throughput_recovered_s")  # issue 11
    newer = (
        set(compared(metrics.TPCC))
        | set(compared(metrics.ACKED_WRITES))
        | set(compared(metrics.FAULTS))
    )
    before_tpcc = tuple(n for n in compared() if n not in newer)
    assert before_tpcc == OLD_COMPARED[:5] + hardware + OLD_COMPARED[5:]
    assert compared(metrics.SYSBENCH) == OLD_COMPARED[:5] + hardware
    assert compared(metrics.DERIVED) == OLD_COMPARED[5:11]
    assert compared(metrics.MYSQLSLAP) == OLD_COMPARED[11:]


def test_progress_line_is_unchanged() -> None:
    values = {
        "tps": 812.345,
        "qps": 16246.9,
        "latency_avg_ms": 9.8412,
        "avg_s": 0.51234,
        "queries_per_s": 976.5,
        "threads": 4.0,
        "latency_pct_ms": math.nan,
    }
    old = ", ".join(fmt.format(values[k]) for k, fmt in OLD_PROGRESS if k in values)
    assert progress_line(values) == old == "812.3 tps, 16247 qps, avg 9.84 ms, avg 0.512 s, 976 q/s"
    assert progress_line({"tps": math.nan}) == "nan tps"
    assert progress_line({}) == ""


def test_throughput_order() -> None:
    picked = [(m.name, m.terminal_heading) for m in throughput_metrics()]
    assert picked == [
        ("nopm", "NOPM"),  # a tpcc run also has tps: New-Orders per minute is its measure
        ("tps", "TPS"),
        ("queries_per_s", "queries/s"),
        ("events_per_s", "events/s"),
        ("qps", "QPS"),
        ("mib_per_s", "MiB/s"),
    ]
    per_interval = [m.name for m in throughput_metrics(per_interval=True)]
    assert per_interval == ["tps", "events_per_s", "qps", "mib_per_s"]


def test_hardware_throughputs_are_headline_and_higher_is_better() -> None:
    shown = [m.name for m in headline(set(HARDWARE_HEADLINE))]
    assert shown == list(HARDWARE_HEADLINE)
    assert all(direction_of(name) is HIGHER for name in HARDWARE_HEADLINE)


def test_format_value_falls_back_to_four_significant_digits() -> None:
    assert format_value("tps", 1234.56) == "1234.6"
    assert format_value("tps", 1234.56, grouped=True) == "1,234.6"
    assert format_value("disk_await_ms", 123.456) == "123.5"
    assert format_value("server_cpu_pct", 123.456) == "123"  # one format per column
    assert format_value("no_such_metric", 0.000123456) == "0.0001235"
    assert format_value("no_such_metric", None) == ""


def test_at_percentile_leaves_other_metrics_alone() -> None:
    tps = metric("tps")
    assert tps is not None and tps.at_percentile(99) is tps
    assert dataclasses.replace(tps) == tps


# --------------------------------------------------------------------------- completeness


def test_every_column_of_the_fixture_runs_is_known() -> None:
    for results in FIXTURES.glob("runs/**/results.csv"):
        meta = json.loads((results.parent / "run.json").read_text())
        factors = set(meta.get("factors") or [])
        columns = set(pd.read_csv(results).columns) - IDENTITY - factors
        assert {c for c in columns if metric(c) is None} == set(), results


def test_every_sysbench_summary_key_is_known() -> None:
    for path in sorted((FIXTURES / "sysbench" / "1.0.20").glob("*.txt")):
        summary = sysbench.parse(path.read_text()).summary
        assert {k for k in summary if metric(k) is None} == set(), path.name


def test_sysbench_interval_columns_match_per_interval() -> None:
    fields = {f.name for f in dataclasses.fields(sysbench.Interval)}
    for entry in REGISTRY:
        if entry.per_interval:
            assert entry.name in fields, entry.name


def test_every_mysqlslap_number_is_known() -> None:
    numeric = [c for c in mysqlslap.ROW_COLUMNS if c not in ("engine", "load_type")]
    assert all(metric(c) is not None and metric(c).source == metrics.MYSQLSLAP for c in numeric)


def test_every_derived_cost_is_known() -> None:
    costs = derived_costs(
        {
            "transactions": 100.0,
            "queries_total": 2000.0,
            "measured_time_s": 10.0,
            "server_cpu_s": 5.0,
            "server_ctx_switches": 1000.0,
            "server_read_mb_per_s": 1.0,
            "server_write_mb_per_s": 2.0,
            "server_wait_s": 0.5,
        },
        WORKLOAD_TOOLS["sysbench"].units_of_work,
    )
    assert set(costs) == set(compared(metrics.DERIVED))


@pytest.mark.parametrize("tool", list(WORKLOAD_TOOLS.values()), ids=list(WORKLOAD_TOOLS))
def test_every_cost_column_a_tool_declares_is_a_registered_derived_metric(tool) -> None:
    for unit in tool.units_of_work:
        assert set(unit.costs) <= set(metrics.COSTS)
        assert metric(unit.count) is not None, unit.count
        for column in unit.columns():
            entry = metric(column)
            assert entry is not None and entry.source == metrics.DERIVED, column


def test_the_registry_is_a_leaf_module() -> None:
    tree = ast.parse(Path(metrics.__file__).read_text())
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert [name for name in imported if name and name.startswith("dbrig")] == []


def test_generated_reference_tables_in_docs_are_current() -> None:
    from pathlib import Path

    from dbrig.report.reference import pages, render_page

    docs = Path(__file__).resolve().parents[2] / "docs"
    for name, tables in pages().items():
        text = (docs / name).read_text()
        assert text == render_page(text, tables), (
            f"docs/{name}: run scripts/update-reference-docs.py"
        )
