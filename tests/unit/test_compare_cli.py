"""`dbrig compare` on the command line: every exit code, every output file."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from dbrig import cli
from dbrig.commands import compare_command, history_command
from dbrig.commands._common import PERCENT
from tests.helpers.cli import invoke as invoke_command
from tests.helpers.files import COMPARE_RUNS as RUNS


def fixture(name: str) -> str:
    return str(RUNS / name)


def invoke(args: list[str]) -> tuple[int, str]:
    return invoke_command(compare_command, args)


# --------------------------------------------------------------------------- exit 0


def test_aa_pair_exits_0_and_prints_the_table():
    code, out = invoke([fixture("base"), fixture("aa"), "--fail-on-regression"])
    assert code == 0
    assert "base → aa: candidate versus baseline" in out
    assert "threads=1 cpu=0" in out
    assert "noise: tps: with n=3 per side" in out
    assert "worse" not in out.split("noise:")[0]


def test_every_output_file_is_written_and_parses(tmp_path):
    paths = {ext: tmp_path / f"out.{ext}" for ext in ("xml", "md", "json", "html")}
    code, _ = invoke(
        [
            fixture("quiet-base"),
            fixture("quiet-worse"),
            *("--junit", str(paths["xml"]), "--markdown", str(paths["md"])),
            *("--json", str(paths["json"]), "--html", str(paths["html"])),
        ]
    )
    assert code == 0  # worse rows, but no --fail-on-regression
    suite = ET.parse(paths["xml"]).getroot().find("testsuite")
    assert suite.get("failures") == "4"
    data = json.loads(paths["json"].read_text())
    assert data["summary"]["worse"] == 4
    assert data["correction"]["method"] == "holm"
    assert data["correction"]["comparisons"] == sum(
        row["p_adjusted"] is not None for row in data["rows"]
    )
    assert all(
        row["p_adjusted"] >= row["p_test"] for row in data["rows"] if row["p_test"] is not None
    )
    assert "#### Regressions" in paths["md"].read_text()
    assert paths["html"].read_text().startswith("<!doctype html>")


def test_metric_option_accepts_repeats_and_commas(tmp_path):
    out = tmp_path / "o.json"
    code, _ = invoke(
        [
            fixture("base"),
            fixture("aa"),
            "--metric",
            "tps,qps",
            "--metric",
            "latency_avg_ms",
            *("--json", str(out)),
        ]
    )
    assert code == 0
    assert json.loads(out.read_text())["metrics"] == ["tps", "qps", "latency_avg_ms"]


@pytest.mark.parametrize("text", ["5%", "5", "0.05", " 5 % "])
def test_threshold_spellings(text):
    assert PERCENT.convert(text, None, None) == pytest.approx(0.05)


def test_threshold_is_applied():
    code, _ = invoke(
        [
            fixture("quiet-base"),
            fixture("quiet-worse"),
            "--threshold",
            "25%",
            "--fail-on-regression",
        ]
    )
    assert code == 0


def test_env_difference_is_reported_and_allowed(tmp_path):
    out = tmp_path / "o.json"
    code, text = invoke([fixture("base"), fixture("env"), "--json", str(out)])
    assert code == 0
    assert "environment: CPU model: Intel(R) Xeon(R) Processor @ 2.10GHz -> AMD EPYC 7B13" in text
    assert "--allow-env-diff gives verdicts anyway" in text
    assert set(json.loads(out.read_text())["summary"]) == {"incomparable"}
    code, _ = invoke([fixture("base"), fixture("env"), "--allow-env-diff", "--json", str(out)])
    assert code == 0
    assert "incomparable" not in json.loads(out.read_text())["summary"]


def test_by_within_one_run_exits_0():
    code, out = invoke([fixture("two-servers"), "--by", "server"])
    assert code == 0
    assert "server=old → server=new" in out
    assert "(explained by server)" in out


def test_by_with_baseline_on_three_values():
    code, out = invoke([fixture("threads3"), "--by", "threads", "--baseline", "2"])
    assert code == 0
    assert "candidate group" in out


def test_same_directory_names_are_told_apart(tmp_path):
    for side in ("a", "b"):
        shutil.copytree(RUNS / "base", tmp_path / side / "small", ignore=_only_meta)
    out = tmp_path / "o.json"
    code, _ = invoke(
        [str(tmp_path / "a" / "small"), str(tmp_path / "b" / "small"), "--json", str(out)]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert (data["baseline"], data["candidates"]) == (
        str(tmp_path / "a" / "small"),
        [str(tmp_path / "b" / "small")],
    )


def _only_meta(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n not in ("run.json", "results.csv")]


# --------------------------------------------------------------------------- exit 1


def test_regression_with_fail_on_regression_exits_1(tmp_path):
    junit = tmp_path / "junit.xml"
    code, out = invoke(
        [
            fixture("quiet-base"),
            fixture("quiet-worse"),
            "--fail-on-regression",
            "--junit",
            str(junit),
        ]
    )
    assert code == 1
    assert "4 regression(s) beyond 5 %" in out
    assert junit.exists()  # outputs are written before failing


# --------------------------------------------------------------------------- exit 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([fixture("base"), fixture("disjoint")], "no cell in common"),
        ([fixture("base"), fixture("future")], "format_version 99 is newer"),
        ([fixture("base"), fixture("interrupted")], "the run is interrupted, not complete"),
        ([fixture("base"), fixture("missing")], "no such run directory"),
        ([fixture("threads3"), "--by", "threads"], "name the baseline with --baseline"),
        ([fixture("base"), "--by", "nope"], "factor 'nope': no such factor"),
        ([fixture("base"), "--by", "server"], "single value"),
        ([fixture("base"), fixture("aa"), "--by", "cpu"], "give exactly one RUN"),
        ([fixture("base"), fixture("aa"), "--baseline", "1"], "--baseline: only with --by"),
        ([fixture("base")], "give BASE_RUN and CAND_RUN"),
        ([fixture("base"), fixture("aa"), "--metric", "nope"], "--metric nope"),
        ([fixture("base"), fixture("aa"), "--metric", "tps", "--primary", "qps"], "--primary qps"),
        ([fixture("base"), fixture("aa"), "--correction", "bh"], "--correction"),
    ],
)
def test_bad_input_exits_2(args, message):
    code, text = invoke(args)
    assert code == 2
    assert message in text


def test_summary_says_how_many_comparisons_and_how(tmp_path):
    code, out = invoke([fixture("quiet-base"), fixture("quiet-worse")])
    assert code == 0
    assert "Holm over the" in out
    code, out = invoke([fixture("quiet-base"), fixture("quiet-worse"), "--correction", "none"])
    assert "alone" in out


def test_incomplete_run_directory_exits_2(tmp_path):
    shutil.copytree(RUNS / "aa", tmp_path / "aa", ignore=_only_meta)
    (tmp_path / "aa" / "run.json").unlink()
    code, text = invoke([fixture("base"), str(tmp_path / "aa")])
    assert code == 2
    assert "missing: this is not a complete dbrig run directory" in text


@pytest.mark.parametrize("option", ["--threshold", "--alpha"])
def test_bad_numbers_are_usage_errors(option):
    code, _ = invoke([fixture("base"), fixture("aa"), option, "abc"])
    assert code == 2


def test_unwritable_output_exits_2(tmp_path):
    code, text = invoke([fixture("base"), fixture("aa"), "--json", str(tmp_path / "no" / "o.json")])
    assert code == 2
    assert "--json" in text and "cannot write" in text


# --------------------------------------------------------------------------- through dbrig.cli.main


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(cli.cli.commands, "compare", compare_command)
    monkeypatch.setitem(cli.cli.commands, "history", history_command)


def main_exit(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    return exc.value.code


def test_main_turns_bad_input_into_one_line_and_exit_2(registered, capsys):
    assert main_exit(["compare", fixture("base"), fixture("disjoint")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dbrig: error: base and disjoint have no cell in common")
    assert len(err.splitlines()) == 1


def test_main_exit_codes_0_and_1(registered):
    assert main_exit(["compare", fixture("base"), fixture("aa")]) == 0
    worse = ["compare", fixture("quiet-base"), fixture("quiet-worse"), "--fail-on-regression"]
    assert main_exit(worse) == 1


def test_how_the_host_disturbed_a_side_is_said_beside_the_verdicts(tmp_path):
    import pandas as pd

    candidate = tmp_path / "aa"
    shutil.copytree(RUNS / "aa", candidate)
    results = pd.read_csv(candidate / "results.csv")
    results["other_cpu_pct"] = 1.0
    results.loc[results["cell"] == results["cell"].iloc[0], "other_cpu_pct"] = 45.0
    results.to_csv(candidate / "results.csv", index=False)
    paths = {ext: tmp_path / f"out.{ext}" for ext in ("md", "json", "html")}
    outputs = [f"--{flag}={paths[ext]}" for flag, ext in (("markdown", "md"), ("json", "json"))]
    code, out = invoke([fixture("base"), str(candidate), *outputs, f"--html={paths['html']}"])
    assert code == 0
    caveats = [ln.removeprefix("caveat: ") for ln in out.splitlines() if ln.startswith("caveat")]
    # The fixture runs' own (stress-ng short of its target in a repetition), then the load.
    assert any(c.startswith("baseline base: ") and "stress-ng achieved" in c for c in caveats)
    (other,) = [c for c in caveats if "other processes" in c]
    assert other.startswith("candidate aa: c000")
    assert "other processes took 45 % of the host's CPU" in other
    assert "#### Measurement caveats" in paths["md"].read_text()
    assert json.loads(paths["json"].read_text())["caveats"] == caveats
    assert "Measurement caveats" in paths["html"].read_text()
    _, quiet = invoke([fixture("base"), fixture("aa")])
    assert "other processes" not in quiet
