"""``dbrig examples``: the scenarios shipped in the package, listed or copied out to edit."""

from __future__ import annotations

from pathlib import Path

import click

from dbrig.commands.completion import complete_shipped
from dbrig.commands.console import out_console, print_line
from dbrig.scenario.shipped import ShippedScenario, copy_shipped, shipped_scenarios


def listing(scenarios: list[ShippedScenario]) -> list[str]:
    """One line per shipped scenario: its name (what `dbrig run NAME` takes), its description."""
    width = max((len(s.name) for s in scenarios), default=0)
    return [f"{s.name:<{width}}  {s.description}".rstrip() for s in scenarios]


@click.group("examples", invoke_without_command=True)
@click.pass_context
def examples_command(ctx: click.Context) -> None:
    """List the shipped scenarios; `dbrig run NAME` runs one, `examples copy NAME` copies it."""
    if ctx.invoked_subcommand is not None:
        return
    console = out_console()
    for line in listing(shipped_scenarios()):
        print_line(console, line)


@examples_command.command("copy")
@click.argument("name", shell_complete=complete_shipped)
@click.argument(
    "directory", required=False, default=Path("."), type=click.Path(path_type=Path, file_okay=False)
)
@click.option("--force", is_flag=True, help="Replace a file of that name in DIRECTORY.")
def copy_command(name: str, directory: Path, force: bool) -> None:
    """Write shipped scenario NAME to DIRECTORY (default: here) as NAME.yaml, to edit."""
    target = copy_shipped(name, directory, force=force)
    print_line(out_console(), f"wrote {target} (edit it, then: dbrig run {target})")
