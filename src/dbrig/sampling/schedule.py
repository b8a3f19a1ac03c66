"""The sampling grid, the phase of a row and the stamp every row starts with.

The rules (a fixed grid from ``t0``, ``t0`` never skipped, a last sample at
``stop()``) are in the :mod:`dbrig.sampling` docstring.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

WARMUP = "warmup"
MEASURE = "measure"
FINAL_SAMPLE_MIN = 0.25  # of an interval: a shorter tail is not worth a noisy row

STAMP_COLUMNS = ("t_s", "phase", "interval_s")


@dataclass(frozen=True)
class SampleTiming:
    """When a sampler samples: every ``interval`` seconds of ``clock``, on a grid from ``t0``.

    Without ``t0`` the sampler's ``start()`` sets it to ``clock() + warmup_s``.
    """

    interval: float = 1.0
    clock: Callable[[], float] = time.monotonic
    t0: float | None = None
    warmup_s: float = 0.0

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError(f"sampling interval must be positive, got {self.interval}")


DEFAULT_TIMING = SampleTiming()


def phase_for(interval_start_s: float) -> str:
    """The phase of a row whose interval started ``interval_start_s`` seconds after t0."""
    return MEASURE if interval_start_s >= 0 else WARMUP


def next_tick_s(now_s: float, interval: float) -> float:
    """The next grid point ``k * interval`` (seconds after t0) to sample at.

    It is at least half an interval after ``now_s`` (a shorter interval gives noisy
    rates), except that t0 itself (0.0) is never skipped: it separates the phases.
    """
    k = math.floor(now_s / interval + 0.5) + 1
    tick = k * interval
    if now_s < 0 < tick:
        return 0.0
    return tick
