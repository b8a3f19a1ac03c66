"""Expected failures and their exit codes.

Anything raised as a :class:`DbrigError` is an expected failure: the CLI prints
its one-line message (plus a hint, if any) and exits with its ``exit_code``.
Anything else is a bug and shows a traceback under ``--debug``.

Exit codes (documented in docs/cli.md):

====  =====================================================================
0     success
1     the run finished but at least one cell failed (or, for ``compare``,
      a regression was found with ``--fail-on-regression``)
2     bad input: scenario file, flag, missing tool or binary, unusable path
3     the environment failed at run time: the server did not start, a
      restore failed, the disk filled
70    an internal error (a bug): rerun with --debug for the traceback
130   interrupted (Ctrl-C, SIGTERM or SIGHUP); finished cells are saved
====  =====================================================================
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CELLS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 3
EXIT_BUG = 70
EXIT_INTERRUPTED = 130


class DbrigError(Exception):
    """An expected failure with a one-line message."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class ConfigError(DbrigError):
    """The scenario file or a command-line flag is wrong."""


class ToolMissing(DbrigError):
    """A binary dbrig needs is not installed."""


class UnsafePathError(DbrigError):
    """dbrig refuses to touch a directory it did not create."""


class ServerError(DbrigError):
    """The database server failed to initialise, start, answer or stop."""

    exit_code = EXIT_RUNTIME


class ServerInitError(ServerError):
    """A managed server could not initialise its datadir: no trial of it can run, so the
    run stops (exit 3) instead of failing every trial alike."""


class DiskFull(DbrigError):
    """A filesystem dbrig writes to is full: nothing more can be saved, so the run stops."""

    exit_code = EXIT_RUNTIME


class ToolError(DbrigError):
    """A benchmark tool failed (non-zero exit, FATAL, timeout)."""

    exit_code = EXIT_RUNTIME


class ParseError(DbrigError):
    """Tool output could not be understood."""

    exit_code = EXIT_RUNTIME


class Interrupted(DbrigError):
    """Ctrl-C, SIGTERM or SIGHUP arrived; everything started has been stopped."""

    exit_code = EXIT_INTERRUPTED
