"""``--dry-run --resume RUN_DIR`` prints and times only the trials that are left."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.helpers import only_run_dir, read_json, run_main, write_scenario


@pytest.mark.integration
def test_a_resumed_dry_run_shows_only_what_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = {
        "name": "left",
        "workload": {"sysbench": {"test": "cpu", "time": 1}},
        "matrix": {"workload.sysbench.threads": [1, 2, 3]},
        "seed": 5,
    }
    path = write_scenario(tmp_path / "left.yaml", scenario)
    out = tmp_path / "runs"
    done = run_main(["run", str(path), "--out", str(out), "--no-report"], capsys)
    assert done.code == 0, done.err
    run = only_run_dir(out)
    order = read_json(run / "run.json")["trials"]
    lost = order[1]
    shutil.rmtree(run / "trials" / lost)  # as if the run had stopped before it

    dry = run_main(["run", "--dry-run", "--resume", str(run)], capsys)
    assert dry.code == 0, dry.err
    lines = dry.out.splitlines()
    assert "resumed: 1 of 3 trials left to run" in dry.out
    assert [ln for ln in lines if ln.startswith("order: ")] == [f"order: {lost}"]
    shown = [ln.split()[0] for ln in lines if ln.startswith("c0")]
    assert shown == [lost.split("-")[0]]
    assert "  1 trials: 1s of load (warm-up + measured)" in lines
    assert sorted(p.name for p in (run / "trials").iterdir()) == sorted(set(order) - {lost})
