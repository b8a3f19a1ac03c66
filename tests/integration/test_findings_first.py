"""The answer first, on a real small run of every shipped scenario kind: the terminal prints
the findings right after its result table, ``dbrig show`` carries the same sentences in
every format, dbrig.log keeps the warnings, and report.html opens on the findings block (a
Chromium screenshot at 1400x900 whose first screen holds it, saved for the docs).

Each kind is its shipped scenario (scenarios/) cut down: one table of 2,000 rows, windows
of 3-8 s, 1-2 repetitions. The seven runs go side by side, each with a TMPDIR of its own
(a starting server clears its tmpdir), so the file takes about as long as the slowest run
and the checks: 100-136 s on this 2-core machine with other test suites running beside
it (load 3-13; the runs 74-84 s of it).

With ``DBRIG_UPDATE_DOCS_IMAGES=1`` the screenshots are also copied into docs/findings/,
the pictures the experiments' docs pages show.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbrig.report.data import load_run
from dbrig.report.findings import HEADING, lines, run_findings
from dbrig.tools.tpcc import TYPES as TPCC_TYPES
from tests.helpers.html import parse_page
from tests.integration.helpers import (
    LEAK_TAG,
    kill_leftovers,
    killed_at_end,
    only_run_dir,
    run_main,
    spawn_dbrig,
    write_scenario,
)
from tests.integration.test_report_browser import CHROMIUM, chromium, console_messages

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "scenarios"
DOCS_IMAGES = ROOT / "docs" / "findings"
UPDATE_DOCS = os.environ.get("DBRIG_UPDATE_DOCS_IMAGES") == "1"
WIDTH, HEIGHT = 1400, 900
RUN_TIMEOUT_S = 420

SMALL_OLTP = {
    "server.config.innodb_buffer_pool_size": "64M",
    "server.config.innodb_log_file_size": "16M",
    "workload.sysbench.tables": 1,
    "workload.sysbench.table_size": 2000,
    "warmup": 1,
}
# The kinds whose findings do not depend on the client's speed (a fault's recovery, lost
# commits, a soak's verdict) run at a fixed rate: seven unthrottled runs at once would
# take the whole suite's CPU for as long as they last.
CALM_RATE = 100
# Each kind: its shipped scenario and the keys (dotted paths) that cut it down.
KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "sweep": (
        "thread-sweep.yaml",
        {
            **SMALL_OLTP,
            "workload.sysbench.time": 3,
            "matrix": {"workload.sysbench.threads": [1, 2]},
            "repeat": 2,
        },
    ),
    "seed-000": (
        "cpu-contention.yaml",
        {
            **SMALL_OLTP,
            "workload.sysbench.threads": 2,
            "workload.sysbench.time": 3,
            "interference.stress-ng.taskset": [0],
            "matrix": {"interference.stress-ng.cpu": [0, 1]},
            "repeat": 2,
        },
    ),
    "crash": (
        "crash-recovery.yaml",
        {
            **SMALL_OLTP,
            "workload.sysbench.threads": 2,
            "workload.sysbench.time": 8,
            "workload.sysbench.rate": CALM_RATE,
            "faults.kill_server.at": 3,
            "matrix": [
                {"faults.kill_server.signal": ["KILL", "TERM"]},
                {"faults.kill_server.signal": ["STOP"], "faults.kill_server.for": [2]},
            ],
            "repeat": 1,
        },
    ),
    "durability": (
        "durability-loss.yaml",
        {
            "server.config.innodb_buffer_pool_size": "64M",
            "server.config.innodb_log_file_size": "16M",
            "workload.acked_writes.threads": 2,
            "workload.acked_writes.time": 6,
            "workload.acked_writes.rate": CALM_RATE,
            "faults.kill_server.at": 3,
            "warmup": 1,
            "matrix": {
                "server.config.innodb_flush_log_at_trx_commit": [0, 1],
                "server.config.sync_binlog": [1],
            },
            "repeat": 1,
        },
    ),
    "tpcc": (
        "tpcc.yaml",
        {
            "server.config.innodb_buffer_pool_size": "256M",
            "server.config.innodb_log_file_size": "48M",
            "workload.tpcc.warehouses": 1,
            "workload.tpcc.threads": 2,
            "workload.tpcc.time": 4,
            "matrix": {"workload.tpcc.threads": [2]},
            "warmup": 1,
            "repeat": 2,
        },
    ),
    "soak": (
        "soak.yaml",
        {
            **SMALL_OLTP,
            "workload.sysbench.threads": 2,
            "workload.sysbench.time": 15,
            "workload.sysbench.rate": CALM_RATE,
        },
    ),
    "hardware": (
        "playbook-hardware.yaml",
        {
            "workload.sysbench.time": 2,
            "repeat": 2,
            "matrix": [
                {
                    "workload.sysbench.test": ["cpu"],
                    "workload.sysbench.cpu_max_prime": [2000],
                    "workload.sysbench.threads": [1, 2],
                },
                {
                    "workload.sysbench.test": ["memory"],
                    "workload.sysbench.memory_block_size": ["1M"],
                    "workload.sysbench.memory_total_size": ["1T"],
                    "workload.sysbench.memory_oper": ["read"],
                },
            ],
        },
    ),
}
# The finding each kind is run for (analysis/findings.py's topics).
TOPIC = {
    "sweep": "scalability",
    "seed-000": "effect",
    "crash": "faults",
    "durability": "durability",
    "tpcc": "tpc-c-like",
    "soak": "soak",
    "hardware": "figures",
}
# A page that reports where the findings block ends on the first screen (the report
# itself has no script): the report's own markup with a probe appended.
PROBE = (
    "<script>window.addEventListener('load', () => {"
    "const box = document.getElementById('findings').getBoundingClientRect();"
    "const warn = document.getElementById('warnings');"
    "const below = warn ? warn.getBoundingClientRect().top : 1e9;"
    "document.body.setAttribute('data-findings', box.top + ',' + box.bottom + ',' + below);"
    "});</script>"
)


@dataclass(frozen=True)
class Ran:
    """One kind's ``dbrig run``: its exit code, what it printed, and its run directory."""

    code: int
    out: str
    err: str
    run: Path


def derived(kind: str) -> dict[str, Any]:
    """The kind's shipped scenario with its cut-down keys (dotted paths) set."""
    shipped, changes = KINDS[kind]
    data = yaml.safe_load((SHIPPED / shipped).read_text())
    data["name"] = f"findings-{kind}"
    data.pop("out", None)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = copy.deepcopy(value)
    return data


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Ran]]:
    """Every kind's ``dbrig run``, side by side; the wall time of all of them is printed."""
    base = tmp_path_factory.mktemp("findings")
    started = {}
    began = time.monotonic()
    for kind in KINDS:
        folder = base / kind
        folder.mkdir()
        scenario = write_scenario(folder / "scenario.yaml", derived(kind))
        tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"dit-findings-{os.getpid()}-{kind}"
        tmp.mkdir(parents=True)
        env = {**os.environ, "TMPDIR": str(tmp), LEAK_TAG: str(base)}
        with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
            child = spawn_dbrig(
                ["run", scenario, "--out", folder / "runs"], stdout=out, stderr=err, env=env
            )
        started[kind] = (child, folder, tmp)
    done = {}
    try:
        with contextlib.ExitStack() as running:
            for child, _folder, _tmp in started.values():
                running.enter_context(killed_at_end(child))
            for kind, (child, folder, _tmp) in started.items():
                try:
                    code = child.wait(timeout=RUN_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    code = -1
                done[kind] = Ran(
                    code,
                    (folder / "stdout").read_text(),
                    (folder / "stderr").read_text(),
                    only_run_dir(folder / "runs") if code == 0 else folder,
                )
    finally:
        leaked = kill_leftovers(base)
        for _child, _folder, tmp in started.values():
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{len(KINDS)} small runs side by side: {time.monotonic() - began:.0f} s")
    assert not leaked, f"processes left running: {leaked}"
    yield done


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


def screenshot(report: Path, kind: str, tmp_path: Path) -> None:
    """The first screen as a PNG in test-artifacts/ (and docs/findings/ when asked)."""
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
    if UPDATE_DOCS:
        shutil.copy(shot, DOCS_IMAGES / f"first-screen-{kind}.png")


@pytest.mark.timeout(RUN_TIMEOUT_S + 120)
@pytest.mark.parametrize("kind", list(KINDS))
def test_the_terminal_show_and_the_first_screen_lead_with_the_findings(
    kind: str, runs: dict[str, Ran], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = runs[kind]
    assert ran.code == 0, ran.err[-3000:]
    found = run_findings(load_run(ran.run))
    assert any(f.topic == TOPIC[kind] for f in found), [f.text for f in found]
    assert all(re.search(r"\d", f.text) for f in found), "each finding says its numbers"

    if kind == "tpcc":  # the script's retries are kept per transaction type
        results = load_run(ran.run).results
        per_type = sum(results[f"{t}_retries"] for t in TPCC_TYPES)
        assert (per_type == results["tpcc_retries"]).all()

    # dbrig run: the findings right after the result table, before "saved:".
    table_end = ran.out.index("mean ±95% CI")
    heading = ran.out.index(f"{HEADING}:")
    assert table_end < heading < ran.out.index("saved:")
    for finding in found:
        assert ran.out.index(finding.text) > heading

    # dbrig show: the same lines in every format.
    for fmt in ("table", "markdown", "csv"):
        shown = run_main(["show", str(ran.run), "--format", fmt], capsys)
        assert shown.code == 0, shown.err
        for line in lines(found, fmt):
            assert line in shown.out, (fmt, line)

    log = (ran.run / "dbrig.log").read_text()
    for line in ran.err.splitlines():
        if line.startswith("warning: "):
            assert line.removeprefix("warning: ") in log

    report = ran.run / "report.html"
    page = parse_page(report)
    for finding in found:
        assert finding.text in page.plain
    html = report.read_text()
    main = html[html.index("<main>") :]
    assert re.search(r"<section id=\"(\w+)\"", main)[1] == "findings"  # type: ignore[index]

    if CHROMIUM is None:
        pytest.skip("chromium is not installed: the first screen is not looked at")
    top, bottom, warnings_top = first_screen_box(report, tmp_path)
    assert 0 < top < bottom <= HEIGHT, f"findings at {top}-{bottom} px of a {HEIGHT} px screen"
    assert warnings_top > bottom
    screenshot(report, kind, tmp_path)
