"""A cell that fails is saved as failed with a one-line reason; the other cells still run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.integration.helpers import (
    BUFFER_POOL_BYTES,
    assert_data_removed,
    assert_no_partial_trials,
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

POOL = "server.config.innodb_buffer_pool_size"
THREADS = "workload.sysbench.threads"

# The failing cell comes first: what it leaves behind must not break the next one.
CASES = {
    "server-cannot-start": (
        tiny_scenario(matrix={POOL: ["banana", "64M"]}, order="sequential"),
        POOL,
        "banana",
        ("[ERROR]", "banana"),
    ),
    "sysbench-fatal": (
        # 10 is MariaDB's smallest max_connections and root may hold one more.
        tiny_scenario(
            server={"config": {"innodb_buffer_pool_size": "64M", "max_connections": 10}},
            matrix={THREADS: [16, 1]},
            order="sequential",
        ),
        THREADS,
        16,
        ("1040", "Too many connections"),
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", list(CASES))
def test_a_failing_cell_is_saved_as_failed_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    scenario, factor, bad_value, reason_words = CASES[case]
    path = write_scenario(tmp_path / f"{case}.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 1, result.err
    assert "dbrig: 1 of 2 trials failed" in result.err
    run = only_run_dir(tmp_path / "runs")

    failed = read_json(run / "trials" / "c000-r1" / "trial.json")
    assert failed["status"] == "failed"
    assert failed["factors"] == {factor: bad_value}
    reason = failed["reason"]
    assert reason and "\n" not in reason
    for word in reason_words:
        assert word in reason

    passed = read_json(run / "trials" / "c001-r1" / "trial.json")
    assert passed["status"] == "ok", passed["reason"]
    assert passed["metrics"]["tps"] > 0
    assert passed["effective_config"]["innodb_buffer_pool_size"] == BUFFER_POOL_BYTES

    results = pd.read_csv(run / "results.csv").set_index("trial")
    assert results.loc["c000-r1", "status"] == "failed"
    assert results.loc["c000-r1", "reason"] == reason
    assert results.loc["c001-r1", "status"] == "ok"
    meta = read_json(run / "run.json")
    assert meta["status"] == "complete"
    assert (meta["trials_saved"], meta["trials_failed"]) == (2, 1)
    assert_no_partial_trials(run)
    assert_data_removed(run)
    assert "failed" in result.out  # the result table has a column for the reasons

    # Nothing left to run, but the run still holds a failed trial: not a success.
    resumed = run_main(["run", "--resume", str(run), "--no-report"], capsys)
    assert resumed.code == 1, resumed.err
    assert "dbrig: 0 trials" in resumed.err
    assert (
        f"dbrig: 1 of 2 trials failed (rerun them with: dbrig run --resume {run} --retry-failed)"
        in resumed.err
    )


@pytest.mark.integration
def test_a_server_config_that_never_starts_fails_every_trial_with_the_server_s_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tiny_scenario(
        server={"config": {"innodb_buffer_pool_size": "banana"}}, repeat=2, warmup=0
    )
    path = write_scenario(tmp_path / "never-starts.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 1, result.err
    run = only_run_dir(tmp_path / "runs")
    for trial in ("c000-r1", "c000-r2"):
        record = read_json(run / "trials" / trial / "trial.json")
        assert record["status"] == "failed"
        assert "[ERROR]" in record["reason"] and "banana" in record["reason"], record["reason"]
    assert read_json(run / "run.json")["trials_failed"] == 2
