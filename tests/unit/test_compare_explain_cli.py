"""`dbrig compare` says why: its 'why' tables, differential flame graphs and the
explanation in JSON and Markdown, on a real run with CPU profiles and server internals
(tests/fixtures/runs/explain/README.md)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from dbrig.commands import compare_command
from dbrig.report.explain_inputs import digests_kept, trial_evidence
from tests.helpers.cli import invoke as invoke_command
from tests.helpers.files import COMPARE_RUNS

RUN = Path(__file__).parents[1] / "fixtures" / "runs" / "explain" / "flush-log"
BY = ["--by", "innodb_flush_log_at_trx_commit"]
BASE, CAND = "innodb_flush_log_at_trx_commit=1", "innodb_flush_log_at_trx_commit=2"


def invoke(args: list[str]) -> tuple[int, str]:
    return invoke_command(compare_command, args)


def _table(out: str, title: str) -> list[str]:
    """The lines of the 'why' table whose caption holds ``title``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("why,") and title in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("└"))
    return lines[start : end + 1]


def test_compare_by_a_factor_names_what_moved_in_each_group() -> None:
    code, out = invoke([str(RUN), *BY, "--explain-rows", "5"])
    assert code == 0, out
    for title in ("CPU functions by self share", "CPU functions by total share"):
        table = _table(out, title)
        assert BASE in table[2] and CAND in table[2]  # the groups head the columns
        assert len([line for line in table if line.startswith("│")]) == 5
    statements = _table(out, "statements by time per transaction")
    commit = next(line for line in statements if "COMMIT (sbtest)" in line)
    # flush at every commit (1) against once a second (2): COMMIT's time per transaction
    assert commit.rstrip(" │").endswith("less")
    waits = _table(out, "wait events by time per transaction (µs/txn), 3/3 trials")
    assert any("wait/io/" in line for line in waits)
    assert "differential flame graphs: --explain-dir DIR" in out


def test_the_flame_graph_json_and_markdown_outputs(tmp_path: Path) -> None:
    folder = tmp_path / "why"
    paths = {ext: tmp_path / f"out.{ext}" for ext in ("json", "md", "html")}
    code, out = invoke(
        [str(RUN), *BY, "--explain-dir", str(folder)]
        + [
            arg
            for ext, path in paths.items()
            for arg in (f"--{ext.replace('md', 'markdown')}", str(path))
        ]
    )
    assert code == 0, out
    (svg,) = folder.glob("*.svg")
    assert f"differential flame graph: {svg}" in out
    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and "do_command" in svg.read_text()
    (explanation,) = json.loads(paths["json"].read_text())["explanations"]
    assert explanation["candidate"] == CAND and explanation["baseline_cell"] == "c000"
    kinds = [t["kind"] for t in explanation["tables"]]
    assert kinds == ["self", "total", "waits", "digests"]
    assert all(len(t["rows"]) <= 10 for t in explanation["tables"])
    row = explanation["tables"][0]["rows"][0]
    assert row["n_baseline"] == row["n_candidate"] == 3 and row["ci_low"] < row["delta"]
    markdown = paths["md"].read_text()
    assert "<summary>Why: (single cell)" in markdown
    untested = [line for line in markdown.splitlines() if line.endswith("| small: untested |")]
    assert untested and all(line.split(" | ")[-3] == "-" for line in untested)  # no p
    page = paths["html"].read_text()
    assert "dbrigDiffSearch" in page and "Why: CPU profiles and server internals" in page


def test_explain_rows_0_turns_the_explanation_off() -> None:
    code, out = invoke([str(RUN), *BY, "--explain-rows", "0"])
    assert code == 0 and "why," not in out and "flame graph" not in out
    code, out = invoke([str(RUN), *BY, "--explain-rows", "0", "--explain-dir", "/tmp/x"])
    assert code == 2 and "--explain-dir" in out


def test_one_trial_a_side_gives_means_and_says_why_there_is_no_interval(tmp_path: Path) -> None:
    run = tmp_path / "flush-log"
    shutil.copytree(RUN, run)
    results = pd.read_csv(run / "results.csv")
    for trial in results.loc[results["repetition"] != 1, "trial"]:
        shutil.rmtree(run / "trials" / trial)
    results[results["repetition"] == 1].to_csv(run / "results.csv", index=False)
    code, out = invoke([str(run), *BY])
    assert code == 0, out
    table = _table(out, "CPU functions by self share")
    assert "1/1 trials" in table[0]
    assert all(line.rstrip(" │").endswith("n < 2") for line in table if line.startswith("│ "))
    assert "note: 1/1 trials (baseline/candidate): fewer than 2 trials on a side" in out


def test_two_runs_explain_cell_by_cell(tmp_path: Path) -> None:
    other = tmp_path / "again"
    shutil.copytree(RUN, other)
    code, out = invoke([str(RUN), str(other), "--explain-rows", "3"])
    assert code == 0, out
    table = _table(out, "CPU functions by self share")
    assert "flush-log → again" in table[0] and "innodb_flush_log_at_trx_commit=1" in table[0]
    # the same trials on both sides: nothing moved, and nothing is claimed
    assert all("+0 " in line and "unclear" in line for line in table if line.startswith("│ "))


def test_runs_without_profiles_or_internals_print_no_explanation() -> None:
    code, out = invoke([str(COMPARE_RUNS / "base"), str(COMPARE_RUNS / "aa")])
    assert code == 0 and "why," not in out and "flame graph" not in out


PS_OFF = "internals: performance_schema is OFF on the server: no wait events\n"


def test_a_trial_whose_waits_were_not_read_is_left_out_not_zero(tmp_path: Path) -> None:
    run = tmp_path / "flush-log"
    shutil.copytree(RUN, run)
    for trial in ("c001-r1", "c001-r2", "c001-r3"):
        for name in ("waits.csv", "digests.csv"):
            (run / "trials" / trial / name).unlink()
        (run / "trials" / trial / "internals.out").write_text(PS_OFF)
    code, out = invoke([str(run), *BY])
    assert code == 0, out
    assert "wait events by time" not in out and "statements by time" not in out
    assert "→ 0" not in out and "CPU functions by self share" in out
    # one trial of three: the candidate's waits are its other two trials'
    shutil.rmtree(run)
    shutil.copytree(RUN, run)
    for name in ("waits.csv", "digests.csv"):
        (run / "trials" / "c001-r1" / name).unlink()
    (run / "trials" / "c001-r1" / "internals.out").write_text(PS_OFF)
    code, out = invoke([str(run), *BY])
    assert code == 0, out
    waits = _table(out, "wait events by time per transaction (µs/txn), 3/2 trials")
    handler = next(line for line in waits if "wait/io/table/sql/handler" in line)
    assert "3/2" in handler and "less" not in handler
    assert "1 of 6 trials have no wait events, left out of n (c001-r1): performance_schema" in out
    assert "1 of 6 trials have no statement digests" in out


def test_a_statement_under_a_full_top_list_is_unknown_not_zero(tmp_path: Path) -> None:
    """The fixture keeps 5 statements a trial (sampling.internals.digests: 5) and every
    list is full: one missing from a list may have run, just below the cut."""
    run = tmp_path / "flush-log"
    shutil.copytree(RUN, run)
    digests = run / "trials" / "c001-r1" / "digests.csv"
    rows = [line for line in digests.read_text().splitlines() if "DELETE FROM" not in line]
    rows.append("sbtest,ffff,10,0.010,1.0,0,0,SELECT 1")  # still 5 statements: full
    digests.write_text("\n".join(rows) + "\n")
    code, out = invoke([str(run), *BY, "--json", str(tmp_path / "out.json")])
    assert code == 0, out
    (explanation,) = json.loads((tmp_path / "out.json").read_text())["explanations"]
    statements = next(t for t in explanation["tables"] if t["kind"] == "digests")
    delete = next(r for r in statements["rows"] if r["name"].startswith("DELETE FROM"))
    assert (delete["n_baseline"], delete["n_candidate"]) == (3, 2)
    assert any("c001-r1" in note and "unknown" in note for note in statements["notes"])


def test_a_trials_statement_list_is_full_at_the_scenarios_cap() -> None:
    meta = json.loads((RUN / "run.json").read_text())
    assert digests_kept(meta) == 5 and digests_kept({}) == 20
    folder = RUN / "trials" / "c000-r1"  # 5 statements
    full = trial_evidence(folder, 1000.0, 5).internals
    short = trial_evidence(folder, 1000.0, 6).internals
    assert full is not None and full.digests_full
    assert short is not None and not short.digests_full


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (
            "waits.csv",
            "event,count,wait_ms\nwait/io/x,3\n",
            "waits.csv: line 2 is short (no wait_ms)",
        ),
        ("waits.csv", "event,wait_ms\nwait/io/x,3.0\n", "waits.csv: no column count in its header"),
        (
            "digests.csv",
            "schema,digest,count,total_ms,mean_us,rows_examined,rows_sent,text\n"
            "s,d,1,lots,1.0,0,0,COMMIT\n",
            "digests.csv: line 2: total_ms 'lots' is not a number",
        ),
        (
            "profile.folded",
            "mariadbd;do_command 5\nnot a stack\n",
            "profile.folded: 1 line not 'stack count', left out",
        ),
    ],
)
def test_a_bad_trial_file_is_left_out_with_a_note(
    tmp_path: Path, name: str, text: str, said: str
) -> None:
    run = tmp_path / "flush-log"
    shutil.copytree(RUN, run)
    (run / "trials" / "c001-r2" / name).write_text(text)
    code, out = invoke([str(run), *BY, "--json", str(tmp_path / "out.json")])
    assert code == 0, out
    (explanation,) = json.loads((tmp_path / "out.json").read_text())["explanations"]
    notes = [n for t in explanation["tables"] for n in t["notes"]]
    assert any(said in note and "c001-r2" in note for note in notes), notes


def test_unreadable_files_of_a_whole_side_are_still_named(tmp_path: Path) -> None:
    run = tmp_path / "flush-log"
    shutil.copytree(RUN, run)
    for trial in ("c001-r1", "c001-r2", "c001-r3"):
        (run / "trials" / trial / "waits.csv").write_text("event,count,wait_ms\nx,1,nan\n")
        (run / "trials" / trial / "profile.folded").unlink()
        (run / "trials" / trial / "profile.folded").mkdir()  # unreadable
    code, out = invoke([str(run), *BY, "--json", str(tmp_path / "out.json")])
    assert code == 0, out
    assert "wait events by time" not in out and "CPU functions" not in out
    (explanation,) = json.loads((tmp_path / "out.json").read_text())["explanations"]
    assert len(explanation["notes"]) == 6  # three waits.csv, three profile.folded
    assert (
        "note: why, (single cell): c001-r3/waits.csv: line 2: wait_ms 'nan' is not a number" in out
    )
    assert "note: why, (single cell): c001-r1/profile.folded: unreadable" in out
