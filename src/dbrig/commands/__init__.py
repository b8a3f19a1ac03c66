"""One module per subcommand; :mod:`dbrig.cli` registers each with ``add_command``.

Each follows the same conventions: a plain function does the work and returns a
result object (tests call it), the click command only adapts flags and exit
codes, and bad input raises :class:`dbrig.errors.DbrigError` (``ConfigError``:
exit 2), which :func:`dbrig.cli.main` turns into one line on stderr.
"""

from dbrig.commands.cache import cache_command
from dbrig.commands.compare import compare_command
from dbrig.commands.doctor import doctor_command
from dbrig.commands.examples import examples_command
from dbrig.commands.history import history_command
from dbrig.commands.merge import merge_command
from dbrig.commands.report import report_command
from dbrig.commands.run import run_command
from dbrig.commands.show import show_command

ALL = (
    run_command,
    show_command,
    report_command,
    compare_command,
    history_command,
    doctor_command,
    examples_command,
    cache_command,
    merge_command,
)

__all__ = [
    "ALL",
    "cache_command",
    "compare_command",
    "doctor_command",
    "examples_command",
    "history_command",
    "merge_command",
    "report_command",
    "run_command",
    "show_command",
]
