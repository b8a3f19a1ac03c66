"""The report's sections (report/sections/), each on the small real runs of
tests/fixtures/runs/findings/ (README there): what each shows, and that the page is
the header and build.SECTIONS in order."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dbrig.report import build, charts, faults, write_report
from dbrig.report.data import load_run
from dbrig.report.sections import LoadedRun, Part, timeseries
from dbrig.report.sections import faults as faults_section
from dbrig.report.sections import internals as internals_section
from dbrig.report.sections import soak as soak_section
from dbrig.report.sections import tpcc as tpcc_section
from dbrig.report.tables import aggregate, cell_overview, headline_metrics, metric_columns
from dbrig.sampling import internals
from tests.helpers.files import RUNS, copy_run

FINDINGS = RUNS / "findings"
REPORT = Path(__file__).resolve().parents[2] / "src" / "dbrig" / "report"


def loaded(kind: str) -> LoadedRun:
    data = load_run(FINDINGS / kind)
    overview = cell_overview(data.results, data.cells)
    stats = aggregate(
        data.results, metric_columns(data.results, data.factors), list(overview["cell"])
    )
    return LoadedRun(data, overview, stats, headline_metrics(data.results), 8)


def text(part: Part | None) -> str:
    assert part is not None
    return str(part.html)


def test_every_module_of_the_report_stays_under_500_lines() -> None:
    long = {
        str(p.relative_to(REPORT)): n
        for p in REPORT.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}


def test_every_section_has_one_entry_point_and_the_page_follows_their_order(
    tmp_path: Path,
) -> None:
    assert all(callable(getattr(s, "section", None)) for s in build.SECTIONS)
    page = write_report(copy_run(FINDINGS / "crash", tmp_path)).read_text()
    anchors = ["findings", "warnings", "scenario", "results", "charts", "faults", "appendix"]
    where = [page.index(f'<section id="{a}">') for a in anchors]
    assert where == sorted(where)
    assert '<a href="#faults">Faults</a>' in page


def test_faults_has_a_row_per_trial_with_recovery_figures() -> None:
    html = text(faults_section.section(loaded("crash")))
    assert "kill_server SIGKILL at 3 s" in html and "kill_server SIGTERM at 3 s" in html
    for heading in ("restart to first query", "InnoDB recovery", "redo scanned", "pages recovered"):
        assert heading in html
    assert ">13.53<" in html and ">173<" in html  # redo MiB and pages, whole
    assert "3.36 s first query" in html and "4.38 s throughput recovered" in html


def test_a_freeze_names_its_length_and_a_run_without_faults_has_no_section() -> None:
    assert "SIGSTOP at 4 s for 3 s" in text(faults_section.section(loaded("freeze")))
    assert faults_section.section(loaded("sweep")) is None


def test_a_faults_timeline_becomes_markers_for_the_time_series() -> None:
    record = faults.read(FINDINGS / "crash" / "trials" / "c000-r1")
    labels = [m.label for m in faults.markers(record)]
    assert labels == ["SIGKILL", "server gone", "restart", "first query", "recovered"]
    assert faults.markers(None) == ()
    assert faults.markers({"timeline": [{"event": "restart", "t_s": "soon"}, "junk"]}) == ()


def test_the_cell_figure_draws_a_line_at_each_fault_event() -> None:
    frame = pd.DataFrame({"t_s": [1.0, 2, 3, 4, 5, 6], "tps": [10.0, 10, 0, 0, 9, 10]})
    samples = charts.CellSamples(
        intervals=[charts.Series("r1", frame)],
        sample_label="r1",
        cpu=None,
        disk=None,
        status=None,
        markers=(charts.Marker(2.5, "SIGKILL"), charts.Marker(4.2, "first query")),
    )
    fig = charts.cell_figure(
        samples, title="c000", throughput=("tps", "TPS"), latency=None, warmup_s=0
    )
    assert fig is not None
    ax = fig.axes[0]
    xs = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() != "-"]
    assert 2.5 in xs and 4.2 in xs
    assert {t.get_text() for t in ax.texts} >= {"SIGKILL", "first query"}


def test_tpcc_shows_each_transaction_type_the_consistency_and_the_caveat() -> None:
    html = text(tpcc_section.section(loaded("tpcc")))
    assert "TPC-C-like, not audited" in html
    for name in ("new order", "payment", "order status", "delivery", "stock level"):
        assert f"<td>{name}</td>" in html
    assert "NOPM" in html and "TPM" in html and "rollbacks" in html and "retries" in html
    assert html.count("held in 2 of 2 trials") == 4
    assert tpcc_section.section(loaded("crash")) is None


def test_tpcc_shows_each_types_retries_summed_over_the_repetitions() -> None:
    run = loaded("tpcc")  # saved before the per-type retries: their cells stay empty
    assert '<td class="num">5</td></tr>' not in text(tpcc_section.section(run))
    for name in ("new_order", "payment", "order_status", "delivery", "stock_level"):
        run.data.results[f"{name}_retries"] = 0.0
    run.data.results["payment_retries"] = [2.0, 3.0]
    html = text(tpcc_section.section(run))
    payment = html[html.index("<td>payment</td>") :]
    assert payment[: payment.index("</tr>")].endswith('<td class="num">5</td>')


def test_a_short_soak_is_not_judged_and_its_memory_is_set_beside_the_buffer_pool() -> None:
    html = text(soak_section.section(loaded("soak")))
    assert "not judged: window under 10 minutes (20 s)" in html
    assert "rising" not in html.split("</p>", 1)[1]  # the rows, after the explanation
    assert "MiB/h [+70.3, +119.9] (148.6 % of the 64 MiB buffer pool per hour)" in html


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        ({"mib_per_s": [5000.0, 5100.0]}, "mib_per_s"),
        ({"read_mib_per_s": [0.0, 0.0], "written_mib_per_s": [30.0, 31.0]}, "written_mib_per_s"),
        ({"events_per_s": [900.0, 910.0]}, "events_per_s"),
    ],
)
def test_a_hardware_cell_draws_its_own_rate_over_time(
    columns: dict[str, list[float]], expected: str
) -> None:
    """A memory or fileio cell of a run whose throughput column is another test's."""
    frame = pd.DataFrame({"t_s": [1.0, 2.0], "latency_pct_ms": [0.1, 0.1], **columns})
    run_wide = timeseries._SeriesColumns("events_per_s", "events/s", ("latency_pct_ms", "ms"))
    chosen = timeseries._cell_columns(run_wide, [charts.Series("r1", frame)])
    assert chosen.throughput == expected
    assert "/s" in chosen.throughput_label


def test_internals_show_each_cells_top_waits_and_statements_per_transaction(
    tmp_path: Path,
) -> None:
    """The waits and digests captured from a real MariaDB 10.11 under sysbench
    (tests/fixtures/mariadb/), written into both trials of the sweep's first cell."""
    snapshots = json.loads((RUNS.parent / "mariadb" / "10.11" / "internals-text.json").read_text())
    start, end = (internals.Snapshot(**snapshots[k]) for k in ("start", "end"))
    run = copy_run(FINDINGS / "sweep", tmp_path)
    for trial in ("c000-r1", "c000-r2"):
        internals.write_files(run / "trials" / trial, start, end, None, 5)
        (run / "trials" / trial / internals.OUT).write_text("")
    (run / "trials" / "c000-r2" / internals.OUT).write_text("internals: could not read x\n")
    data = load_run(run)
    loaded_run = LoadedRun(data, cell_overview(data.results, data.cells), None, [], 8)  # type: ignore[arg-type]
    page = text(internals_section.section(loaded_run))
    assert '<section id="internals">' in page and 'id="internals-c000"' in page
    assert 'id="internals-c001"' not in page  # no internals there
    assert "wait/io/socket/sql/client_connection" in page and "2 trials" in page
    assert "SELECT `c` FROM `sbtest" in page
    assert "c000-r2: could not read x" in page
    # A trial whose waits were not read is left out of the waits, not counted as none.
    (run / "trials" / "c000-r2" / internals.WAITS).unlink()
    cell = internals_section.cell_internals(load_run(run), "c000", "x")
    assert cell is not None and "c000-r2: no waits.csv, left out of its table" in cell["notes"]
    alone = {w.event: w.count for w in internals.read_waits(run / "trials/c000-r1/waits.csv")}
    assert all(w.count == alone[w.event] for w in cell["waits"])  # c000-r1's waits only
    # A bad file is left out in the same way, and named.
    (run / "trials" / "c000-r2" / internals.WAITS).write_text("event,count,wait_ms\nx,1\n")
    cell = internals_section.cell_internals(load_run(run), "c000", "x")
    assert cell is not None and "c000-r2: waits.csv: line 2 is short (no wait_ms)" in cell["notes"]
    # A run without them has no section.
    assert internals_section.section(loaded("sweep")) is None
