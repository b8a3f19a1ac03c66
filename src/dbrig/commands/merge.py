"""``dbrig merge``: the pieces of one split run (``dbrig run --shard I/N``) as one run directory.

:func:`merge_runs` is the plain function behind the command. It checks that
the pieces are parts of one run (one scenario digest, one seed, the cells the
scenario expands to), that their environments agree by the rules ``compare``
uses (:func:`dbrig.analysis.compare.piece_differences`), and that every
planned trial is given exactly once. Then it writes one run directory in the
format of an unsharded run: run.json with every cell and the unsharded trial
order, ``trials/<id>/`` copied, results.csv and results.parquet rebuilt from
the trials; each piece's dbrig.log and server logs go under
``pieces/piece-<k>/``. run.json's ``merged`` key names the pieces and keeps
any environment difference that ``--allow-env-diff`` let through, and any
trial ``--allow-partial`` let be missing (the run's status is then
``partial``).

The inputs are only read. The output is built in a hidden directory next to
``--out`` and renamed into place at the end, so a merge that fails leaves
nothing behind.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from dbrig import ownership, scenario, store
from dbrig.analysis.compare import EnvDifference, piece_differences
from dbrig.commands.completion import complete_run_dir
from dbrig.commands.console import err_console, out_console, print_line
from dbrig.errors import ConfigError
from dbrig.report.compare_text import difference_line

SHOWN = 5  # trials or differences named in one error line


@dataclass(frozen=True)
class MergeOutcome:
    """What ``dbrig merge`` wrote: the run directory and what it holds."""

    run_dir: Path
    pieces: int
    trials: int
    planned: int
    missing: tuple[str, ...]
    differences: tuple[str, ...]  # "piece: what: a -> b", let through by --allow-env-diff


@dataclass(frozen=True)
class _Piece:
    number: int  # 1-based, in the order given
    path: Path
    run: store.RunDir
    saved: store.SavedRun
    trial_ids: tuple[str, ...]

    @property
    def name(self) -> str:
        shard = f" (shard {self.saved.shard.label})" if self.saved.shard else ""
        return f"{self.path}{shard}"


def merge_runs(
    runs: Sequence[Path],
    *,
    out: Path,
    allow_env_diff: bool = False,
    allow_partial: bool = False,
) -> MergeOutcome:
    """Merge the run directories ``runs`` into the new directory ``out``; raises DbrigError."""
    if not runs:
        raise ConfigError("merge: give the run directories to merge (RUN...)")
    _check_out(out, runs)
    pieces = [_open_piece(i, Path(p), allow_partial) for i, p in enumerate(runs, 1)]
    _check_same_run(pieces)
    plan = _full_plan(pieces[0])
    _check_cells(pieces, plan)
    missing = _missing_trials(pieces, plan, allow_partial)
    differences = _environment_differences(pieces, allow_env_diff)
    results = {t: p.run.trial(t) for p in pieces for t in p.trial_ids}
    saved = _merged_saved(pieces, plan, results, missing, differences)
    _write(out, pieces, saved, results)
    return MergeOutcome(
        run_dir=out.absolute(),
        pieces=len(pieces),
        trials=len(results),
        planned=len(plan.trials),
        missing=tuple(missing),
        differences=tuple(_difference_text(p, d) for p, d in differences),
    )


# -- checks ------------------------------------------------------------------------------


def _check_out(out: Path, runs: Sequence[Path]) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: is a file, expected a new or empty directory")
    if out.is_dir() and any(out.iterdir()):
        raise ConfigError(f"--out {out}: exists and is not empty; merge into a new directory")
    target = out.resolve()
    for run in runs:
        source = Path(run).resolve()
        if target == source or source in target.parents:
            raise ConfigError(f"--out {out}: is inside {run}; the merged runs are never changed")


def _open_piece(number: int, path: Path, allow_partial: bool) -> _Piece:
    run = store.RunDir.open(path)
    saved = run.saved()
    if saved.status != "complete" and not allow_partial:
        raise ConfigError(
            f"merge: {path}: the run is {saved.status or 'of unknown status'}, not complete "
            f"(finish it with: dbrig run --resume {path}, or merge with --allow-partial)"
        )
    if saved.raw_scenario is None or saved.digest is None or saved.seed is None:
        raise ConfigError(
            f"merge: {path}: run.json has no raw_scenario, digest or seed to merge by"
        )
    return _Piece(number, path, run, saved, tuple(run.trial_ids()))


def _check_same_run(pieces: Sequence[_Piece]) -> None:
    first = pieces[0]
    for piece in pieces[1:]:
        if piece.path.resolve() == first.path.resolve():
            raise ConfigError(f"merge: {piece.path} is given twice")
        if piece.saved.digest != first.saved.digest:
            raise ConfigError(
                f"merge: {piece.path}: scenario digest {piece.saved.digest} differs from "
                f"{first.path}'s {first.saved.digest}: pieces of one run come from one "
                "scenario file"
            )
        if piece.saved.seed != first.saved.seed:
            raise ConfigError(
                f"merge: {piece.path}: seed {piece.saved.seed} differs from {first.path}'s "
                f"{first.saved.seed}: run every shard with the same --seed"
            )


def _full_plan(piece: _Piece) -> scenario.Plan:
    """The unsharded plan the pieces were cut from: every cell and the seeded order."""
    saved = piece.saved
    assert saved.raw_scenario is not None and saved.seed is not None
    cores = (saved.environment.get("host") or {}).get("cpu_count")
    return scenario.plan_from_dict(
        dict(saved.raw_scenario),
        source=str(piece.path / "scenario.yaml"),
        seed=saved.seed,
        cpu_count=cores,
    )


def _check_cells(pieces: Sequence[_Piece], plan: scenario.Plan) -> None:
    planned = {c.id: _plain(c.factor_dict) for c in plan.cells}
    for piece in pieces:
        for cell in piece.saved.cells:
            if planned.get(cell.cell) != _plain(dict(cell.factors)):
                raise ConfigError(
                    f"merge: {piece.path}: cell {cell.cell} is not the scenario's cell "
                    f"{cell.cell} (was it run by another dbrig version, or with nproc in "
                    "the matrix on a machine with another CPU count?)"
                )


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _missing_trials(
    pieces: Sequence[_Piece], plan: scenario.Plan, allow_partial: bool
) -> list[str]:
    """The planned trials no piece holds; ConfigError for a trial held twice or unplanned."""
    planned = [t.id for t in plan.trials]
    known = set(planned)
    holder: dict[str, _Piece] = {}
    for piece in pieces:
        for trial_id in piece.trial_ids:
            if trial_id not in known:
                raise ConfigError(
                    f"merge: {piece.path}: trial {trial_id} is not in the scenario's plan"
                )
            if trial_id in holder:
                raise ConfigError(
                    f"merge: trial {trial_id} is in both {holder[trial_id].name} and "
                    f"{piece.name}: the pieces overlap (run each --shard I/N once)"
                )
            holder[trial_id] = piece
    missing = [t for t in planned if t not in holder]
    if missing and not allow_partial:
        raise ConfigError(
            f"merge: {len(missing)} of {len(planned)} trials are missing "
            f"({_some(missing)}){_shards_given(pieces)}; merge what there is with "
            "--allow-partial"
        )
    return missing


def _shards_given(pieces: Sequence[_Piece]) -> str:
    shards = [p.saved.shard for p in pieces if p.saved.shard is not None]
    if not shards:
        return ""
    count = shards[0].count
    absent = sorted(set(range(1, count + 1)) - {s.index for s in shards if s.count == count})
    given = ", ".join(s.label for s in shards)
    lacking = f", missing shard {', '.join(f'{i}/{count}' for i in absent)}" if absent else ""
    return f" (shards given: {given}{lacking})"


def _some(items: Sequence[str]) -> str:
    more = f", +{len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _environment_differences(
    pieces: Sequence[_Piece], allow_env_diff: bool
) -> list[tuple[_Piece, EnvDifference]]:
    base = pieces[0].saved.to_json()
    found = [
        (piece, diff)
        for piece in pieces[1:]
        for diff in piece_differences(base, piece.saved.to_json())
    ]
    if found and not allow_env_diff:
        lines = [_difference_text(p, d) for p, d in found]
        raise ConfigError(
            f"merge: the pieces' environments differ from {pieces[0].path}'s "
            f"({'; '.join(lines[:SHOWN])}{'; ...' if len(lines) > SHOWN else ''}): "
            "run the shards on alike machines, or merge with --allow-env-diff "
            "(the differences are then listed in the merged run and its report)"
        )
    return found


def _difference_text(piece: _Piece, diff: EnvDifference) -> str:
    return f"{piece.path.name}: {difference_line(diff)}"


# -- the merged run ----------------------------------------------------------------------


def _merged_saved(
    pieces: Sequence[_Piece],
    plan: scenario.Plan,
    results: dict[str, store.TrialResult],
    missing: Sequence[str],
    differences: Sequence[tuple[_Piece, EnvDifference]],
) -> store.SavedRun:
    first = pieces[0].saved
    servers: dict[str, Any] = {}
    for piece in pieces:
        servers.update({k: v for k, v in piece.saved.servers.items() if k not in servers})
    merged = {
        "pieces": [_piece_record(p) for p in pieces],
        "environment_differences": [
            {"piece": str(p.path), "text": difference_line(d), "what": d.what}
            | {"base": d.base, "piece_value": d.candidate, "server": d.server}
            for p, d in differences
        ],
        "missing": list(missing),
    }
    return first.replace(
        status="partial" if missing else "complete",
        created_at=_earliest([p.saved.created_at for p in pieces]) or first.created_at,
        cells=tuple(store.CellPlan(c.id, c.server, c.factor_dict) for c in plan.cells),
        trials=tuple(t.id for t in plan.trials),
        servers=servers,
        finished_at=_latest([p.saved.finished_at for p in pieces]) or first.finished_at,
        trials_saved=len(results),
        trials_failed=sum(not r.ok for r in results.values()),
        shard=None,
        extra={**first.extra, "merged": merged},
    )


def _piece_record(piece: _Piece) -> dict[str, Any]:
    return {
        "path": str(piece.path.absolute()),
        "folder": f"pieces/piece-{piece.number}",
        "shard": piece.saved.shard.to_json() if piece.saved.shard else None,
        "status": piece.saved.status,
        "created_at": piece.saved.created_at,
        "hostname": (piece.saved.environment.get("host") or {}).get("hostname"),
        "trials": len(piece.trial_ids),
    }


def _times(values: Sequence[str | None]) -> list[tuple[dt.datetime, str]]:
    out = []
    for value in values:
        try:
            when = dt.datetime.fromisoformat(value or "")
        except ValueError:
            continue
        aware = when if when.tzinfo else when.astimezone()
        out.append((aware, str(value)))
    return out


def _earliest(values: Sequence[str | None]) -> str | None:
    times = _times(values)
    return min(times)[1] if times else None


def _latest(values: Sequence[str | None]) -> str | None:
    times = _times(values)
    return max(times)[1] if times else None


def _write(
    out: Path,
    pieces: Sequence[_Piece],
    saved: store.SavedRun,
    results: dict[str, store.TrialResult],
) -> None:
    """Build the run in a hidden sibling of ``out``, then rename it into place."""
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{out.name}.merging-", dir=parent))
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    try:
        building.chmod(0o777 & ~_umask())  # mkdtemp's 0700, as a plain mkdir would make it
        ownership.mark_owned(building, role="run")
        run = store.RunDir(building)
        run.trials_dir.mkdir()
        for piece in pieces:
            for trial_id in piece.trial_ids:
                shutil.copytree(piece.run.trial_path(trial_id), run.trial_path(trial_id))
            _copy_logs(piece, building / "pieces" / f"piece-{piece.number}")
        _copy_file(pieces[0].path / "scenario.yaml", building / "scenario.yaml")
        (building / "dbrig.log").write_text(
            "".join(f"merged from {p.name}: see pieces/piece-{p.number}/\n" for p in pieces)
        )
        run.write_saved(saved)
        if results:
            run.write_results(store.results_frame(results[t] for t in sorted(results)))
        if out.is_dir():
            out.rmdir()  # empty, checked before; rename cannot replace it on every system
        os.rename(building, out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _copy_logs(piece: _Piece, target: Path) -> None:
    """The piece's dbrig.log and each server's files (my.cnf, mysqld.err), no datadirs."""
    target.mkdir(parents=True)
    _copy_file(piece.path / "dbrig.log", target / "dbrig.log")
    servers = piece.path / "servers"
    if servers.is_dir():
        for server in sorted(p for p in servers.iterdir() if p.is_dir()):
            for item in sorted(p for p in server.iterdir() if p.is_file()):
                _copy_file(item, target / "servers" / server.name / item.name)


def _copy_file(source: Path, target: Path) -> None:
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


@click.command("merge")
@click.argument(
    "runs",
    nargs=-1,
    required=True,
    type=click.Path(path_type=Path),
    shell_complete=complete_run_dir,
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="The merged run directory: must not exist, or be empty.",
)
@click.option(
    "--allow-env-diff",
    is_flag=True,
    help="Merge pieces whose environments differ (listed in run.json and the report).",
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Merge even with trials missing; the merged run's status is then 'partial'.",
)
def merge_command(
    runs: tuple[Path, ...], out: Path, allow_env_diff: bool, allow_partial: bool
) -> None:
    """Merge the shard runs RUN... (dbrig run --shard I/N) into one run directory."""
    outcome = merge_runs(runs, out=out, allow_env_diff=allow_env_diff, allow_partial=allow_partial)
    for line in outcome.differences:
        print_line(err_console(), f"warning: environments differ: {line}")
    if outcome.missing:
        print_line(
            err_console(),
            f"warning: {len(outcome.missing)} of {outcome.planned} trials missing: "
            f"{_some(list(outcome.missing))}; the merged run is partial",
        )
    print_line(
        out_console(),
        f"merged {outcome.pieces} runs, {outcome.trials} of {outcome.planned} trials: "
        f"{outcome.run_dir}",
    )
