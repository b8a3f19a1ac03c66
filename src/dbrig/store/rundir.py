"""Run directories: versioned, self-describing, written so a crash loses at most one trial.

Layout of ``runs/<scenario>-<YYYYmmdd-HHMMSS>/``::

    run.json            format_version, scenario (resolved), environment, plan, status
    scenario.yaml       the file as given
    dbrig.log           every command started (passwords masked) and every event
    results.csv         tidy: one row per cell x repetition, a column per factor and metric
    results.parquet     the same, typed
    trials/c000-r1/     one folder per repetition of a cell:
        trial.json        factors, status, reason, timings, metrics, commands
        workload.out      the tool's raw output (re-parse it years later)
        intervals.csv     the tool's per-interval series on the run clock
        cpu.csv ...       samples (see docs/sampling.md)
    servers/<name>/     managed server: my.cnf, mysqld.err (kept), datadir and snapshots
                        (removed when the run completes, unless --keep-data)

A trial is written in ``trials/.c000-r1.partial/`` and renamed into place only
when complete, so a half-written trial is never mistaken for a finished one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dbrig import ownership
from dbrig.errors import ConfigError
from dbrig.util import files

FORMAT_VERSION = 1
RUN_JSON = "run.json"
TRIAL_JSON = "trial.json"


def write_json_atomic(path: Path, data: Any) -> None:
    files.write_json_atomic(path, data)


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
        version = run.meta().get("format_version")
        if not isinstance(version, int):
            raise ConfigError(
                f"{path / RUN_JSON}: no format_version: this is not a dbrig run directory"
            )
        if version > FORMAT_VERSION:
            raise ConfigError(
                f"{path / RUN_JSON}: format_version {version!r} is newer than this dbrig "
                f"understands ({FORMAT_VERSION}): upgrade dbrig"
            )
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

    def meta(self) -> dict[str, Any]:
        return read_json(self.path / RUN_JSON)

    def write_meta(self, data: Mapping[str, Any]) -> None:
        write_json_atomic(self.path / RUN_JSON, {"format_version": FORMAT_VERSION, **data})

    def update_meta(self, **changes: Any) -> None:
        self.write_meta({**self.meta(), **changes})

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

    def trial_records(self) -> dict[str, dict[str, Any]]:
        """Every finished trial's trial.json, by trial id."""
        records = {}
        if not self.trials_dir.is_dir():
            return records
        for folder in sorted(self.trials_dir.iterdir()):
            meta = folder / TRIAL_JSON
            if not folder.name.startswith(".") and meta.is_file():
                records[folder.name] = read_json(meta)
        return records

    # -- tidy results -----------------------------------------------------------------

    def write_results(self, frame: pd.DataFrame) -> None:
        csv_tmp = self.path / ".results.csv.tmp"
        frame.to_csv(csv_tmp, index=False)
        os.replace(csv_tmp, self.path / "results.csv")
        parquet_tmp = self.path / ".results.parquet.tmp"
        parquet_safe(frame).to_parquet(parquet_tmp, index=False)
        os.replace(parquet_tmp, self.path / "results.parquet")

    def results(self) -> pd.DataFrame:
        path = self.path / "results.csv"
        if not path.exists():
            return results_frame(self.trial_records().values())
        return pd.read_csv(path)


def parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet columns have one type: a factor mixing 128M and 1073741824 becomes text."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:
            kinds = {type(v) for v in out[column].dropna()}
            if len(kinds) > 1:
                out[column] = out[column].map(lambda v: v if v is None or v != v else str(v))
    return out


def results_frame(records: Any) -> pd.DataFrame:
    """One row per trial: identity, factors, status, timings, metrics."""
    rows = []
    for rec in records:
        row: dict[str, Any] = {
            "trial": rec["trial"],
            "cell": rec["cell"],
            "repetition": rec["repetition"],
            "server": rec["server"],
            "status": rec["status"],
            "reason": rec.get("reason"),
        }
        row.update(rec.get("factors", {}))
        row.update({f"{k}": v for k, v in rec.get("metrics", {}).items()})
        row.update({f"time_{k}": v for k, v in rec.get("timings", {}).items()})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = frame.sort_values(["cell", "repetition"], kind="stable").reset_index(drop=True)
    return frame


def find_runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob(f"*/{RUN_JSON}"))
