"""What the run refuses, the dry run refuses too: both build one plan (run/plan.py).

Each case used to pass ``--dry-run`` and fail the run (some after the run directory
was made). Now both exit 2 with one line naming the key, and nothing is created.
No server starts: every case is refused while the plan is built.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbrig.cli import main

OLTP = """\
name: refused
workload:
  sysbench: {test: oltp_read_only, tables: 1, table_size: 100, time: 10}
"""
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mkfs.xfs") is None,
    reason="the workspace's size is checked after root and xfsprogs",
)
WITH_SYSBENCH = pytest.mark.skipif(
    shutil.which("sysbench") is None, reason="the run finds its binaries first"
)


def _dbrig(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    return exited.value.code, capsys.readouterr().err  # type: ignore[return-value]


def refused_by_both(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], *flags: str
) -> str:
    """The one error line the dry run and the run both give, nothing made under --out."""
    path = tmp_path / "s.yaml"
    path.write_text(text)
    out = tmp_path / "runs"
    lines = []
    for mode in (["--dry-run"], ["--no-report"]):
        code, err = _dbrig(["run", str(path), *mode, *flags, "--out", str(out)], capsys)
        assert code == 2, err
        got = err.strip("\n").splitlines()
        assert len(got) == 1 and got[0].startswith("dbrig: error: "), err
        assert not out.exists()
        lines.append(got[0])
    assert lines[0] == lines[1]
    return lines[0]


@AS_ROOT
def test_a_disk_full_size_too_small_names_its_own_key_and_the_size_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused_by_both(tmp_path, OLTP + "faults: {disk_full: {size: 100M, at: 1}}\n", capsys)
    assert (
        line
        == f"dbrig: error: {tmp_path / 's.yaml'}: faults.disk_full.size: at least 512M, got 100M"
    )


@AS_ROOT
def test_a_workspace_image_too_small_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused_by_both(tmp_path, OLTP + "workspace: {image: 100M}\n", capsys)
    assert line.endswith("s.yaml: workspace.image: at least 512M, got 100M")


@AS_ROOT
def test_a_workspace_image_bigger_than_the_disk_is_refused_before_the_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused_by_both(tmp_path, OLTP + "workspace: {image: 100P}\n", capsys)
    assert "s.yaml: workspace.image: 100P is more than the " in line


def test_disk_full_sizes_that_differ_per_cell_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = OLTP + (
        "matrix:\n"
        "  - {faults.disk_full: [{at: 1, size: 1G}]}\n"
        "  - {faults.disk_full: [{at: 1, size: 2G}]}\n"
    )
    line = refused_by_both(tmp_path, text, capsys)
    assert "faults.disk_full.size: the run's datadirs live on one filesystem" in line
    assert "(got 1G, 2G)" in line


def test_a_workspace_with_keep_data_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refused_by_both(tmp_path, OLTP + "workspace: {image: 1G}\n", capsys, "--keep-data")
    assert "--keep-data: a clone workspace (workspace.image)" in line


def test_a_workspace_for_a_workload_with_no_server_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "name: cpu\nworkload:\n  sysbench: {test: cpu, time: 2}\nworkspace: {image: 1G}\n"
    line = refused_by_both(tmp_path, text, capsys)
    assert "workspace.image: sysbench cpu needs no server" in line


@contextlib.contextmanager
def _closed_port() -> Iterator[int]:
    """Bound, never listened on: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@WITH_SYSBENCH
@pytest.mark.skipif(shutil.which("ssh") is None, reason="the client host is reached over ssh")
def test_a_client_host_whose_ssh_port_is_closed_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _closed_port() as port:
        text = OLTP + (
            f"hosts: {{c1: {{ssh: root@127.0.0.1, port: {port}}}}}\n"
            "matrix: {workload.sysbench.host: [c1]}\n"
        )
        line = refused_by_both(tmp_path, text, capsys)
    assert f"hosts.c1 (root@127.0.0.1:{port}): cannot connect" in line


@WITH_SYSBENCH
def test_a_password_sysbench_cannot_be_given_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DBRIG_TEST_PW", 'it\'s "quoted"')
    with _closed_port() as port:  # refused before dbrig tries to connect
        text = OLTP + (
            f"server: {{kind: external, host: 127.0.0.1, port: {port}, user: u, "
            "password_env: DBRIG_TEST_PW, reset: none}\n"
        )
        line = refused_by_both(tmp_path, text, capsys)
    assert "server.password_env: sysbench's --config-file cannot hold a password" in line
    assert "quoted" not in line


def test_a_buffer_pool_larger_than_this_machine_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = OLTP + "server:\n  config: {innodb_buffer_pool_size: 64P}\n"
    line = refused_by_both(tmp_path, text, capsys)
    assert "server.config.innodb_buffer_pool_size: 64P is more than this machine's" in line


def test_a_matrixed_buffer_pool_is_named_by_its_server_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = OLTP + (
        "servers:\n  a: {}\n  b: {}\n"
        "matrix:\n  - server: [a, b]\n    servers.b.config.innodb_buffer_pool_size: [64M, 512P]\n"
    )
    line = refused_by_both(tmp_path, text, capsys)
    assert "servers.b.config.innodb_buffer_pool_size: 512P is more" in line
