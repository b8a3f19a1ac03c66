"""The findings of a run (analysis/findings.py, report/findings.py): the answer of each
experiment in a sentence, on small real runs (tests/fixtures/runs/findings/README.md) and
on frames built to the point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dbrig.analysis import findings as findings_module
from dbrig.analysis.findings import RunFacts, findings
from dbrig.report.data import load_run
from dbrig.report.findings import lines, run_findings
from tests.helpers.files import RUNS

RUNS_DIR = RUNS / "findings"


def texts(kind: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for finding in run_findings(load_run(RUNS_DIR / kind)):
        found.setdefault(finding.topic, []).append(finding.text)
    return found


def test_a_two_cell_sweep_says_why_it_has_no_fit_and_what_went_with_the_spread() -> None:
    found = texts("sweep")
    (sweep,) = found["scalability"]
    assert sweep.startswith("threads sweep (threads 1-2, n=4 repetitions): no USL fit: ")
    assert "the fit needs 4 or more" in sweep and "Measured peak 2,280.0 TPS at threads=1" in sweep
    assert "no latency knee" in sweep
    assert "at threads=1 (its repetitions disagree, CV 26 %: the peak's place may be noise" in sweep
    (spread,) = found["spread"]
    assert spread.startswith("Repetitions disagree in 2 cell(s) on TPS (threads=1: 1.4x")
    assert "threads=2: 2.4x (CV 59 %)" in spread
    assert "measured with it: other processes' CPU r1 52-58 %, r2 63-64 %" in spread


def test_crash_recovery_gives_each_fault_kind_its_figures() -> None:
    kill, term = texts("crash")["faults"]
    assert kill.startswith("kill_server SIGKILL at 3 s (n=1): downtime 0.34 s; ")
    for part in (
        "restart to first query 0.3281 s",
        "InnoDB crash recovery 0 s",
        "throughput recovery 1.4 s",
        "TPS with the fault 2,984.9 txn/s",
        "InnoDB crash recovery 0 s (13.5 MiB of redo, 173 pages recovered, 0 transactions",
    ):
        assert part in kill
    assert term.startswith("kill_server SIGTERM at 3 s (n=1): downtime 0.22 s")
    assert "InnoDB" not in term  # a clean shutdown recovers nothing


def test_a_freeze_is_its_own_kind_with_the_range_over_trials() -> None:
    (freeze,) = texts("freeze")["faults"]
    assert freeze.startswith("kill_server SIGSTOP at 4 s for 3 s (n=2): downtime 3.00 s")
    assert "TPS with the fault 2,099.9 txn/s (1,946.7-2,253.0)" in freeze


def test_lost_commits_are_given_per_setting() -> None:
    (lost,) = texts("acked")["durability"]
    assert lost == (
        "Acknowledged commits lost: innodb_flush_log_at_trx_commit=0: 4,770 lost of 203,728 "
        "acknowledged (lost in 1 of 1 trials); innodb_flush_log_at_trx_commit=1: 0 lost of "
        "37,336 acknowledged (lost in 0 of 1 trials)."
    )


def test_tpcc_says_nopm_consistency_rollbacks_and_the_caveat() -> None:
    (tpcc,) = texts("tpcc")["tpc-c-like"]
    assert tpcc.startswith("NOPM 16,227 ±18 % (n=2).")
    assert "Consistency conditions 1-4 held in 2 of 2 trials." in tpcc
    assert "New-Order rollbacks 0.8 %" in tpcc
    assert tpcc.endswith("TPC-C-like, not audited: not comparable with published TPC-C results.")


def test_a_short_soak_is_not_judged() -> None:
    assert texts("soak") == {
        "soak": [
            "soak r1: not judged: the window of 20 s is under 10 minutes (a per-hour slope "
            "would extrapolate the start-up)"
        ]
    }


def test_hardware_cells_give_their_own_figures() -> None:
    (figures,) = texts("hw")["figures"]
    assert "test=cpu cpu_max_prime=2000 threads=1: events/s 26,241.7" in figures
    assert "memory_oper=read: MiB/s 40,105.3 ±3 % (n=2)" in figures


def test_a_varied_factor_gets_compares_verdict_and_the_smallest_visible_change() -> None:
    (effect,) = texts("seed")["effect"]
    assert effect == (
        "cpu=1 against 0: TPS -15 %, inconclusive at n=2 (83 % is the smallest change "
        "this run could see)."
    )


# --------------------------------------------------------------------------- built frames


def frame(rows: list[dict[str, object]]) -> pd.DataFrame:
    return pd.DataFrame([{"status": "ok", **r} for r in rows])


def test_a_clear_effect_is_called_worse_with_its_interval() -> None:
    cpu = "interference.stress-ng.cpu"
    rows = [
        {"cell": c, "trial": f"{c}-r{r}", "repetition": r, cpu: n, "tps": tps}
        for c, n, values in (("c000", 0, [1000, 1010, 995]), ("c001", 2, [800, 805, 790]))
        for r, tps in enumerate(values, start=1)
    ]
    facts = RunFacts(frame(rows), [cpu], {cpu: "stressed cores"})
    (effect,) = [f.text for f in findings(facts) if f.topic == "effect"]
    assert effect.startswith("stressed cores=2 against 0: TPS -20 %, worse at n=3 (95 % CI")


def test_disagreeing_repetitions_name_the_other_load_of_each_repetition() -> None:
    threads = "workload.sysbench.threads"
    rows = []
    for cell, n, pairs in (
        ("c000", 16, [(2000, 28.0), (1000, 56.0)]),
        ("c001", 32, [(2100, 32.0), (1050, 60.0)]),
    ):
        for rep, (tps, other) in enumerate(pairs, start=1):
            rows.append(
                {
                    "cell": cell,
                    "trial": f"{cell}-r{rep}",
                    "repetition": rep,
                    threads: n,
                    "tps": tps,
                    "other_cpu_pct": other,
                }
            )
    labels = {"c000": "threads=16", "c001": "threads=32"}
    facts = RunFacts(frame(rows), [threads], {threads: "threads"}, cell_labels=labels)
    (spread,) = [f.text for f in findings(facts) if f.topic == "spread"]
    assert "threads=16: 2.0x" in spread and "threads=32: 2.0x" in spread
    assert spread.endswith("measured with it: other processes' CPU r1 28-32 %, r2 56-60 %.")


def test_factors_absent_from_some_cells_print_as_written_never_nan() -> None:
    test, prime = "workload.sysbench.test", "workload.sysbench.cpu_max_prime"
    rows = [
        {"cell": "c000", "trial": "c000-r1", "repetition": 1, test: "cpu", prime: 20000.0},
        {"cell": "c000", "trial": "c000-r2", "repetition": 2, test: "cpu", prime: 20000.0},
        {"cell": "c001", "trial": "c001-r1", "repetition": 1, test: "memory", prime: None},
        {"cell": "c001", "trial": "c001-r2", "repetition": 2, test: "memory", prime: None},
    ]
    for row in rows:
        row["events_per_s" if row[test] == "cpu" else "mib_per_s"] = 100.0 + row["repetition"]
    facts = RunFacts(frame(rows), [test, prime], {test: "test", prime: "cpu_max_prime"})
    text = " ".join(f.text for f in findings(facts))
    assert "nan" not in text and "20000.0" not in text
    assert not [f for f in findings(facts) if f.topic == "effect"]  # cpu vs memory: no verdict


def test_a_long_soak_is_judged_against_its_thresholds() -> None:
    row = {
        "cell": "c000",
        "trial": "c000-r1",
        "repetition": 1,
        "tps": 500.0,
        "measured_time_s": 3600.0,
        "tps_drift_pct_per_h": -12.0,
        "tps_drift_ci_low_pct_per_h": -15.0,
        "tps_drift_ci_high_pct_per_h": -9.0,
        "server_rss_growth_mib": 16.6,
        "server_rss_slope_mib_per_h": 3.0,
        "server_rss_slope_ci_low_mib_per_h": -1.0,
        "server_rss_slope_ci_high_mib_per_h": 7.0,
    }
    facts = RunFacts(frame([row]), [], {}, cell_labels={"c000": "(single cell)"}, soak={})
    (soak,) = [f.text for f in findings(facts) if f.topic == "soak"]
    assert soak.startswith("soak r1 (60 min): TPS drifts (-12.0 %/h, 95 % CI -15.0 to -9.0")
    assert "server RSS +17 MiB over the window, +3.0 MiB/h over its second half (within" in soak


def test_no_results_no_findings() -> None:
    assert findings(RunFacts(pd.DataFrame(), [], {})) == []


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_every_format_carries_the_same_sentences(fmt: str) -> None:
    found = run_findings(load_run(RUNS_DIR / "seed"))
    printed = lines(found, fmt)
    for finding in found:
        assert sum(finding.text in line for line in printed) == 1


def test_show_prints_the_findings_after_the_table_in_every_format(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dbrig.commands.show import print_results
    from dbrig.store import RunDir

    expected = [f.text for f in run_findings(load_run(RUNS_DIR / "sweep"))]
    for fmt in ("table", "markdown", "csv"):
        print_results(RunDir.open(Path(RUNS_DIR / "sweep")), fmt)
        out = capsys.readouterr().out
        table_end = out.index("c001")  # the last row of the table
        for text in expected:
            assert out.index(text) > table_end, fmt


def test_factors_print_as_written_in_the_table_and_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Matrix blocks that set different keys leave holes: 2000 stays 2000, a hole stays empty."""
    from dbrig.commands.show import print_results
    from dbrig.report import write_report
    from dbrig.store import RunDir
    from tests.helpers.files import copy_run
    from tests.helpers.html import parse_page

    print_results(RunDir.open(RUNS_DIR / "hw"), "markdown")
    table = capsys.readouterr().out.split("**Findings**")[0]
    assert "| c000 | cpu | 2000 | 1 |  |  |  |" in table
    assert "2000.0" not in table and "nan" not in table
    page = parse_page(write_report(copy_run(RUNS_DIR / "hw", tmp_path)))
    assert " nan " not in page.plain and "2000.0" not in page.plain


def test_a_share_shown_as_a_percentage_is_headed_as_one() -> None:
    from dbrig.metrics import metric

    ratio = metric("stress_achieved_ratio")
    assert ratio is not None and ratio.unit == "0..1"  # results.csv keeps the fraction
    assert ratio.shown_unit == "%" and ratio.heading == "stress achieved (%)"


def random_facts(rng: Any) -> RunFacts:
    """A run of random shape: 1-3 factors (some cells leaving one out), 1-3 repetitions,
    some failed trials, metrics with holes, faults and a soak block now and then."""
    factors = [f"workload.sysbench.f{i}" for i in range(int(rng.integers(1, 4)))]
    metrics = ["tps", "latency_pct_ms", "other_cpu_pct", "lost_commits", "nopm", "downtime_s"]
    rows, faults = [], {}
    for c in range(int(rng.integers(1, 6))):
        values = {f: rng.choice([1, 2.0, "x", None, float("nan")]) for f in factors}
        for rep in range(1, int(rng.integers(1, 4)) + 1):
            trial = f"c{c:03d}-r{rep}"
            row: dict[str, Any] = {"cell": f"c{c:03d}", "trial": trial, "repetition": rep}
            row["status"] = "ok" if rng.random() > 0.2 else "failed"
            row.update(values)
            for name in metrics:
                if rng.random() > 0.3:
                    row[name] = float(rng.choice([0.0, rng.random() * 1000, float("nan")]))
            rows.append(row)
            if rng.random() > 0.7:
                faults[trial] = {"faults": {"kill_server": {"signal": "KILL", "at": 3}}}
    return RunFacts(
        pd.DataFrame(rows),
        factors,
        {f: f.rsplit(".", 1)[-1] for f in factors},
        faults=faults,
        soak={} if rng.random() > 0.5 else None,
    )


def test_findings_of_random_runs_never_fail_nor_print_nan() -> None:
    rng = np.random.default_rng(22)
    for _ in range(150):
        for finding in findings(random_facts(rng)):
            assert finding.text and "nan" not in finding.text.lower().replace("nanos", "")


@pytest.mark.parametrize("kind", sorted(p.name for p in RUNS_DIR.iterdir() if p.is_dir()))
def test_the_report_opens_on_the_findings_of_every_kind(kind: str, tmp_path: Path) -> None:
    from dbrig.report import write_report
    from tests.helpers.files import copy_run
    from tests.helpers.html import parse_page

    page = write_report(copy_run(RUNS_DIR / kind, tmp_path))
    html = page.read_text()
    main = html[html.index("<main>") :]
    assert main.index("<section") == main.index('<section id="findings">')
    assert main.index('id="findings"') < main.index('id="warnings"') < main.index('id="scenario"')
    text = parse_page(page).plain
    for finding in run_findings(load_run(RUNS_DIR / kind)):
        assert finding.text in text


def test_show_format_csv_is_csv_then_the_findings_as_comment_lines() -> None:
    import csv
    import io

    from click.testing import CliRunner

    from dbrig.commands.show import show_command

    result = CliRunner().invoke(show_command, [str(RUNS_DIR / "seed"), "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.output.split("\n#")[0])))
    assert rows[0][:3] == ["cell", "cpu", "n"] and [r[0] for r in rows[1:]] == ["c000", "c001"]
    comments = [line for line in result.output.splitlines() if line.startswith("# ")]
    assert comments == [f"# {f.text}" for f in run_findings(load_run(RUNS_DIR / "seed"))]


def test_one_of_a_recovery_count_is_said_in_the_singular() -> None:
    rows = pd.DataFrame({"innodb_trx_rolled_back": [1.0], "innodb_pages_recovered": [12.0]})
    detail = findings_module._innodb_detail(rows)
    assert detail == " (12 pages recovered, 1 transaction rolled back)"
