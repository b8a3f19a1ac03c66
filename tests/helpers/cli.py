"""One dbrig command run in-process with click's test runner."""

from __future__ import annotations

import click
from click.testing import CliRunner

from dbrig.errors import DbrigError


def invoke(command: click.Command, args: list[str]) -> tuple[int, str]:
    """Run ``command`` as dbrig.cli.main would: a DbrigError becomes its exit code and message."""
    result = CliRunner().invoke(command, args)
    if isinstance(result.exception, DbrigError):
        return result.exception.exit_code, str(result.exception)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output
