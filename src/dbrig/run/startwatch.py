"""When a workload tool said its clients were connected, read from its output file.

sysbench 1.0.20 starts its own clock (the ``[ 1s ]`` intervals, ``--time``, the
warm-up checkpoint) once every thread has connected and prepared its statements,
and prints ``Threads started!`` then; dbrig's clocks (the samplers', the fault
timeline) start when it launches the process. The gap is tens of milliseconds on a
quiet machine and grows with the threads and the load (docs/reliability.md). The
trial's watch loop looks every 0.25 s, too coarse for it: this thread reads the
output file every ``poll_s`` until the line shows up (sysbench flushes each line),
notes the clock, and ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.01


def first_line_starting(text: str, marker: str) -> bool:
    """True when a whole line of ``text`` starts with ``marker``."""
    lines = text.split("\n")[:-1]  # the last piece is not a whole line yet
    return any(line.startswith(marker) for line in lines)


class StartWatch:
    """Notes ``clock()`` when a line starting with ``marker`` appears in ``path``."""

    def __init__(
        self,
        path: Path,
        marker: str,
        clock: Callable[[], float],
        poll_s: float = POLL_S,
    ) -> None:
        self.path = path
        self.marker = marker
        self.clock = clock
        self.poll_s = poll_s
        self.seen_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dbrig-startwatch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> float | None:
        """Ends the watch (the run ended, or the line was seen): the clock when it was."""
        self._stop.set()
        self._thread.join()
        return self.seen_at

    def _run(self) -> None:
        offset, pending = 0, ""
        while not self._stop.wait(self.poll_s):
            chunk = self._read_from(offset)
            if not chunk:
                continue
            offset += len(chunk)
            pending += chunk.decode(errors="replace")
            if first_line_starting(pending, self.marker):
                self.seen_at = self.clock()
                return
            pending = pending[pending.rfind("\n") + 1 :]

    def _read_from(self, offset: int) -> bytes:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(offset)
                return handle.read()
        except OSError:  # not created yet
            return b""
