"""A sequential run's looks (run/sequential_run.py), the parts that need no server."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dbrig.errors import ConfigError
from dbrig.run import sequential_run
from dbrig.run.sequential_run import width_look
from dbrig.scenario import plan_from_dict
from dbrig.scenario.model import SequentialRepeat

WORKLOAD = {"sysbench": {"test": "oltp_read_write", "tables": 1, "table_size": 100, "time": 5}}


def _interval(cell: str, metric: str, mean: float, half_width: float | None) -> dict[str, Any]:
    return {"cell": cell, "metric": metric, "n": 3, "mean": mean, "half_width": half_width}


def test_a_near_zero_metric_is_left_out_of_ci_width_and_the_look_says_why() -> None:
    found = [
        _interval("c000", "tps", 1000.0, 0.03),
        _interval("c001", "tps", 900.0, 0.04),
    ]
    look = width_look(found, left_out=["errors_per_s"], cells=2, limit=0.05)
    assert look["decided"]
    assert look["left_out"] == [{"metric": "errors_per_s", "reason": sequential_run.NEAR_ZERO}]
    assert [c["metric"] for c in look["cells"]] == ["tps", "tps"]
    line = sequential_run._progress_line({"round": 3, **look})
    assert line == (
        "dbrig: look after round 3: widest interval +/-4.0 %, want +/-5 %; "
        "left out (mean about 0, no relative width): errors_per_s"
    )


def test_a_metric_whose_mean_is_0_in_a_cell_is_left_out_there_not_waited_for() -> None:
    # A read-only fileio test: writes_per_s is 0 in every trial, its interval [0, 0].
    found = [
        _interval("c000", "reads_per_s", 5000.0, 0.02),
        _interval("c000", "writes_per_s", 0.0, None),
    ]
    look = width_look(found, left_out=[], cells=1, limit=0.05)
    assert look["decided"]
    assert look["left_out"] == [
        {"metric": "writes_per_s", "cell": "c000", "reason": sequential_run.ZERO_MEAN}
    ]


def test_a_wide_interval_or_a_cell_without_values_keeps_the_run_going() -> None:
    wide = [_interval("c000", "tps", 1000.0, 0.03), _interval("c001", "tps", 900.0, 0.08)]
    assert not width_look(wide, left_out=[], cells=2, limit=0.05)["decided"]
    one_cell = [_interval("c000", "tps", 1000.0, 0.03)]
    assert not width_look(one_cell, left_out=[], cells=2, limit=0.05)["decided"]
    unknown = [_interval("c000", "tps", 1000.0, None)]
    look = width_look(unknown, left_out=[], cells=1, limit=0.05)
    assert not look["decided"]
    assert "widest interval not known yet" in sequential_run._progress_line({"round": 2, **look})


def test_errors_and_lost_commits_are_the_near_zero_metrics() -> None:
    names = {m.name for m in sequential_run.near_zero_metrics()}
    assert {"errors_per_s", "lost_commits"} <= names
    assert not names & {"tps", "qps", "latency_pct_ms", "events_per_s"}


def test_naming_a_near_zero_metric_for_ci_width_is_refused_before_anything_runs() -> None:
    until = {"ci_width": "5%", "metrics": ["tps", "errors_per_s"]}
    plan = plan_from_dict(
        {"name": "w", "workload": WORKLOAD, "repeat": {"max": 5, "until": until}}, seed=1
    )
    with pytest.raises(ConfigError, match=r"repeat.until.metrics: errors_per_s: usually about 0"):
        sequential_run.check_design(plan)


def test_the_dry_run_says_what_ci_width_leaves_out_and_each_looks_boundary() -> None:
    width = plan_from_dict(
        {"name": "w", "workload": WORKLOAD, "repeat": {"max": 5, "until": {"ci_width": "5%"}}},
        seed=1,
    )
    assert width.scenario.sequential is not None
    lines = list(sequential_run.design_lines(width.scenario.sequential))
    assert any("left out of ci_width" in ln and "errors_per_s" in ln for ln in lines)
    decided = plan_from_dict(
        {
            "name": "d",
            "workload": WORKLOAD,
            "servers": {"a": {}, "b": {}},
            "matrix": {"server": ["a", "b"]},
            "repeat": {"min": 2, "max": 5, "until": {"decided_by": "server"}},
        },
        seed=1,
    )
    assert decided.scenario.sequential is not None
    lines = list(sequential_run.design_lines(decided.scenario.sequential))
    assert any("levels calibrated for Welch's t" in ln for ln in lines)
    looks = [ln for ln in lines if ln.startswith("    round ")]
    assert [ln.split(":")[0] for ln in looks] == [f"    round {r}" for r in range(2, 6)]
    assert looks[-1].startswith("    round 5: t=1.00, p < 0.0")
    assert re.fullmatch(r"    round 3: t=0\.60, p < [0-9.e-]+ \(\|z\| >= [0-9.]+\)", looks[1])


def test_a_long_designs_dry_run_shows_the_calibrated_looks_and_says_what_follows() -> None:
    spec = SequentialRepeat(min=3, max=1000, until={"decided_by": "server"})
    lines = list(sequential_run.design_lines(spec))
    looks = [ln for ln in lines if ln.startswith("    round ")]
    assert looks[-1].startswith("    round 100: t=0.10")
    assert lines[-1].startswith("    rounds 101..1000: exact z boundaries")


def test_the_progress_line_of_a_decided_by_look() -> None:
    look = {
        "round": 4,
        "z": 2.68,
        "alpha": 0.0074,
        "comparisons": [{"verdict": "worse"}, {"verdict": "inconclusive"}],
    }
    assert sequential_run._progress_line(look) == (
        "dbrig: look after round 4 (|z| >= 2.68, alpha 0.0074): 1 of 2 decided"
    )
    look.update(z=None, alpha=0.0, comparisons=[])
    assert "no alpha to spend" in sequential_run._progress_line(look)


def _decided_plan_and_run(tmp_path: Any) -> tuple[Any, Any]:
    import datetime as dt

    from dbrig.store import CellPlan, RunDir, SavedRun

    raw = {
        "name": "d",
        "workload": WORKLOAD,
        "servers": {"a": {}, "b": {}},
        "matrix": {"server": ["a", "b"]},
        "repeat": {"min": 3, "max": 8, "until": {"decided_by": "server"}},
    }
    plan = plan_from_dict(raw, seed=1)
    run = RunDir.create(tmp_path, "d", dt.datetime(2026, 1, 1))
    run.write_saved(
        SavedRun(
            raw_scenario=raw,
            seed=1,
            cells=tuple(CellPlan(c.id, c.server, c.factor_dict) for c in plan.cells),
            trials=tuple(t.id for t in plan.trials),
        )
    )
    return plan, run


def _with_looks(run: Any, value: dict[str, Any]) -> None:
    saved = run.saved()
    run.write_saved(saved.replace(extra={**saved.extra, sequential_run.KEY: value}))


def test_a_resumed_run_rebuilds_the_looks_made_so_the_next_boundary_is_the_same(
    tmp_path: Any,
) -> None:
    from dbrig.analysis.sequential import Spender

    plan, run = _decided_plan_and_run(tmp_path)
    first = sequential_run.Looks(plan, run)
    design = sequential_run.record(run)["design"]
    assert design["boundaries"] == "calibrated" and [k["round"] for k in design["looks"]] == list(
        range(3, 9)
    )
    assert first.legacy == {}
    # Round 3 looked at with a failed trial (2 of 3 values in one cell), then resumed.
    _with_looks(run, {"design": design, "looks": [{"round": 3, "fraction": 2 / 8}]})
    resumed = sequential_run.Looks(plan, run)
    fresh = Spender(first.design)
    fresh.look(3, 2 / 8)
    assert resumed.spender.look(4, 4 / 8) == fresh.look(4, 4 / 8)


def test_a_design_recorded_with_exact_boundaries_goes_on_with_exact_z_looks(
    tmp_path: Any,
) -> None:
    from dbrig.analysis.sequential import Design, ExactSpender

    plan, run = _decided_plan_and_run(tmp_path)
    old = {"min": 3, "max": 8, "boundaries": "exact", "looks": []}
    _with_looks(run, {"design": old, "looks": [{"round": 3, "fraction": 3 / 8}]})
    resumed = sequential_run.Looks(plan, run)
    assert resumed.design.boundaries == "exact" and resumed.legacy == {}
    fresh = ExactSpender(Design(3, 8, boundaries="exact"))
    fresh.look(3, 3 / 8)
    assert resumed.spender.look(4, 4 / 8) == fresh.look(4, 4 / 8)
    assert sequential_run.record(run)["design"]["boundaries"] == "exact"


def test_a_design_recorded_before_exact_boundaries_keeps_its_alphas_on_resume(
    tmp_path: Any,
) -> None:
    plan, run = _decided_plan_and_run(tmp_path)
    old = {"min": 3, "max": 8, "looks": [{"round": r, "alpha": 0.001 * r} for r in range(3, 9)]}
    _with_looks(run, {"design": old, "looks": []})
    looks = sequential_run.Looks(plan, run)
    assert looks.legacy == {r: pytest.approx(0.001 * r) for r in range(3, 9)}
