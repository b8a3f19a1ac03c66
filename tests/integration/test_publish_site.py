"""dbrig publish on three real runs made at three commits of a throwaway git checkout.

The runs (one cell, two 2-second repetitions each) are made once for the module, from
inside the checkout: run.json records each commit. The third run changes a server
setting with --set, which the scenario page marks at that run. Headless Chromium then
opens the index and the scenario page: one point per run, each linked to its report,
no console message, and a screenshot in ``test-artifacts/publish-site.png``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbrig.report import site_page
from tests.integration.helpers import DBRIG, tiny_scenario, write_scenario
from tests.integration.test_report_browser import (
    ROOT,
    chromium,
    console_messages,
    needs_chromium,
    png_size,
)
from tests.unit.test_ci_json import check_bmf, check_custom

pytestmark = pytest.mark.integration

FLUSH = "innodb_flush_log_at_trx_commit"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def dbrig(repo: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run(
        [str(DBRIG), *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """A git checkout with three commits and a run of the scenario at each."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("checkout")
    short = Path(tempfile.mkdtemp(prefix="dpub-", dir="/tmp"))
    try:
        git(repo, "init", "-q", "-b", "main")
        write_scenario(repo / "bench.yaml", tiny_scenario(name="pub", repeat=2))
        commits = []
        for number in range(3):
            (repo / "app.txt").write_text(f"version {number}\n")
            git(repo, "add", "app.txt", "bench.yaml")
            git(repo, "commit", "-q", "-m", f"change {number}")
            commits.append(git(repo, "rev-parse", "HEAD"))
            extra = ["--set", f"server.config.{FLUSH}=2", "--label", "v3"] if number == 2 else []
            extra += ["--ci-json", "bmf=bmf.json", "--ci-json", "customBiggerIsBetter=tps.json"]
            extra += ["--snapshot-cache", str(short / "cache")]  # one prepare for the three
            done = dbrig(repo, short, "run", "bench.yaml", "--out", "runs", *extra)
            assert done.returncode == 0, done.stderr[-3000:]
        yield repo, commits
    finally:
        shutil.rmtree(short, ignore_errors=True)


def test_each_run_records_its_commit_and_the_ci_json_is_valid(repo) -> None:
    checkout, commits = repo
    runs = sorted((checkout / "runs").iterdir())
    assert len(runs) == 3
    recorded = [json.loads((r / "run.json").read_text())["environment"]["git"] for r in runs]
    assert [g["commit"] for g in recorded] == commits
    assert all(g["branch"] == "main" and "dirty" not in g for g in recorded)
    bmf = json.loads((checkout / "bmf.json").read_text())
    check_bmf(bmf)
    assert set(bmf["pub (single cell)"]) >= {"tps", "latency_avg_ms"}
    check_custom(json.loads((checkout / "tps.json").read_text()))


@needs_chromium
def test_the_site_opens_in_chromium_with_a_point_per_run(repo, tmp_path: Path) -> None:
    checkout, commits = repo
    site = tmp_path / "site"
    done = dbrig(checkout, tmp_path, "publish", "runs", "--out", str(site))
    assert done.returncode == 0, done.stderr
    assert "published 3 new run(s)" in done.stdout

    index = chromium(tmp_path / "profile-index", "--dump-dom", (site / "index.html").as_uri())
    assert index.returncode == 0, index.stderr[-2000:]
    assert console_messages(index.stderr) == []
    page_name = site_page.scenario_file("pub")
    assert f'href="{page_name}"' in index.stdout and "<td>3</td>" in index.stdout

    page = site / page_name
    dumped = chromium(tmp_path / "profile-page", "--dump-dom", page.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert console_messages(dumped.stderr) == []
    charts = re.findall(r'<figure class="chart".*?</figure>', dumped.stdout, re.S)
    assert charts and any('data-metric="tps"' in c for c in charts)
    for chart in charts:
        assert chart.count('class="point"') == 3
        links = re.findall(r'<a href="(runs/[^"]+/report\.html)"><circle', chart)
        assert len(links) == 3
        assert all((site / link).is_file() for link in links)
    for commit in commits[:2]:
        assert commit[:8] in dumped.stdout  # the points are named by their commits
    assert "v3" in dumped.stdout
    assert f"changed at run 3: {FLUSH} 1 -&gt; 2" in dumped.stdout
    assert dumped.stdout.count("compare.html") == 2

    shot = tmp_path / "site.png"
    shown = chromium(
        tmp_path / "profile-shot",
        "--hide-scrollbars",
        "--window-size=1100,1600",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert png_size(shot.read_bytes()) == (1100, 1600)
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copy(shot, artifacts / "publish-site.png")
