"""The answer first, on real small runs: the terminal prints the findings right after its
result table, dbrig.log keeps the warnings, and report.html opens on the findings block
(a Chromium screenshot at 1400x900 whose first screen holds it, saved for the docs)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from dbrig.report import write_report
from dbrig.report.data import load_run
from dbrig.report.findings import run_findings
from tests.helpers.files import RUNS, copy_run
from tests.helpers.html import parse_page
from tests.integration.helpers import only_run_dir, run_main, tiny_scenario, write_scenario
from tests.integration.test_report_browser import (
    CHROMIUM,
    chromium,
    console_messages,
    needs_chromium,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 1400, 900
STRESS = {"stress-ng": {"cpu": 0, "cpu_load": 90, "taskset": [0]}}
KINDS: dict[str, dict[str, Any]] = {
    "sweep": tiny_scenario(
        name="findings-sweep", matrix={"workload.sysbench.threads": [1, 2]}, repeat=2
    ),
    "seed-000": tiny_scenario(
        name="findings-seed",
        interference=STRESS,
        matrix={"interference.stress-ng.cpu": [0, 1]},
        repeat=2,
    ),
}
# A page that reports where the findings block ends on the first screen (the report
# itself has no script): the report's own markup with a probe appended.
PROBE = (
    "<script>window.addEventListener('load', () => {"
    "const box = document.getElementById('findings').getBoundingClientRect();"
    "const warn = document.getElementById('warnings').getBoundingClientRect();"
    "document.body.setAttribute('data-findings', box.top + ',' + box.bottom + ',' + warn.top);"
    "});</script>"
)


def first_screen_box(report: Path, tmp_path: Path) -> tuple[float, float, float]:
    """Where the findings block starts and ends, and where the warnings start, in px
    from the top of a 1400x900 window (the report's markup with a probe appended)."""
    probe = tmp_path / "probe.html"
    probe.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    measured = chromium(
        tmp_path / "profile-probe",
        f"--window-size={WIDTH},{HEIGHT}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        probe.as_uri(),
    )
    assert measured.returncode == 0, measured.stderr[-2000:]
    box = re.search(r'data-findings="([^"]+)"', measured.stdout)
    assert box is not None, "the probe did not run"
    top, bottom, warnings_top = map(float, box[1].split(","))
    return top, bottom, warnings_top


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_terminal_the_report_and_its_first_screen_lead_with_the_findings(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = write_scenario(tmp_path / f"{kind}.yaml", KINDS[kind])
    result = run_main(["run", str(scenario), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")

    found = run_findings(load_run(run))
    assert found, "a run with results has findings"
    table_end = result.out.index("c001")  # the table's last row
    for finding in found:
        assert result.out.index(finding.text) > table_end  # right after the table
    assert result.out.index("Findings:") < result.out.index("saved:")

    log = (run / "dbrig.log").read_text()
    for line in result.err.splitlines():
        if line.startswith("warning: "):
            assert line.removeprefix("warning: ") in log

    page = parse_page(run / "report.html")
    for finding in found:
        assert finding.text in page.plain
    html = (run / "report.html").read_text()
    main = html[html.index("<main>") :]
    assert re.search(r"<section id=\"(\w+)\"", main)[1] == "findings"  # type: ignore[index]
    assert main.index('id="findings"') < main.index('id="warnings"')

    if kind == "sweep":
        assert any(f.topic == "scalability" for f in found)
    else:
        assert any(f.topic == "effect" and f.text.startswith("cpu=1 against 0") for f in found)

    if CHROMIUM is None:
        pytest.skip("chromium is not installed: the first screen is not looked at")
    report = run / "report.html"
    top, bottom, warnings_top = first_screen_box(report, tmp_path)
    assert 0 < top < bottom <= HEIGHT, f"findings at {top}-{bottom} px of a {HEIGHT} px screen"
    assert warnings_top > bottom

    shot = tmp_path / "first-screen.png"
    shown = chromium(
        tmp_path / "profile-shot",
        "--hide-scrollbars",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--screenshot={shot}",
        report.as_uri(),
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_messages(shown.stderr) == []
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copy(shot, artifacts / f"findings-first-screen-{kind}.png")


@needs_chromium
@pytest.mark.parametrize("kind", ["crash", "freeze", "acked", "tpcc", "soak", "hw"])
def test_each_saved_kind_opens_on_its_findings_in_chromium(kind: str, tmp_path: Path) -> None:
    """The other kinds, from their saved small runs (tests/fixtures/runs/findings)."""
    report = write_report(copy_run(RUNS / "findings" / kind, tmp_path))
    top, bottom, warnings_top = first_screen_box(report, tmp_path)
    assert 0 < top < bottom <= HEIGHT, f"findings at {top}-{bottom} px of a {HEIGHT} px screen"
    assert warnings_top > bottom
