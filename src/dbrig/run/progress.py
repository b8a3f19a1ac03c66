"""What a run prints as it goes: one line per trial with an ETA, and a live line while the
workload runs.

The live line says which trial runs, for how long, how long it has left, the tool's
latest interval (TPS or its rate, and latency) and the run's ETA. On a terminal it is
one line redrawn in place (the commands layer gives a :class:`LiveLine` for it); off a
terminal (CI logs) it is a plain line at most every :data:`PLAIN_EVERY_S` seconds.
The trial feeds it from its watch loop; nothing in it may break a run: an error is
logged and the display goes quiet for the rest of the trial.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

from dbrig.metrics import Metric, metric, throughput_metrics
from dbrig.scenario import Trial
from dbrig.tools.base import WorkloadTool

log = logging.getLogger(__name__)

_STATUS_SUFFIX = {"ok": "ok", "failed": "FAILED"}
PLAIN_EVERY_S = 10.0  # off a terminal: at most one live line this often, so CI logs stay short
TERMINAL_EVERY_S = 1.0  # on a terminal: the live line is redrawn this often
TAIL_BYTES = 8192  # of the workload's output kept for the tool to find its latest interval

Clock = Callable[[], float]


class LiveLine(Protocol):
    """Where a running trial's status goes; ``every_s``: how often it wants a new one."""

    every_s: float

    def show(self, text: str) -> None: ...

    def close(self) -> None: ...


class PlainLines:
    """The live line as plain lines through ``emit``: for logs and pipes."""

    def __init__(self, emit: Callable[[str], None], every_s: float | None = None) -> None:
        self.emit = emit
        # Read at construction, not import, so the constant stays configurable.
        self.every_s = PLAIN_EVERY_S if every_s is None else every_s

    def show(self, text: str) -> None:
        self.emit(text)

    def close(self) -> None:
        pass


class Progress:
    """Prints one line per trial with an ETA, and opens each trial's live line."""

    def __init__(
        self,
        total: int,
        emit: Callable[[str], None],
        clock: Clock = time.monotonic,
        live_line: Callable[[], LiveLine] | None = None,
    ) -> None:
        self.total = total
        self.done = 0
        self.emit = emit
        self.clock = clock
        self.started = clock()
        self.trial_started = self.started
        self.open_line = live_line or (lambda: PlainLines(emit))

    def starting(self, trial: Trial, label: str) -> None:
        self.trial_started = self.clock()
        eta = self.eta_s()
        suffix = f"  (ETA {_fmt_duration(eta)})" if eta is not None else ""
        self.emit(f"[{self.done + 1}/{self.total}] {trial.id} {label}{suffix}")

    def note(self, line: str) -> None:
        """A step of the trial in progress worth a line of its own (a data set load)."""
        self.emit(f"    {line}")

    def finished(self, trial: Trial, status: str, detail: str) -> None:
        self.done += 1
        self.emit(f"    {_STATUS_SUFFIX.get(status, status)}: {detail}")

    def eta_s(self) -> float | None:
        """Seconds until the run ends, from the mean time of the trials done so far, less
        the time the current trial has run; None before the first trial is done."""
        if not self.done:
            return None
        per_trial = (self.trial_started - self.started) / self.done
        into_trial = self.clock() - self.trial_started
        return max(0.0, per_trial * (self.total - self.done) - into_trial)

    @contextlib.contextmanager
    def following(
        self, trial: Trial, tool: WorkloadTool, warmup: int, output: Path | Callable[[], Path]
    ) -> Iterator[Callable[[], None]]:
        """The live line of ``trial``'s workload while the block runs: yields ``poll``,
        to call often from the trial's watch loop (it does its work when one is due)."""
        follower = _Follower(self, trial.id, tool, warmup, OutputTail(output))
        try:
            yield follower.poll
        finally:
            follower.close()


class _Follower:
    """One trial's live line: follows the output, asks the tool, shows, never raises."""

    def __init__(
        self, progress: Progress, trial_id: str, tool: WorkloadTool, warmup: int, tail: OutputTail
    ) -> None:
        self.progress = progress
        self.clock = progress.clock
        self.trial_id = trial_id
        self.tool = tool
        self.warmup = warmup
        self.expected_s = tool.expected_seconds(warmup)
        self.tail = tail
        self.started = self.clock()
        self.line: LiveLine | None = None
        self.interval_broken = False
        with _logged("opening the live progress line"):
            self.line = progress.open_line()
        self.next_at = self.started + (self.line.every_s if self.line else 0.0)

    def poll(self) -> None:
        if self.line is None or self.clock() < self.next_at:
            return
        now = self.clock()
        # On a grid from the start (10 s, 20 s...), missed points skipped: a late poll
        # does not shift every later line (9 s, 11 s on a terminal) or add one.
        every = self.line.every_s
        self.next_at = self.started + every * (math.floor((now - self.started) / every) + 1)
        with _logged("the live progress line") as ok:
            self.line.show(self.text(now))
        if not ok:
            self.close()  # quiet for the rest of the trial; the run goes on

    def text(self, now: float) -> str:
        return live_text(
            self.trial_id,
            elapsed_s=now - self.started,
            expected_s=self.expected_s,
            warmup=self.warmup,
            interval=self._interval(),
            eta_s=self.progress.eta_s(),
        )

    def _interval(self) -> Mapping[str, float] | None:
        if self.interval_broken:
            return None
        with _logged(f"{self.tool.key}: reading its latest interval"):
            return self.tool.live_interval(self.tail.read())
        self.interval_broken = True  # reached only when it raised: keep elapsed and ETA
        return None

    def close(self) -> None:
        line, self.line = self.line, None
        if line is not None:
            with _logged("closing the live progress line"):
                line.close()


class _Outcome:
    def __init__(self) -> None:
        self.ok = True

    def __bool__(self) -> bool:
        return self.ok


@contextlib.contextmanager
def _logged(doing: str) -> Iterator[_Outcome]:
    """Log and swallow any error of the display (never KeyboardInterrupt)."""
    outcome = _Outcome()
    try:
        yield outcome
    except Exception as exc:
        outcome.ok = False
        log.warning("%s failed (%s); the trial goes on without it", doing, _one_line(exc))
        log.info("%s failed", doing, exc_info=True)  # the traceback: dbrig.log only


def _one_line(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class OutputTail:
    """The last ``keep`` bytes of a file another process is writing, read as it grows."""

    def __init__(self, path: Path | Callable[[], Path], keep: int = TAIL_BYTES) -> None:
        """``path`` may be a function giving the file to follow now: a workload started
        again after a fault writes a new one, followed from its start."""
        self.source = path
        self.path = path() if callable(path) else path
        self.keep = keep
        self.offset = 0
        self.buffer = b""

    def read(self) -> str:
        """The tail as text, after reading what was added since the last call."""
        if callable(self.source) and (now := self.source()) != self.path:
            self.path, self.offset, self.buffer = now, 0, b""
        try:
            with self.path.open("rb") as handle:
                size = handle.seek(0, 2)
                start = max(self.offset, size - self.keep)
                handle.seek(start)
                added = handle.read(size - start)
        except FileNotFoundError:
            return ""
        if start > self.offset:
            self.buffer = b""  # more was written than we keep: start over from the new end
        self.offset = start + len(added)
        self.buffer = (self.buffer + added)[-self.keep :]
        return self.buffer.decode(errors="replace")


def live_text(
    trial_id: str,
    *,
    elapsed_s: float,
    expected_s: float | None,
    warmup: int,
    interval: Mapping[str, float] | None,
    eta_s: float | None,
) -> str:
    """``    c001-r1 running 1m05s (28m55s left): 812.3 tps, p95 9.84 ms; run ETA 4h10m``."""
    doing = "warming up" if elapsed_s < warmup else "running"
    text = f"    {trial_id} {doing} {_fmt_duration(elapsed_s)}"
    if expected_s is not None:
        text += f" ({_fmt_duration(max(0.0, expected_s - elapsed_s))} left)"
    numbers = interval_text(interval or {})
    if numbers:
        text += f": {numbers}"
    if eta_s is not None:
        text += f"; run ETA {_fmt_duration(eta_s)}"
    return text


def interval_text(values: Mapping[str, float]) -> str:
    """An interval's rate and latency: ``812.3 tps, p95 9.84 ms`` (the rate first found in
    the registry's throughput order: TPS, the tool's own rate, events/s, QPS)."""
    parts = []
    rate = next((m for m in throughput_metrics() if m.name in values), None)
    if rate is not None:
        parts.append(_rate_text(rate, values[rate.name]))
    latency = values.get("latency_pct_ms")
    latency_metric = metric("latency_pct_ms")
    if latency is not None and latency_metric is not None:
        pct = values.get("percentile")
        label = f"p{pct:g}" if pct else "latency"
        parts.append(f"{label} {latency_metric.format(latency, grouped=False)} ms")
    return ", ".join(parts)


def _rate_text(rate: Metric, value: float) -> str:
    if rate.progress:
        return rate.progress_text(value)
    return f"{rate.format(value, grouped=False)} {rate.unit}"


def _fmt_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
