"""The ssh transport's pure parts: options, quoting, the wrapper's protocol, its times."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from dbrig import ownership, proc
from dbrig.errors import ConfigError
from dbrig.remote.ssh import (
    TIMES_MARKER,
    LocalHost,
    RemoteSecret,
    SshTarget,
    client_times,
    connection_error,
    remote_command,
    remove_orphaned_control_dirs,
    secret_preamble,
    ssh_options,
    stop_wrapped,
    wrapped,
)
from dbrig.run.remote import check_client_hosts
from dbrig.scenario import plan_from_dict
from dbrig.tools.registry import interference_for

TARGET = SshTarget("db1", "root@db1", 2222, {"IdentityFile": "/k", "ConnectTimeout": "3"})


def test_batch_mode_comes_first_and_the_scenarios_options_before_dbrigs_defaults() -> None:
    argv = ssh_options(TARGET, Path("/tmp/x/cm"))
    assert argv[:4] == ["-o", "BatchMode=yes", "-S", "/tmp/x/cm"]
    assert argv[4:6] == ["-p", "2222"]
    # ssh keeps the first value of an option: the scenario's ConnectTimeout wins.
    assert argv.index("ConnectTimeout=3") < argv.index("ConnectTimeout=10")
    assert "IdentityFile=/k" in argv


def test_the_label_names_the_hosts_key_and_where_it_is() -> None:
    assert TARGET.label == "hosts.db1 (root@db1:2222)"
    assert SshTarget("u@h", "u@h").label == "u@h"


def test_a_remote_command_splits_back_into_the_same_argv() -> None:
    argv = ["sysbench", "--mysql-db=a b", "$HOME", "it's", "a;b", ""]
    assert shlex.split(remote_command(argv)) == ["exec", *argv]


def run_held(argv: list[str], data: bytes = b"") -> tuple[int, str, str]:
    """Run the wrapper as ssh would (its own group), its stdin held open until it exits."""
    child = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    with contextlib.suppress(BrokenPipeError):  # it may exit before reading (exit 125)
        child.stdin.write(data)
        child.stdin.flush()
    code = child.wait(timeout=30)
    with contextlib.suppress(BrokenPipeError):
        child.stdin.close()
    return code, child.stdout.read().decode(), child.stderr.read().decode()


def test_the_wrapper_runs_the_command_and_passes_its_exit_code(tmp_path: Path) -> None:
    argv = wrapped(["sh", "-c", 'echo "$1"; exit 3', "x", "a b"])
    assert run_held(argv)[:2] == (3, "a b\n")


def test_the_wrapper_writes_the_secret_0600_from_stdin_and_removes_it(tmp_path: Path) -> None:
    secret = RemoteSecret(str(tmp_path / "s"), "pw.cnf", "password='x y'\n[client]\n")
    script = f'stat -c %a {secret.folder} {secret.path}; cat "{secret.path}"'
    code, out, err = run_held(wrapped(["sh", "-c", script], secret), secret_preamble(secret))
    assert code == 0, err
    assert out == "700\n600\n" + secret.text
    assert not Path(secret.folder).exists()


def test_the_wrapper_refuses_a_secret_folder_that_exists(tmp_path: Path) -> None:
    secret = RemoteSecret(str(tmp_path), "pw", "x")
    assert run_held(wrapped(["true"], secret), secret_preamble(secret))[0] == 125
    assert tmp_path.exists(), "a folder it did not make is left alone"


def test_the_wrapper_stops_its_command_when_stdin_closes(tmp_path: Path) -> None:
    marker = tmp_path / "still-running"
    argv = wrapped(["sh", "-c", f"sleep 30; touch {marker}"])
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)
    assert child.stdin is not None
    child.stdin.close()
    assert child.wait(timeout=20) != 0
    deadline = time.monotonic() + 10
    while _group_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group_alive(child.pid), "nothing of its group is left"
    assert not marker.exists()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_wrappers_times_are_read_and_cut_from_the_output() -> None:
    output = f"tool output\nlast line\n{TIMES_MARKER}\n0m0.01s 0m0.00s\n1m2.50s 0m0.25s\n"
    text, user, system = client_times(output)
    assert text == "tool output\nlast line\n"
    assert (user, system) == (62.5, 0.25)
    assert client_times("cut short\n") == ("cut short\n", None, None)


def test_the_wrapper_reports_its_commands_times() -> None:
    argv = wrapped(["sh", "-c", "echo hi"], report_times=True)
    code, out, err = run_held(argv)
    assert code == 0
    text, user, system = client_times(out + err)
    assert text == "hi\n"
    assert user is not None and system is not None


def test_a_wrapped_command_stopped_at_stdins_eof_still_reports_its_code_and_times(
    tmp_path: Path,
) -> None:
    """The stop an interference tool gets: stdin closed, the command ends on SIGTERM as
    stress-ng does (metrics printed, exit 0), and the wrapper reports its CPU times."""
    burn = 'trap "echo stopped; exit 0" TERM; echo started; while :; do :; done'
    argv = wrapped(["sh", "-c", burn], report_times=True)
    out = tmp_path / "out"
    child = proc.spawn(argv, stdout=out, merge_stderr=True, stdin_pipe=True)
    try:
        deadline = time.monotonic() + 10
        while "started" not in out.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # some CPU to count
    finally:
        finished = stop_wrapped(child)
    text, user, system = client_times(out.read_text())
    assert finished.returncode == 0, text
    assert text == "started\nstopped\n"
    assert user is not None and system is not None and user + system > 0
    deadline = time.monotonic() + 10  # its watcher notices within a second, then kills
    while _group_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group_alive(child.pid), "nothing of its group is left"


def test_stopping_a_wrapped_command_that_already_ended_is_not_an_error(tmp_path: Path) -> None:
    child = proc.spawn(wrapped(["true"]), stdout=tmp_path / "out", stdin_pipe=True)
    child.wait(30)
    assert stop_wrapped(child).returncode == 0


def test_sshs_complaint_is_its_last_line() -> None:
    text = "Warning: added\nroot@db1: Permission denied (publickey).\n\n"
    assert connection_error(text) == "root@db1: Permission denied (publickey)."
    assert connection_error("") == "ssh gave no reason"


def test_a_control_folder_whose_dbrig_died_is_removed(tmp_path: Path) -> None:
    dead = tmp_path / "dbrig-ssh-dead"
    dead.mkdir()
    ownership.mark_owned(dead, role="ssh-control", owner_pid=2**22 + 1)
    alive = tmp_path / "dbrig-ssh-alive"
    alive.mkdir()
    ownership.mark_owned(alive, role="ssh-control", owner_pid=os.getpid())
    foreign = tmp_path / "dbrig-ssh-foreign"
    foreign.mkdir()
    assert remove_orphaned_control_dirs(tmp_path) == [dead]
    assert alive.exists() and foreign.exists()


def scenario(**changes: object) -> dict:
    data = {
        "name": "t",
        "hosts": {"load1": {"ssh": "bench@load1", "port": 2222}},
        "workload": {"sysbench": {"test": "oltp_read_only", "host": "load1"}},
    }
    data.update(changes)
    return data


def test_a_client_host_must_be_named_in_hosts() -> None:
    plan_from_dict(scenario(), source="s.yaml")
    bad = scenario(workload={"sysbench": {"test": "oltp_read_only", "host": "load2"}})
    with pytest.raises(ConfigError, match=r"workload.sysbench.host: 'load2' is not a key of hosts"):
        plan_from_dict(bad, source="s.yaml")


def test_a_matrix_of_client_hosts_is_checked_per_cell() -> None:
    data = scenario(matrix={"workload.sysbench.host": [None, "load1", "nope"]})
    with pytest.raises(ConfigError, match="'nope' is not a key of hosts"):
        plan_from_dict(data, source="s.yaml")


def test_an_interference_host_must_be_named_in_hosts_also_as_a_matrix_factor() -> None:
    stress = {"cpu": 1, "host": "load1"}
    plan = plan_from_dict(scenario(interference={"stress-ng": stress}), source="s.yaml")
    assert interference_for(plan.cells[0].scenario.interference)[0].host == "load1"
    bad = scenario(interference={"stress-ng": {**stress, "host": "db9"}})
    with pytest.raises(ConfigError) as raised:
        plan_from_dict(bad, source="s.yaml")
    assert "interference.stress-ng.host: 'db9' is not a key of hosts: (known: load1)" in str(
        raised.value
    )
    cells = scenario(
        interference={"stress-ng": {"cpu": 1}},
        matrix={"interference.stress-ng.host": [None, "load1"]},
    )
    plan = plan_from_dict(cells, source="s.yaml")
    hosts = [interference_for(c.scenario.interference)[0].host for c in plan.cells]
    assert hosts == [None, "load1"]
    cells["matrix"] = {"interference.stress-ng.host": ["load1", "nope"]}
    with pytest.raises(
        ConfigError, match=r"cell interference\.stress-ng\.host=nope: .*'nope' is not"
    ):
        plan_from_dict(cells, source="s.yaml")


def test_dbrigs_own_ssh_options_are_refused() -> None:
    data = scenario(hosts={"load1": {"ssh": "h", "options": {"ControlPersist": "yes"}}})
    with pytest.raises(ConfigError, match="ControlPersist' is set by dbrig"):
        plan_from_dict(data, source="s.yaml")


def test_an_ssh_destination_cannot_be_an_option() -> None:
    with pytest.raises(ConfigError, match=r"hosts.load1.ssh"):
        plan_from_dict(scenario(hosts={"load1": {"ssh": "-oProxyCommand=x"}}), source="s.yaml")


def test_a_remote_client_cannot_use_files_of_this_machine(tmp_path: Path) -> None:
    script = tmp_path / "mine.lua"
    script.write_text("function event() end\n")
    fileio = {
        "test": "fileio",
        "file_total_size": "16M",
        "file_test_mode": "seqrd",
        "host": "load1",
    }
    for block in ({"script": str(script), "host": "load1"}, fileio):
        plan = plan_from_dict(scenario(workload={"sysbench": block}), source="s.yaml")
        with pytest.raises(ConfigError, match=r"s.yaml: workload.sysbench.host: .*cannot"):
            check_client_hosts(plan)  # refused before any connection is tried


def test_the_local_host_answers_the_same_calls() -> None:
    local = LocalHost()
    local.connect()
    assert local.command_prefix() == [] and local.argv(["echo", "a b"]) == ["echo", "a b"]
    assert local.run(["sh", "-c", "cat; echo $0", "x"], input=b"in ") == (0, "in x\n")
    local.close()
