"""Shell completion callbacks: saved runs and shipped scenarios for click's own mechanism.

``eval "$(_DBRIG_COMPLETE=bash_source dbrig)"`` installs it (docs/cli.md); click
completes subcommands and flags by itself, these complete the arguments. Each
list starts with a ``dir`` or ``file`` item: zsh and fish then add the shell's
own path completion, bash falls back to it when no name matches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from dbrig.scenario.shipped import shipped_names
from dbrig.store.rundir import RUN_JSON

# Where `dbrig run` puts runs unless --out or the scenario's out: says otherwise.
DEFAULT_RUNS_DIR = Path("runs")


def complete_run_dir(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Saved runs (folders holding run.json) in ./runs and in the folder being typed."""
    runs = [p for p in dict.fromkeys(_run_dirs(incomplete)) if p.startswith(incomplete)]
    return [CompletionItem(incomplete, type="dir"), *map(CompletionItem, runs)]


def complete_scenario(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shipped scenario names, and files."""
    return [CompletionItem(incomplete, type="file"), *complete_shipped(ctx, param, incomplete)]


def complete_shipped(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    return [CompletionItem(n) for n in shipped_names() if n.startswith(incomplete)]


def _run_dirs(incomplete: str) -> Iterator[str]:
    typed = os.path.dirname(incomplete)
    if not typed:
        yield from (str(p) for p in _saved_runs(DEFAULT_RUNS_DIR))
    yield from (os.path.join(typed, p.name) for p in _saved_runs(Path(typed or ".")))


def _saved_runs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if (p / RUN_JSON).is_file())
    except OSError:
        return []
