"""Ctrl-C and SIGTERM held across a step: every handler comes back, whatever lands when.

Real signals, sent to this process from inside the swapping of handlers, where a Ctrl-C
of a user can land: ``signal.signal`` runs the handlers of pending signals first.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dbrig.util.signals import HeldSignals, interrupt_cause, interrupts_held, stop_on_signals


class Terminated(Exception):
    """What this test's SIGTERM handler raises (dbrig's turns SIGTERM into an interrupt)."""


TERMS: list[int] = []  # one entry per run of the SIGTERM handler


def _on_sigterm(signum: int, frame: Any) -> None:
    TERMS.append(signum)
    raise Terminated


@pytest.fixture
def handlers() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, SIGTERM raises Terminated; put back afterwards."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_sigterm)
    TERMS.clear()
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


def _assert_handlers_back() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is _on_sigterm
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        signal.getsignal(signal.SIGINT)  # a bytecode boundary for the handler to run at
    with pytest.raises(Terminated):
        os.kill(os.getpid(), signal.SIGTERM)
        signal.getsignal(signal.SIGTERM)


def _send_once_after(
    monkeypatch: pytest.MonkeyPatch, when: Callable[[int, Any], bool], send: int
) -> None:
    """``signal.signal`` sends ``send`` to this process right after the swap ``when``
    picks (once): the signal lands between two swaps, as a user's Ctrl-C can."""
    real = signal.signal
    sent = []

    def swap(signum: int, handler: Any) -> Any:
        old = real(signum, handler)
        if not sent and when(signum, handler):
            sent.append(signum)
            os.kill(os.getpid(), send)
        return old

    monkeypatch.setattr(signal, "signal", swap)


def _restoring_sigint(signum: int, handler: Any) -> bool:
    return signum == signal.SIGINT and handler is signal.default_int_handler


def _holding_sigint(signum: int, handler: Any) -> bool:
    return signum == signal.SIGINT and getattr(handler, "__func__", None) is HeldSignals.hold


def test_a_held_signal_is_delivered_once_after_the_block(handlers: None) -> None:
    held = HeldSignals()
    with interrupts_held(held):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
    assert held.signals == [signal.SIGTERM, signal.SIGTERM]
    with pytest.raises(Terminated):
        held.deliver()
    held.deliver()  # nothing left: not delivered twice
    assert TERMS == [signal.SIGTERM]
    _assert_handlers_back()


def test_every_held_signal_is_delivered_even_if_the_first_raises(handlers: None) -> None:
    held = HeldSignals()
    with interrupts_held(held):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        held.deliver()
    assert TERMS == [signal.SIGTERM]
    assert held.signals == []
    _assert_handlers_back()


def test_a_ctrl_c_between_the_restores_leaves_sigterm_restored(
    handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT's handler is back, SIGTERM's not yet: a Ctrl-C now raised KeyboardInterrupt
    out of the restoring, and SIGTERM stayed held, swallowed, for the rest of the run."""
    held = HeldSignals()
    with pytest.raises(KeyboardInterrupt), interrupts_held(held):
        _send_once_after(monkeypatch, _restoring_sigint, signal.SIGINT)
    monkeypatch.undo()
    _assert_handlers_back()


def test_a_sigterm_while_the_holds_go_in_leaves_ctrl_c_working(
    handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT is held, SIGTERM's hold not in yet: a SIGTERM now raised out of the setting
    up, before the block, and Ctrl-C stayed held for good."""
    held = HeldSignals()
    _send_once_after(monkeypatch, _holding_sigint, signal.SIGTERM)
    ran = []
    with pytest.raises(Terminated), interrupts_held(held):
        ran.append(True)
    monkeypatch.undo()
    assert ran == []  # the interrupt came first: the held step did not start
    _assert_handlers_back()


def test_a_signal_while_the_holds_go_out_is_held_or_handled_not_lost(
    handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM just as SIGINT's handler is restored lands in SIGTERM's hold (still in):
    delivered once, after every handler is back."""
    held = HeldSignals()
    with interrupts_held(held):
        _send_once_after(monkeypatch, _restoring_sigint, signal.SIGTERM)
    monkeypatch.undo()
    assert held.signals == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is _on_sigterm
    with pytest.raises(Terminated):
        held.deliver()
    _assert_handlers_back()


@pytest.fixture
def stop_handlers() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP as they were before the test."""
    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in signums}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize(
    "signum, words",
    [
        (signal.SIGINT, "Ctrl-C"),
        (signal.SIGTERM, "SIGTERM"),
        (signal.SIGHUP, "terminal or ssh session closed"),
    ],
)
def test_each_stop_signal_interrupts_and_says_which(
    stop_handlers: None, signum: int, words: str
) -> None:
    stop_on_signals()
    with pytest.raises(KeyboardInterrupt) as stopped:
        os.kill(os.getpid(), signum)
        signal.getsignal(signum)  # a bytecode boundary for the handler to run at
    assert words in interrupt_cause(stopped.value)


def test_a_hangup_ignored_as_nohup_does_stays_ignored(stop_handlers: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    stop_on_signals()
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    os.kill(os.getpid(), signal.SIGHUP)
    signal.getsignal(signal.SIGHUP)


def test_a_hangup_is_held_like_ctrl_c(stop_handlers: None) -> None:
    stop_on_signals()
    held = HeldSignals()
    with interrupts_held(held):
        os.kill(os.getpid(), signal.SIGHUP)
        signal.getsignal(signal.SIGHUP)
    assert held.signals == [signal.SIGHUP]
    with pytest.raises(KeyboardInterrupt) as stopped:
        held.deliver()
    assert "SIGHUP" in interrupt_cause(stopped.value)
