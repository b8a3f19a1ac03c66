"""One line per trial with an ETA: quiet enough for CI logs."""

from __future__ import annotations

import time
from collections.abc import Callable

from dbrig.scenario import Trial

_STATUS_SUFFIX = {"ok": "ok", "failed": "FAILED"}


class Progress:
    """Prints one line per trial with an ETA; quiet enough for CI logs."""

    def __init__(self, total: int, emit: Callable[[str], None], clock=time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.emit = emit
        self.clock = clock
        self.started = clock()

    def starting(self, trial: Trial, label: str) -> None:
        eta = self._eta()
        self.emit(f"[{self.done + 1}/{self.total}] {trial.id} {label}{eta}")

    def finished(self, trial: Trial, status: str, detail: str) -> None:
        self.done += 1
        self.emit(f"    {_STATUS_SUFFIX.get(status, status)}: {detail}")

    def _eta(self) -> str:
        if not self.done:
            return ""
        per_trial = (self.clock() - self.started) / self.done
        remaining = per_trial * (self.total - self.done)
        return f"  (ETA {_fmt_duration(remaining)})"


def _fmt_duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
