"""A second MariaDB build through server.basedir: Debian's previous 10.11 build, unpacked
by scripts/fetch-old-mariadb.sh, initialised, started and benchmarked by dbrig.

The build is fetched once into the checkout's .servers/ (or DBRIG_SERVERS_DIR), the same
cache `make old-server` fills; without network or without a second build in the apt
sources the test is skipped with the script's own reason.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dbrig.server.binary import find_server
from tests.integration.helpers import (
    only_run_dir,
    read_json,
    run_main,
    tiny_scenario,
    write_scenario,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "scripts" / "fetch-old-mariadb.sh"
_FETCH_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def old_basedir() -> Path:
    servers = Path(os.environ.get("DBRIG_SERVERS_DIR", ROOT / ".servers"))
    previous = servers / "previous" / "usr"
    if not (previous / "sbin" / "mariadbd").is_file():
        try:
            done = subprocess.run(
                [str(FETCH)],
                capture_output=True,
                text=True,
                timeout=_FETCH_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"{FETCH.name} took over {_FETCH_TIMEOUT_S} s (no network?)")
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"no previous MariaDB build to run: {reason}")
    return previous


def test_the_previous_build_runs_as_a_managed_server(
    tmp_path: Path, old_basedir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    installed = find_server()
    scenario = tiny_scenario(
        name="upgrade",
        servers={"old": {"basedir": str(old_basedir), "config": {"innodb_log_file_size": "16M"}}},
        matrix={"server": ["old"]},
    )
    del scenario["server"]
    path = write_scenario(tmp_path / "upgrade.yaml", scenario)

    result = run_main(["run", str(path), "--out", str(tmp_path / "runs")], capsys)

    assert result.code == 0, result.err
    run = only_run_dir(tmp_path / "runs")
    old = read_json(run / "run.json")["servers"]["old"]
    # The build under the basedir ran, not the installed one; run.json names the
    # real directory even when the scenario went through the .servers/previous link.
    assert old["binary"] == str(old_basedir.resolve() / "sbin" / "mariadbd")
    assert old["version"].split("-")[0] != installed.version
    assert old["variables"]["basedir"].rstrip("/") == str(old_basedir.resolve())
    trial = read_json(next((run / "trials").iterdir()) / "trial.json")
    assert trial["status"] == "ok", trial.get("reason")
