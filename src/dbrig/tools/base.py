"""What every tool driver shares: how to describe the tool and the server it talks to.

A driver module (``sysbench.py``, ``mysqlslap.py``, ``stress_ng.py``) exposes:

- ``INFO``: a :class:`ToolInfo` (binary names, Debian package, version flag);
- a frozen pydantic ``...Params`` model: the scenario's ``workload.<tool>`` or
  ``interference.<tool>`` block, validated;
- ``build_command(params, ...) -> list[str]``: pure, an argv list, never a shell string;
- ``parse(text) -> ...Result``: pure, survives empty, truncated and error output.

Drivers never start processes, read clocks or look at global state: the runner does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolInfo:
    """How to find a tool and what to tell the user when it is missing."""

    name: str
    binaries: tuple[str, ...]  # tried in order, e.g. ("mariadb-slap", "mysqlslap")
    package: str  # the Debian package that provides it
    version_args: tuple[str, ...] = ("--version",)
