"""A workload's own files (a Lua script and the modules it requires): kept in the run,
run from there, and asked which commands they define when the plan is built.

- :func:`probed_plan` (the plan, before anything exists): each distinct folder is
  copied to a temporary folder, exactly the files the run will keep, and the tool's
  probe runs on that copy (so a module left out of ``files:`` fails here, in one line,
  and the dry run refuses what the run would); the cells' blocks get the answer.
- :func:`keep_inputs` (the run's start): the files copied into ``inputs/<name>/`` of the
  run directory; run.json names each copy, its source, digest, files and search path.
- :func:`at_copies` (the runner): the trials' cells rewritten to read that copy, so what
  runs, prepare included, is what the run keeps.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dbrig import proc
from dbrig.errors import ConfigError
from dbrig.scenario import Cell, Plan, Trial
from dbrig.tools.base import FolderWorkload, InputFolder
from dbrig.tools.registry import field_name, workload_for
from dbrig.util import files as util_files

INPUTS_DIR = "inputs"
PROBE_TIMEOUT_S = 60.0


def folder_workload(cell: Cell) -> tuple[FolderWorkload, InputFolder] | None:
    """The cell's workload and its files, when it reads a folder of its own."""
    tool = workload_for(cell.scenario.workload)
    if not isinstance(tool, FolderWorkload):
        return None
    folder = tool.input_folder()
    return None if folder is None else (tool, folder)


def with_params(cell: Cell, params: BaseModel) -> Cell:
    """``cell`` whose workload block holds ``params`` in place of its tool's own."""
    tool = workload_for(cell.scenario.workload)
    block = cell.scenario.workload.model_copy(update={field_name(tool.key): params})
    scenario = cell.scenario.model_copy(update={"workload": block})
    return dataclasses.replace(cell, scenario=scenario)


def copy_folder(folder: InputFolder, dest: Path) -> Path:
    """The folder's files copied under ``dest`` (made), atomically each; ``dest``."""
    for name in folder.files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        util_files.write_bytes_atomic(target, (folder.root / name).read_bytes())
    return dest


# --- the plan: which commands a folder workload defines ---------------------------------------


def probed_plan(plan: Plan, binary: Path, *, strict: bool = True) -> Plan:
    """``plan`` with each folder workload's commands filled in from its probe (declared
    ones are kept). ``strict=False`` (the dry run): a tool not installed leaves them
    unknown. Raises ConfigError naming the scenario for a workload that does not load."""
    answers: dict[tuple[str, str], tuple[str, Path]] = {}

    def probed(cells: Iterable[Cell]) -> tuple[Cell, ...]:
        return tuple(_probed_cell(plan.source, cell, binary, answers, strict) for cell in cells)

    cells = probed(plan.cells)
    shard = plan.shard
    if shard is not None:
        by_id = {c.id: c for c in cells}
        all_cells = tuple(by_id.get(c.id) or c for c in probed(shard.all_cells))
        shard = dataclasses.replace(shard, all_cells=all_cells)
    return dataclasses.replace(plan, cells=cells, shard=shard)


def _probed_cell(
    source: str,
    cell: Cell,
    binary: Path,
    answers: dict[tuple[str, str], tuple[str, Path]],
    strict: bool,
) -> Cell:
    found = folder_workload(cell)
    if found is None:
        return cell
    tool, folder = found
    key = (folder.digest, folder.main)
    if key not in answers:
        with tempfile.TemporaryDirectory(prefix="dbrig-probe-") as tmp:
            root = copy_folder(folder, Path(tmp) / folder.name)
            empty = Path(tmp) / "cwd"
            empty.mkdir()
            probe = tool.commands_probe(binary, root, empty)
            if probe is None:
                return cell  # its commands are declared
            rc, output = proc.capture(
                probe.argv, timeout_s=PROBE_TIMEOUT_S, input=probe.stdin.encode()
            )
        if rc == 127 and not strict:
            return cell  # the dry run names the missing tool elsewhere
        answers[key] = (output, root)
    output, root = answers[key]
    try:
        return with_params(cell, tool.probed(output, root))
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc.message}", hint=exc.hint) from None


def trials_of(plan: Plan, trials: Sequence[Trial]) -> tuple[Trial, ...]:
    """``trials`` (by id) as the trials of ``plan``: their cells are the probed ones."""
    cells = {c.id: c for c in (plan.shard.all_cells if plan.shard else plan.cells)}
    return tuple(dataclasses.replace(t, cell=cells[t.cell.id]) for t in trials)


# --- the run: its own copy ---------------------------------------------------------------------


def copy_root(run_path: Path, folder: InputFolder) -> Path:
    return run_path / INPUTS_DIR / folder.name


def keep_inputs(cells: Iterable[Cell], run_path: Path) -> dict[str, dict[str, Any]]:
    """Copy each folder workload's files into ``inputs/<name>/`` of the run; for run.json,
    by that name: the source folder, the main file, the files, their digest and the
    variables that put the copy on the tool's search path."""
    kept: dict[str, dict[str, Any]] = {}
    for cell in cells:
        found = folder_workload(cell)
        if found is None or found[1].name in kept:
            continue
        tool, folder = found
        root = copy_folder(folder, copy_root(run_path, folder))
        kept[folder.name] = {
            "source": str(folder.root),
            "main": folder.main,
            "files": list(folder.files),
            "sha256": folder.digest,
            "search_path": tool.search_path(root),
        }
    return kept


def check_copies(cells: Iterable[Cell], run_path: Path) -> None:
    """A resumed run runs the copies its start kept: refuse one whose files have changed
    since (their digest names a copy the run does not hold)."""
    for cell in cells:
        found = folder_workload(cell)
        if found is not None and not copy_root(run_path, found[1]).is_dir():
            folder = found[1]
            raise ConfigError(
                f"--resume {run_path}: the workload's files in {folder.root} changed since "
                f"the run started (no {INPUTS_DIR}/{folder.name} in it)",
                hint="start a new run, or put the files back as they were",
            )


def at_copy(cell: Cell, run_path: Path) -> Cell:
    """``cell`` whose workload reads the copy of its files in the run at ``run_path``."""
    found = folder_workload(cell)
    if found is None:
        return cell
    tool, folder = found
    return with_params(cell, tool.at_copy(copy_root(run_path, folder)))


def at_copies(trials: Iterable[Trial], run_path: Path) -> list[Trial]:
    """The trials whose workload reads a folder of its own, reading the run's copy."""
    moved: dict[str, Cell] = {}
    for trial in trials:
        moved.setdefault(trial.cell.id, at_copy(trial.cell, run_path))
    return [dataclasses.replace(t, cell=moved[t.cell.id]) for t in trials]
