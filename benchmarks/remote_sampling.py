#!/usr/bin/env python3
"""What sampling a remote host costs per tick: the agent against reading /proc over the link.

Two ways to get the server host's counters each tick:

- A, /proc over the connection: one command per tick through the prefix
  (``cat /proc/stat /proc/diskstats /proc/meminfo /proc/vmstat``: what the host
  sampler reads), as a sampler without an agent on the far side would do;
- B, the agent: the host sampler runs on the far side (its own CPU per tick is
  ``sampler_cost.py``'s figure) and nothing crosses the link per tick; what does
  cross is the trial's liveness poll, one ``ping`` round trip (``died`` costs the
  same) every 0.25 s. B's per-tick figure is that round trip.

Rounds alternate A/B, B/A so drift of the shared host lands on both sides. Prints
each side's milliseconds of wall time and of dbrig-side CPU (this process and its
children) per tick, then the ratio A/B as a median with its range and IQR.

    .venv/bin/python benchmarks/remote_sampling.py --rounds 8 --ticks 20
    .venv/bin/python benchmarks/remote_sampling.py --prefix "ssh -p 2222 root@127.0.0.1 --"
"""

from __future__ import annotations

import argparse
import resource
import shlex
import statistics
import tempfile
import time
from pathlib import Path

from dbrig import proc
from dbrig.remote.server import AgentConnection

PROC_FILES = ["/proc/stat", "/proc/diskstats", "/proc/meminfo", "/proc/vmstat"]


def cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def per_tick(action, ticks: int) -> tuple[float, float]:
    """Milliseconds of wall time and of CPU per call of ``action``."""
    wall, cpu = time.perf_counter(), cpu_s()
    for _ in range(ticks):
        action()
    return (time.perf_counter() - wall) * 1000 / ticks, (cpu_s() - cpu) * 1000 / ticks


def read_proc(prefix: list[str]) -> None:
    code, text = proc.capture([*prefix, "cat", *PROC_FILES], timeout_s=30)
    assert code == 0 and "cpu" in text, text[:200]


def describe(label: str, values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return (
        f"{label}: median {statistics.median(values):.2f} "
        f"(range {min(values):.2f}-{max(values):.2f}, IQR {q[0]:.2f}-{q[2]:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--prefix", default="", help="the command prefix (empty: this host)")
    parser.add_argument("--python", default="python3", help="the far side's python, with dbrig")
    args = parser.parse_args()
    prefix = shlex.split(args.prefix)
    with tempfile.TemporaryDirectory() as tmp:
        agent = AgentConnection(prefix, "bench", Path(tmp) / "agent.log", args.python)
        try:
            sides = {
                "A /proc": lambda: read_proc(prefix),
                "B agent": lambda: agent.call("ping"),
            }
            walls: dict[str, list[float]] = {name: [] for name in sides}
            cpus: dict[str, list[float]] = {name: [] for name in sides}
            for side in sides.values():
                per_tick(side, 3)  # warm: the page cache, the connection
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for name in order:
                    wall, cpu = per_tick(sides[name], args.ticks)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
                    print(f"round {r + 1} {name}: {wall:.2f} ms wall, {cpu:.2f} ms CPU per tick")
        finally:
            agent.close()
    a, b = "A /proc", "B agent"
    for name in sides:
        print(describe(f"{name} wall ms/tick", walls[name]))
        print(describe(f"{name} dbrig-side CPU ms/tick", cpus[name]))
    print(describe("wall ratio A/B", [x / y for x, y in zip(walls[a], walls[b], strict=True)]))
    print(describe("CPU ratio A/B", [x / y for x, y in zip(cpus[a], cpus[b], strict=True) if y]))


if __name__ == "__main__":
    main()
