"""Ctrl-C and SIGTERM held across a step that must not be cut in two, then delivered."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class HeldSignals:
    """The signals that arrived while held, to deliver (raise again) afterwards."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def hold(self, signum: int, frame: Any) -> None:
        self.signals.append(signum)

    def deliver(self) -> None:
        for signum in self.signals:
            signal.raise_signal(signum)
        self.signals.clear()


@contextlib.contextmanager
def interrupts_held(held: HeldSignals) -> Iterator[HeldSignals]:
    """Hold Ctrl-C and SIGTERM inside the block; the caller delivers them after it.

    Starting a child (Popen waits for the exec: an interrupt there loses the child,
    unregistered) and making a folder with its ownership marker (an interrupt between
    the two leaves a folder dbrig will not delete) must not be cut in two. Only the
    main thread receives signals, so elsewhere this holds nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is not None:
            previous[signum] = signal.signal(signum, held.hold)
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
