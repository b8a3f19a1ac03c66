"""Factor charts of the report: blocks, joint keys, matrix order, no-effect cells, small
multiples, points below 4 repetitions. Synthetic runs saved through the store API. And
how figures become PNGs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from dbrig.report import chart_base, charts, write_report
from dbrig.report.data import load_run
from dbrig.util.background import in_background
from tests.helpers.files import COMPLETE
from tests.helpers.html import parse_page
from tests.helpers.matrix_run import make_run

CPU = "interference.stress-ng.cpu"
LOAD = "interference.stress-ng.cpu_load"
THREADS = "workload.sysbench.threads"
LOAD_TYPE = "workload.mysqlslap.load_type"
QUERIES = "workload.mysqlslap.number_of_queries"


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[charts.FactorPoints]:
    """What every factor chart of the next report is given."""
    seen: list[charts.FactorPoints] = []
    real = charts.factor_chart

    def spy(points: charts.FactorPoints, **kwargs: Any) -> Any:
        seen.append(points)
        return real(points, **kwargs)

    monkeypatch.setattr(charts, "factor_chart", spy)
    return seen


def figures(page: Path) -> list[tuple[str, str]]:
    """(data-spread, caption text) of each factor chart."""
    html = page.read_text()
    found = re.findall(
        r'<figure class="factor-chart" data-spread="(\w*)">.*?<figcaption>(.*?)</figcaption>',
        html,
        re.S,
    )
    return [(spread, re.sub(r"<[^>]+>", "", caption)) for spread, caption in found]


SEED_000 = [
    {CPU: ["0..nproc"], LOAD: [90]},
    {CPU: ["nproc"], LOAD: [20, 60, 100]},
]
SEED_000_CELLS = [{CPU: c, LOAD: 90} for c in (0, 1, 2)] + [
    {CPU: 2, LOAD: x} for x in (20, 60, 100)
]
STRESS = {"interference": {"stress-ng": {"cpu": 0, "cpu_load": 90}}}


def test_each_block_of_the_matrix_is_its_own_experiment(
    tmp_path: Path, drawn: list[charts.FactorPoints]
) -> None:
    run = make_run(tmp_path, SEED_000, SEED_000_CELLS, scenario=STRESS)
    data = load_run(run)
    assert [(e.number, e.cells) for e in data.experiments] == [
        (1, ("c000", "c001", "c002")),
        (2, ("c003", "c004", "c005")),
    ]
    page = write_report(run)
    titles = parse_page(page).plain
    assert "Block 1 of the matrix (cpu_load=90): headline metrics by cpu (line)" in titles
    assert "Block 2 of the matrix (cpu=2): headline metrics by cpu_load (line)" in titles
    assert [list(p.means["x"]) for p in drawn] == [[0, 1, 2], [20, 60, 100]]
    assert len(figures(page)) == 2


def test_a_cell_where_the_factor_has_no_effect_is_left_off_its_axis(
    tmp_path: Path, drawn: list[charts.FactorPoints]
) -> None:
    """cpu=0 runs no stress-ng: it is no point of a cpu_load curve (but is cpu's 0)."""
    cells = [{CPU: c, LOAD: x} for c in (0, 1, 2) for x in (50, 90)]
    run = make_run(tmp_path, {CPU: [0, 1, 2], LOAD: [50, 90]}, cells, scenario=STRESS)
    page = write_report(run)
    by_cpu, by_load = drawn
    assert sorted(set(by_cpu.means["x"])) == [0, 1, 2]
    assert set(by_load.means["panel"]) == {"cpu=1", "cpu=2"}
    assert "Left out: 2 cells where cpu_load has no effect" in figures(page)[1][1]


def test_keys_varied_together_are_one_factor(
    tmp_path: Path, drawn: list[charts.FactorPoints]
) -> None:
    rows = [["read", 10000], ["write", 10000], ["key", 100000]]
    matrix = {"server": ["small", "large"], f"{LOAD_TYPE}, {QUERIES}": rows}
    cells = [{"server": s, LOAD_TYPE: t, QUERIES: q} for s in ("small", "large") for t, q in rows]
    page = write_report(make_run(tmp_path, matrix, cells))
    text = parse_page(page).plain
    assert "headline metrics by load_type, number_of_queries (bar)" in text.lower()
    assert "by number_of_queries (" not in text
    assert "These keys vary together in the matrix, so they are one factor." in text
    by_server, by_load = drawn
    # categories in matrix order, not alphabetical (key, read, write)
    assert by_load.categories == ["read, 10000", "write, 10000", "key, 100000"]
    assert by_server.categories == ["small", "large"]
    assert list(dict.fromkeys(by_server.means["panel"])) == [
        "load_type, number_of_queries=read, 10000",
        "load_type, number_of_queries=write, 10000",
        "load_type, number_of_queries=key, 100000",
    ]


def test_another_factor_gives_small_multiples(tmp_path: Path) -> None:
    cells = [{THREADS: t, CPU: c} for t in (1, 2, 4) for c in (0, 1)]
    run = make_run(tmp_path, {THREADS: [1, 2, 4], CPU: [0, 1]}, cells, scenario=STRESS)
    page = write_report(run)
    fig_by_threads = figures(page)[0][1]
    assert "One panel per value of cpu, a row per metric" in fig_by_threads
    data = load_run(run)
    assert [g.label for g in data.experiments[0].groups] == ["threads", "cpu"]


def test_two_repetitions_draw_points_four_draw_intervals(tmp_path: Path) -> None:
    matrix = {THREADS: [1, 2]}
    cells = [{THREADS: 1}, {THREADS: 2}]
    few = figures(write_report(make_run(tmp_path / "two", matrix, cells, repeat=2)))
    assert few[0][0] == "points"
    assert "every repetition as a hollow dot beside the mean and no interval" in few[0][1]
    many = figures(write_report(make_run(tmp_path / "four", matrix, cells, repeat=4)))
    assert many[0][0] == "interval"
    assert "95 % confidence interval" in many[0][1]


def test_a_run_without_the_written_matrix_is_one_experiment() -> None:
    data = load_run(COMPLETE)
    assert len(data.experiments) == 1
    assert [g.label for g in data.experiments[0].groups] == ["threads", "cpu"]


def test_servers_side_by_side_and_system_settings_per_cell(tmp_path: Path) -> None:
    scenario = {
        "servers": {
            "small": {"kind": "managed", "cpus": [0], "config": {"innodb_buffer_pool_size": "32M"}},
            "old": {"kind": "managed", "basedir": ".servers/10.11.18/usr", "cpus": None},
        },
        "system": {"io_scheduler": None},
    }
    saved = {
        "small": {"flavor": "mariadb", "version": "10.11.19", "binary": "/usr/sbin/mariadbd"},
        "old": {"flavor": "mariadb", "version": "10.11.18", "binary": "/srv/old/mariadbd"},
    }
    cells = [{"system.io_scheduler": "none"}, {"system.io_scheduler": "mq-deadline"}]
    run = make_run(
        tmp_path,
        {"system.io_scheduler": ["none", "mq-deadline"]},
        cells,
        scenario=scenario,
        servers=saved,
        systems=[{"io_scheduler": "none"}, {"io_scheduler": "mq-deadline"}],
    )
    html = write_report(run).read_text()
    table = re.search(r'<table class="servers">(.*?)</table>', html, re.S)
    assert table is not None
    rows = {
        re.sub(r"<[^>]+>", "", r[0]): [re.sub(r"<[^>]+>", "", v) for v in r[1:]]
        for r in (
            re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)
        )
    }
    assert rows[""] == ["small", "old"]
    assert rows["version"] == ["mariadb 10.11.19", "mariadb 10.11.18"]
    assert rows["basedir"] == ["(the installed server)", ".servers/10.11.18/usr"]
    assert rows["cpus (pinning)"] == ["0", "not pinned (every core)"]
    assert rows["config"][0] == "innodb_buffer_pool_size=32M"
    settings = parse_page(run / "report.html").plain
    assert "system.io_scheduler" in settings
    assert re.search(r"c000 io_scheduler=none\s+none", settings)
    assert re.search(r"c001 io_scheduler=mq-deadline\s+mq-deadline", settings)


# --------------------------------------------------------------------------- rendering


def _log_axis_figure() -> Figure:
    fig = Figure(figsize=(3, 2), dpi=charts.DPI)
    ax = fig.add_subplot()
    ax.plot([1, 10, 100, 1000], [1, 2, 3, 4])
    ax.set_xscale("log")  # mathtext tick labels: 10^0 .. 10^3
    return fig


def test_figures_of_one_size_are_drawn_on_one_renderer_with_the_same_pixels() -> None:
    first = charts.png_bytes(_log_axis_figure())
    assert charts.png_bytes(_log_axis_figure()) == first
    assert len(chart_base._ReusedRendererCanvas._renderers) >= 1


def test_a_forked_child_draws_on_renderers_of_its_own() -> None:
    """A kept renderer's parsed mathtext reads glyphs through the parent's font file,
    whose offset a forked child would share: the child must not reuse it."""
    charts.png_bytes(_log_axis_figure())
    with in_background(lambda: len(chart_base._ReusedRendererCanvas._renderers), fork=True) as job:
        assert job.result() == 0
    assert chart_base._ReusedRendererCanvas._renderers
