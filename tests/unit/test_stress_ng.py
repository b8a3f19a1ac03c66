"""stress-ng driver: parameters, argv, and parsing of real 0.15.06 output."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from dbrig.errors import ConfigError, ParseError
from dbrig.tools import stress_ng
from dbrig.tools.stress_ng import (
    MiscMetric,
    StressNgParams,
    StressNgResult,
    StressorMetrics,
    achieved_cpu_seconds,
    build_command,
    failure_reason,
    parse,
    parse_yaml,
    requested_cpu_seconds,
    validate_for_host,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "stress-ng" / "0.15.06"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def cpu_row(ops, real, usr, sys, rate_real, rate_usr_sys, pct=None, rss=None) -> StressorMetrics:
    return StressorMetrics("cpu", ops, real, usr, sys, rate_real, rate_usr_sys, pct, rss)


# --- INFO and params ---------------------------------------------------------------------------


def test_info() -> None:
    assert stress_ng.INFO.name == "stress-ng"
    assert stress_ng.INFO.binaries == ("stress-ng",)
    assert stress_ng.INFO.package == "stress-ng"


def test_params_defaults_are_inactive() -> None:
    params = StressNgParams()
    assert params.cpu == 0 and params.cpu_load == 100
    assert params.cpu_method is None and params.taskset is None
    assert params.io == params.hdd == params.vm == 0
    assert params.extra_args == []
    assert not params.active


@pytest.mark.parametrize("field", ["cpu", "io", "hdd", "vm"])
def test_any_worker_makes_params_active(field: str) -> None:
    assert StressNgParams(**{field: 1}).active


def test_extra_args_alone_do_not_make_params_active() -> None:
    assert not StressNgParams(extra_args=["--matrix", "1"]).active


def test_params_are_frozen() -> None:
    params = StressNgParams(cpu=1)
    with pytest.raises(ValidationError):
        params.cpu = 2


def test_every_field_has_a_description() -> None:
    for name, info in StressNgParams.model_fields.items():
        assert info.description, name


@pytest.mark.parametrize(
    ("block", "loc"),
    [
        ({"cpu_load": 190}, ("cpu_load",)),
        ({"cpu_load": -1}, ("cpu_load",)),
        ({"cpu": -1}, ("cpu",)),
        ({"io": -2}, ("io",)),
        ({"hdd_bytes": "256MB"}, ("hdd_bytes",)),
        ({"vm_bytes": "12Q"}, ("vm_bytes",)),
        ({"taskset": []}, ("taskset",)),
        ({"cpu_method": ""}, ("cpu_method",)),
        ({"cpus": 2}, ("cpus",)),
    ],
)
def test_params_reject_bad_values_with_their_key(block: dict, loc: tuple) -> None:
    with pytest.raises(ValidationError) as caught:
        StressNgParams(**block)
    assert caught.value.errors()[0]["loc"] == loc


@pytest.mark.parametrize("size", ["256M", "256m", "1g", "1.5G", "2T", "4096", "10%", "1b"])
def test_params_accept_stress_ng_sizes(size: str) -> None:
    assert StressNgParams(vm=1, vm_bytes=size, hdd=1, hdd_bytes=size).vm_bytes == size


# --- validate_for_host -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "cpu_count", "message"),
    [
        (
            StressNgParams(cpu=1, taskset=[5]),
            2,
            "interference.stress-ng.taskset: core 5 does not exist (this machine has cores 0-1)",
        ),
        (
            StressNgParams(cpu=1, taskset=[-1]),
            2,
            "interference.stress-ng.taskset: core -1 does not exist (this machine has cores 0-1)",
        ),
        (
            StressNgParams(cpu=1, taskset=[1]),
            1,
            "interference.stress-ng.taskset: core 1 does not exist (this machine has core 0)",
        ),
        (
            StressNgParams(cpu=1, taskset=[0, 0]),
            2,
            "interference.stress-ng.taskset: core 0 is listed twice",
        ),
        (
            StressNgParams(cpu=2, cpu_load=90, taskset=[0]),
            2,
            "interference.stress-ng.cpu: 2 cpu workers pinned to 1 core (taskset 0); pinned "
            "workers would share cores and not reach cpu_load 90%",
        ),
        (
            StressNgParams(cpu=3, taskset=[1, 0]),
            4,
            "interference.stress-ng.cpu: 3 cpu workers pinned to 2 cores (taskset 1,0); pinned "
            "workers would share cores and not reach cpu_load 100%",
        ),
    ],
)
def test_validate_for_host_rejects(params: StressNgParams, cpu_count: int, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_for_host(params, cpu_count)
    assert caught.value.message == message


@pytest.mark.parametrize(
    "params",
    [
        StressNgParams(cpu=4),  # over-subscription without pinning is legitimate
        StressNgParams(cpu=2, taskset=[0, 1]),
        StressNgParams(cpu=1, taskset=[1]),
        StressNgParams(io=4, hdd=2, taskset=[0]),  # only cpu workers count against the cores
        StressNgParams(),
    ],
)
def test_validate_for_host_accepts(params: StressNgParams) -> None:
    validate_for_host(params, 2)


def test_validate_for_host_needs_a_cpu() -> None:
    with pytest.raises(ValueError):
        validate_for_host(StressNgParams(cpu=1), 0)


def test_requested_cpu_seconds() -> None:
    assert requested_cpu_seconds(StressNgParams(cpu=2, cpu_load=90), 5.0) == pytest.approx(9.0)
    assert requested_cpu_seconds(StressNgParams(cpu=2, cpu_load=0), 5.0) == 0
    assert requested_cpu_seconds(StressNgParams(io=3), 5.0) == 0
    with pytest.raises(ValueError):
        requested_cpu_seconds(StressNgParams(cpu=1), -1.0)


# --- build_command -----------------------------------------------------------------------------


def test_build_command_cpu_only() -> None:
    params = StressNgParams(cpu=2, cpu_load=90)
    assert build_command(params) == ["stress-ng", "--cpu", "2", "-l", "90", "--metrics-brief"]


def test_build_command_as_the_runner_calls_it() -> None:
    # the argv of the stressng_cpu_sigterm_pgrp_yaml capture
    params = StressNgParams(cpu=2, cpu_load=90)
    argv = build_command(params, timeout_s=3, yaml_path="./sigterm.yaml")
    assert " ".join(argv) == "stress-ng --cpu 2 -l 90 --metrics-brief -t 3s --yaml ./sigterm.yaml"


def test_build_command_everything() -> None:
    # the argv of the stressng_mixed_metrics_brief_yaml capture
    params = StressNgParams(
        cpu=1,
        cpu_load=50,
        cpu_method="matrixprod",
        taskset=[0, 1],
        io=1,
        hdd=1,
        hdd_bytes="16M",
        vm=1,
        vm_bytes="64M",
    )
    argv = build_command(params, timeout_s=2, yaml_path="./mixed_brief.yaml")
    assert " ".join(argv) == (
        "stress-ng --cpu 1 -l 50 --cpu-method matrixprod --taskset 0,1 --io 1 --hdd 1 "
        "--hdd-bytes 16M --vm 1 --vm-bytes 64M --metrics-brief -t 2s --yaml ./mixed_brief.yaml"
    )


def test_build_command_leaves_out_stressors_with_no_workers() -> None:
    # stress-ng reads "--cpu 0" as one worker per CPU, so a 0 must never reach it
    params = StressNgParams(vm=1, vm_bytes="10%", cpu_method="matrixprod", hdd_bytes="1G")
    assert build_command(params) == [
        "stress-ng",
        "--vm",
        "1",
        "--vm-bytes",
        "10%",
        "--metrics-brief",
    ]


def test_build_command_binary_and_extra_args_last() -> None:
    params = StressNgParams(io=2, extra_args=["--matrix", "1", "--verify"])
    argv = build_command(params, binary="/opt/bin/stress-ng", timeout_s=70)
    assert argv == [
        "/opt/bin/stress-ng",
        "--io",
        "2",
        "--metrics-brief",
        "-t",
        "70s",
        "--matrix",
        "1",
        "--verify",
    ]


def test_build_command_refuses_inactive_params() -> None:
    with pytest.raises(ValueError, match="no workers"):
        build_command(StressNgParams(extra_args=["--cpu", "1"]))


@pytest.mark.parametrize("timeout_s", [0, -5])
def test_build_command_refuses_a_timeout_that_is_not_a_safety_net(timeout_s: int) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        build_command(StressNgParams(cpu=1), timeout_s=timeout_s)


# --- parse: good runs --------------------------------------------------------------------------


def test_parse_empty() -> None:
    assert parse("") == StressNgResult()
    assert parse("\n\n") == StressNgResult()


def test_parse_metrics_brief() -> None:
    result = parse(fixture("stressng_cpu_metrics_brief.stderr"))
    assert result == StressNgResult(
        version=None,
        timeout_s=5,
        workers=(("cpu", 2),),
        stressors=(cpu_row(10873, 5.00, 8.70, 0.02, 2172.84, 1245.91),),
        completed=True,
        run_time_s=5.01,
    )
    assert failure_reason(result, 0) is None
    assert achieved_cpu_seconds(result) == pytest.approx(8.72)


def test_parse_metrics_full_has_the_extra_columns() -> None:
    result = parse(fixture("stressng_cpu_metrics_full.stderr"))
    assert result.stressors == (cpu_row(11194, 5.00, 8.94, 0.01, 2237.01, 1250.54, 89.44, 6620),)
    assert result.completed and result.errors == ()


def test_parse_log_brief_without_tags() -> None:
    result = parse(fixture("stressng_cpu_log_brief.stderr"))
    assert result.timeout_s == 3
    assert result.workers == (("cpu", 2),)
    assert result.stressors == (cpu_row(6552, 3.00, 5.34, 0.00, 2181.74, 1227.04),)
    assert result.completed and result.run_time_s == 3.01
    assert result.errors == ()


def test_parse_taskset_run_ignores_the_affinity_note() -> None:
    result = parse(fixture("stressng_cpu_taskset0.stderr"))
    assert result.stressors == (cpu_row(6024, 5.01, 4.79, 0.01, 1203.35, 1255.25),)
    assert result.errors == () and result.warnings == ()
    assert failure_reason(result, 0) is None
    # two workers pinned to one core: well short of the 2 x 90 % x 5 s = 9 s asked for
    assert achieved_cpu_seconds(result) == pytest.approx(4.80)


def test_parse_sigint_stopped_run_still_has_metrics() -> None:
    result = parse(fixture("stressng_cpu_sigint.stderr"))
    assert result.timeout_s == 5
    assert result.stressors == (cpu_row(4400, 1.99, 3.51, 0.00, 2209.05, 1252.93),)
    assert result.completed and result.run_time_s == 2.00
    assert failure_reason(result, 0) is None


def test_parse_sigterm_to_the_process_group_is_a_clean_stop() -> None:
    result = parse(fixture("stressng_cpu_sigterm_pgrp_yaml.stderr"))
    assert result.timeout_s == 3
    assert result.stressors == (cpu_row(5099, 1.50, 2.68, 0.01, 3407.08, 1897.14),)
    assert result.completed and result.run_time_s == 1.50
    assert failure_reason(result, 0) is None
    assert achieved_cpu_seconds(result) == pytest.approx(2.69)


@pytest.mark.parametrize(
    ("name", "row", "achieved"),
    [
        ("stressng_bg_cpu2_l90_1", cpu_row(10766, 7.01, 8.33, 0.19, 1536.89, 1264.86), 8.52),
        ("stressng_bg_cpu2_l90_2", cpu_row(11107, 7.00, 8.26, 0.20, 1585.77, 1312.74), 8.46),
        ("stressng_bg_cpu2_l90_3", cpu_row(10688, 7.01, 8.43, 0.16, 1525.43, 1243.69), 8.59),
        ("stressng_bg_cpu2_l90_taskset0", cpu_row(7451, 7.01, 6.00, 0.05, 1063.44, 1231.50), 6.05),
        ("stressng_cpu_yaml", cpu_row(10821, 5.00, 8.74, 0.01, 2162.42, 1235.91), 8.75),
    ],
)
def test_parse_background_runs(name: str, row: StressorMetrics, achieved: float) -> None:
    for suffix in (".stderr", ".txt"):
        result = parse(fixture(name + suffix))
        assert result.stressors == (row,)
        assert result.workers == (("cpu", 2),)
        assert result.completed and result.errors == ()
        assert failure_reason(result, 0) is None
        assert achieved_cpu_seconds(result) == pytest.approx(achieved)


def test_parse_mixed_stressors_and_misc_metrics() -> None:
    result = parse(fixture("stressng_mixed_metrics_brief_yaml.stderr"))
    assert result.workers == (("cpu", 1), ("io", 1), ("hdd", 1), ("vm", 1))
    assert result.stressors == (
        cpu_row(1547, 2.06, 0.68, 0.10, 751.70, 1983.06),
        StressorMetrics("io", 3572, 2.01, 0.05, 0.15, 1775.78, 18020.38),
        StressorMetrics("hdd", 44725, 2.01, 0.60, 0.58, 22241.34, 38028.52),
        StressorMetrics("vm", 47025, 2.00, 0.64, 0.76, 23481.13, 33742.67),
    )
    assert result.misc_metrics == (
        MiscMetric("hdd", 5564.19, "MB/sec read rate (geometic mean of 1 instances)"),
        MiscMetric("hdd", 2143.63, "MB/sec write rate (geometic mean of 1 instances)"),
        MiscMetric(
            "hdd", 3089.38, "MB/sec read/write combined rate (geometic mean of 1 instances)"
        ),
    )
    assert result.errors == () and result.completed
    # only the cpu stressor counts as requested CPU, not what io/hdd/vm burn
    assert achieved_cpu_seconds(result) == pytest.approx(0.78)


def test_parse_mixed_metrics_full() -> None:
    result = parse(fixture("stressng_mixed_metrics_full_yaml.stderr"))
    assert result.stressors == (
        cpu_row(1931, 2.00, 1.00, 0.00, 965.45, 1930.02, 50.02, 6588),
        StressorMetrics("vm", 72800, 2.00, 1.20, 0.78, 36344.76, 36762.72, 98.86, 67680),
    )
    assert result.misc_metrics == ()


def test_parse_verbose_run_gives_the_version() -> None:
    result = parse(fixture("stressng_cpu_verbose.stderr"))
    assert result.version == "0.15.06"
    assert result.stressors == (cpu_row(933, 1.00, 0.50, 0.00, 932.89, 1860.24),)
    assert result.errors == () and result.completed


def test_parse_version_output() -> None:
    result = parse(fixture("stressng_version.txt"))
    assert result.version == "0.15.06"
    assert result.errors == ()


def test_parse_long_timeout_announcement() -> None:
    # "setting to a 90 second (1 min, 30.00 secs) run per stressor"; a dry run has no rows
    result = parse(fixture("stressng_dryrun_90s.stderr"))
    assert result.timeout_s == 90
    assert result.stressors == ()
    assert result.completed
    assert (
        failure_reason(result, 0)
        == "stress-ng printed no metrics (was --metrics-brief overridden?)"
    )


# --- parse: failures ---------------------------------------------------------------------------


def test_parse_killed_worker_is_an_unsuccessful_run() -> None:
    result = parse(fixture("stressng_cpu_worker_killed.stderr"))
    assert result.stressors == (cpu_row(4813, 1.00, 1.80, 0.00, 4802.69, 2679.27),)
    assert result.errors == (
        "cpu instance 0 corrupted bogo-ops counter, 1370 vs 0",
        "cpu instance 0 hash error in bogo-ops counter and run flag, 3250129726 vs 0",
        "metrics-check: stressor metrics corrupted, data is compromised",
        "unsuccessful run completed in 2.01s",
    )
    assert not result.completed
    assert result.run_time_s == 2.01
    assert failure_reason(result, 2) == (
        "stress-ng exited with status 2 (one or more stressors failed): "
        "cpu instance 0 corrupted bogo-ops counter, 1370 vs 0"
    )


@pytest.mark.parametrize(
    ("name", "errors"),
    [
        ("stressng_err_bad_option.stderr", ("stress-ng: unrecognized option '--bogus-option'",)),
        (
            "stressng_err_bad_option.txt",
            (
                "stress-ng: unrecognized option '--bogus-option'",
                "Try 'stress-ng --help' for more information.",
            ),
        ),
        (
            "stressng_err_bad_load.stderr",
            ("Value 190 is out of range for cpu-load, allowed: 0 .. 100",),
        ),
        (
            "stressng_err_taskset_core5.stderr",
            ("taskset: invalid range, 5 is not allowed, allowed range: 0 to 1",),
        ),
        (
            "stressng_err_temp_path.stderr",
            ("aborting: temp-path '/nonexistent' must be readable and writeable",),
        ),
        ("stressng_err_bad_vm_bytes.stderr", ("Illegal length specifier Q",)),
    ],
)
def test_parse_option_errors(name: str, errors: tuple[str, ...]) -> None:
    result = parse(fixture(name))
    assert result.errors == errors
    assert result.stressors == () and not result.completed
    assert failure_reason(result, 1) == (
        f"stress-ng exited with status 1 (bad options or a fatal resource problem): {errors[0]}"
    )


def test_parse_bad_cpu_method_lists_the_methods() -> None:
    (error,) = parse(fixture("stressng_err_bad_cpu_method.stderr")).errors
    assert error.startswith("cpu-method must be one of: all ackermann apery")
    assert " matrixprod " in error


@pytest.mark.parametrize("cut", [100, 250, 400])
def test_parse_truncated_output_is_not_completed(cut: int) -> None:
    result = parse(fixture("stressng_cpu_metrics_brief.stderr")[:cut])
    assert not result.completed
    assert failure_reason(result, 0) is not None


# --- failure_reason ----------------------------------------------------------------------------


def test_failure_reason_killed_by_signal() -> None:
    result = parse(fixture("stressng_cpu_metrics_brief.stderr")[:150])
    assert failure_reason(result, -9) == "stress-ng was killed by SIGKILL"


def test_failure_reason_unknown_status_without_errors() -> None:
    assert failure_reason(StressNgResult(), 42) == "stress-ng exited with status 42 (failed)"


def test_failure_reason_rc0_with_nothing_printed() -> None:
    assert failure_reason(StressNgResult(), 0) == (
        "stress-ng did not report a completed run (its output may be truncated)"
    )


def test_failure_reason_reports_error_lines_even_with_rc0() -> None:
    text = fixture("stressng_cpu_worker_killed.stderr")
    assert failure_reason(parse(text), 0) == (
        "stress-ng reported an error: cpu instance 0 corrupted bogo-ops counter, 1370 vs 0"
    )


# --- parse_yaml --------------------------------------------------------------------------------


def test_parse_yaml_keeps_dates_and_times_as_strings() -> None:
    parsed = parse_yaml(fixture("stress.yaml"))
    info = parsed["system_info"]
    assert info["date-yyyy-mm-dd"] == "2026:11:21"
    assert info["time-hh-mm-ss"] == "22:39:21"
    assert info["epoch-secs"] == 1795300761
    assert info["cpus"] == 2
    assert info["stress-ng-version"] == "0.15.06"
    assert parsed["version"] == "0.15.06"


def test_parse_yaml_rows_match_the_stderr_rows() -> None:
    parsed = parse_yaml(fixture("stress.yaml"))
    assert parsed["stressors"] == (
        cpu_row(10821, 5.004115, 8.740532, 0.014949, 2162.420386, 1235.911539, 87.482814, 6596),
    )
    assert parsed["misc_metrics"] == ()
    (from_stderr,) = parse(fixture("stressng_cpu_yaml.stderr")).stressors
    (from_yaml,) = parsed["stressors"]
    assert from_yaml.bogo_ops == from_stderr.bogo_ops
    assert from_yaml.usr_time_s == pytest.approx(from_stderr.usr_time_s, abs=0.005)


def test_parse_yaml_after_sigterm() -> None:
    parsed = parse_yaml(fixture("sigterm.yaml"))
    assert parsed["system_info"]["time-hh-mm-ss"] == "23:49:45"
    assert parsed["stressors"] == (
        cpu_row(5099, 1.496590, 2.679714, 0.008011, 3407.079532, 1897.143495, 89.794988, 6472),
    )


def test_parse_yaml_mixed_with_misc_metrics() -> None:
    parsed = parse_yaml(fixture("mixed_brief.yaml"))
    assert [row.stressor for row in parsed["stressors"]] == ["cpu", "io", "hdd", "vm"]
    assert parsed["stressors"][2] == StressorMetrics(
        "hdd", 44725, 2.010895, 0.598457, 0.577634, 22241.342783, 38028.519902, 58.485954, 2584
    )
    assert parsed["misc_metrics"] == (
        MiscMetric("hdd", 5564.189987, "mbsec-read-rate"),
        MiscMetric("hdd", 2143.628438, "mbsec-write-rate"),
        MiscMetric("hdd", 3089.375579, "mbsec-readwrite-combined-rate"),
    )


def test_parse_yaml_full_metrics_file() -> None:
    parsed = parse_yaml(fixture("mixed.yaml"))
    assert parsed["stressors"][1] == StressorMetrics(
        "vm", 72800, 2.003040, 1.201281, 0.778986, 36344.763257, 36762.719371, 98.863098, 67680
    )


def test_parse_yaml_still_reads_ordinary_numbers() -> None:
    parsed = parse_yaml("system-info:\n  a: 12\n  b: 1.5\n  c: 0x10\n  d: '7'\n  e: 1:30.5\n")
    assert parsed["system_info"] == {"a": 12, "b": 1.5, "c": 16, "d": "7", "e": "1:30.5"}


def test_parse_yaml_empty() -> None:
    assert parse_yaml("") == {
        "version": None,
        "system_info": {},
        "stressors": (),
        "misc_metrics": (),
    }


def test_parse_yaml_truncated_metrics_entry() -> None:
    text = fixture("stress.yaml")
    cut = text[: text.index("user-time")]
    with pytest.raises(ParseError, match="lacks 'usr_time_s'"):
        parse_yaml(cut)


def test_parse_yaml_not_yaml() -> None:
    with pytest.raises(ParseError, match="not valid YAML"):
        parse_yaml("metrics: [\n")


def test_parse_yaml_refuses_python_tags() -> None:
    with pytest.raises(ParseError):
        parse_yaml("system-info: !!python/object/apply:os.system ['true']\n")
