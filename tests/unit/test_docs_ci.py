"""docs/ci.md: its workflows are YAML whose dbrig commands and flags exist, its scenarios are
valid, and the step that merges main's and the pull request's scenarios produces a valid one.

actionlint, where it is installed, checks the workflows as GitHub would read them.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from dbrig.cli import cli
from dbrig.scenario import plan_from_dict

CI_MD = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
SHELL_OPERATORS = {"||", "&&", "|", ";", ">", ">>", "2>", "&"}


def yaml_blocks() -> list[Any]:
    text = CI_MD.read_text()
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def workflows() -> list[dict[str, Any]]:
    return [b for b in yaml_blocks() if isinstance(b, dict) and "jobs" in b]


def run_scripts(only: str | None = None) -> list[str]:
    """The ``run:`` scripts of every workflow, or of the one named ``only``."""
    return [
        step["run"]
        for workflow in workflows()
        if only in (None, workflow["name"])
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if "run" in step
    ]


def dbrig_command_lines(script: str) -> list[list[str]]:
    """The words of every dbrig invocation in a step's script, up to a shell operator."""
    script = re.sub(r"\$\{\{.*?\}\}", "EXPR", script).replace("\\\n", " ")
    script = re.sub(r"<<'EOF'\n.*?\nEOF\n", "\n", script, flags=re.S)
    commands = []
    for line in script.splitlines():
        words = shlex.split(line, comments=True)
        starts = [i for i, w in enumerate(words) if w == "dbrig" or w.endswith("/bin/dbrig")]
        for start in starts:
            rest = words[start + 1 :]
            end = next((i for i, w in enumerate(rest) if w in SHELL_OPERATORS), len(rest))
            commands.append(rest[:end])
    return commands


def unknown_parts(words: list[str]) -> list[str]:
    """Subcommands and flags in ``words`` that dbrig's click group does not have."""
    command: click.Command = cli
    ctx = click.Context(cli)
    words = list(words)
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        name = words.pop(0)
        sub = command.get_command(ctx, name)
        if sub is None:
            return [name]
        command = sub
    flags = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    flags |= {"--help", "-h"}
    return [w for w in words if w.startswith("-") and w.split("=")[0] not in flags]


def test_the_page_has_the_interleaved_the_two_run_and_the_sharded_workflow() -> None:
    names = [w["name"] for w in workflows()]
    assert names == ["benchmark", "benchmark-two-runs", "benchmark-history", "benchmark-sharded"]
    for workflow in workflows():
        assert "on" in workflow or True in workflow  # YAML 1.1 reads the key `on` as True
        for job in workflow["jobs"].values():
            assert job["runs-on"]
            assert all("run" in step or "uses" in step for step in job["steps"])


def test_every_dbrig_command_in_the_workflows_uses_real_subcommands_and_flags() -> None:
    commands = [c for script in run_scripts() for c in dbrig_command_lines(script)]
    assert len(commands) >= 6
    for words in commands:
        assert unknown_parts(words) == [], " ".join(words)


def test_the_interleaved_workflow_compares_servers_within_one_run() -> None:
    commands = [" ".join(c) for s in run_scripts("benchmark") for c in dbrig_command_lines(s)]
    assert [c for c in commands if c.startswith("run ")] == [
        "run interleaved.yaml --dry-run",
        "run interleaved.yaml --out runs",
    ]
    assert any(c.startswith("compare runs/ci-* --by server --baseline base ") for c in commands)


def test_the_history_workflow_restores_runs_publishes_and_deploys_to_pages() -> None:
    workflow = next(w for w in workflows() if w["name"] == "benchmark-history")
    assert set(workflow.get("on") or workflow[True]) == {"push"}
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == [
        "actions/checkout",
        "actions/cache/restore",
        "actions/cache/save",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    ]
    commands = [
        " ".join(c) for s in run_scripts("benchmark-history") for c in dbrig_command_lines(s)
    ]
    assert any(c.startswith("run bench/ci.yaml --out runs --ci-json ") for c in commands)
    assert "publish runs --out site" in commands


def test_the_checker_itself_catches_a_wrong_flag_and_subcommand() -> None:
    assert unknown_parts(["compare", "a", "--by", "server", "--by-server"]) == ["--by-server"]
    assert unknown_parts(["comparre", "a"]) == ["comparre"]
    assert unknown_parts(["examples", "copy", "quickstart", "--force"]) == []
    assert dbrig_command_lines("x && /opt/dbrig/bin/dbrig run a.yaml --out r || [ $? -eq 1 ]") == [
        ["run", "a.yaml", "--out", "r"]
    ]


def test_every_scenario_on_the_page_is_valid() -> None:
    scenarios = [b for b in yaml_blocks() if isinstance(b, dict) and "workload" in b]
    assert len(scenarios) >= 3
    for raw in scenarios:
        plan_from_dict(raw, source="docs/ci.md", seed=1)


def test_the_merge_step_turns_both_sides_scenarios_into_one_interleaved_run(
    tmp_path: Path,
) -> None:
    script = next(s for s in run_scripts() if "interleaved.yaml" in s and "<<'EOF'" in s)
    program = re.search(r"<<'EOF'\n(.*?)\nEOF\n", script, re.S)
    assert program is not None
    scenario = next(b for b in yaml_blocks() if isinstance(b, dict) and b.get("name") == "ci")
    changed = {**scenario, "server": {"config": {"innodb_flush_log_at_trx_commit": 2}}}
    (tmp_path / "base" / "bench").mkdir(parents=True)
    (tmp_path / "base" / "bench" / "ci.yaml").write_text(yaml.safe_dump(scenario))
    pr = tmp_path / "pr"
    (pr / "bench").mkdir(parents=True)
    (pr / "bench" / "ci.yaml").write_text(yaml.safe_dump(changed))
    subprocess.run([sys.executable, "-c", program.group(1)], cwd=pr, check=True, timeout=60)

    raw = yaml.safe_load((pr / "interleaved.yaml").read_text())
    plan = plan_from_dict(raw, source="interleaved.yaml", seed=1)
    assert set(plan.scenario.server_specs) == {"base", "candidate"}
    assert plan.scenario.server_specs["candidate"].config["innodb_flush_log_at_trx_commit"] == 2
    assert len(plan.cells) == 2 * len(scenario["matrix"]["workload.sysbench.threads"])


@pytest.mark.skipif(shutil.which("actionlint") is None, reason="actionlint is not installed")
def test_actionlint_accepts_every_workflow(tmp_path: Path) -> None:
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    blocks = re.findall(r"```yaml\n(.*?)```", CI_MD.read_text(), re.S)
    for i, block in enumerate(b for b in blocks if "\njobs:" in b):
        (folder / f"w{i}.yml").write_text(block)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    linted = subprocess.run(["actionlint"], cwd=tmp_path, capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout
