"""A soak's pieces without a server: --set, downsampled drawing, the disk-fit check, warnings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from dbrig import scenario
from dbrig.cli import main
from dbrig.errors import EXIT_BAD_INPUT, ConfigError
from dbrig.report import charts, panels, run_warnings, write_report
from dbrig.report.charts import downsample
from dbrig.report.data import load_run
from dbrig.report.soak import section_rows as soak_section_rows
from dbrig.run import preflight
from tests.helpers.files import COMPLETE, copy_run

SOAK = {
    "name": "s",
    "workload": {"sysbench": {"test": "oltp_read_only", "time": 3600, "report_interval": 1}},
    "soak": {},
}


# --------------------------------------------------------------------------- --set


def test_set_parses_yaml_values_and_sets_nested_keys() -> None:
    changes = [scenario.parse_override(t) for t in ("workload.sysbench.time=5", "warmup=0")]
    assert changes == [("workload.sysbench.time", 5), ("warmup", 0)]
    raw = scenario.apply_overrides(SOAK, [*changes, ("soak.drift_threshold_pct_per_h", 2.5)])
    assert raw["workload"]["sysbench"]["time"] == 5 and raw["warmup"] == 0
    assert raw["soak"] == {"drift_threshold_pct_per_h": 2.5}
    assert SOAK["workload"]["sysbench"]["time"] == 3600  # the original is untouched


@pytest.mark.parametrize("text", ["time", "=5", "a..b=1", "a=[unclosed"])
def test_set_refuses_what_is_not_key_equals_value(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--set "):
        scenario.parse_override(text)


def test_set_refuses_a_matrix_factor_and_a_key_inside_a_scalar() -> None:
    raw = {**SOAK, "matrix": {"workload.sysbench.threads": [1, 2]}}
    with pytest.raises(ConfigError, match="is a matrix factor"):
        scenario.apply_overrides(raw, [("workload.sysbench.threads", 4)])
    with pytest.raises(ConfigError, match="warmup is not a mapping"):
        scenario.apply_overrides({**SOAK, "warmup": 1}, [("warmup.x", 1)])


def test_run_set_with_resume_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--resume", str(tmp_path), "--set", "warmup=1"])
    assert exited.value.code == EXIT_BAD_INPUT
    assert "--set: a resumed run keeps its saved scenario" in capsys.readouterr().err


# --------------------------------------------------------------------------- drawing


def test_downsample_keeps_mean_min_and_max_of_each_bucket() -> None:
    times = np.arange(1.0, 3601.0)
    values = np.full(3600, 10.0)
    values[1234] = 500.0  # one spike must survive as a bucket's max
    buckets = downsample(times, values, 300)
    assert len(buckets.end) == 300 and buckets.end[-1] == 3600.0 and buckets.end[0] == 12.0
    assert buckets.high.max() == 500.0 and buckets.low.min() == 10.0
    assert buckets.mean.mean() == pytest.approx(values.mean())


def test_downsample_of_a_short_series_is_the_series() -> None:
    buckets = downsample(np.array([1.0, 2.0]), np.array([3.0, np.nan]), 300)
    assert list(buckets.end) == [1.0, 2.0] and buckets.mean[0] == 3.0
    assert np.isnan(buckets.mean[1])


def test_the_band_of_a_long_series_spans_each_buckets_min_to_max_with_a_gap_where_none() -> None:
    times = np.arange(1.0, 3601.0)
    values = np.full(3600, 10.0)
    values[::12] = 4.0  # every bucket of 12 rows: min 4, max 10
    values[1200:1212] = np.nan  # one whole bucket missing
    ax = Figure().add_subplot()
    panels._draw_steps(ax, times, values, 1.0, color="#1f77b4")
    (band,) = ax.collections
    before, after = band.get_paths()  # split at the missing bucket
    for path in (before, after):
        y = path.vertices[:, 1]
        assert set(y) == {4.0, 10.0}
    assert before.vertices[:, 0].min() == 0.0  # the first step starts one interval early
    assert before.vertices[:, 0].max() == 1200.0 and after.vertices[:, 0].min() == 1212.0
    assert after.vertices[:, 0].max() == 3600.0


# --------------------------------------------------------------------------- disk fit


def test_series_bytes_grow_with_time_and_sampling_rate() -> None:
    hour = scenario.plan_from_dict(SOAK, seed=1)
    fast = scenario.plan_from_dict({**SOAK, "sampling": {"interval": 0.1}}, seed=1)
    size = preflight.series_bytes(hour, cpu_count=2)
    assert 2 * 2**20 < size < 20 * 2**20  # an hour at 1 s: a few MiB
    assert preflight.series_bytes(fast, cpu_count=2) > 8 * size


def test_a_soak_too_big_for_the_free_disk_is_one_line_exit_2_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    raw = {**SOAK, "workload": {"sysbench": {"test": "oltp_read_only", "time": 10**9}}}
    path = tmp_path / "soak.yaml"
    path.write_text(json.dumps(raw))
    out = tmp_path / "runs"
    with pytest.raises(SystemExit) as exited:
        main(["run", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert exited.value.code == EXIT_BAD_INPUT
    assert err.count("\n") == 1
    assert f"{path}: workload.sysbench.time: the per-interval data of 1 trial" in err
    assert "TiB but only" in err
    assert not out.exists()


# --------------------------------------------------------------------------- warnings


def soak_run(tmp_path: Path, columns: dict[str, float], soak: dict | None = None) -> Path:
    run = copy_run(COMPLETE, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    meta["scenario"]["soak"] = {} if soak is None else soak
    (run / "run.json").write_text(json.dumps(meta))
    frame = pd.read_csv(run / "results.csv")
    frame.loc[frame["trial"] == "c000-r1", "measured_time_s"] = 3600.0
    for column, value in columns.items():
        frame[column] = np.where(frame["trial"] == "c000-r1", value, np.nan)
    frame.to_csv(run / "results.csv", index=False)
    return run


FALLING = {
    "tps_drift_pct_per_h": -12.0,
    "tps_drift_ci_low_pct_per_h": -15.0,
    "tps_drift_ci_high_pct_per_h": -9.0,
}


def soak_warnings(run: Path) -> list:
    return [w for w in run_warnings(run) if w.code.startswith("soak_")]


def test_a_real_large_drift_warns_and_a_flat_or_small_one_does_not(tmp_path: Path) -> None:
    (warning,) = soak_warnings(soak_run(tmp_path / "a", FALLING))
    assert warning.code == "soak_drift" and warning.cell == "c000"
    assert "r1: TPS falling -12.0 %/h (95 % CI -15.0 to -9.0; beyond 5 %/h)" in warning.message
    flat = {**FALLING, "tps_drift_ci_high_pct_per_h": 1.0}
    assert soak_warnings(soak_run(tmp_path / "b", flat)) == []
    assert soak_warnings(soak_run(tmp_path / "c", FALLING, {"drift_threshold_pct_per_h": 20})) == []


def test_a_drift_over_minutes_is_no_soak_warning(tmp_path: Path) -> None:
    run = soak_run(tmp_path, FALLING)
    frame = pd.read_csv(run / "results.csv")
    frame["measured_time_s"] = 300.0  # an hourly slope from 5 minutes is an extrapolation
    frame.to_csv(run / "results.csv", index=False)
    assert soak_warnings(run) == []


def test_server_rss_still_growing_warns(tmp_path: Path) -> None:
    rss = {
        "server_rss_growth_mib": 300.0,
        "server_rss_slope_mib_per_h": 120.0,
        "server_rss_slope_ci_low_mib_per_h": 90.0,
        "server_rss_slope_ci_high_mib_per_h": 150.0,
    }
    (warning,) = soak_warnings(soak_run(tmp_path / "a", rss))
    assert warning.code == "soak_rss_growth"
    assert "server RSS still growing +120.0 MiB/h" in warning.message
    filling = {**rss, "server_rss_slope_mib_per_h": 30.0}  # under 40 MiB/h
    assert soak_warnings(soak_run(tmp_path / "b", filling)) == []


def test_a_run_without_soak_gets_no_soak_warnings(tmp_path: Path) -> None:
    run = soak_run(tmp_path, FALLING)
    meta = json.loads((run / "run.json").read_text())
    del meta["scenario"]["soak"]
    (run / "run.json").write_text(json.dumps(meta))
    assert soak_warnings(run) == []


def test_a_soak_cell_figure_draws_an_hour_downsampled_with_a_memory_panel() -> None:
    t = np.arange(1.0, 3601.0)
    intervals = pd.DataFrame({"t_s": t, "tps": 100 + np.sin(t), "latency_pct_ms": 2 + 0 * t})
    procs = pd.concat(
        pd.DataFrame({"t_s": t, "interval_s": 1.0, "role": role, "cpu_pct": 50.0, "rss_mb": rss})
        for role, rss in (("server", 200 + t / 100), ("workload", 12.0))
    )
    samples = charts.CellSamples(
        intervals=[charts.Series("r1", intervals)],
        sample_label="r1",
        cpu=None,
        disk=None,
        status=None,
        procs=procs,
        memory=True,
    )
    fig = charts.cell_figure(
        samples,
        title="c000",
        throughput=("tps", "TPS (txn/s)"),
        latency=("latency_pct_ms", "p95 (ms)"),
        warmup_s=0,
    )
    assert fig is not None
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert "Memory by process role" in titles
    throughput = fig.axes[titles.index("Throughput, every repetition")]
    (line,) = throughput.get_lines()
    assert len(line.get_xdata()) == charts.MAX_PLOT_POINTS + 1  # bucket means, not 3600 steps
    assert throughput.collections, "the min..max band is drawn"


def test_the_report_has_a_soak_section_with_each_trial_drift(tmp_path: Path) -> None:
    run = soak_run(tmp_path, FALLING)
    rows = soak_section_rows(load_run(run))
    assert rows[0]["trial"] == "c000-r1"
    assert rows[0]["TPS"] == "-12.0 %/h [-15.0, -9.0] falling"
    assert rows[1]["TPS"] == ""  # a trial without the columns
    page = write_report(run).read_text()
    assert '<section id="soak">' in page and "-12.0 %/h [-15.0, -9.0] falling" in page
