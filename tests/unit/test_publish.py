"""dbrig publish on synthetic saved runs: the site's data, its pages, adding runs, change marks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dbrig.analysis import history
from dbrig.commands.history import history_command
from dbrig.commands.publish import publish_command
from dbrig.errors import ConfigError
from dbrig.report import site, site_page
from tests.helpers.cli import invoke
from tests.unit.test_history import LEVELS_1, LEVELS_2, write_run

FLUSH = "innodb_flush_log_at_trx_commit"


def write_runs(root: Path, first: int = 0, stop: int = 10, *, change_at: int | None = 5) -> None:
    """Runs ``first``..``stop``-1 of a series whose threads=1 level drops 15 % at run 6
    (index 5); from ``change_at`` on, the scenario sets the flush setting 2 -> 1 (--set)."""
    for i in range(first, stop):
        folder = write_run(
            root,
            f"hist-{i:02d}",
            f"2026-11-{10 + i:02d}T12:00:00",
            {1: LEVELS_1[i], 2: LEVELS_2[i]},
        )
        value = 1 if change_at is not None and i >= change_at else 2
        meta = json.loads((folder / "run.json").read_text())
        meta["raw_scenario"] = {"name": "hist", "server": {"config": {FLUSH: value}}}
        meta["servers"] = {"default": {"version": "10.11.6", "variables": {FLUSH: str(value)}}}
        meta["environment"] = {"host": {"hostname": "ci-1"}, "git": {"commit": f"{i:040x}"}}
        (folder / "run.json").write_text(json.dumps(meta))
        (folder / "report.html").write_text(f"<html><body>report {i}</body></html>")


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, site.PublishResult]:
    root = tmp_path_factory.mktemp("publish")
    write_runs(root / "runs")
    return root, site.publish([root / "runs"], root / "site")


def page_of(root: Path) -> str:
    return (root / "site" / site_page.scenario_file("hist")).read_text()


def test_every_run_gets_a_data_file_and_a_manifest_entry(published):
    root, result = published
    assert len(result.added) == 10 and result.kept == 0 and result.scenarios == ("hist",)
    manifest = json.loads((root / "site" / "manifest.json").read_text())
    assert manifest["format"] == site.SITE_FORMAT
    assert set(manifest["runs"]) == {f"hist-{i:02d}" for i in range(10)}
    data = json.loads((root / "site" / manifest["runs"]["hist-00"]["data"]).read_text())
    assert data["scenario"] == "hist" and data["git"]["commit"].endswith("0")
    cells = {(v["cell"], v["metric"]): v for v in data["values"]}
    first = cells[("threads=1", "tps")]
    assert first["n"] == 3 and first["mean"] == pytest.approx(500)
    assert first["ci_low"] < 500 < first["ci_high"]
    assert data["meta"]["servers"]["default"]["variables"][FLUSH] == "2"


def test_each_point_links_to_its_report_and_each_run_to_its_compare(published):
    root, _ = published
    page = page_of(root)
    for i in range(10):
        assert (root / "site" / "runs" / f"hist-{i:02d}" / "report.html").exists()
        assert f'<a href="runs/hist-{i:02d}/report.html"><circle' in page
    assert not (root / "site" / "runs" / "hist-00" / "compare.html").exists()
    for i in range(1, 10):
        assert f'href="runs/hist-{i:02d}/compare.html"' in page
        assert "<html" in (root / "site" / "runs" / f"hist-{i:02d}" / "compare.html").read_text()
    # a chart per cell and metric, each with one point per run
    charts = re.findall(r'<figure class="chart".*?</figure>', page, re.S)
    assert len(charts) == 2
    assert all(chart.count('class="point"') == 10 for chart in charts)


def test_a_step_that_a_settings_change_explains_is_labelled(published):
    root, _ = published
    page = page_of(root)
    expected = (
        "threads=1: step at run 6 (hist-05): 500 -&gt; 425.2 (-15.0 %), worse "
        "\N{EM DASH} settings changed at run 6: innodb_flush_log_at_trx_commit 2 -&gt; 1"
    )
    assert expected in page
    assert "changed at run 6: innodb_flush_log_at_trx_commit 2 -&gt; 1" in page
    assert page.count('class="change"') == 2  # the change marked on both cells' charts
    index = (root / "site" / "index.html").read_text()
    assert 'href="scenario-hist.html"' in index and "1 cell(s) worse since a step" in index


def test_history_marks_the_change_and_the_step_alike(published):
    root, _ = published
    code, out = invoke(history_command, [str(root / "runs")])
    assert code == 0
    flat = " ".join(out.split())
    assert "changed at run 6 (hist-05): innodb_flush_log_at_trx_commit 2 -> 1" in flat
    assert "worse \N{EM DASH} settings changed at run 6: innodb_flush_log_at_trx_commit" in flat


def test_adding_runs_keeps_the_published_ones(tmp_path):
    write_runs(tmp_path / "runs", 0, 6)
    first = site.publish([tmp_path / "runs"], tmp_path / "site")
    assert len(first.added) == 6
    kept_report = tmp_path / "site" / "runs" / "hist-00" / "report.html"
    kept_report.write_text("as published")  # not copied again
    data = tmp_path / "site" / "data" / "hist-02.json"
    before = data.stat().st_mtime_ns
    write_runs(tmp_path / "runs", 6, 9)
    second = site.publish([tmp_path / "runs"], tmp_path / "site")
    assert second.added == ("hist-06", "hist-07", "hist-08") and second.kept == 6
    assert kept_report.read_text() == "as published"
    assert data.stat().st_mtime_ns == before
    assert page_of(tmp_path).count('class="point"') == 2 * 9
    assert site.publish([tmp_path / "runs"], tmp_path / "site").added == ()


def test_a_run_published_late_slots_in_by_time(tmp_path):
    write_runs(tmp_path / "runs", 0, 4, change_at=None)
    (tmp_path / "later").mkdir()
    (tmp_path / "runs" / "hist-02").rename(tmp_path / "later" / "hist-02")
    site.publish([tmp_path / "runs"], tmp_path / "site")
    data = tmp_path / "site" / "data" / "hist-03.json"
    assert json.loads(data.read_text())["compared_with"] == "hist-01"
    site.publish([tmp_path / "later"], tmp_path / "site")
    assert json.loads(data.read_text())["compared_with"] == "hist-02"
    keys = site.ordered_keys(
        json.loads((tmp_path / "site" / "manifest.json").read_text())["runs"], "hist"
    )
    assert keys == ["hist-00", "hist-01", "hist-02", "hist-03"]


def test_incomplete_runs_are_skipped_with_a_reason(tmp_path):
    write_runs(tmp_path / "runs", 0, 2, change_at=None)
    write_run(tmp_path / "runs", "hist-run", "2026-12-01T00:00:00", {1: 1.0}, status="running")
    warned: list[str] = []
    result = site.publish([tmp_path / "runs"], tmp_path / "site", warn=warned.append)
    assert len(result.added) == 2 and "not complete" in result.skipped[0]
    assert warned and "hist-run" in warned[0]


def test_bad_folders_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="nope: no such directory"):
        site.publish([tmp_path / "nope"], tmp_path / "site")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    (tmp_path / "runs").mkdir()
    with pytest.raises(ConfigError, match="not empty and not a dbrig site"):
        site.publish([tmp_path / "runs"], tmp_path / "busy")
    code, message = invoke(
        publish_command, [str(tmp_path / "runs"), "--out", str(tmp_path / "busy")]
    )
    assert code == 2 and "--out" in message


def test_run_changes_name_settings_versions_and_host():
    before = {
        "raw_scenario": {"name": "s", "warmup": 5, "server": {"config": {FLUSH: 2}}},
        "servers": {"default": {"version": "10.11.6", "variables": {FLUSH: "2", "port": "1"}}},
        "environment": {"host": {"hostname": "a", "kernel": "6.1"}},
    }
    after = {
        "raw_scenario": {"name": "s", "warmup": 10, "server": {"config": {FLUSH: 1}}},
        "servers": {"default": {"version": "10.11.7", "variables": {FLUSH: "1", "port": "2"}}},
        "environment": {"host": {"hostname": "b", "kernel": "6.1"}},
    }
    changes = history.run_changes(before, after)
    assert changes == (
        "host a -> b",
        "warmup 5 -> 10",
        "server version 10.11.6 -> 10.11.7",
        f"{FLUSH} 2 -> 1",
    )
    assert history.run_changes(before, before) == ()
    assert history.changes_between([before, before, after]) == ((), (), changes)


def test_point_labels():
    assert site.point_label({"label": "v1.2", "git": {"commit": "a" * 40}}) == "v1.2"
    git = {"commit": "abcdef1234" + "0" * 30, "branch": "main", "dirty": "true"}
    assert site.point_label({"git": git}) == "abcdef12 main (dirty)"
    assert site.point_label({"created_at": "2026-11-10T12:00:00+00:00"}) == "2026-11-10 12:00"
