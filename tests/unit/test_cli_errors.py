"""Bad input through the command line: exit 2, one line naming the file and key, nothing made.

No server or tool is needed: every one of these is refused while the scenario is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.cli import main

VALID = """\
name: bad-input
workload:
  sysbench: {tables: 1, table_size: 1000, time: 2}
"""


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    """A directory with a long path: an error line naming it must still be one line."""
    path = tmp_path / ("a-folder-with-a-long-name-" * 6)
    path.mkdir()
    return path


def dbrig(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    return exited.value.code, capsys.readouterr().err


def refused(args: list[str], capsys: pytest.CaptureFixture[str], out: Path) -> str:
    """The one error line of a command that must exit 2 and create nothing under ``out``."""
    code, err = dbrig([*args, "--out", str(out)], capsys)
    assert code == 2, err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert lines[0].startswith("dbrig: error: "), lines[0]
    assert not out.exists()
    return lines[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        (VALID + "colour: blue\n", "colour: unknown key"),
        (
            VALID.replace("time: 2", "time: 2, bogus_option: 1"),
            "workload.sysbench.bogus_option: unknown key",
        ),
        (VALID + "repeat: many\n", "repeat: "),
        (VALID.replace("tables: 1", "tables: two"), "workload.sysbench.tables: "),
        (
            VALID + "matrix:\n  workload.sysbench.thread: [1, 2]\n",
            "'workload.sysbench.thread' names nothing",
        ),
        (
            VALID + "matrix:\n  workload.sysbench.threads: [1, two]\n",
            "workload.sysbench.threads",
        ),
        (VALID + "workload: [unclosed\n", "YAML syntax error"),
        (VALID + "name: twice\n", "name: key is given twice"),
    ],
    ids=[
        "unknown-key",
        "unknown-nested-key",
        "wrong-type",
        "wrong-nested-type",
        "matrix-path-names-nothing",
        "matrix-value-wrong-type",
        "yaml-syntax",
        "duplicate-key",
    ],
)
def test_a_bad_scenario_is_one_line_naming_the_file_and_key(
    deep: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    scenario = deep / "scenario.yaml"
    scenario.write_text(text)
    line = refused(["run", str(scenario)], capsys, deep / "runs")
    assert f"dbrig: error: {scenario}: " in line
    assert expected in line


def test_a_missing_scenario_file_is_one_line_naming_it(
    deep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = deep / "no-such-scenario.yaml"
    line = refused(["run", str(missing)], capsys, deep / "runs")
    assert str(missing) in line and "no such scenario file" in line


@pytest.mark.parametrize("kind", ["empty-directory", "no-such-directory", "not-json"])
def test_resuming_something_that_is_not_a_run_is_one_line_and_changes_nothing(
    deep: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    target = deep / "not-a-run"
    if kind != "no-such-directory":
        target.mkdir()
    if kind == "not-json":
        (target / "run.json").write_text("{ half written")
    before = sorted(p.name for p in deep.rglob("*"))
    code, err = dbrig(["run", "--resume", str(target)], capsys)
    assert code == 2, err
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("dbrig: error: "), err
    assert str(target) in lines[0]
    assert sorted(p.name for p in deep.rglob("*")) == before


def test_neither_a_scenario_nor_resume_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused(["run"], capsys, tmp_path / "runs")
    assert "--resume" in line


@pytest.mark.parametrize(
    "args, expected",
    [
        (["run", "--bogus"], "No such option '--bogus'"),
        (["nope"], "No such command 'nope'"),
        (["reprot"], "No such command 'reprot'. Did you mean 'report'?"),
        (["cache", "lsit"], "No such command 'lsit'. Did you mean 'list'?"),
        (["show"], "Missing argument 'RUN_DIR'"),
    ],
)
def test_a_wrong_flag_or_command_is_one_line_with_exit_2(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = dbrig(args, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dbrig: error: ") and expected in lines[0]
    assert "--help" in lines[0]


def _saved_run(tmp_path: Path, cores: int) -> Path:
    """A run directory as start_run leaves it, for cpu-contention.yaml planned on ``cores``."""
    import datetime as dt

    from dbrig.scenario import plan_from_dict, read_yaml
    from dbrig.store import CellPlan, RunDir, SavedRun

    raw = read_yaml(Path(__file__).parents[2] / "scenarios" / "cpu-contention.yaml")
    plan = plan_from_dict(raw, seed=3, cpu_count=cores)
    run = RunDir.create(tmp_path, "cpu", dt.datetime(2026, 1, 1))
    run.write_saved(
        SavedRun(
            raw_scenario=raw,
            seed=3,
            cells=tuple(CellPlan(c.id, c.server, c.factor_dict) for c in plan.cells),
            trials=tuple(t.id for t in plan.trials),
            environment={"host": {"cpu_count": cores}},
        )
    )
    return run.path


def test_resume_sizes_nproc_by_the_saved_host_not_this_one(tmp_path: Path) -> None:
    from dbrig.commands.run import resume_plan as _resume_plan

    _, plan = _resume_plan(_saved_run(tmp_path, cores=5))
    cpus = {c.factor_dict["interference.stress-ng.cpu"] for c in plan.cells}
    assert cpus == {0, 1, 2, 3, 4, 5}


def test_resume_refuses_a_run_whose_cells_no_longer_match(tmp_path: Path) -> None:
    import json

    from dbrig.commands.run import resume_plan as _resume_plan
    from dbrig.errors import ConfigError

    path = _saved_run(tmp_path, cores=2)
    meta = json.loads((path / "run.json").read_text())
    meta["cells"][0]["factors"]["interference.stress-ng.cpu"] = 7
    (path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="no longer expands to the saved cells"):
        _resume_plan(path)
