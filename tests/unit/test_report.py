"""The run report: report.html, plots/*.png and results_by_cell.csv from saved run directories."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from dbrig.metrics import HEADLINE
from dbrig.report import charts, result_table, write_report
from dbrig.report.build import REPORT_HTML, RESULTS_BY_CELL
from dbrig.report.data import load_run, read_samples
from dbrig.report.tables import headline_metrics
from tests.helpers.files import COMPLETE, FAILED, RUNS, copy_run
from tests.helpers.html import PNG_MAGIC, decoded_png
from tests.helpers.html import parse_page as parse

SECTIONS = ("warnings", "scenario", "results", "charts", "timeseries", "appendix")


@pytest.fixture(scope="module")
def complete_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of a copy of the complete run, rendered once for the tests that only read it."""
    run = copy_run(COMPLETE, tmp_path_factory.mktemp("complete"))
    return write_report(run)


@pytest.fixture(scope="module")
def failed_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = copy_run(FAILED, tmp_path_factory.mktemp("failed"))
    return write_report(run)


# --------------------------------------------------------------------------- whole report


def test_report_of_a_complete_run(complete_report: Path) -> None:
    page_path = complete_report
    run = page_path.parent
    assert page_path == run / REPORT_HTML
    page = parse(page_path)
    assert set(SECTIONS) <= page.ids
    assert page.external == []
    assert page.scripts == 0
    assert len(page.images) == 7
    for src in page.images:
        assert decoded_png(src).startswith(PNG_MAGIC)
    plots = sorted(p.name for p in (run / "plots").iterdir())
    assert plots == [
        "cell_c000.png",
        "cell_c001.png",
        "cell_c002.png",
        "cell_c003.png",
        "factor_1.png",
        "factor_2.png",
        "timeseries_throughput.png",
    ]
    text = page.plain
    for expected in (
        "small run report",
        "tiny fixture run for report and compare tests",
        "12 of 12 trials saved",
        "Intel(R) Xeon(R) Processor @ 2.10GHz, 2 logical cores",
        "ext4 on /dev/vda",
        "I/O scheduler mq-deadline",
        "mariadb 10.11.19-MariaDB-0+deb12u1",
        "sysbench 1.0.20",
        "innodb_buffer_pool_size=67108864",
        "the data fits in the buffer pool: this measures CPU and locking, not disk",
        "workload.sysbench.threads",
    ):
        assert expected in text, expected


def test_the_result_table_shows_mean_and_interval_per_cell(complete_report: Path) -> None:
    html = complete_report.read_text()
    rows = re.findall(r'<tr class="state-ok">(.*?)</tr>', html, re.S)
    assert len(rows) == 4
    cells = [
        re.sub(r"<[^>]+>", " ", c).split() for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[0])
    ]
    assert cells[:4] == [["c000"], ["1"], ["0"], ["3/3"]]
    # TPS as the terminal table (dbrig.report.result_table) has it: mean ±half (CV)
    data = load_run(COMPLETE)
    terminal = result_table.cell_table(data.results, data.factors, data.labels)
    expected = result_table.format_cell(terminal.loc[0, "tps"], "{:.1f}")
    assert expected == "459.5 ±244.8 (21.4%)"
    assert cells[4] == ["459.5", "±", "244.8"]
    assert cells[-1] == ["21.4", "%"]
    # every repetition on demand, without JavaScript
    assert '<details id="repetitions">' in html
    assert html.count('<td class="id">c00') == 4 + 12


def test_results_by_cell_csv(failed_report: Path) -> None:
    run = failed_report.parent
    table = pd.read_csv(run / RESULTS_BY_CELL)
    assert list(table["cell"]) == ["c000", "c001", "c002", "c003"]
    assert list(table["state"]) == ["ok", "ok", "partial", "ok"]
    results = pd.read_csv(run / "results.csv")
    ok = results[results["status"] == "ok"]
    means = ok.groupby("cell")["tps"].mean()
    assert table.set_index("cell")["tps_mean"].to_dict() == pytest.approx(means.to_dict())


def test_failed_trials_are_listed_with_their_reasons(failed_report: Path) -> None:
    page_path = failed_report
    page = parse(page_path)
    assert "failed" in page.ids
    text = page.plain
    assert "1 failed" in text
    assert "c002-r2 c002 threads=2 cpu=0 failed killed by signal / no summary (rc=-9)" in text
    assert "1 failed: killed by signal / no summary (rc=-9)" in text
    assert '<tr class="state-partial">' in page_path.read_text()


def test_a_cell_whose_every_repetition_failed(tmp_path: Path) -> None:
    run = copy_run(FAILED, tmp_path)
    results = pd.read_csv(run / "results.csv")
    c002 = results["cell"] == "c002"
    results.loc[c002 & (results["status"] == "ok"), "reason"] = "server 'default' died (exit 1)"
    results.loc[c002, "status"] = "failed"
    results.loc[c002, ["tps", "qps", "latency_avg_ms"]] = None
    results.to_csv(run / "results.csv", index=False)
    page_path = write_report(run, max_cell_figures=1)
    assert '<tr class="state-failed">' in page_path.read_text()
    page = parse(page_path)
    assert (
        "every repetition failed: server 'default' died (exit 1); "
        "killed by signal / no summary (rc=-9)"
    ) in page.plain
    assert all(decoded_png(src).startswith(PNG_MAGIC) for src in page.images)


def test_a_run_still_running_with_cells_not_run_yet(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)
    results = pd.read_csv(run / "results.csv")
    keep = ["c000-r1", "c000-r2", "c001-r1"]
    results[results["trial"].isin(keep)].to_csv(run / "results.csv", index=False)
    for folder in (run / "trials").iterdir():
        if folder.name not in keep:
            shutil.rmtree(folder)
    meta = json.loads((run / "run.json").read_text())
    meta["status"] = "running"
    for key in ("finished_at", "trials_saved", "trials_failed"):
        meta.pop(key)
    (run / "run.json").write_text(json.dumps(meta))
    page_path = write_report(run, max_cell_figures=2)
    page = parse(page_path)
    text = page.plain
    assert "running" in text
    assert "3 of 12 trials saved" in text
    assert "the run is running: 3 of 12 trials saved" in text
    assert "not run yet" in text
    assert "2 of 3 repetitions saved" in text
    assert all(decoded_png(src).startswith(PNG_MAGIC) for src in page.images)
    plots = {p.name for p in (run / "plots").iterdir()}
    assert {"cell_c000.png", "cell_c001.png"} <= plots
    assert "cell_c002.png" not in plots


def test_a_run_with_no_trial_yet(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)
    (run / "results.csv").unlink()
    shutil.rmtree(run / "trials")
    (run / "trials").mkdir()
    meta = json.loads((run / "run.json").read_text())
    meta["status"] = "running"
    (run / "run.json").write_text(json.dumps(meta))
    page = parse(write_report(run))
    assert set(SECTIONS) <= page.ids
    assert page.images == []
    assert "0 of 12 trials saved" in page.plain
    assert pd.read_csv(run / RESULTS_BY_CELL)["state"].tolist() == ["pending"] * 4


def test_cell_figures_are_bounded_and_the_page_says_so(tmp_path: Path) -> None:
    run = copy_run(COMPLETE, tmp_path)
    (run / "plots").mkdir()
    (run / "plots" / "notes.txt").write_text("mine")
    write_report(run, max_cell_figures=2)
    html = write_report(run, max_cell_figures=1).read_text()
    plots = sorted(p.name for p in (run / "plots").iterdir())
    assert plots == [
        "cell_c000.png",
        "factor_1.png",
        "factor_2.png",
        "notes.txt",
        "timeseries_throughput.png",
    ]
    assert "the per-cell figures the first 1 of the 4 cells with saved trials" in html


def test_the_report_is_rendered_from_the_run_directory_alone(tmp_path: Path) -> None:
    """Moved elsewhere (servers/ gone, different path), the report still renders."""
    run = copy_run(FAILED, tmp_path / "moved")
    assert not (run / "servers").exists()
    assert write_report(run, max_cell_figures=0).is_file()


# --------------------------------------------------------------------------- charts


def _factor_points(n: int) -> charts.FactorPoints:
    means = pd.DataFrame(
        {
            "cell": [f"c{i}" for i in range(6)],
            "x": [1, 2, 4, 1, 2, 4],
            "panel": [""] * 6,
            "series": ["cpu=0"] * 3 + ["cpu=1"] * 3,
            "n": [n] * 6,
            "tps": [400.0, 800.0, 900.0, 300.0, 500.0, None],
            "tps_half": [40.0, 80.0, None, 30.0, 50.0, None],
            "qps": [8e3, 16e3, 18e3, 6e3, 10e3, None],
            "qps_half": [None] * 6,
        }
    )
    reps = pd.DataFrame(
        {"cell": ["c0", "c0"], "x": [1, 1], "panel": ["", ""], "series": ["cpu=0"] * 2}
        | {"tps": [390.0, 410.0], "qps": [7.9e3, 8.1e3]}
    )
    return charts.FactorPoints(means, reps, ["1", "2", "4"])


def test_factor_chart_draws_one_panel_per_metric() -> None:
    metrics = [m for m in HEADLINE if m.column in ("tps", "qps")]
    for numeric in (True, False):
        fig = charts.factor_chart(
            _factor_points(2),
            x_label="threads",
            series_label="cpu",
            metrics=metrics,
            numeric=numeric,
        )
        assert isinstance(fig, Figure)
        visible = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title(loc="left") for ax in visible] == ["TPS (txn/s)", "QPS (queries/s)"]
        assert charts.png_bytes(fig).startswith(PNG_MAGIC)


def test_few_repetitions_draw_points_and_no_interval() -> None:
    """n=2: the dots of every repetition, no vertical interval segment; n=5: the interval."""
    from matplotlib.collections import LineCollection

    metrics = [m for m in HEADLINE if m.column == "tps"]
    for numeric in (True, False):
        few = charts.factor_chart(
            _factor_points(2), x_label="threads", series_label="", metrics=metrics, numeric=numeric
        )
        ax = few.axes[0]
        dots = [line for line in ax.lines if line.get_linestyle() == "None"]
        assert dots and len(dots[0].get_xdata()) == 2
        assert not any(isinstance(c, LineCollection) for c in ax.collections)
        many = charts.factor_chart(
            _factor_points(5), x_label="threads", series_label="", metrics=metrics, numeric=numeric
        )
        ax = many.axes[0]
        assert any(isinstance(c, LineCollection) for c in ax.collections)
    assert charts.spread_kind(pd.Series([2, 3])) == "points"
    assert charts.spread_kind(pd.Series([4, 5])) == "interval"
    assert charts.spread_kind(pd.Series([2, 5])) == "mixed"


def test_cell_figure_from_real_samples() -> None:
    trial = COMPLETE / "trials" / "c001-r1"
    samples = charts.CellSamples(
        intervals=[charts.Series("r1", read_samples(trial, "intervals"))],
        sample_label="r1",
        cpu=read_samples(trial, "cpu"),
        disk=read_samples(trial, "disk"),
        status=read_samples(trial, "status"),
        procs=read_samples(trial, "procs"),
        role_labels={"workload": "client (sysbench)"},
    )
    fig = charts.cell_figure(
        samples,
        title="c001 threads=1 cpu=1",
        throughput=("tps", "TPS (txn/s)"),
        latency=("latency_pct_ms", "p95 latency (ms)"),
        warmup_s=1,
    )
    assert fig is not None
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]
    assert titles == [
        "Throughput, every repetition",
        "Latency, every repetition",
        "CPU busy per core (%)",
        "CPU by process role",
        "Disk I/O",
        "Disk await",
        "Disk utilisation, CPU iowait",
        "Server questions",
        "Rows (Handler_*)",
        "Buffer pool misses",
    ]
    roles = next(ax for ax in fig.axes if ax.get_title(loc="left") == "CPU by process role")
    assert [t.get_text() for t in roles.get_legend().get_texts()] == [
        "server",
        "client (sysbench)",
        "stress-ng",
    ]
    png = charts.png_bytes(fig)
    assert png.startswith(PNG_MAGIC)
    assert len(png) < 400_000


def test_cell_figure_with_nothing_to_draw() -> None:
    samples = charts.CellSamples(intervals=[], sample_label="r1", cpu=None, disk=None, status=None)
    fig = charts.cell_figure(
        samples, title="c000", throughput=("tps", "TPS"), latency=None, warmup_s=0
    )
    assert fig is None


def test_headline_metrics_follow_the_run() -> None:
    data = load_run(COMPLETE)
    metrics = headline_metrics(data.results)
    assert [m.column for m in metrics] == [
        "tps",
        "qps",
        "latency_avg_ms",
        "latency_pct_ms",
        "errors_per_s",
    ]
    assert [m.heading for m in metrics][3] == "p95 latency (ms)"
    assert headline_metrics(pd.DataFrame({"avg_s": [0.5], "queries_per_s": [900.0]})) == [
        m for m in HEADLINE if m.column in ("avg_s", "queries_per_s")
    ]


def test_trials_without_series_or_samples_still_render(tmp_path: Path) -> None:
    """A workload with no per-interval output (mysqlslap) or a trial killed early."""
    run = copy_run(COMPLETE, tmp_path)
    for name in ("intervals", "cpu", "disk", "status", "procs"):
        for path in run.glob(f"trials/*/{name}.csv"):
            path.unlink()
    page = parse(write_report(run))
    assert set(SECTIONS) <= page.ids
    assert len(page.images) == 2  # the two factor charts; no time series to draw
    assert "No trial has per-interval series or samples yet." in page.plain


def test_text_from_the_run_is_escaped(tmp_path: Path) -> None:
    run = copy_run(FAILED, tmp_path)
    results = pd.read_csv(run / "results.csv")
    results.loc[results["status"] != "ok", "reason"] = "<script>alert(1)</script> & more"
    results.to_csv(run / "results.csv", index=False)
    html = write_report(run, max_cell_figures=0).read_text()
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in html


def test_a_run_whose_matrix_chooses_the_server_renders(tmp_path: Path) -> None:
    """The matrix key ``server`` is a factor and the results' server column at once."""
    run = tmp_path / "two-servers"
    shutil.copytree(RUNS / "compare" / "two-servers", run)
    page = write_report(run)
    text = page.read_text()
    assert "server=" in text
    assert (run / RESULTS_BY_CELL).is_file()


def test_an_external_server_is_described_with_its_reset_mode(tmp_path: Path) -> None:
    run = tmp_path / "external"
    shutil.copytree(COMPLETE, run)
    meta = json.loads((run / "run.json").read_text())
    meta["scenario"]["server"] = {
        "kind": "external",
        "host": "db.example",
        "port": 3306,
        "user": "bench",
        "reset": "reprepare",
        "prepare": True,
    }
    (run / "run.json").write_text(json.dumps(meta))
    text = write_report(run).read_text()
    assert "external, not managed by dbrig: db.example:3306 as bench" in text
    assert "reset: reprepare" in text


def test_the_result_table_carries_interference_and_cpu_by_role(complete_report: Path) -> None:
    html = complete_report.read_text()
    head = re.search(r'<table class="results">(.*?)</thead>', html, re.S)
    assert head is not None
    for heading in ("stress achieved", "stress CPU got", "server CPU", "client user CPU"):
        assert heading in head.group(1), heading


def test_a_cell_figure_without_intervals_says_what_it_draws(tmp_path: Path) -> None:
    """mysqlslap has no per-interval output: the caption does not promise throughput panels."""
    run = copy_run(COMPLETE, tmp_path)
    for name in ("intervals", "disk", "status"):
        for path in run.glob(f"trials/*/{name}.csv"):
            path.unlink()
    html = write_report(run, max_cell_figures=1).read_text()
    caption = re.search(r"<b>c000 threads=1 cpu=0.</b>(.*?)<span", html, re.S)
    assert caption is not None
    assert caption.group(1).strip() == (
        "CPU busy per core (%), CPU by process role, Disk utilisation, CPU iowait of r1 (the "
        "successful repetition with the median tps); no per-interval throughput: the workload "
        "tool reports only a final summary. Grey: warm-up, discarded."
    )
