"""Shell completion through click's own mechanism (_DBRIG_COMPLETE): subcommands, flags,
saved runs and shipped scenario names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.shell_completion import ShellComplete, get_completion_class

from dbrig.cli import cli
from dbrig.scenario import shipped

SRC = Path(__file__).resolve().parents[2] / "src"
FIXTURE_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "compare" / "base"


def complete(args: list[str], incomplete: str) -> list[tuple[str, str]]:
    """(type, value) of each completion, as the shell scripts receive them."""
    items = ShellComplete(cli, {}, "dbrig", "_DBRIG_COMPLETE").get_completions(args, incomplete)
    return [(item.type, item.value) for item in items]


def values(args: list[str], incomplete: str) -> list[str]:
    return [value for kind, value in complete(args, incomplete) if kind == "plain"]


@pytest.fixture
def runs_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with two saved runs under runs/ and one beside them; one non-run."""
    for where in ("runs/quickstart-20261123-100000", "runs/ci-20261123-110000", "old-run"):
        shutil.copytree(FIXTURE_RUN, tmp_path / where)
    (tmp_path / "runs" / "not-a-run").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_subcommands_complete() -> None:
    from dbrig.commands import ALL

    assert values([], "") == sorted(command.name for command in ALL)
    assert {"run", "show", "report", "compare", "history", "doctor", "examples"} <= set(
        values([], "")
    )
    assert values([], "ex") == ["examples"]
    assert values(["examples"], "") == ["copy"]


def test_flags_complete() -> None:
    assert values(["run"], "--re") == ["--resume", "--retry-failed", "--report"]
    assert "--fail-on-regression" in values(["compare"], "--")
    assert values(["examples", "copy", "quickstart"], "--") == ["--force", "--help"]


@pytest.mark.parametrize(
    "args", [["show"], ["report"], ["compare"], ["compare", "runs/ci-20261123-110000"]]
)
def test_arguments_that_take_a_run_complete_saved_runs(runs_here: Path, args: list[str]) -> None:
    found = values(args, "")
    assert found == [
        "runs/ci-20261123-110000",
        "runs/quickstart-20261123-100000",
        "old-run",
    ]
    assert values(args, "runs/q") == ["runs/quickstart-20261123-100000"]
    assert values(args, "./runs/") == [
        "./runs/ci-20261123-110000",
        "./runs/quickstart-20261123-100000",
    ]


def test_a_run_argument_also_offers_the_shells_own_directory_completion(runs_here: Path) -> None:
    assert complete(["show"], "elsewhere/")[0] == ("dir", "elsewhere/")
    assert values(["show"], "elsewhere/") == []
    assert values(["run", "--resume"], "runs/c") == ["runs/ci-20261123-110000"]


def test_run_and_examples_copy_complete_shipped_scenario_names() -> None:
    assert values(["run"], "quick") == ["quickstart"]
    assert complete(["run"], "quick")[0] == ("file", "quick")  # files too, a path wins
    assert values(["examples", "copy"], "") == shipped.shipped_names()
    assert values(["run", "--dry-run"], "") == shipped.shipped_names()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_documented_shell_gets_a_completion_script(shell: str) -> None:
    script = get_completion_class(shell)(cli, {}, "dbrig", "_DBRIG_COMPLETE").source()
    assert f"_DBRIG_COMPLETE={shell}_complete" in script.replace('"', "")


def test_the_environment_variable_completes_in_a_real_process(runs_here: Path) -> None:
    """What the sourced bash script runs on TAB (one process: importing dbrig takes seconds)."""
    completed = subprocess.run(
        [sys.executable, "-c", "from dbrig.cli import main; main()"],
        env={
            **os.environ,
            "PYTHONPATH": str(SRC),
            "_DBRIG_COMPLETE": "bash_complete",
            "COMP_WORDS": "dbrig show runs/",
            "COMP_CWORD": "2",
        },
        cwd=runs_here,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert completed.stdout.splitlines() == [
        "dir,runs/",
        "plain,runs/ci-20261123-110000",
        "plain,runs/quickstart-20261123-100000",
    ]


def test_the_lazy_table_names_every_command_and_loads_it() -> None:
    import click

    from dbrig import commands

    for name in commands.COMMANDS:
        command = commands.load(name)
        assert isinstance(command, click.Command) and command.name == name


def test_version_and_subcommand_names_need_no_command_module() -> None:
    """--version and completing a subcommand's name import no command (so no pandas)."""
    import subprocess
    import sys

    code = (
        "import sys; from dbrig.cli import cli; import dbrig.commands as c; "
        "loaded = [m for m in sys.modules if m.startswith('dbrig.commands.') "
        "and m not in ('dbrig.commands.console',)]; "
        "print(loaded, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] False"
