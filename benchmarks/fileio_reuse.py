#!/usr/bin/env python3
"""What reusing fileio's prepared files across cells saves: set-up time, with and without.

A matrix over ``file_test_mode`` (seqwr, seqrd, rndrd, rndwr, rndrw: the
playbook's five modes) has one data set: the same ``file_num`` and
``file_total_size``. dbrig prepares it once and every cell reuses the folder
(side B). Without reuse, each cell prepares its own files, as a script running
``sysbench fileio prepare``/``cleanup`` around every run does (side A). Both
sides go through the real code: ``run.datasets.ready_for_trial`` with a
:class:`~dbrig.run.workdir.WorkDirHandle`, real ``sysbench fileio prepare``
writing real files; side A gets a fresh handle per cell.

Rounds alternate A/B, B/A so drift of the shared host lands on both sides.
Prints each round's set-up seconds, then the ratio A/B (time without reuse
over time with it) as a median with its range and interquartile range.

    .venv/bin/python benchmarks/fileio_reuse.py --rounds 6 --size 256M --cells 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dbrig import proc
from dbrig.run.datasets import ready_for_trial
from dbrig.run.workdir import WorkDirHandle
from dbrig.scenario import ManagedServer
from dbrig.tools.sysbench import SysbenchParams, SysbenchTool

MODES = ("seqwr", "seqrd", "rndrd", "rndwr", "rndrw")


def cells(size: str, n: int) -> list[SysbenchTool]:
    return [
        SysbenchTool(
            SysbenchParams(
                test="fileio", file_num=8, file_total_size=size, file_test_mode=MODES[i % 5]
            )
        )
        for i in range(n)
    ]


def setup_seconds(tools: list[SysbenchTool], parent: Path, binary: Path, reuse: bool) -> float:
    """Set-up time of every cell, one after the other (the files removed at the end)."""
    handle = WorkDirHandle("none", parent)
    started = time.monotonic()
    try:
        for tool in tools:
            if not reuse:
                handle.close()  # this cell's files are its own: prepared again
                handle = WorkDirHandle("none", parent)
            ready_for_trial(handle, tool, ManagedServer(), binary)
    finally:
        handle.close()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--size", default="256M", help="file_total_size of the data set")
    parser.add_argument("--cells", type=int, default=5, help="cells sharing the data set")
    parser.add_argument("--dir", type=Path, default=None, help="where the files go")
    args = parser.parse_args()
    binary = proc.which(("sysbench",), package="sysbench")
    tools = cells(args.size, args.cells)
    ratios = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        parent = Path(tmp)
        for i in range(args.rounds):
            order = (False, True) if i % 2 == 0 else (True, False)
            seconds = {reuse: setup_seconds(tools, parent, binary, reuse) for reuse in order}
            ratio = seconds[False] / seconds[True]
            ratios.append(ratio)
            print(
                f"round {i + 1}: without reuse {seconds[False]:.2f} s, "
                f"with reuse {seconds[True]:.2f} s, ratio {ratio:.2f}"
            )
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    print(
        f"set-up time without/with reuse, {args.cells} cells of {args.size}: median ratio "
        f"{statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}, "
        f"IQR {q1:.2f}-{q3:.2f}, {len(ratios)} rounds)"
    )


if __name__ == "__main__":
    main()
