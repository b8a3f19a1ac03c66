"""The saved-run model: format versions, migration of version-1 runs, refusing newer ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dbrig.cli import main
from dbrig.errors import ConfigError
from dbrig.store import FORMAT_VERSION, RunDir, SavedRun, TrialResult, read_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "runs"
V1 = FIXTURES / "v1" / "small-20261121-235548"
AA = FIXTURES / "compare" / "aa"


def dbrig(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


@pytest.fixture
def v1_run(tmp_path: Path) -> Path:
    """A copy: ``dbrig report`` writes into the run directory."""
    return Path(shutil.copytree(V1, tmp_path / V1.name))


def trial_json(**changes: object) -> dict:
    data = read_json(V1 / "trials" / "c001-r1" / "trial.json")
    data.update(changes)
    return data


# -- the model ---------------------------------------------------------------------------


def test_the_fixture_is_version_1() -> None:
    assert read_json(V1 / "run.json")["format_version"] == 1
    assert isinstance(read_json(V1 / "trials" / "c000-r1" / "trial.json")["commands"], list)


def test_v1_commands_migrate_to_a_mapping_by_role() -> None:
    run = RunDir.open(V1)
    trials = run.trials()
    assert len(trials) == 12
    with_stress = trials["c001-r1"].commands
    assert list(with_stress) == ["workload", "interference"]
    assert with_stress["workload"][:3] == ("/usr/bin/sysbench", "oltp_read_write", "run")
    assert with_stress["interference"][0] == "/usr/bin/stress-ng"
    assert list(trials["c000-r1"].commands) == ["workload"]
    raw = read_json(V1 / "trials" / "c001-r1" / "trial.json")["commands"]
    assert with_stress["workload"] == tuple(raw[0])
    assert with_stress["interference"] == tuple(raw[1])


def test_a_v1_trial_written_back_is_v2_and_reads_back_equal() -> None:
    result = TrialResult.from_json(trial_json())
    data = result.to_json()
    assert data["format_version"] == FORMAT_VERSION == 2
    assert data["commands"] == {
        "workload": list(result.commands["workload"]),
        "interference": list(result.commands["interference"]),
    }
    assert TrialResult.from_json(json.loads(json.dumps(data))) == result
    assert data["metrics"] == trial_json()["metrics"]


def test_a_v1_trial_without_commands_migrates_to_none() -> None:
    assert TrialResult.from_json(trial_json(commands=[])).commands == {}
    data = trial_json()
    del data["commands"]
    assert TrialResult.from_json(data).commands == {}


def test_a_v1_run_json_reads_and_writes_back_unchanged_but_for_the_version() -> None:
    raw = read_json(V1 / "run.json")
    saved = SavedRun.from_json(raw)
    assert saved.status == "complete" and saved.seed == 7
    assert saved.factors == ("workload.sysbench.threads", "interference.stress-ng.cpu")
    assert saved.cells[1].cell == "c001" and saved.cells[1].factors == raw["cells"][1]["factors"]
    assert len(saved.trials) == 12
    assert saved.to_json() == {**raw, "format_version": FORMAT_VERSION}
    assert list(saved.to_json()) == list(raw)  # same key order


def test_the_run_id_round_trips_and_an_older_run_has_none() -> None:
    saved = SavedRun.from_json({"format_version": FORMAT_VERSION, "run_id": "0a1b2c3d"})
    assert saved.run_id == "0a1b2c3d" and saved.to_json()["run_id"] == "0a1b2c3d"
    assert SavedRun.from_json(read_json(V1 / "run.json")).run_id is None
    with pytest.raises(ConfigError, match="run_id: expected str, got int"):
        SavedRun.from_json({"format_version": FORMAT_VERSION, "run_id": 7})


@pytest.mark.parametrize("run_id", ["../../../tmp/x", "0A1B2C3D", "0a1b2c3", "0a1b2c3d/"])
def test_a_run_id_that_could_name_another_folder_is_refused(run_id: str) -> None:
    """The id names the run's folders on other hosts (``~/.dbrig/<run>-<id>-<server>``)."""
    with pytest.raises(ConfigError, match="run_id: expected eight hex digits"):
        SavedRun.from_json({"format_version": FORMAT_VERSION, "run_id": run_id})


def test_unknown_keys_are_kept_when_rewritten() -> None:
    saved = SavedRun.from_json({"format_version": 1, "status": "complete", "note": "mine"})
    assert saved.to_json()["note"] == "mine"
    trial = TrialResult.from_json(trial_json(note="mine"))
    assert trial.to_json()["note"] == "mine"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"format_version": 99}, "format_version 99 is newer than this dbrig"),
        ({"status": 3}, "status: expected str, got int"),
        ({"repetition": "1"}, "repetition: expected int, got str"),
        ({"trial": None}, "trial: missing"),
        ({"commands": [["a"], ["b"], ["c"]]}, "commands: 3 entries, expected at most 2"),
        ({"commands": {"workload": "sysbench run"}}, "commands.workload: expected a list"),
    ],
)
def test_a_bad_trial_json_is_one_line_naming_the_file(changes: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        TrialResult.from_json(trial_json(**changes), "trials/c001-r1/trial.json")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("trials/c001-r1/trial.json: ")
    assert expected in message


def test_a_newer_run_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"format_version": 99, "status": "complete"}))
    with pytest.raises(ConfigError) as info:
        RunDir.open(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'run.json'}: format_version 99 is newer than this dbrig understands "
        f"({FORMAT_VERSION}): upgrade dbrig"
    )


# -- the commands on a version-1 run -----------------------------------------------------


def test_show_reads_a_v1_run(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = dbrig(["show", str(V1), "--format", "markdown"], capsys)
    assert code == 0, err
    assert len([line for line in out.splitlines() if line.startswith("| c0")]) == 4


def test_report_reads_a_v1_run(v1_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = dbrig(["report", str(v1_run), "--cell-figures", "1"], capsys)
    assert code == 0, err
    page = (v1_run / "report.html").read_text()
    assert "small" in page and "c003" in page
    assert "67108864" in page  # effective_config, read from a v1 trial.json


def test_compare_reads_v1_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = dbrig(["compare", str(V1), str(AA)], capsys)
    assert code == 0, err
    assert f"{V1.name} → aa: candidate versus baseline" in out
    assert "threads=2 cpu=1" in out


def test_a_v1_run_and_its_v2_rewrite_compare_identical(
    v1_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = RunDir(v1_run)
    run.write_saved(run.saved())
    for trial_id, result in run.trials().items():
        run.write_trial(run.trial_path(trial_id), result)
    assert read_json(v1_run / "run.json")["format_version"] == 2
    assert isinstance(read_json(v1_run / "trials" / "c001-r1" / "trial.json")["commands"], dict)
    assert RunDir.open(v1_run).trials() == RunDir.open(V1).trials()
    _, v1_table, _ = dbrig(["show", str(V1), "--format", "markdown"], capsys)
    _, v2_table, _ = dbrig(["show", str(v1_run), "--format", "markdown"], capsys)
    assert v1_table == v2_table


@pytest.mark.parametrize("command", [["show"], ["report"], ["compare", str(AA)]])
def test_a_newer_format_is_refused_with_exit_2_and_one_line(
    v1_run: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    meta = read_json(v1_run / "run.json")
    (v1_run / "run.json").write_text(json.dumps({**meta, "format_version": 99}))
    code, _, err = dbrig([command[0], str(v1_run), *command[1:]], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(v1_run / "run.json") in lines[0]
    assert "newer than this dbrig understands" in lines[0] and "upgrade dbrig" in lines[0]
    assert not (v1_run / "report.html").exists()


def test_a_bad_cell_in_run_json_is_named_by_its_index() -> None:
    from dbrig.errors import ConfigError
    from dbrig.store.model import SavedRun

    with pytest.raises(ConfigError, match=r"run.json: cells\[1\]: factors: expected dict"):
        SavedRun.from_json(
            {"format_version": 2, "cells": [{"cell": "c000"}, {"cell": "c001", "factors": [1]}]},
            "run.json",
        )
