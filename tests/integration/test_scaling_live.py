"""A real short thread sweep: the report gets its Scalability section, fitted or refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbrig.report.data import load_run
from dbrig.report.scaling import find_sweeps
from tests.helpers.html import parse_page
from tests.integration.helpers import only_run_dir, run_main, tiny_scenario, write_scenario

THREADS = "workload.sysbench.threads"
LEVELS = [1, 2, 4, 8]


@pytest.mark.integration
def test_a_real_thread_sweep_gets_a_scalability_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = write_scenario(
        tmp_path / "sweep.yaml", tiny_scenario(matrix={THREADS: LEVELS}, repeat=1, warmup=0)
    )
    result = run_main(["run", str(scenario), "--out", str(tmp_path / "runs")], capsys)
    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")

    page = parse_page(run / "report.html")
    assert "scalability" in page.ids
    [sweep] = find_sweeps(load_run(run))
    assert sweep.fit.levels == tuple(float(n) for n in LEVELS)
    assert sweep.fit.points == len(LEVELS)
    # The speed of a shared machine decides whether the fit is kept: either way it says so.
    if sweep.fit.ok:
        assert sweep.fit.r2 >= 0.9 and sweep.fit.lam > 0
        assert "Universal Scalability Law fitted to the repetitions" in page.plain
    else:
        assert sweep.fit.reason and f"no fit: {sweep.fit.reason}" in page.plain
    assert (run / "plots" / "scaling_1.png").is_file()
    assert sweep.knee.n is not None or sweep.knee.reason
