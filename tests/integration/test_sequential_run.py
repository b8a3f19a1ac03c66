"""``repeat: {min, max, until}``: a real run stops at the first look that decides, and a
resumed run continues the same design."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from dbrig.run.sequential_run import NEAR_ZERO
from tests.integration.helpers import only_run_dir, read_json, run_main, write_scenario

# Point selects on a managed server at sysbench's rate limit: the two groups' throughput
# differs tenfold (their latencies barely differ, so the decision is on tps alone).
SCENARIO = {
    "name": "until",
    "workload": {
        "sysbench": {"test": "oltp_point_select", "time": 2, "tables": 1, "table_size": 100}
    },
    "matrix": {"workload.sysbench.rate": [20, 200]},
    "repeat": {
        "min": 3,
        "max": 5,
        "spending": "pocock",
        "until": {"decided_by": "rate", "metrics": ["tps"]},
    },
    "seed": 11,
}


REPO = Path(__file__).resolve().parents[2]


def _sequential(run: Path) -> dict:
    return read_json(run / "run.json")["sequential"]


@pytest.mark.integration
def test_a_clear_difference_stops_at_min_and_a_resume_continues_the_design(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_scenario(tmp_path / "until.yaml", SCENARIO)
    out = tmp_path / "runs"
    dry = run_main(["run", "--dry-run", str(path), "--out", str(out)], capsys)
    assert dry.code == 0, dry.err
    assert "sequential: rounds 3..5" in dry.out
    assert "if it stops at min (3)" in dry.out
    full_order = next(ln for ln in dry.out.splitlines() if ln.startswith("order: ")).split()[1:]
    assert len(full_order) == 10

    done = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert done.code == 0, done.err
    run = only_run_dir(out)
    saved = read_json(run / "run.json")
    seq = saved["sequential"]
    # Decided before max (at min but for a load spike on a shared machine).
    stop = seq["stopped"]["round"]
    assert seq["stopped"]["reason"] == "decided" and stop < 5
    assert [look["round"] for look in seq["looks"]] == list(range(3, stop + 1))
    look = seq["looks"][-1]
    assert look["decided"] and look["n"] == {"c000": stop, "c001": stop}
    # The planned level (calibrated for Welch's t, which at n = 3 is conservative enough
    # that Pocock's first share needs a level a little above 0.05).
    assert look["alpha"] == seq["design"]["looks"][stop - 3]["alpha"] > 0
    assert seq["design"]["boundaries"] == "calibrated"
    assert {c["verdict"] for c in look["comparisons"]} <= {"better", "worse", "changed"}
    assert all(c["p_value"] < look["alpha"] for c in look["comparisons"])
    assert saved["status"] == "complete"
    ran = full_order[: 2 * stop]
    assert saved["trials"] == ran and saved["trials_saved"] == len(ran)
    assert len(list((run / "trials").iterdir())) == len(ran)

    # As if the run had been stopped during its last round: those trials and look not made.
    for trial_id in ran[-2:]:
        shutil.rmtree(run / "trials" / trial_id)
    saved.update(status="interrupted", trials=full_order)
    saved["sequential"] = {"design": seq["design"], "looks": seq["looks"][:-1]}
    (run / "run.json").write_text(json.dumps(saved))

    resumed = run_main(["run", "--resume", str(run), "--no-report"], capsys)
    assert resumed.code == 0, resumed.err
    again = _sequential(run)
    assert again["design"] == seq["design"]
    assert again["stopped"]["round"] >= stop and again["stopped"]["reason"] == "decided"
    assert again["looks"][: stop - 3] == seq["looks"][: stop - 3]  # the earlier looks kept
    assert [look["round"] for look in again["looks"]] == list(
        range(3, again["stopped"]["round"] + 1)
    )
    again_ran = full_order[: 2 * again["stopped"]["round"]]
    assert sorted(p.name for p in (run / "trials").iterdir()) == sorted(again_ran)


@pytest.mark.integration
def test_ci_width_stops_once_every_cell_is_precise_enough(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # At 200 events/s over 2 s the Poisson arrivals of --rate vary by about 5 %.
    scenario = {
        "name": "width",
        "workload": {"sysbench": {"test": "cpu", "time": 2, "threads": 1, "rate": 200}},
        "repeat": {"min": 2, "max": 5, "until": {"ci_width": "25%", "metrics": ["events_per_s"]}},
        "seed": 3,
    }
    path = write_scenario(tmp_path / "width.yaml", scenario)
    out = tmp_path / "runs"
    done = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert done.code == 0, done.err
    seq = _sequential(only_run_dir(out))
    stop = seq["stopped"]["round"]
    assert seq["stopped"]["reason"] == "ci width reached" and stop < 5
    last = seq["looks"][-1]
    assert last["ci_width"] == 0.25
    assert [c["metric"] for c in last["cells"]] == ["events_per_s"]
    assert last["cells"][0]["n"] == stop and last["cells"][0]["half_width"] <= 0.25


@pytest.mark.integration
def test_a_decision_no_run_could_reach_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = {**SCENARIO, "repeat": {"max": 4, "until": {"decided_by": "threads"}}}
    path = write_scenario(tmp_path / "bad.yaml", scenario)
    out = tmp_path / "runs"
    refused = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert refused.code == 2
    assert f"{path}: repeat.until.decided_by: factor 'threads'" in refused.err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.integration
def test_upgrade_check_with_ci_width_and_no_metrics_stops_early_leaving_err_s_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # scenarios/upgrade-check.yaml, shrunk to fit the suite: its new (installed) server
    # alone, a tiny table, 2 s at a fixed rate. Without metrics the rule waits on every
    # headline metric but errors_per_s: about 0 here, its interval relative to its mean
    # never narrows (before it was left out, this run went on to max). The width is one
    # any metric with a mean reaches in a few rounds, even on a busy machine.
    scenario = yaml.safe_load((REPO / "scenarios" / "upgrade-check.yaml").read_text())
    del scenario["servers"]["old"], scenario["matrix"]
    scenario["workload"]["sysbench"].update(
        tables=1, table_size=100, threads=1, time=2, rate=50, report_interval=1
    )
    # max 10: a busy CI host's latency spikes made p95 of 1 s at 20/s too wide at 6
    scenario.update(warmup=0, repeat={"min": 3, "max": 10, "until": {"ci_width": "95%"}})
    path = write_scenario(tmp_path / "upgrade-check.yaml", scenario)
    out = tmp_path / "runs"
    done = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert done.code == 0, done.err
    saved = read_json(only_run_dir(out) / "run.json")
    seq = saved["sequential"]
    stop = seq["stopped"]["round"]
    assert seq["stopped"]["reason"] == "ci width reached" and stop < 10, seq["looks"][-1]
    assert saved["status"] == "complete" and len(saved["trials"]) == stop
    last = seq["looks"][-1]
    assert {"metric": "errors_per_s", "reason": NEAR_ZERO} in last["left_out"]
    judged = {c["metric"] for c in last["cells"]}
    assert {"tps", "latency_pct_ms"} <= judged and "errors_per_s" not in judged
    assert all(c["half_width"] <= 0.95 for c in last["cells"])
    said = done.out + done.err
    assert f"dbrig: look after round {stop}: widest interval" in said
    assert "left out (mean about 0, no relative width): errors_per_s" in said
