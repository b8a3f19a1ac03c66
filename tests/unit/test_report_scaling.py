"""The report's Scalability section on synthetic sweeps saved through the store API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dbrig.analysis.scaling import usl
from dbrig.commands.show import print_results
from dbrig.report import run_warnings, write_report
from dbrig.report.data import load_run
from dbrig.report.scaling import find_sweeps
from dbrig.store import RunDir
from tests.helpers.html import PNG_MAGIC, decoded_png
from tests.helpers.html import parse_page as parse
from tests.helpers.sweep import THREADS, make_sweep_run

LEVELS = [1, 2, 4, 8, 16, 32, 64]


def sysbench_metrics(sigma: float, kappa: float, noise: float = 0.01):
    rng = np.random.default_rng(11)

    def metrics(factors: dict[str, Any], rep: int) -> dict[str, float]:
        n = factors[THREADS]
        tps = float(usl(np.float64(n), 400.0, sigma, kappa)) * (1 + rng.normal(0, noise))
        return {
            "tps": tps,
            "qps": 20 * tps,
            "latency_avg_ms": 1000 * n / tps,
            "latency_pct_ms": 1500 * n / tps,
            "percentile": 95.0,
        }

    return metrics


def test_a_sweep_gets_the_section_the_table_and_the_chart(tmp_path: Path) -> None:
    run = make_sweep_run(tmp_path, {THREADS: LEVELS}, sysbench_metrics(0.1, 0.005), repeat=2)
    page_path = write_report(run, max_cell_figures=0)
    page = parse(page_path)
    assert "scalability" in page.ids
    assert (run / "plots" / "scaling_1.png").read_bytes().startswith(PNG_MAGIC)
    scaling_images = [src for src in page.images if decoded_png(src).startswith(PNG_MAGIC)]
    assert len(scaling_images) >= 1
    text = page.plain
    assert "Where throughput stops scaling: threads sweep" in text
    assert "Universal Scalability Law" in text
    assert "N* (green) is the fitted peak" in text
    assert "no fit:" not in text
    # σ 0.1, κ 0.005: N* = sqrt(0.9 / 0.005) = 13.4
    sweep = find_sweeps(load_run(run))[0]
    assert sweep.fit.ok
    assert sweep.fit.n_star == pytest.approx(13.4, rel=0.1)
    assert f"{sweep.fit.n_star:.1f}" in text
    assert sweep.knee.n is not None
    assert f"N = {sweep.knee.n:g} (" in text


def test_a_refused_fit_shows_its_reason_and_no_curve(tmp_path: Path) -> None:
    def flat(factors: dict[str, Any], rep: int) -> dict[str, float]:
        wobble = 1 + 0.03 * np.sin(factors[THREADS] * 7 + rep)
        return {"tps": 500 * wobble, "latency_pct_ms": 2.0 * factors[THREADS], "percentile": 95.0}

    run = make_sweep_run(tmp_path, {THREADS: LEVELS}, flat)
    text = parse(write_report(run, max_cell_figures=0)).plain
    assert "no fit: R²" in text
    assert "throughput is flat" in text
    assert "No curve:" in text
    assert (run / "plots" / "scaling_1.png").is_file()  # the points are still drawn


def test_too_few_concurrencies_get_the_reason_and_no_chart(tmp_path: Path) -> None:
    run = make_sweep_run(tmp_path, {THREADS: [1, 2, 4]}, sysbench_metrics(0.1, 0.005))
    text = parse(write_report(run, max_cell_figures=0)).plain
    assert "only 3 distinct concurrencies with results (N = 1, 2, 4)" in text
    assert not (run / "plots" / "scaling_1.png").exists()


def test_one_fit_per_combination_of_the_other_factors(tmp_path: Path) -> None:
    cpu = "interference.stress-ng.cpu"
    base = sysbench_metrics(0.05, 0.002)

    def metrics(factors: dict[str, Any], rep: int) -> dict[str, float]:
        values = dict(base(factors, rep))
        values["tps"] /= 1 + factors[cpu]
        return values

    run = make_sweep_run(tmp_path, {THREADS: LEVELS, cpu: [0, 1]}, metrics)
    sweeps = find_sweeps(load_run(run))
    assert [s.group for s in sweeps] == ["cpu=0", "cpu=1"]
    assert all(s.fit.ok for s in sweeps)
    assert sweeps[0].fit.lam == pytest.approx(2 * sweeps[1].fit.lam, rel=0.05)
    write_report(run, max_cell_figures=0)
    assert {p.name for p in (run / "plots").glob("scaling_*.png")} == {
        "scaling_1.png",
        "scaling_2.png",
    }


def test_mysqlslap_uses_queries_per_second_and_the_time_per_query(tmp_path: Path) -> None:
    concurrency = "workload.mysqlslap.concurrency"

    def metrics(factors: dict[str, Any], rep: int) -> dict[str, float]:
        n = factors[concurrency]
        rate = float(usl(np.float64(n), 800.0, 0.1, 0.004))
        return {"queries_per_s": rate, "avg_s": 50 * n / rate, "queries_per_client": 50.0}

    run = make_sweep_run(tmp_path, {concurrency: LEVELS}, metrics, tool="mysqlslap")
    sweep = find_sweeps(load_run(run))[0]
    assert sweep.throughput.name == "queries_per_s"
    assert sweep.latency_heading == "mean time per query (ms)"
    assert sweep.points["latency"].iloc[0] == pytest.approx(1000 / 800.0)
    text = parse(write_report(run, max_cell_figures=0)).plain
    assert "mysqlslap reports no latency percentile" in text


def test_a_run_without_a_concurrency_sweep_has_no_section(tmp_path: Path) -> None:
    run = make_sweep_run(
        tmp_path, {"interference.stress-ng.cpu": [0, 1, 2, 3]}, lambda f, r: {"tps": 100.0}
    )
    assert find_sweeps(load_run(run)) == []
    assert "scalability" not in parse(write_report(run, max_cell_figures=0)).ids


def test_a_sweep_stopping_before_the_peak_is_warned_about(tmp_path: Path) -> None:
    # σ 0.02, κ 0.0002: N* = 70, beyond the largest N, 16
    run = make_sweep_run(
        tmp_path, {THREADS: [1, 2, 4, 8, 16]}, sysbench_metrics(0.02, 0.0002, 0.002)
    )
    warnings = [w for w in run_warnings(run) if w.code == "peak_not_reached"]
    assert len(warnings) == 1
    assert "the peak was not reached: extend the sweep beyond threads=16" in warnings[0].message


def test_a_sweep_past_its_peak_is_not_warned_about(tmp_path: Path) -> None:
    run = make_sweep_run(tmp_path, {THREADS: LEVELS}, sysbench_metrics(0.1, 0.005))
    assert not [w for w in run_warnings(run) if w.code == "peak_not_reached"]
    frame = pd.read_csv(run / "results.csv")
    assert sorted(frame[THREADS].unique()) == LEVELS


def test_show_prints_the_fit_under_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_sweep_run(tmp_path, {THREADS: LEVELS}, sysbench_metrics(0.1, 0.005))
    print_results(RunDir.open(run))
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("  threads sweep ("))
    assert "USL fit R²" in line and "σ 0.1" in line and "peak N* = 13" in line
    assert "Measured peak" in line and "latency knee at threads=" in line


def test_show_says_why_a_sweep_of_two_or_three_values_has_no_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_sweep_run(tmp_path, {THREADS: [1, 2, 4]}, sysbench_metrics(0.1, 0.005))
    print_results(RunDir.open(run))
    line = next(x for x in capsys.readouterr().out.splitlines() if "threads sweep" in x)
    assert "no USL fit" in line and "the fit needs 4 or more" in line
