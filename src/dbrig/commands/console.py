"""Consoles and one-line output: all ``dbrig`` needs to report an error, so the command
line can answer ``--version``, ``--help`` and completion without loading a command.

Both consoles write to ``sys.stdout`` and ``sys.stderr`` as they are at each print, which
``cli.main`` guards (:func:`guarded_std_streams`): a stream closed under dbrig (a pipe's
reader gone, a terminal hung up) drops what is printed instead of raising.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from dbrig.util.streams import closed_streams, guarded_std_streams

__all__ = [
    "closed_streams",
    "err_console",
    "guarded_std_streams",
    "out_console",
    "print_line",
]


def out_console() -> Console:
    # Off a terminal (CI logs, pipes) rich would wrap tables at 80 columns.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def err_console() -> Console:
    return Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def print_line(console: Console, text: str, style: str = "") -> None:
    """One line as is: no rich markup, never wrapped, so paths and values stay whole."""
    console.print(Text(text, style=style), soft_wrap=True)
