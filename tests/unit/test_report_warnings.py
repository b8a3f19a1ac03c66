"""Warnings where a run's numbers may lie (seed 004), on real saved runs and edited copies."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from dbrig.report import RunWarning, run_warnings
from dbrig.report.warnings import MAX_CELL_WARNINGS, see
from dbrig.util.units import parse_size
from tests.helpers.files import COMPLETE, FAILED, copy_run


def edit_results(run: Path, change: Callable[[pd.DataFrame], pd.DataFrame | None]) -> None:
    frame = pd.read_csv(run / "results.csv")
    changed = change(frame)
    (frame if changed is None else changed).to_csv(run / "results.csv", index=False)


def drop_trial_folders(run: Path, pattern: str) -> None:
    for folder in (run / "trials").glob(pattern):
        shutil.rmtree(folder)


def edit_meta(run: Path, **changes: object) -> None:
    meta = json.loads((run / "run.json").read_text())
    meta.update(changes)
    (run / "run.json").write_text(json.dumps(meta))


def by_code(warnings: list[RunWarning]) -> dict[str, list[RunWarning]]:
    grouped: dict[str, list[RunWarning]] = {}
    for warning in warnings:
        grouped.setdefault(warning.code, []).append(warning)
    return grouped


def test_a_complete_short_run_says_what_is_wrong_with_it() -> None:
    found = by_code(run_warnings(COMPLETE))
    assert set(found) == {
        "short_window",
        "data_in_buffer_pool",
        "errors",
        "high_cv",
        "weak_interference",
    }
    (short,) = found["short_window"]
    assert short.cell is None
    assert short.message.startswith("measured window 3 s in every cell (under 60 s")
    (pool,) = found["data_in_buffer_pool"]
    assert pool.message == (
        "the data fits in the buffer pool: this measures CPU and locking, not disk "
        "(1 table x 2,000 rows x ~230 B = 0.4 MiB of data, innodb_buffer_pool_size 64.0 MiB; "
        "every cell)"
    )
    # one line per kind, each cell in it, worst first
    (high_cv,) = found["high_cv"]
    assert high_cv.cell is None
    assert high_cv.message.startswith("TPS varying across repetitions in 4 of 4 cells: ")
    assert "c000 (threads=1 cpu=0): TPS CV 21.4 % over 3 repetitions (above 5 %)" in (
        high_cv.message
    )
    (errors,) = found["errors"]
    assert errors.message.startswith("errors or reconnects in 2 of 4 cells: ")
    assert "c002 (threads=2 cpu=0): 2.67 ignored errors/s" in errors.message
    (weak,) = found["weak_interference"]
    assert "c001" in weak.message and "c003" in weak.message
    assert "only 73 % of the CPU it asked for (2 of 3 repetitions under 80 %: r2, r3" in (
        weak.message
    )


def test_warnings_come_one_per_kind_most_threatening_first() -> None:
    codes = [w.code for w in run_warnings(COMPLETE)]
    assert codes == [
        "errors",
        "weak_interference",
        "high_cv",
        "data_in_buffer_pool",
        "short_window",
    ]


def test_warnings_are_frozen_values() -> None:
    warning = run_warnings(COMPLETE)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        warning.code = "other"  # type: ignore[misc]


def test_a_failed_repetition_is_named_with_its_reason_and_leaves_too_few() -> None:
    found = by_code(run_warnings(FAILED))
    (failed,) = found["failed"]
    assert failed.cell == "c002"
    assert failed.message == (
        "c002 (threads=2 cpu=0): 1 of 3 repetitions failed: killed by signal / no summary (rc=-9)"
    )
    (few,) = found["few_repetitions"]
    assert few.cell == "c002"
    assert "2 successful repetition(s) (fewer than 3" in few.message


def test_an_interrupted_run_says_how_far_it_got(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)
    edit_results(run, lambda f: f[f["repetition"] < 3])
    drop_trial_folders(run, "*-r3")  # trial.json is the record: results.csv must agree
    edit_meta(run, status="interrupted")
    found = by_code(run_warnings(run))
    (incomplete,) = found["incomplete"]
    assert incomplete.cell is None
    assert incomplete.message.startswith("the run is interrupted: 8 of 12 trials saved")
    assert f"dbrig run --resume {run}" in incomplete.message
    # two repetitions per cell so far, although repeat is 3
    (few,) = found["few_repetitions"]
    assert few.message.startswith("too few repetitions in 4 of 4 cells")
    assert all(c in few.message for c in ("c000", "c001", "c002", "c003"))


def test_too_few_repetitions_by_design_is_one_warning(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)
    edit_results(run, lambda f: f[f["repetition"] < 3])
    drop_trial_folders(run, "*-r3")  # trial.json is the record: results.csv must agree
    meta = json.loads((run / "run.json").read_text())
    meta["scenario"]["repeat"] = 2
    (run / "run.json").write_text(json.dumps(meta))
    (few,) = by_code(run_warnings(run))["few_repetitions"]
    assert few.cell is None
    assert few.message.startswith("repeat: 2 runs 2 repetition(s) per cell (fewer than 3")


def test_other_load_names_the_cell_and_its_busy_repetitions(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)

    def change(frame: pd.DataFrame) -> None:
        frame["other_cpu_pct"] = 1.5  # a quiet host
        frame.loc[frame["cell"] == "c001", "other_cpu_pct"] = [2.0, 63.2, 14.0]

    edit_results(run, change)
    (other,) = by_code(run_warnings(run))["other_load"]
    assert other.cell == "c001"
    assert other.message == (
        "c001 (threads=1 cpu=1): other processes took 63 % of the host's CPU (2 of 3 "
        "repetitions above 10 %: r2, r3) (the results competed with something dbrig did not "
        "start)"
    )


def test_steal_swap_reconnects_and_sampler_cost_name_the_cell_and_number(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)

    def change(frame: pd.DataFrame) -> None:
        c001 = frame["cell"] == "c001"
        frame.loc[c001, "steal_pct"] = [6.0, 9.0, 12.0]
        frame.loc[c001, "swap_out_mb_per_s"] = 1.5
        frame.loc[c001, "reconnects_per_s"] = 0.25
        frame.loc[frame["cell"] == "c003", "sampler_cpu_pct"] = 1.8
        frame.loc[frame["cell"] == "c003", "measured_time_s"] = 30.0
        # c002's 3 s windows are too short to judge the samplers' steady cost.
        frame.loc[frame["cell"] == "c002", "sampler_cpu_pct"] = 2.5

    edit_results(run, change)
    found = by_code(run_warnings(run))
    (steal,) = found["steal"]
    assert steal.cell == "c001"
    assert steal.message.startswith("c001 (threads=1 cpu=1): CPU steal 9.0 % (above 5 %")
    (swap,) = found["swap"]
    assert swap.message == "c001 (threads=1 cpu=1): swapping: 0.00 MiB/s in, 1.50 MiB/s out"
    (errors,) = found["errors"]
    assert "c001 (threads=1 cpu=1): 0.25 reconnects/s" in errors.message
    (sampler,) = found["sampler_overhead"]
    assert sampler.message == (
        "c003 (threads=2 cpu=1): the samplers used 1.8 % of a core (above 1 %)"
    )


def test_many_cells_tripping_one_check_give_one_summary_warning(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    cells = [{**meta["cells"][i % 4], "cell": f"c{i:03d}"} for i in range(MAX_CELL_WARNINGS + 2)]
    for i, cell in enumerate(cells):
        cell["factors"] = {"workload.sysbench.threads": i + 1, "interference.stress-ng.cpu": 0}
    meta.update(cells=cells, trials=[f"{c['cell']}-r1" for c in cells])
    (run / "run.json").write_text(json.dumps(meta))
    first = pd.read_csv(run / "results.csv").iloc[0]
    frame = pd.DataFrame([first] * len(cells)).reset_index(drop=True)
    frame["cell"] = [c["cell"] for c in cells]
    frame["trial"] = [f"{c['cell']}-r1" for c in cells]
    frame["steal_pct"] = [10.0 + i for i in range(len(cells))]
    frame.to_csv(run / "results.csv", index=False)
    drop_trial_folders(run, "*")  # no trial folders: results.csv is all there is
    (steal,) = by_code(run_warnings(run))["steal"]
    assert steal.cell is None
    head = f"CPU steal in {len(cells)} of {len(cells)} cells: c007"
    assert steal.message.startswith(head)
    assert steal.message.endswith(f"+2 more: {see('steal_pct')}")


def test_buffer_pool_comes_from_the_factor_when_the_matrix_varies_it(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    path = "server.config.innodb_buffer_pool_size"
    for cell, size in zip(meta["cells"], ["64M", "64M", "256K", "256K"], strict=True):
        cell["factors"][path] = size
    meta["factors"].append(path)
    meta["factor_labels"][path] = "innodb_buffer_pool_size"
    (run / "run.json").write_text(json.dumps(meta))
    (found,) = by_code(run_warnings(run))["data_in_buffer_pool"]
    assert "c000" in found.message and "c001" in found.message and "c002" not in found.message
    assert "innodb_buffer_pool_size 64.0 MiB" in found.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("128M", 128 * 2**20),
        ("1G", 2**30),
        ("1.5g", 1.5 * 2**30),
        ("67108864", 67108864),
        (67108864, 67108864),
        ("512K", 512 * 1024),
        ("16MB", 16 * 2**20),
        ("auto", None),
        (None, None),
        (True, None),
    ],
)
def test_parse_size(value: object, expected: float | None) -> None:
    assert parse_size(value) == expected


def hardware_run(tmp_path: Path, block: dict, memory_gib: float, cores: int) -> Path:
    """The COMPLETE fixture run, its scenario turned into a sysbench hardware test."""
    run = copy_run(COMPLETE, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    meta["scenario"]["workload"] = {"sysbench": {"threads": 1, **block}}
    meta["environment"]["host"].update(memory_gib=memory_gib, cpu_count=cores)
    (run / "run.json").write_text(json.dumps(meta))
    return run


def test_fileio_smaller_than_ram_without_direct_measures_the_page_cache(tmp_path: Path) -> None:
    block = {"test": "fileio", "file_total_size": "64M", "file_test_mode": "rndrd"}
    found = by_code(run_warnings(hardware_run(tmp_path / "a", block, 8, 2)))["page_cache"]
    assert len(found) == 1 and found[0].cell is None
    assert "file_total_size 64.0 MiB < RAM 8.0 GiB in every cell" in found[0].message
    assert "the page cache is measured, not the disk" in found[0].message
    direct = {**block, "file_extra_flags": "direct"}
    assert "page_cache" not in by_code(run_warnings(hardware_run(tmp_path / "b", direct, 8, 2)))
    big = {**block, "file_total_size": "16G"}
    assert "page_cache" not in by_code(run_warnings(hardware_run(tmp_path / "c", big, 8, 2)))


@pytest.mark.parametrize(("test", "warned"), [("cpu", True), ("mutex", True), ("threads", False)])
def test_cpu_and_mutex_with_more_threads_than_cores(
    tmp_path: Path, test: str, warned: bool
) -> None:
    """The fixture run varies threads over 1 and 2: on one core, the 2-thread cells warn."""
    run = hardware_run(tmp_path, {"test": test}, 8, 1)
    found = by_code(run_warnings(run)).get("threads_over_cores", [])
    assert bool(found) is warned
    if warned:
        assert all(f"{test} with 2 threads on 1 core" in w.message for w in found)
        assert "time-sharing, not per-core speed" in found[0].message


def test_no_buffer_pool_warning_for_a_script_or_a_hardware_test(tmp_path: Path) -> None:
    script = hardware_run(tmp_path / "a", {"script": "/x/select_one.lua"}, 8, 2)
    assert "data_in_buffer_pool" not in by_code(run_warnings(script))
    cpu = hardware_run(tmp_path / "b", {"test": "cpu"}, 8, 2)
    assert "data_in_buffer_pool" not in by_code(run_warnings(cpu))


def test_a_cell_without_a_factor_of_another_matrix_block_has_no_nan_in_its_label(
    tmp_path: Path,
) -> None:
    from dbrig.report.data import load_run

    run = copy_run(COMPLETE, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    meta["cells"][0]["factors"]["workload.sysbench.cpu_max_prime"] = 2000
    meta["factors"].append("workload.sysbench.cpu_max_prime")
    (run / "run.json").write_text(json.dumps(meta))
    labels = list(load_run(run).cells["label"])
    assert "cpu_max_prime=2000" in labels[0]
    assert all("cpu_max_prime" not in label and "nan" not in label for label in labels[1:])
