"""Folded CPU profiles (``profile.folded``, see ``sampling/profile.py``): read, merged per
cell, and the functions that take the most of it, by self and by total share.

A function's *self* share is the fraction of samples whose stack ends in it (it was
running); its *total* share is the fraction whose stack holds it anywhere (it or what
it called was running), counted once per sample even when it recurses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

UNKNOWN = "[unknown]"  # how sampling/profile.py names a frame perf could not name


def parse_folded(text: str) -> Counter[str]:
    """``stack count`` lines (stack -> samples); a line without a count is skipped."""
    stacks: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


def merge(profiles: Iterable[Mapping[str, int]]) -> Counter[str]:
    """Several trials' folded stacks as one (a cell's)."""
    total: Counter[str] = Counter()
    for stacks in profiles:
        total.update(stacks)
    return total


@dataclass(frozen=True)
class FunctionShare:
    name: str
    self_share: float  # 0..1 of the samples
    total_share: float  # 0..1 of the samples


def top_functions(stacks: Mapping[str, int], n: int = 15) -> list[FunctionShare]:
    """The ``n`` functions with the largest self share (ties: total share, then name)."""
    ranked = sorted(function_shares(stacks), key=lambda f: (-f.self_share, -f.total_share, f.name))
    return ranked[:n]


def top_by_total(stacks: Mapping[str, int], n: int = 15) -> list[FunctionShare]:
    """The ``n`` functions with the largest total share (what they called included).
    Frames perf could not name are left out: one ``[unknown]`` stands for many functions
    at every depth, so its total says nothing (its self share stays in the other list)."""
    named = [f for f in function_shares(stacks) if not f.name.startswith(UNKNOWN)]
    ranked = sorted(named, key=lambda f: (-f.total_share, -f.self_share, f.name))
    return ranked[:n]


def function_shares(stacks: Mapping[str, int]) -> list[FunctionShare]:
    """Every function's shares; the root (the process's name) is not a function."""
    samples = sum(stacks.values())
    if samples == 0:
        return []
    own: Counter[str] = Counter()
    within: Counter[str] = Counter()
    for stack, count in stacks.items():
        frames = stack.split(";")[1:]
        if not frames:
            continue
        own[frames[-1]] += count
        for name in set(frames):
            within[name] += count
    return [FunctionShare(name, own[name] / samples, within[name] / samples) for name in within]
