"""Click commands kept out of cli.py; the cli group registers them with ``add_command``.

Each follows cli.py's conventions: bad input raises :class:`dbrig.errors.DbrigError`
(``ConfigError``: exit 2), which :func:`dbrig.cli.main` turns into one line on stderr.
"""

from dbrig.commands.compare import compare_command
from dbrig.commands.history import history_command

__all__ = ["compare_command", "history_command"]
