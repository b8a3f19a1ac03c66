"""One module per subcommand; :mod:`dbrig.cli` loads each only when it is used.

Each follows the same conventions: a plain function does the work and returns a
result object (tests call it), the click command only adapts flags and exit
codes, and bad input raises :class:`dbrig.errors.DbrigError` (``ConfigError``:
exit 2), which :func:`dbrig.cli.main` turns into one line on stderr.

:data:`COMMANDS` names them without importing them: ``dbrig --version``, ``--help`` of
the group and shell completion of a subcommand's name then cost milliseconds, not the
two seconds that pandas, scipy and matplotlib take to import. ``from dbrig.commands
import run_command`` still works (a module ``__getattr__`` imports on first use).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import click

# name -> (module, attribute, one line of help), in the order --help lists them.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("dbrig.commands.run", "run_command", "Run a scenario (a file or a shipped name)."),
    "show": ("dbrig.commands.show", "show_command", "Print a saved run's result table."),
    "report": ("dbrig.commands.report", "report_command", "Write a saved run's HTML report."),
    "compare": ("dbrig.commands.compare", "compare_command", "Candidate versus baseline."),
    "history": ("dbrig.commands.history", "history_command", "One metric over many runs."),
    "publish": ("dbrig.commands.publish", "publish_command", "A static site of saved runs."),
    "merge": ("dbrig.commands.merge", "merge_command", "Join shard runs into one run."),
    "doctor": ("dbrig.commands.doctor", "doctor_command", "What this machine has and lacks."),
    "examples": ("dbrig.commands.examples", "examples_command", "The shipped scenarios."),
    "cache": ("dbrig.commands.cache", "cache_command", "The snapshot cache across runs."),
}


def load(name: str) -> click.Command:
    """The click command called ``name`` (imports its module)."""
    module, attribute, _ = COMMANDS[name]
    return getattr(importlib.import_module(module), attribute)


def __getattr__(attribute: str) -> Any:
    if attribute == "ALL":
        return tuple(load(name) for name in COMMANDS)
    for name, (_, command_attribute, _) in COMMANDS.items():
        if attribute == command_attribute:
            return load(name)
    raise AttributeError(f"module 'dbrig.commands' has no attribute {attribute!r}")
