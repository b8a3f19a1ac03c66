"""The run report in a real browser: Debian's headless Chromium opens report.html.

It checks what a reader would hit first: every section is in the rendered DOM,
every image is an inline PNG that decodes (no broken images, nothing fetched),
the browser logs no console message (the page has no JavaScript, so any
message is a problem), and a screenshot is saved for a human to look at:
``<pytest tmp dir>/report.png`` and ``test-artifacts/report-browser.png`` at the
repository root (git-ignored).
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from PIL import Image

from dbrig.report import write_report
from tests.helpers.files import FAILED, RUNS, copy_run
from tests.helpers.html import PNG_MAGIC, decoded_png, parse_html
from tests.helpers.matrix_run import make_run

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium")
SECTIONS = {
    "warnings": "Warnings",
    "scenario": "Scenario and environment",
    "results": "Results",
    "failed": "Failed trials",
    "charts": "Charts",
    "timeseries": "Time series",
    "appendix": "Appendix",
}
WIDTH, HEIGHT = 1280, 7000

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)"
)


def chromium(user_data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with no network chatter, no profile, its console on stderr."""
    assert CHROMIUM is not None
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-breakpad",
        f"--user-data-dir={user_data}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    finally:
        _wait_for_helpers(user_data)


def _wait_for_helpers(user_data: Path, timeout_s: float = 15.0) -> None:
    """Chromium's crash handlers outlive it for a moment; wait for them, then stop them."""
    deadline = time.monotonic() + timeout_s
    while (helpers := _helpers(user_data)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for process in helpers:
        process.kill()
    psutil.wait_procs(helpers, timeout=5)


def _helpers(user_data: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = process.info["cmdline"] or []
        if process.info["status"] != psutil.STATUS_ZOMBIE and any(
            str(user_data) in arg for arg in cmdline
        ):
            found.append(process)
    return found


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG that decodes completely (Pillow comes with matplotlib)."""
    assert data.startswith(PNG_MAGIC), "not a PNG"
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        image.load()
        return image.size


def probe_page(images: list[str]) -> str:
    """A page with the report's images that records how wide the browser decoded each."""
    tags = "".join(f'<img src="{src}">' for src in images)
    script = (
        "window.addEventListener('load', () => document.body.setAttribute('data-widths', "
        "Array.from(document.images, i => i.complete ? i.naturalWidth : -1).join(',')));"
    )
    return f"<!DOCTYPE html><html><body>{tags}<script>{script}</script></body></html>"


@pytest.fixture
def report(tmp_path: Path) -> Path:
    return write_report(copy_run(FAILED, tmp_path))


@needs_chromium
def test_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    url = report.as_uri()
    dumped = chromium(tmp_path / "profile-dom", "--dump-dom", url)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert console_messages(dumped.stderr) == []

    dom = parse_html(dumped.stdout)
    for section in SECTIONS:
        assert section in dom.ids, f"section #{section} missing from the rendered page"
    headings = re.findall(r"<h[23][^>]*>([^<]+)</h[23]>", dumped.stdout)
    assert set(SECTIONS.values()) <= set(headings)
    assert "killed by signal / no summary (rc=-9)" in dumped.stdout
    # issue 12: the result table carries the context columns the run has, as rendered
    results_head = re.search(r'<table class="results">(.*?)</thead>', dumped.stdout, re.S)
    assert results_head is not None
    for column in ("stress achieved", "server CPU", "workload CPU", "client user CPU"):
        assert column in results_head.group(1), column

    assert len(dom.images) == 7
    for src in dom.images:
        width, height = png_size(decoded_png(src))
        assert width >= 600 and height >= 200

    probe = tmp_path / "probe.html"
    probe.write_text(probe_page(dom.images))
    decoded = chromium(
        tmp_path / "profile-probe", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()
    )
    widths = re.search(r'data-widths="([^"]*)"', decoded.stdout)
    assert widths is not None, "the probe page did not finish loading"
    assert all(int(w) > 0 for w in widths.group(1).split(",")), f"broken images: {widths[1]}"

    shot = tmp_path / "report.png"
    shown = chromium(
        tmp_path / "profile-shot",
        "--hide-scrollbars",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--screenshot={shot}",
        url,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_messages(shown.stderr) == []
    assert png_size(shot.read_bytes()) == (WIDTH, HEIGHT)
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copy(shot, artifacts / "report-browser.png")


@needs_chromium
def test_two_repetitions_draw_points_not_intervals_in_chromium(tmp_path: Path) -> None:
    """A 2-repetition run: every factor chart says, in the rendered DOM, that it draws
    each repetition as a point and no t-interval (t = 12.7 at n = 2); a 4-repetition run
    draws intervals. Blocks and joint keys are charted as in the matrix."""
    threads = "workload.sysbench.threads"
    load_type, queries = "workload.mysqlslap.load_type", "workload.mysqlslap.number_of_queries"
    rows = [["read", 10000], ["key", 100000]]
    matrix = [{threads: [1, 2]}, {f"{load_type}, {queries}": rows}]
    cells = [{threads: 1}, {threads: 2}] + [{load_type: t, queries: q} for t, q in rows]
    for repeat, spread in ((2, "points"), (4, "interval")):
        page = write_report(make_run(tmp_path / f"r{repeat}", matrix, cells, repeat=repeat))
        dumped = chromium(tmp_path / f"profile-{repeat}", "--dump-dom", page.as_uri())
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        assert console_messages(dumped.stderr) == []
        figures = re.findall(
            r'<figure class="factor-chart" data-spread="(\w+)">\s*<img src="([^"]+)" alt="([^"]+)"',
            dumped.stdout,
        )
        assert [f[0] for f in figures] == [spread, spread]
        for _, src, alt in figures:
            png_size(decoded_png(src))
            assert ("every repetition as points" in alt) == (spread == "points")
        assert "Block 1 of the matrix: headline metrics by threads (line)" in dumped.stdout
        assert (
            "Block 2 of the matrix: headline metrics by load_type, number_of_queries (bar)"
            in dumped.stdout
        )


@needs_chromium
@pytest.mark.parametrize(
    ("kind", "section", "words"),
    [
        (
            "crash",
            "faults",
            ("kill_server SIGKILL at 3 s", "restart to first query", "redo scanned"),
        ),
        ("tpcc", "transactions", ("TPC-C-like, not audited", "new order", "held in 2 of 2")),
        ("soak", "soak", ("not judged: window under 10 minutes", "MiB buffer pool per hour")),
    ],
)
def test_the_new_experiments_sections_render_in_chromium(
    kind: str, section: str, words: tuple[str, ...], tmp_path: Path
) -> None:
    """The Faults, TPC-C-like and Soak sections of saved small runs, as Chromium renders them."""
    report = write_report(copy_run(RUNS / "findings" / kind, tmp_path / "run"))
    dumped = chromium(tmp_path / "profile", "--dump-dom", report.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert console_messages(dumped.stderr) == []
    assert section in parse_html(dumped.stdout).ids
    body = re.search(rf'<section id="{section}">(.*?)</section>', dumped.stdout, re.S)
    assert body is not None
    for word in words:
        assert word in body.group(1), word
