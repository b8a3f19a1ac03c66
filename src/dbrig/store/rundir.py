"""Run directories: versioned, self-describing, written so a crash loses at most one trial.

Layout of ``runs/<scenario>-<YYYYmmdd-HHMMSS>/``::

    run.json            format_version, scenario (resolved), environment, plan, status
    scenario.yaml       the file as given
    dbrig.log           every command started (passwords masked) and every event
    results.csv         tidy: one row per cell x repetition, a column per factor and metric;
                        current after every trial (rows in completion order while running),
                        sorted by cell and repetition when the run ends or stops
    results.parquet     the same, typed; written when the run ends or stops
    trials/c000-r1/     one folder per repetition of a cell:
        trial.json        factors, status, reason, timings, metrics, commands
        workload.out      the tool's raw output (re-parse it years later)
        intervals.csv     the tool's per-interval series on the run clock
        cpu.csv ...       samples (see docs/sampling.md)
    servers/<name>/     managed server: my.cnf, mysqld.err (kept), datadir and snapshots
                        (removed when the run completes, unless --keep-data)

A trial is written in ``trials/.c000-r1.partial/`` and renamed into place only
when complete, so a half-written trial is never mistaken for a finished one.
trial.json is the record; results.csv gets each trial's row as it is saved, and
both results files are rebuilt from the trials when a run resumes, ends or stops
(see :mod:`dbrig.store.results`).
run.json and trial.json are read and written through :mod:`dbrig.store.model`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from dbrig import ownership
from dbrig.errors import ConfigError, DiskFull
from dbrig.store.model import SavedRun, TrialResult
from dbrig.store.results import RESULTS_CSV, parquet_safe, results_frame
from dbrig.util import files

log = logging.getLogger(__name__)
_said_rebuilt: set[Path] = set()

RUN_JSON = "run.json"
TRIAL_JSON = "trial.json"


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: missing: this is not a complete dbrig run directory") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


class RunDir:
    """A run directory on disk."""

    def __init__(self, path: Path) -> None:
        # Absolute: the servers' datadirs live inside, and mariadb-install-db and mariadbd
        # resolve a relative datadir against their basedir (/usr), not our working directory.
        self.path = path.absolute()

    # -- creating and opening -------------------------------------------------------

    @classmethod
    def create(cls, out: Path, name: str, now: dt.datetime) -> RunDir:
        """A new, marked directory ``<out>/<name>-<timestamp>[-N]``; never an existing one."""
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: is a file, expected a directory")
        base = out / f"{name}-{now:%Y%m%d-%H%M%S}"
        try:
            out.mkdir(parents=True, exist_ok=True)
            for n in range(1, 1000):
                path = base if n == 1 else base.with_name(f"{base.name}-{n}")
                try:
                    path.mkdir()  # atomic: two runs started in one second get two directories
                    break
                except FileExistsError:
                    continue
            else:
                raise ConfigError(f"--out {out}: no free run directory name for {base.name}")
            ownership.mark_owned(path, role="run")
        except PermissionError:
            raise ConfigError(f"--out {out}: not writable") from None
        (path / "trials").mkdir()
        return cls(path)

    @classmethod
    def open(cls, path: Path) -> RunDir:
        if not path.is_dir():
            raise ConfigError(f"{path}: no such run directory")
        run = cls(path)
        run.saved()  # refuses a missing, unreadable or newer run.json
        return run

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run for this process: a --resume of a run still running is refused, since
        both would restore and start servers on the same datadirs."""
        handle = open(self.path / ".lock", "a+")  # noqa: SIM115 - held for the whole block
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "?"
                raise ConfigError(
                    f"{self.path}: another dbrig (pid {holder}) is running this run"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield
        finally:
            handle.close()

    # -- run.json -----------------------------------------------------------------

    def saved(self) -> SavedRun:
        """run.json, migrated to the current format."""
        path = self.path / RUN_JSON
        return SavedRun.from_json(read_json(path), path)

    def write_saved(self, saved: SavedRun) -> None:
        path = self.path / RUN_JSON
        try:
            files.write_json_atomic(path, saved.to_json())
        except DiskFull:
            # A full disk has no room for the copy; run.json must still say how the run
            # ended, so overwrite it where it is if its blocks already hold the new text.
            text = (json.dumps(saved.to_json(), indent=2, default=str) + "\n").encode()
            if len(text) > path.stat().st_blocks * 512:
                raise
            old = path.read_bytes()
            try:
                _overwrite(path, text)
            except OSError:
                _overwrite(path, old)  # a copy-on-write filesystem: put back what was there
                raise

    def update_saved(self, **changes: Any) -> SavedRun:
        saved = self.saved().replace(**changes)
        self.write_saved(saved)
        return saved

    # -- trials -------------------------------------------------------------------

    @property
    def trials_dir(self) -> Path:
        return self.path / "trials"

    def trial_path(self, trial_id: str) -> Path:
        return self.trials_dir / trial_id

    @contextlib.contextmanager
    def writing_trial(self, trial_id: str) -> Iterator[Path]:
        """A scratch folder that becomes ``trials/<id>`` only if the block finishes."""
        partial = self.trials_dir / f".{trial_id}.partial"
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
        try:
            yield partial
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        final = self.trial_path(trial_id)
        if final.exists():  # a failed trial being retried
            shutil.rmtree(final)
        os.replace(partial, final)

    def trial_ids(self) -> list[str]:
        """The ids of the finished trials, without reading them."""
        if not self.trials_dir.is_dir():
            return []
        return sorted(
            folder.name
            for folder in self.trials_dir.iterdir()
            if not folder.name.startswith(".") and (folder / TRIAL_JSON).is_file()
        )

    def trial(self, trial_id: str) -> TrialResult:
        """One finished trial's trial.json, migrated to the current format."""
        return read_trial(self.trial_path(trial_id))

    def trials(self) -> dict[str, TrialResult]:
        """Every finished trial, by trial id (sorted)."""
        return {trial_id: self.trial(trial_id) for trial_id in self.trial_ids()}

    def write_trial(self, folder: Path, result: TrialResult) -> None:
        """trial.json into a folder given by :meth:`writing_trial`."""
        files.write_json_atomic(folder / TRIAL_JSON, result.to_json())

    # -- tidy results -----------------------------------------------------------------

    def write_results(self, frame: pd.DataFrame) -> None:
        with files.replacing(self.path / RESULTS_CSV) as tmp:
            frame.to_csv(tmp, index=False)
        with files.replacing(self.path / "results.parquet") as tmp:
            parquet_safe(frame).to_parquet(tmp, index=False)

    def results(self) -> pd.DataFrame:
        """One row per saved trial (empty before the first trial is saved).

        trial.json is the record: a results.csv whose trials are not the saved ones (cut
        short by a full disk, edited, or a trial saved a moment ago) is rebuilt from them.
        """
        path = self.path / RESULTS_CSV
        if not path.exists():
            return results_frame(self.trials().values())
        try:
            frame = pd.read_csv(path)
        except pd.errors.EmptyDataError:  # written empty by an older dbrig
            return results_frame(self.trials().values())
        saved = self.trial_ids()
        listed = sorted(frame["trial"].astype(str)) if "trial" in frame else []
        if listed == saved or not saved:  # no trial folders: a results-only copy of a run
            return frame
        if path not in _said_rebuilt:  # once per command, though report reads it twice
            _said_rebuilt.add(path)
            log.warning(
                "%s lists %d trials but %d are saved in trials/: rebuilt from the trial folders",
                path,
                len(listed),
                len(saved),
            )
        return results_frame(self.trials().values())


def _overwrite(path: Path, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.write(data)
        handle.truncate()


def read_trial(folder: Path) -> TrialResult:
    path = folder / TRIAL_JSON
    return TrialResult.from_json(read_json(path), path)


def find_runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob(f"*/{RUN_JSON}"))
