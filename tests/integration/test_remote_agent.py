"""A managed server driven through the agent (``python3 -m dbrig.remote.agent``), started
with an empty command prefix: a plain local child, exactly what ssh would run on db1.

Real MariaDB, real sysbench over TCP as the benchmark account; 1 table x 1000 rows.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from dbrig import proc
from dbrig.errors import ServerError
from dbrig.remote.server import (
    AGENT_MODULE,
    LOCAL_AGENT_ENV,
    AgentConnection,
    RemoteServerHandle,
)
from dbrig.run.datasets import client_endpoint, data_set_id, ready_for_trial
from dbrig.scenario.load import plan_from_dict
from dbrig.tools.registry import workload_for
from tests.helpers.wait import wait_for
from tests.integration.helpers import (
    LEAK_TAG,
    TINY_SCENARIO,
    killed_at_end,
    only_run_dir,
    read_json,
    spawn_dbrig,
    tiny_scenario,
    write_scenario,
)


def _plan():
    return plan_from_dict(tiny_scenario())


def _handle(tmp_path: Path, plan) -> RemoteServerHandle:
    spec = plan.scenario.server_specs[plan.cells[0].server]
    return RemoteServerHandle(
        "default",
        spec,
        tmp_path / "local",
        prefix=[],
        address="127.0.0.1",
        remote_home=str(tmp_path / "remote"),
    )


def _server_pids(tmp_path: Path) -> list[int]:
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = " ".join(process.info["cmdline"] or [])
            if "mariadbd" in (process.info["name"] or "") and str(tmp_path) in cmdline:
                found.append(process.pid)
    return found


def test_the_agent_prepares_restores_runs_and_survives_a_lost_connection(tmp_path: Path) -> None:
    plan = _plan()
    spec = plan.scenario.server_specs[plan.cells[0].server]
    workload = workload_for(plan.scenario.workload)
    sysbench = proc.which(["sysbench"], package="sysbench")
    handle = _handle(tmp_path, plan)
    try:
        timings = ready_for_trial(handle, workload, spec, sysbench)
        assert timings["restore_s"] >= 0 and timings["server_start_s"] > 0
        _, digest = data_set_id(workload)
        assert handle.has_data_set(digest)
        assert handle.info["kind"] == "managed" and "mariadb" in handle.info["flavor"]
        assert handle.died() is None
        assert handle.effective(spec)["innodb_buffer_pool_size"] == str(64 * 2**20)
        endpoint = client_endpoint(handle, workload)
        assert endpoint.host == "127.0.0.1" and endpoint.socket is None
        argv = workload.run_argv(endpoint, sysbench, warmup=0)
        assert handle.credentials().password not in " ".join(argv)
        out = tmp_path / "run.out"
        done = proc.run(argv, timeout_s=60, stdout=out, merge_stderr=True)
        assert done.returncode == 0, out.read_text()
        assert workload.analyse(out.read_text(), 0).metrics["tps"] > 0
        assert handle.finish_trial()["server_stop_s"] > 0

        # The next trial: its snapshot restored and started; then the connection drops.
        ready_for_trial(handle, workload, spec, sysbench)
        assert len(_server_pids(tmp_path)) == 1
        agent = handle._agent
        assert agent is not None
        agent._child.popen.stdin.close()  # what a dropped ssh connection does to the agent
        wait_for("the server to stop", lambda: not _server_pids(tmp_path), timeout=60)
        wait_for("the agent to exit", lambda: agent._child.poll() is not None, timeout=30)
        reason = handle.died()
        assert reason is not None and "the connection to its agent was lost" in reason, reason
        assert handle.finish_trial() == {}

        # The trial after it: a new agent, the snapshot still there (no prepare again).
        ready_for_trial(handle, workload, spec, sysbench)
        assert handle.died() is None
        with contextlib.closing(handle.connect()) as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM sbtest.sbtest1")
            assert cur.fetchone()[0] == 1000
        assert (tmp_path / "local" / "prepare.out").read_text().count("Creating table") == 1
    finally:
        handle.close(keep_data=False)
    assert _server_pids(tmp_path) == []
    assert not (tmp_path / "remote").exists(), "close(keep_data=False) removes the remote home"
    assert "ready for connections" in (tmp_path / "local" / "remote" / "mysqld.err").read_text()
    for file in [f for f in (tmp_path / "local").rglob("*") if f.is_file()]:
        assert handle._password not in file.read_text(errors="replace"), f"password in {file}"


# What a local run of TINY_SCENARIO has beyond the workload's own: the sampler's and the
# server's columns. A run through the agent must have every one of them.
SAMPLED_COLUMNS = (
    "cpu_busy_pct",
    "cpu_busy_pct_core0",
    "iowait_pct",
    "disk_write_mb_per_s",
    "mem_available_mb_min",
    "server_cpu_pct",
    "server_rss_mb_max",
    "server_ctx_switches",
    "workload_cpu_pct",
    "questions_per_s",
    "buffer_pool_hit_ratio",
    "sampler_cpu_pct",
    "server_cpu_us_per_txn",
    "time_restore_s",
    "time_server_start_s",
    "time_server_stop_s",
)


def _agents_of(tmp_path: Path) -> list[psutil.Process]:
    """This test's running agents (they inherit the test's tag)."""
    found = []
    for process in psutil.process_iter(["cmdline", "environ"]):
        with contextlib.suppress(psutil.Error):
            environ = process.info["environ"] or {}
            cmdline = " ".join(process.info["cmdline"] or [])
            if AGENT_MODULE in cmdline and environ.get(LEAK_TAG) == str(tmp_path):
                found.append(process)
    return found


def _measured_trial_running(out: Path) -> bool:
    outputs = out.glob("*/trials/.c*.partial/workload.out")
    return any("Threads started!" in p.read_text(errors="replace") for p in outputs)


def test_a_run_through_the_agent_has_a_local_runs_columns_and_outlives_a_lost_agent(
    tmp_path: Path,
) -> None:
    sysbench = {**TINY_SCENARIO["workload"]["sysbench"], "time": 4}
    scenario = tiny_scenario(workload={"sysbench": sysbench}, repeat=2, order="sequential")
    path = write_scenario(tmp_path / "s.yaml", scenario)
    out = tmp_path / "runs"
    child = spawn_dbrig(
        ["run", path, "--out", out, "--no-report"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, LOCAL_AGENT_ENV: "1"},
    )
    with killed_at_end(child, group=True):
        wait_for("the first trial", lambda: _measured_trial_running(out), timeout=90, child=child)
        time.sleep(1)
        agents = _agents_of(tmp_path)
        assert len(agents) == 1, agents
        agents[0].kill()  # the harshest loss: no EOF, no signal handler
        _, err = child.communicate(timeout=120)
    assert child.returncode == 1, err  # one trial failed, the run went on
    run = only_run_dir(out)
    results = pd.read_csv(run / "results.csv").sort_values("trial")
    first, second = results.iloc[0], results.iloc[1]
    assert first["status"] == "failed"
    assert "the connection to its agent was lost" in first["reason"], first["reason"]
    assert second["status"] == "ok", second["reason"]
    missing = [c for c in SAMPLED_COLUMNS if c not in results.columns]
    assert not missing, f"columns a local run has and a run through the agent lacks: {missing}"
    assert second[list(SAMPLED_COLUMNS)].notna().all()
    assert second["tps"] > 0
    trial = run / "trials" / second["trial"]
    assert {"server", "workload"} <= set(pd.read_csv(trial / "procs.csv")["role"])
    assert (trial / "client" / "cpu.csv").is_file(), "the client host's own figures are kept"
    assert (run / "servers" / "default" / "remote" / "mysqld.err").is_file()
    assert read_json(run / "run.json")["servers"]["default"]["kind"] == "managed"
    assert _server_pids(tmp_path) == [] and _agents_of(tmp_path) == []


def test_an_agent_that_cannot_start_there_is_one_line_naming_the_host(tmp_path: Path) -> None:
    # The prefix runs a python without dbrig: what a host where dbrig is not installed gives.
    prefix = ["env", "-i", "PATH=/usr/bin:/bin"]
    with pytest.raises(ServerError) as raised:
        AgentConnection(prefix, "server 'db' on db1", tmp_path / "agent.log", "/usr/bin/python3")
    message = str(raised.value)
    assert message.startswith("server 'db' on db1: the agent did not start: ")
    assert "No module named" in message and "\n" not in message
    assert "is dbrig" in message
