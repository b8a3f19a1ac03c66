"""The agent's wire format and the parts of the agent that need no server."""

from __future__ import annotations

import io
import json
import shlex
import sys
import time
from pathlib import Path

import pytest

import dbrig
from dbrig.errors import ConfigError, ServerError, ServerInitError, ToolMissing
from dbrig.remote import protocol
from dbrig.remote.agent import Agent, serve
from dbrig.remote.profiling import AgentProfile, RemoteProfile
from dbrig.remote.samples import merge_remote_samples
from dbrig.remote.server import (
    AGENT_MODULE,
    AgentLost,
    RemoteServerHandle,
    agent_argv,
    agent_target,
    located,
    remote_folder,
)
from dbrig.remote.ssh import SshHost, SshTarget
from dbrig.run.ssh_client import _direct
from dbrig.sampling import profile, summarize_cell
from dbrig.sampling.schedule import SampleTiming
from dbrig.scenario import ManagedServer
from dbrig.scenario.load import plan_from_dict
from dbrig.scenario.model import HostSpec
from dbrig.tools.registry import workload_for


def test_a_request_is_one_line_and_decodes_back() -> None:
    line = protocol.encode_request("load_base", {"database": "sb\ntest"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert protocol.decode_request(line) == ("load_base", {"database": "sb\ntest"})


def test_a_result_decodes_to_its_value() -> None:
    assert protocol.decode_response(protocol.encode_result({"server_start_s": 1.5})) == {
        "server_start_s": 1.5
    }
    assert protocol.decode_response(protocol.encode_result(None)) is None


def test_a_dbrig_error_comes_back_as_its_class_with_message_and_hint() -> None:
    line = protocol.encode_error(ToolMissing("mariadbd not found", hint="apt-get install x"))
    with pytest.raises(ToolMissing) as raised:
        protocol.decode_response(line)
    assert raised.value.message == "mariadbd not found"
    assert raised.value.hint == "apt-get install x"


def test_any_other_exception_is_a_one_line_server_error_naming_its_type() -> None:
    line = protocol.encode_error(OSError("disk\nfull"), where="server 'db' on db1")
    with pytest.raises(ServerError) as raised:
        protocol.decode_response(line)
    assert raised.value.message == "server 'db' on db1: OSError: disk full"


def test_an_unknown_error_kind_is_a_server_error() -> None:
    line = b'{"ok": false, "error": {"kind": "NotAnError", "message": "m", "hint": null}}'
    with pytest.raises(ServerError, match=r"^m$"):
        protocol.decode_response(line)
    assert protocol.error_class("KeyboardInterrupt") is ServerError


@pytest.mark.parametrize("line", [b"Traceback (most recent call last):\n", b"[1]\n", b'{"x": 1}'])
def test_a_line_that_is_not_a_response_is_a_protocol_error(line: bytes) -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_response(line)


def test_the_hello_is_checked_for_the_same_dbrig_version() -> None:
    hello = protocol.encode_hello("0.1.0", 42, "db1")
    assert protocol.decode_hello(hello, "0.1.0", "db1")["pid"] == 42
    with pytest.raises(ConfigError, match=r"^db1: dbrig 0.0.9 is installed there, this is dbrig"):
        protocol.decode_hello(protocol.encode_hello("0.0.9", 42, "db1"), "0.1.0", "db1")


def test_a_hello_from_something_else_names_the_host() -> None:
    with pytest.raises(protocol.ProtocolError, match=r"^db1: the agent did not introduce itself"):
        protocol.decode_hello(b'{"hello": {"agent": "other"}}', "0.1.0", "db1")


def test_the_agent_answers_each_line_and_an_error_is_an_answer() -> None:
    requests = io.BytesIO(
        protocol.encode_request("died")
        + b"\n"
        + protocol.encode_request("no_such_op")
        + b"not json\n"
    )
    responses = io.BytesIO()
    assert serve(requests, responses) == 0
    lines = responses.getvalue().splitlines()
    hello = protocol.decode_hello(lines[0], dbrig.__version__, "here")
    assert hello["agent"] == "dbrig"
    with pytest.raises(protocol.ProtocolError, match="the first request is open"):
        protocol.decode_response(lines[1])
    with pytest.raises(protocol.ProtocolError, match="no operation 'no_such_op'"):
        protocol.decode_response(lines[2])
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.decode_response(lines[3])
    assert len(lines) == 4


def test_the_agent_refuses_a_home_dbrig_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "someone's file").write_text("x")
    line = protocol.encode_request(
        "open",
        {
            "name": "db",
            "spec": {},
            "home": str(tmp_path),
            "account": {"user": "dbrig", "password": "s3cret"},
        },
    )
    answer = Agent().handle_line(line)
    assert b"s3cret" not in answer
    with pytest.raises(Exception, match="not empty"):
        protocol.decode_response(answer)


def test_the_agent_runs_here_without_a_prefix_and_as_python3_through_one() -> None:
    assert agent_argv([]) == [sys.executable, "-m", AGENT_MODULE]
    prefix = ["ssh", "-o", "ControlPath=/tmp/c", "root@db1", "--"]
    assert agent_argv(prefix) == [*prefix, "python3", "-m", AGENT_MODULE]


def test_over_ssh_the_agent_is_one_command_string_the_remote_shell_splits_back() -> None:
    prefix = ["ssh", "-S", "/tmp/c/cm", "root@db1"]
    argv = agent_argv(prefix, "env PYTHONPATH='/opt/my dbrig' /opt/py/bin/python", shell=True)
    assert argv[: len(prefix)] == prefix and len(argv) == len(prefix) + 1
    words = shlex.split(argv[-1])
    python = ["env", "PYTHONPATH=/opt/my dbrig", "/opt/py/bin/python"]
    assert words == ["exec", *python, "-m", AGENT_MODULE]


def test_a_remote_servers_target_names_its_host_and_carries_no_secret(tmp_path: Path) -> None:
    hosts = {"db1": HostSpec(ssh="root@db1", address="10.0.0.5", python="/opt/py/bin/python")}
    spec = ManagedServer(host="db1")
    target = agent_target("big", spec, tmp_path / "runs" / "r-1", hosts, "0a1b2c3d")
    assert target is not None and target.ssh is not None
    assert target.address == "10.0.0.5" and target.python == "/opt/py/bin/python"
    assert target.remote_home == ".dbrig/r-1-0a1b2c3d-big"
    assert target.where == "server 'big' on hosts.db1 (root@db1)"
    handle = RemoteServerHandle(
        "big",
        spec,
        tmp_path / "local",
        prefix=[],
        address=target.address,
        remote_home=target.remote_home,
        host=SshHost(target.ssh),
    )
    try:
        argv = agent_argv(handle.host.command_prefix(), target.python, shell=True)
        assert handle._password not in " ".join(argv)
    finally:
        handle.close(keep_data=False)
    assert agent_target("big", ManagedServer(), tmp_path, hosts) is None


def test_runs_named_alike_get_their_own_folder_on_the_server_host_and_keep_it() -> None:
    """Two runs started in the same second on two machines have one folder name; their
    ids tell them apart there. The same run (a --resume) finds its folder again."""
    first = remote_folder("s-20261126-093700", "0a1b2c3d", "db")
    second = remote_folder("s-20261126-093700", "9f8e7d6c", "db")
    assert first != second
    assert first == remote_folder("s-20261126-093700", "0a1b2c3d", "db")
    assert first == ".dbrig/s-20261126-093700-0a1b2c3d-db"
    # run.json of an older dbrig has no id: the folder its killed run left is still found
    assert remote_folder("s-20261126-093700", None, "db") == ".dbrig/s-20261126-093700-db"


STAMP = "t_s,phase,interval_s"


def _csv(header: str, *rows: str) -> str:
    return "\n".join([header, *rows]) + "\n"


def test_remote_samples_read_like_a_local_trials(tmp_path: Path) -> None:
    client = tmp_path / "client"
    client.mkdir()
    procs = f"{STAMP},role,pids,cpu_pct,rss_mb,ctx_switches_per_s,read_mb_per_s,write_mb_per_s"
    sampler = f"{STAMP},sampler,cpu_s,cpu_pct"
    (client / "procs.csv").write_text(_csv(procs, "1.0,measure,1.0,workload,1,50,10,100,0,0"))
    (client / "sampler.csv").write_text(_csv(sampler, "1.0,measure,1.0,host,0.01,1.0"))
    (client / "cpu.csv").write_text("client host cpu")
    (tmp_path / "sampler.csv").write_text(_csv(sampler, "1.0,measure,1.0,status,0.02,2.0"))
    cpu = f"{STAMP},core,user_pct,nice_pct,system_pct,iowait_pct,irq_pct,softirq_pct,"
    cpu += "steal_pct,idle_pct,busy_pct"
    remote = {
        "cpu.csv": _csv(cpu, "1.0,measure,1.0,0,30,0,10,5,0,0,0,55,40"),
        "procs.csv": _csv(procs, "1.0,measure,1.0,server,3,80,500,200,0,1.5"),
        "sampler.csv": _csv(sampler, "1.0,measure,1.0,host,0.04,4.0"),
    }
    merge_remote_samples(tmp_path, remote)
    summary = summarize_cell(tmp_path)
    assert summary["cpu_busy_pct"] == 40
    assert summary["server_cpu_pct"] == 80 and summary["workload_cpu_pct"] == 50
    assert summary["sampler_cpu_pct"] == pytest.approx(7.0)
    assert (client / "cpu.csv").read_text() == "client host cpu"
    assert not (client / "procs.csv").exists()
    rows = (tmp_path / "sampler.csv").read_text().splitlines()
    assert rows[0] == sampler and [r.split(",")[3] for r in rows[1:]] == [
        "status",
        "host",
        "client-host",
    ]
    assert json.dumps(summary)


def test_a_remote_error_names_the_host_and_keeps_its_class() -> None:
    where = "server 'db' on db1"
    init = located(ServerInitError("server 'db': initialising failed", hint="h"), "db", where)
    assert isinstance(init, ServerInitError) and init.hint == "h"
    assert init.message == "server 'db' on db1: initialising failed"
    missing = located(ToolMissing("mariadbd or mysqld not found"), "db", where)
    assert missing.message == "server 'db' on db1: mariadbd or mysqld not found"
    assert located(ServerError(f"{where}: lost"), "db", where).message == f"{where}: lost"


def test_a_remote_client_reaches_a_remote_server_on_its_own_host_by_loopback(
    tmp_path: Path,
) -> None:
    """A client on the server's host connects to 127.0.0.1 there; on a third host, to
    the server's address; the password only in the option file's text."""
    plan = plan_from_dict({"name": "x", "workload": {"sysbench": {}}})
    workload = workload_for(plan.scenario.workload)
    db1 = SshHost(SshTarget("db1", "root@db1"))
    load1 = SshHost(SshTarget("load1", "root@load1"))
    handle = RemoteServerHandle(
        "db",
        ManagedServer(host="db1"),
        tmp_path,
        prefix=[],
        address="10.0.0.5",
        remote_home=".dbrig/r-db",
        host=db1,
    )
    handle.port = 3307  # what the agent's open would answer
    try:
        beside = _direct(db1, handle, workload)
        third = _direct(load1, handle, workload)
        assert (beside.endpoint.host, beside.endpoint.port) == ("127.0.0.1", 3307)
        assert (third.endpoint.host, third.endpoint.port) == ("10.0.0.5", 3307)
        for run in (beside, third):
            assert run.endpoint.user == "dbrig" and run.secret is not None
            assert handle._password in run.secret.text
            assert str(run.endpoint.client_options_file) == run.secret.path
            argv = workload.run_argv(run.endpoint, Path("sysbench"), warmup=0)
            assert handle._password not in " ".join(run.saved_argv(argv))
    finally:
        handle.close(keep_data=True)
        load1.close()


# -- a CPU profile through the agent ----------------------------------------------------------


def test_a_profile_answer_travels_as_one_line_and_reads_back() -> None:
    folded = "mariadbd;do_command;filesort 3\nmariadbd;[unknown] (libc.so.6) 1\n"
    result = protocol.profile_answer(
        folded, "[ perf record: Woken up 1 times ]\n", {"profile_samples": 4}, ["a\nline"]
    )
    line = protocol.encode_result(result)
    assert line.count(b"\n") == 1
    answer = protocol.read_profile_answer(protocol.decode_response(line))
    assert answer.folded == folded and answer.record_out.startswith("[ perf record")
    assert answer.metrics == {"profile_samples": 4.0}
    assert answer.warnings == ("a line",)


@pytest.mark.parametrize(
    ("result", "says"),
    [
        ("perf.data", "not an object"),
        ({"folded": b"x", "record_out": ""}, "folded and record_out"),
        ({"folded": "", "record_out": "", "metrics": {"n": "1"}, "warnings": []}, "not numbers"),
        ({"folded": "", "record_out": "", "metrics": {}, "warnings": "w"}, "not lines"),
    ],
)
def test_a_profile_answer_of_another_shape_is_a_protocol_error(result: object, says: str) -> None:
    with pytest.raises(protocol.ProtocolError, match=says):
        protocol.read_profile_answer(result)


def test_a_profile_request_asks_for_the_window_not_for_now() -> None:
    sent: list[tuple] = []
    timing = SampleTiming(clock=lambda: 100.0, t0=102.5, warmup_s=2.5)
    remote = RemoteProfile(lambda *a, **k: sent.append((a, k)), timing, 49, "server 'db' on db1")
    remote.start()
    assert sent == [(("profile_start",), {"frequency": 49, "t0_in_s": 2.5})]
    line = protocol.encode_request(sent[0][0][0], sent[0][1])
    assert protocol.decode_request(line) == ("profile_start", {"frequency": 49, "t0_in_s": 2.5})


def test_a_remote_profile_writes_the_trials_files_and_gives_its_metric(tmp_path: Path) -> None:
    answer = protocol.profile_answer(
        "mariadbd;do_command 7\n", "perf said\n", {"profile_samples": 7}, []
    )
    timing = SampleTiming(clock=lambda: 0.0, t0=0.0)
    remote = RemoteProfile(lambda op, *a, **k: answer, timing, 99, "server 'db' on db1")
    remote.stop()
    outcome = remote.collect(tmp_path)
    assert (tmp_path / profile.FOLDED).read_text() == "mariadbd;do_command 7\n"
    assert (tmp_path / profile.RECORD_OUT).read_text() == "perf said\n"
    assert outcome.metrics == {"profile_samples": 7.0} and outcome.warnings == ()


def test_a_profile_the_agent_lost_is_a_warning_and_an_empty_profile(tmp_path: Path) -> None:
    def lost(op: str, *args: object, **kwargs: object) -> None:
        raise AgentLost("server 'db' on db1: the connection to its agent was lost")

    remote = RemoteProfile(lost, SampleTiming(clock=lambda: 0.0), 99, "server 'db' on db1")
    remote.stop()
    outcome = remote.collect(tmp_path)
    assert remote.error is None  # the trial's own failure says why; the profile is a line
    assert (tmp_path / profile.FOLDED).read_text() == ""
    assert outcome.metrics == {"profile_samples": 0.0}
    assert outcome.warnings[0].startswith("profile: the profile of server 'db' on db1 was lost")


def test_the_agents_profile_without_a_server_says_so_and_leaves_no_file(tmp_path: Path) -> None:
    """No server process when the window starts: perf is not started, the answer says
    why, and the profile's folder is gone."""
    folder = tmp_path / "profile"
    recording = AgentProfile(folder, 99, time.monotonic(), lambda: None)
    recording.start()
    time.sleep(0.1)
    answer = protocol.read_profile_answer(recording.finish())
    assert answer.folded == "" and answer.metrics == {"profile_samples": 0.0}
    assert answer.warnings == ("profile: no server process to record (no pid)",)
    assert not folder.exists()


def test_a_profile_stopped_in_the_warm_up_records_nothing(tmp_path: Path) -> None:
    asked: list[int] = []
    recording = AgentProfile(tmp_path / "p", 99, time.monotonic() + 60, lambda: asked.append(1))
    recording.start()
    assert recording.finish()["folded"] == ""
    assert asked == [] and not (tmp_path / "p").exists()


def test_profile_stop_without_a_start_is_an_error_answer() -> None:
    agent = Agent()
    with pytest.raises(protocol.ProtocolError, match="profile_stop without profile_start"):
        protocol.decode_response(agent.handle_line(protocol.encode_request("profile_stop")))
    with pytest.raises(protocol.ProtocolError, match="the first request is open"):
        protocol.decode_response(
            agent.handle_line(
                protocol.encode_request("profile_start", {"frequency": 99, "t0_in_s": 1})
            )
        )
