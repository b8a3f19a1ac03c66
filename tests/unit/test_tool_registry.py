"""Every registered tool keeps the seam's promises, on output captured from the real tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig import metrics
from dbrig.scenario import plan_from_dict
from dbrig.tools.base import Usage
from dbrig.tools.registry import (
    INTERFERENCE_TOOLS,
    WORKLOAD_TOOLS,
    all_tools,
    interference_for,
    workload_for,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURED = {
    "sysbench": FIXTURES / "sysbench" / "1.0.20" / "oltp_read_write_run.txt",
    "mysqlslap": FIXTURES / "mysqlslap" / "mariadb-slap-1.0" / "slap_engine_option_text.txt",
    "stress-ng": FIXTURES / "stress-ng" / "0.15.06" / "stressng_cpu_metrics_brief.stderr",
    "tpcc": FIXTURES / "tpcc" / "1.0.20" / "run_w1_t4_warmup.txt",
    "acked_writes": FIXTURES / "acked_writes" / "1.0.20" / "run_t2_rate20_warmup.txt",
}
SCENARIO_BLOCKS = {
    "sysbench": {"test": "oltp_read_write", "time": 10},
    "mysqlslap": {"load_type": "mixed", "number_of_queries": 100},
    "stress-ng": {"cpu": 1},
    "tpcc": {"warehouses": 1, "time": 10},
    "acked_writes": {"threads": 2, "time": 10},
}


def _scenario(workload: str, interference: str | None = None) -> dict:
    raw = {"name": "t", "workload": {workload: SCENARIO_BLOCKS[workload]}}
    if interference:
        raw["interference"] = {interference: SCENARIO_BLOCKS[interference]}
    return raw


def test_every_tool_has_a_captured_output_here() -> None:
    assert set(CAPTURED) == set(WORKLOAD_TOOLS) | set(INTERFERENCE_TOOLS)


@pytest.mark.parametrize("key", sorted(WORKLOAD_TOOLS))
def test_a_workload_block_names_its_tool_and_its_metrics_are_registered(key: str) -> None:
    plan = plan_from_dict(_scenario(key), seed=1)
    tool = workload_for(plan.scenario.workload)
    assert tool.key == key == plan.scenario.workload.tool
    produced = {m.name for m in tool.metrics()}
    assert produced, f"{key} declares no metrics"
    outcome = tool.analyse(CAPTURED[key].read_text(), 0)
    assert outcome.reason is None
    unregistered = [name for name in outcome.metrics if metrics.metric(name) is None]
    assert not unregistered, f"{key} writes metrics the registry lacks: {unregistered}"


@pytest.mark.parametrize("key", sorted(INTERFERENCE_TOOLS))
def test_an_interference_block_names_its_tool_and_its_metrics_are_registered(key: str) -> None:
    plan = plan_from_dict(_scenario("sysbench", key), seed=1)
    (tool,) = interference_for(plan.scenario.interference)
    assert tool.key == key and tool.active
    measured = tool.analyse(CAPTURED[key].read_text(), Usage(10.0, 9.0, 0.5))
    assert {m.name for m in tool.metrics()} == set(measured)


def test_an_idle_interference_block_starts_nothing() -> None:
    raw = _scenario("sysbench")
    raw["interference"] = {"stress-ng": {"cpu": 0}}
    assert interference_for(plan_from_dict(raw, seed=1).scenario.interference) == []


def test_doctor_probes_every_registered_tool() -> None:
    names = [info.name for info, _ in all_tools()]
    every = [t.info.name for t in (*WORKLOAD_TOOLS.values(), *INTERFERENCE_TOOLS.values())]
    assert names == list(dict.fromkeys(every))  # tpcc's sysbench is probed once
    assert dict((info.name, required) for info, required in all_tools())["sysbench"] is True


@pytest.mark.parametrize("key", sorted(WORKLOAD_TOOLS))
def test_a_workload_answers_every_member_of_the_seam_without_getattr(key: str) -> None:
    plan = plan_from_dict(_scenario(key), seed=1)
    tool = workload_for(plan.scenario.workload)
    assert tool.client_cpus is None and tool.client_host is None
    assert isinstance(tool.reconnects_itself, bool)
    assert tool.interval_s is None or tool.interval_s > 0
    outcome = tool.analyse(CAPTURED[key].read_text(), 0)
    for unit in tool.units_of_work:  # a declared unit is one its output counts
        assert unit.count in outcome.metrics, f"{key}: {unit.name} counts {unit.count}"
    if tool.space_key is not None:
        assert tool.space_key in tool.params_model.model_fields
    if tool.mean_latency is not None:
        assert metrics.metric(tool.mean_latency.column) is not None
    assert tool.estimated_data(lambda name: None) is None  # nothing known, nothing estimated


def test_the_client_placement_keys_reach_the_seam() -> None:
    raw = _scenario("sysbench")
    raw["hosts"] = {"c": {"ssh": "user@client"}}
    raw["workload"]["sysbench"] |= {"cpus": [1], "host": "c"}
    tool = workload_for(plan_from_dict(raw, seed=1).scenario.workload)
    assert (tool.client_cpus, tool.client_host) == ((1,), "c")


@pytest.mark.parametrize("key", sorted(INTERFERENCE_TOOLS))
def test_an_interference_tool_declares_its_columns_and_its_words(key: str) -> None:
    tool = INTERFERENCE_TOOLS[key]
    assert tool.column_prefix and tool.column_prefix.isidentifier()
    assert key in tool.inactive_note
    ratio = tool.achieved_ratio_metric
    assert ratio is None or metrics.metric(ratio).source == key
