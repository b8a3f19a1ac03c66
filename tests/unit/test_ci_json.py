"""--ci-json: github-action-benchmark's custom JSON and Bencher's BMF, checked field by field.

The fields are those the formats document: github-action-benchmark's README ("custom
benchmarks": a list of objects with ``name``, ``unit`` and ``value`` required, ``range``
and ``extra`` optional strings) and Bencher's BMF JSON schema (https://bencher.dev/bmf.json:
benchmark name -> measure -> ``value`` required, ``lower_value`` and ``upper_value``
optional, all numbers; a measure slug at most 64 characters).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dbrig.analysis import cells
from dbrig.commands._common import load_run_input
from dbrig.commands.compare import compare_command
from dbrig.errors import ConfigError
from dbrig.host import probe
from dbrig.report import ci_json
from tests.helpers.cli import invoke
from tests.unit.test_history import write_run

GAB_REQUIRED = {"name": str, "unit": str, "value": (int, float)}
GAB_OPTIONAL = {"range": str, "extra": str}
BMF_FIELDS = {"value", "lower_value", "upper_value"}


def check_custom(entries: object) -> None:
    """github-action-benchmark's customBiggerIsBetter / customSmallerIsBetter input."""
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert isinstance(entry, dict)
        for key, kind in GAB_REQUIRED.items():
            assert isinstance(entry[key], kind), key
        for key, kind in GAB_OPTIONAL.items():
            assert key not in entry or isinstance(entry[key], kind), key
        assert set(entry) <= set(GAB_REQUIRED) | set(GAB_OPTIONAL)
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), "a benchmark name twice"


def check_bmf(document: object) -> None:
    """Bencher Metric Format, as its JSON schema states it."""
    assert isinstance(document, dict) and document
    for benchmark, measures in document.items():
        assert isinstance(benchmark, str) and benchmark
        assert isinstance(measures, dict) and measures
        for measure, metric in measures.items():
            assert isinstance(measure, str) and 0 < len(measure) <= 64
            assert isinstance(metric, dict) and "value" in metric
            assert set(metric) <= BMF_FIELDS
            assert all(isinstance(v, int | float) for v in metric.values())
            if "lower_value" in metric:
                assert metric["lower_value"] <= metric["value"] <= metric["upper_value"]


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base = write_run(tmp_path, "base", "2026-11-10T12:00:00", {1: 500, 2: 900})
    cand = write_run(tmp_path, "cand", "2026-11-11T12:00:00", {1: 400, 2: 905})
    for folder in (base, cand):
        frame_path = folder / "results.csv"
        text = frame_path.read_text().splitlines()
        # add a lower-is-better headline metric next to tps
        text[0] += ",latency_avg_ms"
        text[1:] = [line + ",5.0" for line in text[1:]]
        frame_path.write_text("\n".join(text) + "\n")
    return base, cand


def test_one_entry_per_cell_and_headline_metric(runs):
    values = cells.cell_values(load_run_input(runs[0]))
    assert [(v.cell, v.metric) for v in values] == [
        ("threads=1", "tps"),
        ("threads=1", "latency_avg_ms"),
        ("threads=2", "tps"),
        ("threads=2", "latency_avg_ms"),
    ]
    bigger = json.loads(ci_json.render(ci_json.BIGGER, "hist", values))
    smaller = json.loads(ci_json.render(ci_json.SMALLER, "hist", values))
    check_custom(bigger)
    check_custom(smaller)
    assert [e["name"] for e in bigger] == ["hist threads=1 tps", "hist threads=2 tps"]
    assert bigger[0]["unit"] == "txn/s" and bigger[0]["value"] == pytest.approx(500)
    assert bigger[0]["range"].startswith("± ") and "n=3" in bigger[0]["extra"]
    assert [e["name"] for e in smaller] == [
        "hist threads=1 latency_avg_ms",
        "hist threads=2 latency_avg_ms",
    ]
    bmf = json.loads(ci_json.render(ci_json.BMF, "hist", values))
    check_bmf(bmf)
    assert set(bmf) == {"hist threads=1", "hist threads=2"}
    assert set(bmf["hist threads=1"]) == {"tps", "latency_avg_ms"}


def test_compare_writes_every_format_with_its_verdicts(runs, tmp_path):
    paths = {kind: tmp_path / f"{kind}.json" for kind in ci_json.FORMATS}
    args = [str(runs[0]), str(runs[1])]
    for kind, path in paths.items():
        args += ["--ci-json", f"{kind}={path}"]
    code, out = invoke(compare_command, args)
    assert code == 0, out
    bigger = json.loads(paths[ci_json.BIGGER].read_text())
    check_custom(bigger)
    check_custom(json.loads(paths[ci_json.SMALLER].read_text()))
    check_bmf(json.loads(paths[ci_json.BMF].read_text()))
    first = next(e for e in bigger if e["name"] == "hist threads=1 tps")
    assert first["value"] == pytest.approx(400)  # the candidate's
    assert "worse (-20.0 %) vs base" in first["extra"]


@pytest.mark.parametrize(
    ("flag", "message"),
    [("bmf", "expected FORMAT=PATH"), ("junit=x.json", "unknown format 'junit'")],
)
def test_a_bad_flag_is_refused_before_anything_runs(runs, tmp_path, flag, message):
    code, out = invoke(compare_command, [str(runs[0]), str(runs[1]), "--ci-json", flag])
    assert code == 2 and message in out and "--ci-json" in out
    with pytest.raises(ConfigError, match=message):
        ci_json.parse_targets([flag])


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_git_checkout_a_run_starts_in(tmp_path):
    assert probe.git_checkout(tmp_path) == {}
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    for argv in (["init", "-q", "-b", "trunk"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", "-C", str(tmp_path), *argv], check=True, env=env)
    found = probe.git_checkout(tmp_path)
    assert found["branch"] == "trunk" and len(found["commit"]) == 40 and "dirty" not in found


def test_run_refuses_a_bad_format_before_it_starts(tmp_path):
    from dbrig.commands.run import run_command

    code, out = invoke(
        run_command, ["quickstart", "--out", str(tmp_path / "runs"), "--ci-json", "csv=x"]
    )
    assert code == 2 and "--ci-json csv=x: unknown format 'csv'" in out
    assert not (tmp_path / "runs").exists()
