"""Command line: turns flags into function calls and results into output and exit codes.

The one error boundary is :func:`main`: a :class:`DbrigError` prints one line
(``dbrig: error: ...``) and exits with its code; anything else is a bug and
shows its traceback with ``--debug``.
"""

from __future__ import annotations

import difflib
import logging
import os
import signal
import sys
import traceback

import click
from click.shell_completion import CompletionItem

from dbrig import __version__, commands, proc
from dbrig.commands.console import err_console, guarded_std_streams, print_line
from dbrig.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    DbrigError,
)

log = logging.getLogger(__name__)


class LazyGroup(click.Group):
    """Subcommands imported when used (:data:`dbrig.commands.COMMANDS`), so ``--version``
    and completing a subcommand's name do not import pandas, scipy and matplotlib."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *commands.COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        found = super().get_command(ctx, name)  # added with add_command (tests do)
        if found is None and name in commands.COMMANDS:
            found = commands.load(name)
        return found

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if self.get_command(ctx, name) is None and not name.startswith("-"):
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command '{name}'. Did you mean '{close[0]}'?")
        return super().resolve_command(ctx, args)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        names = [
            CompletionItem(name, help=commands.COMMANDS[name][2])
            for name in self.list_commands(ctx)
            if name.startswith(incomplete) and name in commands.COMMANDS
        ]
        # the group's own options (--debug, --version), without importing a command
        return names + click.Command.shell_complete(self, ctx, incomplete)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dbrig")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Benchmark MySQL and MariaDB from one YAML scenario."""
    ctx.obj = {"debug": debug}
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def main(argv: list[str] | None = None) -> None:
    """The one error boundary: every way out stops every child first, then sets the code."""
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    # A log line that cannot be written (a full disk holding dbrig.log) is dropped, not
    # printed as a traceback: the error that matters is reported on its own.
    logging.raiseExceptions = debug
    # A closed pipe is an error a write returns (EPIPE), never a signal that kills dbrig
    # mid-run (Python ignores SIGPIPE itself; a process embedding dbrig may not).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    with guarded_std_streams():
        try:
            code = _run_cli(argv, debug)
        finally:
            proc.stop_all()
    sys.exit(code)


def _run_cli(argv: list[str] | None, debug: bool) -> int:
    try:
        cli.main(args=argv, prog_name="dbrig", standalone_mode=False)
    except DbrigError as exc:
        if debug:
            traceback.print_exc()
        return _said(f"dbrig: error: {exc}", exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        return _said("dbrig: interrupted", EXIT_INTERRUPTED)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "dbrig"
        print_line(err_console(), f"dbrig: error: {exc.format_message()} (see: {command} --help)")
        return EXIT_BAD_INPUT
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except Exception:
        if debug:
            raise
        return _said(
            "dbrig: internal error (a bug): "
            f"{traceback.format_exc().strip().splitlines()[-1]}; rerun with --debug",
            EXIT_BUG,
        )
    return EXIT_OK


def _said(line: str, code: int) -> int:
    """The last line on stderr, and in dbrig.log when the command keeps one (a run's
    outcome must be there even when nobody reads stderr any more)."""
    print_line(err_console(), line)
    log.info("%s (exit %d)", line, code)
    return code


if __name__ == "__main__":  # pragma: no cover
    main()
    os._exit(0)
