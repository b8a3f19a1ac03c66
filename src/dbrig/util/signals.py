"""Ctrl-C and SIGTERM held across a step that must not be cut in two, then delivered."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM)


class HeldSignals:
    """The signals that arrived while held, to deliver (raise again) afterwards."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def hold(self, signum: int, frame: Any) -> None:
        self.signals.append(signum)

    def deliver(self) -> None:
        """Raise each held signal once (a second Ctrl-C while held is the same Ctrl-C),
        in the order they came; all of them even if a handler raises, whose exception
        (the first) is raised after the last. The list is emptied first: a second call
        delivers nothing again."""
        pending = list(dict.fromkeys(self.signals))
        self.signals.clear()
        _each_then_raise(pending, signal.raise_signal)


@contextlib.contextmanager
def interrupts_held(held: HeldSignals) -> Iterator[HeldSignals]:
    """Hold Ctrl-C and SIGTERM inside the block; the caller delivers them after it.

    Starting a child (Popen waits for the exec: an interrupt there loses the child,
    unregistered) and making a folder with its ownership marker (an interrupt between
    the two leaves a folder dbrig will not delete) must not be cut in two. Only the
    main thread receives signals, so elsewhere this holds nothing.

    Every handler is put back however the block or the swapping ends: ``signal.signal``
    first runs the Python handlers of signals already pending, so a Ctrl-C landing
    between two swaps raises from the middle of them (and left SIGTERM held for good,
    swallowing every later one).
    """
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {s: h for s in HELD if (h := signal.getsignal(s)) is not None}
    try:
        _install_all(dict.fromkeys(previous, held.hold))
        yield held
    finally:
        _install_all(previous)


def _install_all(handlers: Mapping[int, Any]) -> None:
    """Install every handler. A pending signal's handler that raises inside
    ``signal.signal`` stops that swap (it is tried again) and not the others: the first
    exception is raised once all are in place."""
    first: BaseException | None = None
    for signum, handler in handlers.items():
        while signal.getsignal(signum) != handler:
            try:
                signal.signal(signum, handler)
            except BaseException as exc:
                first = first or exc
    if first is not None:
        raise first


def _each_then_raise(items: list[int], step: Callable[[int], object]) -> None:
    """``step(item)`` for every item even if some raise; then the first exception."""
    first: BaseException | None = None
    for item in items:
        try:
            step(item)
        except BaseException as exc:
            first = first or exc
    if first is not None:
        raise first
