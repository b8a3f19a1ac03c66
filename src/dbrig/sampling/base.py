"""What every sampler shares: the thread's loop on the grid, the CSV log, its own cost.

A sampler takes a baseline snapshot at ``start()``, then one per grid tick until
``stop()``; subclasses say how to take a snapshot (``_take``) and which rows two
snapshots give (``_emit``). The step API (``open``, ``sample``, ``close``) lets
tests drive the loop with a fake clock.

sampler.csv (one row per sample per sampler: the samplers' own cost)
--------------------------------------------------------------------
========  =====================================================================
sampler   ``host`` or ``status``
cpu_s     CPU seconds the sampler thread used since its previous sample
          (``time.thread_time()``)
cpu_pct   cpu_s / interval_s * 100: share of one core
========  =====================================================================
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Self

from dbrig.sampling.rates import _per_s
from dbrig.sampling.schedule import (
    FINAL_SAMPLE_MIN,
    STAMP_COLUMNS,
    SampleTiming,
    next_tick_s,
    phase_for,
)

DEFAULT_STOP_TIMEOUT_S = 5.0
SAMPLER_COLUMNS = (*STAMP_COLUMNS, "sampler", "cpu_s", "cpu_pct")

_WRITE_LOCK = threading.Lock()  # sampler.csv is shared by both threads


# --- CSV output -------------------------------------------------------------------------------


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else ""
    return value


class _CsvLog:
    """Appends rows to one CSV file, header first, flushed after every batch."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path = path
        self.columns = tuple(columns)
        self._file: IO[str] | None = None
        self._writer: Any = None

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        with _WRITE_LOCK:
            if self._file is None:
                self._file = self.path.open("a", newline="", encoding="utf-8")
                self._writer = csv.DictWriter(self._file, fieldnames=self.columns)
            if os.fstat(self._file.fileno()).st_size == 0:
                self._writer.writeheader()
            self._writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# --- samplers ---------------------------------------------------------------------------------


class SamplerFailure(Exception):
    """A sampler cannot go on; the message is the one-line reason."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class _Sampler:
    """The shared loop: a baseline at start, then one sample per grid tick until stop."""

    name = "sampler"

    def __init__(self, cell_dir: Path | str, *, timing: SampleTiming) -> None:
        self.cell_dir = Path(cell_dir)
        self.interval = float(timing.interval)
        self.error: str | None = None
        self.failure: BaseException | None = None  # what set ``error``, when it was raised
        self._clock = timing.clock
        self._t0 = timing.t0  # set by start() or open() when the timing has none
        self._warmup_s = float(timing.warmup_s)
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._prev: Any = None
        self._prev_time = 0.0
        self._prev_mark = 0.0  # where the next row's interval starts, in s after t0
        self._prev_cpu = 0.0
        self._sampler_log = _CsvLog(self.cell_dir / "sampler.csv", SAMPLER_COLUMNS)

    @property
    def t0(self) -> float | None:
        """The measured window's start; without one, ``start()`` sets it to now + warmup_s."""
        return self._t0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"the {self.name} sampler was already started")
        self.cell_dir.mkdir(parents=True, exist_ok=True)
        if self._t0 is None:
            self._t0 = self._clock() + self._warmup_s
        self._thread = threading.Thread(
            target=self._run, name=f"dbrig-{self.name}-sampler", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Stop the thread (after a last sample) and wait for it, at most ``timeout`` s."""
        if self._thread is None:
            return
        self._stop_event.set()
        self._thread.join(timeout)
        if self._thread.is_alive() and self.error is None:
            self.error = f"{self.name} sampler did not stop within {timeout:g} s"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # The step API: the thread calls these; tests call them directly with a fake clock.

    def open(self) -> None:
        """Take the baseline sample (no row)."""
        if self._t0 is None:
            self._t0 = self._clock() + self._warmup_s
        self._prev_cpu = time.thread_time()
        now = self._clock()
        self._prev = self._take()
        self._prepare(self._prev)
        self._prev_time = now
        self._prev_mark = now - self._t0

    def sample(self, scheduled_s: float | None = None) -> None:
        """Take one sample and append its rows; ``scheduled_s`` is its grid point after t0."""
        assert self._t0 is not None, "open() first"
        now = self._clock()
        snapshot = self._take()
        elapsed = now - self._prev_time
        stamp = {"t_s": now - self._t0, "phase": phase_for(self._prev_mark), "interval_s": elapsed}
        self._emit(stamp, self._prev, snapshot, elapsed)
        cpu_now = time.thread_time()
        cpu_s = max(0.0, cpu_now - self._prev_cpu)
        cpu_per_s = _per_s(cpu_s, elapsed)
        self._sampler_log.write(
            [
                {
                    **stamp,
                    "sampler": self.name,
                    "cpu_s": cpu_s,
                    "cpu_pct": None if cpu_per_s is None else 100.0 * cpu_per_s,
                }
            ]
        )
        self._prev, self._prev_time, self._prev_cpu = snapshot, now, cpu_now
        self._prev_mark = stamp["t_s"] if scheduled_s is None else scheduled_s

    def close(self) -> None:
        for log in self._logs():
            log.close()
        self._sampler_log.close()

    def _run(self) -> None:
        try:
            self.open()
            while True:
                assert self._t0 is not None
                tick = next_tick_s(self._clock() - self._t0, self.interval)
                if self._stop_event.wait(max(0.0, self._t0 + tick - self._clock())):
                    break
                self.sample(tick)
            if self._clock() - self._prev_time >= FINAL_SAMPLE_MIN * self.interval:
                self.sample()
        except SamplerFailure as exc:
            self.error = str(exc)
        except Exception as exc:
            self.failure = exc
            self.error = f"{self.name} sampler failed: {type(exc).__name__}: {_one_line(exc)}"
        finally:
            with contextlib.suppress(OSError):
                self.close()

    # Subclasses fill these in.

    def _take(self) -> Any:
        raise NotImplementedError

    def _prepare(self, first: Any) -> None:
        """Decide what to record from the baseline snapshot."""

    def _emit(self, stamp: Mapping[str, Any], before: Any, after: Any, elapsed_s: float) -> None:
        raise NotImplementedError

    def _logs(self) -> Iterable[_CsvLog]:
        return ()
