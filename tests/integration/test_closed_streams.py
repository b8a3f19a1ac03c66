"""A closed stdout or stderr never changes a run's outcome: ``dbrig run ... 2>&1 | head -3``
and ``| true`` run to the end, and run.json and dbrig.log say what happened."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.integration.helpers import (
    DBRIG,
    only_run_dir,
    read_json,
    tiny_scenario,
    write_scenario,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "reader, flags",
    [("head -3", []), ("true", ["--no-report"])],
    ids=["head-3", "true"],
)
def test_a_run_whose_output_pipe_closes_goes_on_and_says_so_in_its_log(
    tmp_path: Path, reader: str, flags: list[str]
) -> None:
    scenario = write_scenario(tmp_path / "s.yaml", tiny_scenario())
    out = tmp_path / "runs"
    argv = [str(DBRIG), "run", str(scenario), "--out", str(out), *flags]
    # The pipeline's status is dbrig's, not the reader's.
    shell = f"{shlex.join(argv)} 2>&1 | {reader}; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(
        ["bash", "-c", shell],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(done.stdout.splitlines()) == (3 if reader == "head -3" else 0)

    run = only_run_dir(out)
    meta = read_json(run / "run.json")
    assert (meta["status"], meta["trials_saved"], meta["trials_failed"]) == ("complete", 1, 0)
    log = (run / "dbrig.log").read_text()
    closed = [line for line in log.splitlines() if "stderr is closed" in line]
    assert len(closed) == 1 and "Broken pipe" in closed[0], log
    assert "ok: " in log, "the progress lines nobody could read are in dbrig.log"
    assert "run ended: 1 of 1 trials ok, 0 failed" in log
