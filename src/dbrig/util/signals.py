"""Ctrl-C, SIGTERM and SIGHUP: each stops a run cleanly (:func:`stop_on_signals`), and is
held across a step that must not be cut in two, then delivered."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_CAUSES = {
    signal.SIGINT: "Ctrl-C (SIGINT)",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP (its terminal or ssh session closed)",
}


class Stopped(KeyboardInterrupt):
    """A stop signal arrived: raised where the main thread was, like Ctrl-C's
    KeyboardInterrupt, so every ``except KeyboardInterrupt`` cleans up alike."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def stop_on_signals() -> None:
    """Ctrl-C, SIGTERM and SIGHUP (a dropped terminal or ssh session) raise
    :class:`Stopped`. Ctrl-C even when ignored: a background job of a script starts with
    SIGINT ignored. SIGHUP not when ignored: that is ``nohup``, asking to run on."""
    signal.signal(signal.SIGINT, _raise_stopped)
    signal.signal(signal.SIGTERM, _raise_stopped)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _raise_stopped)


def interrupt_cause(exc: BaseException) -> str:
    """What stopped the run, for dbrig.log: ``SIGHUP (its terminal or ssh session closed)``."""
    signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
    return _CAUSES.get(signum, signal.Signals(signum).name)


def _raise_stopped(signum: int, frame: Any) -> None:
    raise Stopped(signum)


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
    """Hold Ctrl-C, SIGTERM and SIGHUP inside the block; the caller delivers them after it.

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
    # An ignored signal stays ignored (SIGHUP under nohup): nothing to hold.
    previous = {s: h for s in HELD if (h := signal.getsignal(s)) not in (None, signal.SIG_IGN)}
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
