"""A CPU profile of a real mariadbd under sysbench, through ``dbrig run``: perf records the
server from the end of the warm-up, the trial keeps its folded stacks, and the report
draws the cell's flame graph."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from dbrig import proc
from dbrig.analysis.profile import parse_folded
from dbrig.host.perf import perf_problem
from dbrig.run import samplers
from dbrig.sampling.registry import sampler_entry
from dbrig.scenario.model import Sampling
from dbrig.server.handles import ManagedServerHandle
from tests.integration.helpers import (
    TINY_SCENARIO,
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

PERF_PROBLEM = perf_problem()
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PERF_PROBLEM is not None, reason=f"no CPU profiles here: {PERF_PROBLEM}"),
]


def test_a_profiled_cell_has_its_stacks_and_a_flame_graph_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sysbench = {**TINY_SCENARIO["workload"]["sysbench"], "time": 3, "threads": 2}
    scenario = tiny_scenario(
        workload={"sysbench": sysbench},
        sampling={"interval": 0.5, "profile": {"cpu": {"client": True}}},
        matrix={"sampling.profile.cpu.frequency": [0, 99]},
        order="sequential",
    )
    path = write_scenario(tmp_path / "profile.yaml", scenario)
    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    off, on = sorted((run / "trials").iterdir())

    assert not (off / "profile.folded").exists()
    assert "profile_samples" not in read_json(off / "trial.json")["metrics"]

    trial = read_json(on / "trial.json")
    assert trial["status"] == "ok", trial
    stacks = parse_folded((on / "profile.folded").read_text())
    assert sum(stacks.values()) == trial["metrics"]["profile_samples"] > 0
    # The server's stacks and, with client: true, the client's, each under its name.
    assert {stack.split(";")[0] for stack in stacks} == {"mariadbd", "sysbench"}
    # Debian's build has symbols: the connection threads' frames are named.
    assert any("do_command" in stack for stack in stacks), list(stacks)[:5]
    # Debian's mariadbd exports its public symbols only: its static functions are unnamed.
    profile_lines = [w for w in trial["warnings"] if w.startswith("profile:")]
    assert all("could not name ([unknown]" in w for w in profile_lines), profile_lines
    # perf started when the 1 s warm-up ended; only the folded stacks stay.
    assert _started(run, "perf record") - _started(run, "sysbench oltp_read_write run") >= 0.8
    assert not (on / "profile.perf.data").exists() and not (on / "profile.script").exists()

    page = (run / "report.html").read_text()
    assert 'id="profiles"' in page and 'class="flamegraph"' in page
    assert 'id="flame-c001"' in page and 'id="flame-c000"' not in page
    assert "dbrigFlameSearch" in page and "do_command" in page


@pytest.mark.parametrize(
    ("target", "says"),
    [("gone", "perf could not record the server"), ("idle", "perf recorded no samples")],
)
def test_a_profile_that_falls_short_is_a_warning_and_the_trial_goes_on(
    tmp_path: Path, target: str, says: str
) -> None:
    """Real perf, against a process that exited (it cannot attach) or one that sleeps
    (no samples): a line in the trial's warnings, profile_samples 0, no exception."""
    sleeper = proc.spawn(["sleep", "30"])
    try:
        if target == "gone":
            done = proc.spawn(["true"])
            done.wait(10)
            pid = done.pid
        else:
            pid = sleeper.pid
        trial = samplers.SampledTrial(
            tmp_path,
            # A managed server's capabilities are all the profile's selection reads (the
            # internals sampler's connection is not made: it is not selected).
            SimpleNamespace(  # type: ignore[arg-type]
                capabilities=ManagedServerHandle.capabilities,
                host_sampler=None,
                profiler=None,
                connect=None,
            ),
            Sampling(enabled=False, profile={"cpu": {"frequency": 99}}),
            warmup=0,
            clock=time.monotonic,
            devices=None,
            faults=False,
            processes=lambda: {"server": [pid]},
            pinned_cores=None,
            processes_here=True,
        )
        found: dict[str, float] = {}
        with samplers.sampled(trial, found, (sampler_entry("profile"),)):
            time.sleep(1.5)
    finally:
        sleeper.stop(grace_s=1)
    assert found["profile_samples"] == 0
    assert len(trial.warnings) == 1 and says in trial.warnings[0], trial.warnings
    assert f"(pid {pid})" in trial.warnings[0]
    assert (tmp_path / "profile.folded").read_text() == ""


def _started(run: Path, command: str) -> float:
    """When dbrig.log says the last ``command`` started, in seconds of the day."""
    lines = [line for line in (run / "dbrig.log").read_text().splitlines() if "start: " in line]
    stamp = [line for line in lines if command in line][-1].split()[1]  # 07:31:08,728
    hours, minutes, seconds = stamp.replace(",", ".").split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


# The shipped profiling scenario cut to seconds: one small table, 3 s windows, one
# repetition, a fixed rate (its finding is where each query's CPU goes, not how many).
# At 100 sorts a second of about 2 ms of CPU each a cell gets some 60 samples at 99 Hz
# (at 20 a second it got 3-7, too few to be sure to land in filesort).
SHIPPED_PROFILING_CUT = {
    "server.config.innodb_buffer_pool_size": "64M",
    "server.config.innodb_log_file_size": "16M",
    "workload.sysbench.tables": 1,
    "workload.sysbench.table_size": 5000,
    "workload.sysbench.time": 3,
    "workload.sysbench.rate": 100,
    "warmup": 1,
    "repeat": 1,
}


def test_the_shipped_profiling_scenario_cut_down_shows_the_merge_passes_of_the_small_buffer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = [a for key, value in SHIPPED_PROFILING_CUT.items() for a in ("--set", f"{key}={value}")]
    result = run_main(["run", "profiling", "--out", str(tmp_path / "runs"), *sets], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    cells = {}
    for folder in sorted((run / "trials").iterdir()):
        trial = read_json(folder / "trial.json")
        assert trial["status"] == "ok", trial
        cells[trial["cell"]] = parse_folded((folder / "profile.folded").read_text())
    small, large = cells["c000"], cells["c001"]  # sort_buffer_size 32K, 2M (the matrix order)
    # 5,000 rows of ~130 bytes do not fit in 32K: filesort merges chunks from a temp file.
    assert any("merge_buffers" in stack for stack in small), list(small)[:5]
    assert not any("merge_buffers" in stack for stack in large)
    assert all(any("filesort" in stack for stack in cell) for cell in (small, large))

    page = (run / "report.html").read_text()
    for cell in ("c000", "c001"):
        assert f'id="flame-{cell}"' in page and f'id="internals-{cell}"' in page
    assert "ORDER BY" in page  # the sorting statement's digest, in the internals tables

    # compare's explanation names the merge passes in its top rows, with each side's share
    by = ["--by", "server.config.sort_buffer_size", "--explain-rows", "15"]
    out = tmp_path / "compare.json"
    run_main(["compare", str(run), *by, "--json", str(out)], capsys)
    (pair,) = read_json(out)["explanations"]
    total = next(t for t in pair["tables"] if t["kind"] == "total")
    names = [(r["name"], r["mean_baseline"], r["mean_candidate"]) for r in total["rows"]]
    merge = next((r for r in total["rows"] if r["name"] == "merge_buffers"), None)
    assert merge is not None, names
    assert merge["mean_baseline"] > 0 and merge["mean_candidate"] == 0, total["rows"]
