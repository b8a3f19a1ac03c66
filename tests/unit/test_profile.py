"""CPU profiles: perf script folded (on real captured output), the outcome's warnings,
the shares per function, the flame graph's SVG, the sampler entry and its refusals."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from dbrig.analysis.profile import merge, parse_folded, top_by_total, top_functions
from dbrig.errors import ConfigError
from dbrig.host.perf import paranoid_problem
from dbrig.report.flamegraph import SEARCH_SCRIPT, WIDTH_PX, frame_colour, render_svg
from dbrig.run.plan_profile import check_profiling
from dbrig.sampling import profile
from dbrig.sampling.registry import SamplerInputs, TrialFacts, Where, sampler_entry, select
from dbrig.sampling.schedule import SampleTiming
from dbrig.scenario import Plan, load

FIXTURES = Path(__file__).parent.parent / "fixtures" / "perf"
# perf record -F 99 -g -e cpu-clock -p <mariadbd> for 3 s of sysbench oltp_read_write
# (2 threads), then perf script: MariaDB 10.11 from Debian 12, kernel 6.18.
CAPTURED = FIXTURES / "mariadbd-oltp-read-write.script"


def _captured() -> str:
    return CAPTURED.read_text()


def test_fold_counts_every_sample_of_the_captured_output() -> None:
    text = _captured()
    headers = [line for line in text.splitlines() if line and not line[0].isspace()]
    stacks = profile.fold(text)
    assert sum(stacks.values()) == len(headers) == 213


def test_folded_stacks_start_at_the_process_and_end_at_the_leaf() -> None:
    stacks = profile.fold(_captured())
    assert all(stack.split(";")[0] == "mariadbd" for stack in stacks)
    # The second sample of the file: a commit under a prepared statement, outermost first.
    commit = next(s for s in stacks if "ha_commit_trans" in s)
    frames = commit.split(";")
    assert frames.index("start_thread") < frames.index("handle_one_connection")
    assert frames.index("mysqld_stmt_execute") < frames.index("ha_commit_trans")
    assert frames[-1] != "start_thread"


def test_frames_lose_their_offsets_and_say_kernel_or_unknown() -> None:
    frames = {f for stack in profile.fold(_captured()) for f in stack.split(";")}
    assert not any(re.search(r"\+0x[0-9a-f]+", f) for f in frames)
    assert "unix_stream_sendmsg [k]" in frames
    assert "[unknown] (mariadbd)" in frames
    assert "handle_one_connection" in frames
    assert not any(";" in f or f == "" for f in frames)


def test_fold_of_nothing_is_empty() -> None:
    assert profile.fold("") == {}
    assert profile.fold("\n\n") == {}


def test_a_sample_without_frames_is_its_process_alone() -> None:
    text = "mariadbd 12  10.5:   10101010 cpu-clock: \n\n"
    assert profile.fold(text) == {"mariadbd": 1}


def test_a_process_name_with_spaces_and_a_pid_tid_header() -> None:
    text = (
        "my thread 12/13  10.500000:   10101010 cpu-clock: \n"
        "\t  1234 leaf_fn+0x5 (/usr/sbin/mariadbd)\n"
        "\t  1235 root_fn+0x10 (/usr/sbin/mariadbd)\n"
    )
    assert profile.fold(text) == {"my thread;root_fn;leaf_fn": 1}


@pytest.mark.parametrize(
    ("symbol", "dso", "name"),
    [
        ("unix_stream_sendmsg+0x5", "[kernel.kallsyms]", "unix_stream_sendmsg [k]"),
        ("[unknown]", "/usr/sbin/mariadbd", "[unknown] (mariadbd)"),
        ("Prepared_statement::execute+0x6e2", "/usr/sbin/mariadbd", "Prepared_statement::execute"),
        ("operator new(unsigned long)+0x1c", "/lib/libstdc++.so.6", "operator new(unsigned long)"),
        ("a;b+0x1", "/x", "a:b"),
    ],
)
def test_frame_name(symbol: str, dso: str, name: str) -> None:
    assert profile.frame_name(symbol, dso) == name


def test_folded_text_is_sorted_and_reads_back() -> None:
    stacks = profile.fold(_captured())
    text = profile.folded_text(stacks)
    assert text.splitlines() == sorted(text.splitlines())
    assert parse_folded(text) == stacks


def test_record_argv(tmp_path: Path) -> None:
    data = tmp_path / "p.data"
    argv = profile.record_argv([42], 99, data)
    assert argv[:2] == ["perf", "record"]
    assert argv[argv.index("-F") + 1] == "99" and argv[argv.index("-e") + 1] == "cpu-clock"
    assert argv[argv.index("-p") + 1] == "42" and "-g" in argv
    assert argv[-2:] == ["-o", str(data)]
    assert "-D" not in argv  # perf's delay leaves the threads started meanwhile disabled
    both = profile.record_argv([42, 43], 99, data)
    assert both[both.index("-p") + 1] == "42,43"


def test_outcome_with_samples_gives_their_count_and_names_the_unnamed_share() -> None:
    done = profile.outcome(profile.fold(_captured()), "", pid=7)
    assert done.metrics == {"profile_samples": 213.0}
    # 35 of the 213 samples end in a frame of Debian's mariadbd that has no symbol.
    assert done.warnings == (
        "profile: 16 % of the samples landed in functions perf could not name ([unknown]; "
        "mariadbd 16 %): those binaries have no symbol for them (their debug symbols would "
        "name them)",
    )
    assert profile.outcome({"m;a;b": 4}, "", pid=7).warnings == ()


def test_outcome_of_a_perf_that_could_not_attach_quotes_it() -> None:
    done = profile.outcome({}, "Couldn't create thread/CPU maps: No such process\n", pid=7)
    assert done.metrics == {"profile_samples": 0.0}
    assert done.warnings == (
        "profile: perf could not record the server (pid 7): "
        "Couldn't create thread/CPU maps: No such process",
    )


def test_outcome_with_no_samples_says_so() -> None:
    done = profile.outcome({}, "Events disabled\nEvents enabled\n", pid=7)
    assert len(done.warnings) == 1 and "recorded no samples" in done.warnings[0]


def test_outcome_names_each_binary_with_unnamed_leaves() -> None:
    stacks = {"m;a;[unknown] (m)": 2, "m;[unknown] (libc.so.6)": 1, "m;a;b": 1}
    (line,) = profile.outcome(stacks, "", pid=7).warnings
    assert "75 % of the samples" in line and "m 50 %, libc.so.6 25 %" in line
    # An unnamed caller with a named leaf: the time is the leaf's, nothing to say.
    assert profile.outcome({"m;[unknown] (m);b": 3}, "", pid=7).warnings == ()


def test_outcome_without_a_server_process() -> None:
    assert "no server process" in profile.outcome({}, "", pid=None).warnings[0]


def test_finish_writes_the_folded_file_and_removes_the_raw_ones(tmp_path: Path) -> None:
    (tmp_path / profile.SCRIPT).write_text(_captured())
    (tmp_path / profile.PERF_DATA).write_bytes(b"PERFILE2")
    (tmp_path / profile.RECORD_OUT).write_text("[ perf record: Captured 213 samples ]\n")
    done = profile.finish(tmp_path, pid=7)
    assert done.metrics["profile_samples"] == 213
    assert sum(parse_folded((tmp_path / profile.FOLDED).read_text()).values()) == 213
    assert not (tmp_path / profile.SCRIPT).exists()
    assert not (tmp_path / profile.PERF_DATA).exists()


def test_finish_without_perf_script_output_writes_an_empty_profile_and_warns(
    tmp_path: Path,
) -> None:
    done = profile.finish(tmp_path, pid=7)
    assert (tmp_path / profile.FOLDED).read_text() == ""
    assert done.warnings


SMALL = {"m;main;a;x": 6, "m;main;a": 2, "m;main;b": 2}


def test_top_functions_by_self_and_total() -> None:
    by_self = top_functions(SMALL, 3)
    assert [(f.name, f.self_share, f.total_share) for f in by_self] == [
        ("x", 0.6, 0.6),
        ("a", 0.2, 0.8),
        ("b", 0.2, 0.2),
    ]
    assert [f.name for f in top_by_total(SMALL, 2)] == ["main", "a"]
    assert top_by_total(SMALL, 1)[0].total_share == 1.0
    assert top_functions({}) == []


def test_unnamed_frames_rank_by_self_but_not_by_total() -> None:
    stacks = {"m;[unknown] (m);a": 3, "m;[unknown] (m)": 1}
    assert [f.name for f in top_functions(stacks)] == ["a", "[unknown] (m)"]
    assert [f.name for f in top_by_total(stacks)] == ["a"]


def test_a_recursive_function_counts_once_per_sample_in_its_total() -> None:
    (rec,) = [f for f in top_functions({"m;r;r;r": 4}) if f.name == "r"]
    assert rec.total_share == 1.0 and rec.self_share == 1.0


def test_merge_adds_the_trials() -> None:
    assert merge([{"m;a": 1}, {"m;a": 2, "m;b": 1}]) == {"m;a": 3, "m;b": 1}


def _rects(svg: str) -> dict[str, float]:
    frames = re.findall(r'<g class="fr" data-n="([^"]*)".*?<rect [^>]*width="([\d.]+)"', svg)
    return {name: float(width) for name, width in frames}


def test_flame_graph_draws_every_frame_with_widths_proportional_to_samples() -> None:
    svg = render_svg(SMALL, "g1", "test")
    widths = _rects(svg)
    assert set(widths) == {"all", "m", "main", "a", "x", "b"}
    assert widths["m"] == pytest.approx(WIDTH_PX, abs=0.1)
    assert widths["a"] == pytest.approx(0.8 * WIDTH_PX, abs=0.1)
    assert widths["x"] == pytest.approx(0.6 * WIDTH_PX, abs=0.1)
    assert widths["b"] == pytest.approx(0.2 * WIDTH_PX, abs=0.1)
    assert 'data-samples="10"' in svg and 'id="g1"' in svg


def test_flame_graph_puts_callees_above_callers() -> None:
    svg = render_svg(SMALL, "g1")
    ys = dict(re.findall(r'data-n="([^"]*)".*?<rect x="[\d.]+" y="(\d+)"', svg))
    assert int(ys["m"]) > int(ys["main"]) > int(ys["a"]) > int(ys["x"])


def test_flame_graph_escapes_names_and_needs_no_network() -> None:
    svg = render_svg({"m;operator<<(std::ostream&)": 1}, "g")
    assert "operator&lt;&lt;(std::ostream&amp;)" in svg
    assert "http" not in svg and "http" not in SEARCH_SCRIPT
    assert "dbrigFlameSearch" in SEARCH_SCRIPT


def test_flame_graph_of_nothing_is_an_empty_svg() -> None:
    svg = render_svg({}, "g")
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "<rect" not in svg


def test_frame_colours_tell_kernel_and_unknown_frames_apart() -> None:
    assert frame_colour("x") == frame_colour("x")
    grey = frame_colour("[unknown] (mariadbd)")
    r, g, b = map(int, re.findall(r"\d+", grey))
    assert r == g == b


@pytest.mark.parametrize(
    ("level", "euid", "refused"),
    [(2, 1000, True), (1, 1000, False), (4, 0, False), (None, 1000, False), (-1, 1000, False)],
)
def test_paranoid_level_refuses_only_users_that_are_not_root(
    level: int | None, euid: int, refused: bool
) -> None:
    problem = paranoid_problem(level, euid)
    assert (problem is not None) == refused
    if refused:
        assert "perf_event_paranoid is 2" in str(problem)


def test_the_profile_sampler_applies_only_when_a_frequency_is_set() -> None:
    facts = TrialFacts(enabled=False, server_status=True, server_samples_its_host=False)
    assert [e.key for e in select(facts)] == []
    on = TrialFacts(False, True, False, profile_hz=99)
    assert [e.key for e in select(on)] == ["profile"]


def test_a_server_its_agent_samples_is_profiled_there_not_here() -> None:
    agent = TrialFacts(False, True, server_samples_its_host=True, profile_hz=99)
    assert [e.key for e in select(agent)] == ["server-profile"]
    assert sampler_entry("server-profile").where is Where.SERVER_HOST
    assert sampler_entry("server-profile").files == sampler_entry("profile").files


REMOTE = "hosts: {db: {ssh: root@10.0.0.9}}\nserver: {kind: managed, host: db}\n"


def test_a_server_on_another_host_is_profiled_without_asking_this_machines_perf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its host is asked by preflight (run/remote_servers.py), over ssh."""
    import dbrig.run.plan_profile as plan_profile

    monkeypatch.setattr(plan_profile, "perf_problem", lambda: pytest.fail("perf probed here"))
    check_profiling(_plan(tmp_path, f"name: p\n{REMOTE}{WORKLOAD}"))
    client = WORKLOAD.replace("{frequency: 99}", "{frequency: 99, client: true}")
    with pytest.raises(ConfigError) as refused:
        check_profiling(_plan(tmp_path, f"name: p\n{REMOTE}{client}warmup: 1\n"))
    assert "client: server 'default' runs on host 'db', whose agent profiles it" in str(
        refused.value
    )


def test_the_profile_entry_records_the_server_from_the_window_start(tmp_path: Path) -> None:
    entry = sampler_entry("profile")
    now = [100.0]
    inputs = SamplerInputs(
        folder=tmp_path,
        timing=SampleTiming(clock=lambda: now[0], t0=102.5, warmup_s=2.5),
        selected=frozenset({"profile"}),
        devices=None,
        server_devices=None,
        processes=lambda: {"server": [4321], "workload": [99]},
        status=None,
        server_host=None,
        profile_hz=49,
    )
    argv = entry.argv(inputs)
    assert argv is not None
    assert argv[argv.index("-p") + 1] == "4321" and argv[argv.index("-F") + 1] == "49"
    assert entry.at_window_start and entry.stop_signal == signal.SIGINT
    assert entry.after(inputs) is None  # perf wrote nothing: no perf script
    (tmp_path / profile.PERF_DATA).write_bytes(b"")
    assert entry.after(inputs) == ["perf", "script", "-i", str(tmp_path / profile.PERF_DATA)]
    no_server = SamplerInputs(**{**inputs.__dict__, "processes": lambda: {}})
    assert entry.argv(no_server) is None
    client = SamplerInputs(**{**inputs.__dict__, "profile_client": True})
    argv = entry.argv(client)
    assert argv is not None and argv[argv.index("-p") + 1] == "4321,99"


def _plan(tmp_path: Path, text: str) -> Plan:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load(path)


WORKLOAD = """
workload:
  sysbench: {test: oltp_read_only, tables: 1, table_size: 100, time: 5}
sampling: {profile: {cpu: {frequency: 99}}}
"""


@pytest.mark.parametrize(
    ("servers", "says"),
    [
        (
            "server: {kind: external, host: 127.0.0.1, port: 3306, user: u, reset: none}",
            "server 'default' is external",
        ),
    ],
)
def test_profiles_of_servers_dbrig_cannot_record_are_refused(
    tmp_path: Path, servers: str, says: str
) -> None:
    plan = _plan(tmp_path, f"name: p\n{servers}\n{WORKLOAD}")
    with pytest.raises(ConfigError) as refused:
        check_profiling(plan)
    assert "sampling.profile.cpu.frequency" in str(refused.value) and says in str(refused.value)


def test_the_client_is_profiled_only_here_and_after_a_warm_up(tmp_path: Path) -> None:
    client = WORKLOAD.replace("{frequency: 99}", "{frequency: 99, client: true}")
    with pytest.raises(ConfigError, match="with warmup: 0 the client is not started yet"):
        check_profiling(_plan(tmp_path, f"name: p\n{client}"))
    elsewhere = (
        client.replace("time: 5}", "time: 5, host: c1}")
        + "warmup: 1\nhosts: {c1: {ssh: root@10.0.0.9}}\n"
    )
    with pytest.raises(ConfigError, match="the client runs on host 'c1'"):
        check_profiling(_plan(tmp_path, f"name: p\n{elsewhere}"))


def test_a_workload_without_a_server_cannot_be_profiled(tmp_path: Path) -> None:
    text = """name: p
workload:
  sysbench: {test: cpu, time: 5}
sampling: {profile: {cpu: {frequency: 99}}}
"""
    with pytest.raises(ConfigError, match="no server process to profile"):
        check_profiling(_plan(tmp_path, text))


def test_profiles_off_by_default_ask_nothing_of_perf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dbrig.run.plan_profile as plan_profile

    monkeypatch.setattr(plan_profile, "perf_problem", lambda: pytest.fail("perf was probed"))
    check_profiling(_plan(tmp_path, "name: p\nworkload: {sysbench: {test: oltp_read_only}}\n"))


def test_a_machine_where_perf_cannot_record_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dbrig.run.plan_profile as plan_profile

    monkeypatch.setattr(plan_profile, "perf_problem", lambda: "perf is not installed")
    with pytest.raises(ConfigError) as refused:
        check_profiling(_plan(tmp_path, f"name: p\n{WORKLOAD}"))
    message = str(refused.value)
    assert "sampling.profile.cpu.frequency: perf is not installed" in message
    assert "\n" not in message


def test_the_frequency_is_a_matrix_factor(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        "name: p\nworkload: {sysbench: {test: oltp_read_only}}\n"
        "matrix: {sampling.profile.cpu.frequency: [0, 99]}\n",
    )
    assert [c.scenario.sampling.profile.cpu.frequency for c in plan.cells] == [0, 99]


def test_doctor_names_the_package_only_when_perf_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dbrig.commands import doctor

    monkeypatch.setattr(doctor, "perf_problem", lambda: "perf is not installed")
    missing = doctor._profiler()
    assert not missing.ok and not missing.required and missing.package == "linux-perf"
    refused = "the kernel refuses CPU profiles to a user that is not root (...)"
    monkeypatch.setattr(doctor, "perf_problem", lambda: refused)
    kernel = doctor._profiler()
    assert not kernel.ok and kernel.package is None and refused in kernel.detail


def test_doctor_host_says_whether_perf_can_record_a_server_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dbrig.commands import doctor
    from dbrig.remote.ssh import SshTarget
    from dbrig.run.remote_servers import PerfRefused
    from dbrig.server.binary import ServerBinary

    host = doctor.SshHost(SshTarget("db1", "root@db1"))
    label = host.target.label
    binary = ServerBinary(
        Path("/usr/sbin/mariadbd"), "mariadb", "10.11.19", "mariadbd Ver 10.11", None, None
    )
    asked: list[bool] = []

    def probe(host: object, python: str, basedir: object, *, perf: bool = False) -> ServerBinary:
        asked.append(perf)
        if perf and refused:
            raise PerfRefused(f"{label}: perf is not installed")
        return binary

    monkeypatch.setattr(doctor, "probe_server_host", probe)
    refused = False
    agent, perf = doctor._remote_agent_and_perf(host, "python3")
    assert agent.ok and perf.ok and asked == [True]
    refused, asked[:] = True, []
    agent, perf = doctor._remote_agent_and_perf(host, "python3")
    assert agent.ok and "mariadbd Ver 10.11" in agent.detail
    assert not perf.ok and not perf.required and perf.package == "linux-perf"
    assert perf.detail.startswith("perf is not installed: no CPU profiles of a server there")


def test_the_server_hosts_probe_says_why_perf_cannot_record_there(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import dbrig.host.perf
    from dbrig.remote import probe

    monkeypatch.setattr(dbrig.host.perf, "perf_problem", lambda: "perf is not installed")
    assert probe.main(["--perf"]) == 0
    assert json.loads(capsys.readouterr().out)["perf"] == {"error": "perf is not installed"}
    monkeypatch.setattr(dbrig.host.perf, "perf_problem", lambda: None)
    probe.main(["--perf"])
    assert json.loads(capsys.readouterr().out)["perf"] == {}
    probe.main([])
    assert "perf" not in json.loads(capsys.readouterr().out)
