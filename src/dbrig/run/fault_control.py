"""The fault controller: the workload's runs under a trial's faults, as a state machine.

The trial hands it the first run of the client; every quarter second it waits on that
run, fires the faults that are due (:class:`~dbrig.run.faults.FaultInjector`), checks
what may abort the trial, and moves between the states below until one that ends the
watch. The table is docs/architecture.md's "The fault controller"; every row is a test
in tests/unit/test_fault_control.py.

- ``RUNNING``: a run of the client is going.
- ``HELD``: the run failed on the full disk of a ``disk_full`` fault; the client is
  started again once the disk is freed.
- ``ENDED``: the last run ended by itself; its end is the trial's.
- ``OVER``: a fault ended the run with less than a second of the window left to start
  it again in (the tool runs whole seconds).
- ``STOPPED``: the trial stopped the run: the server or interference died (or did,
  seen just after a failed run's end), a sampler failed, a fault's recovery failed, or
  the client cannot be started again.
- ``TIMED_OUT``: the run outlasted its time limit (the faults' own time not counted).

A trial without faults is the same machine with no fault ever due.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from dbrig import proc
from dbrig.errors import DbrigError
from dbrig.run.client import ClientRun
from dbrig.run.faults import Fired
from dbrig.tools.base import ResumableWorkload, WorkloadTool

WAIT_S = 0.25  # how often the run, the faults and the aborts are looked at
DEATH_SEEN_S = 0.5  # a failed run's end until a dead server (its cause) must be seen


class State(enum.Enum):
    RUNNING = "running"
    HELD = "held"
    ENDED = "ended"
    OVER = "over"
    STOPPED = "stopped"
    TIMED_OUT = "timed out"


FINAL = frozenset({State.ENDED, State.OVER, State.STOPPED, State.TIMED_OUT})


class Schedule(Protocol):
    """The faults' side (:class:`~dbrig.run.faults.FaultInjector`), as the controller
    sees it."""

    def start(self, measure_start: float) -> None: ...

    def now_s(self) -> float: ...

    def tick(self, kill_client: Callable[[], None]) -> Fired: ...

    def disk_ended_run(self) -> bool: ...

    def disk_is_full(self) -> bool: ...

    def client_ended(self, t_s: float) -> None: ...

    def client_resumed(self) -> float: ...

    def close(self) -> None: ...


# Launches the client again for ``seconds`` (whole seconds), as the given run number.
Relaunch = Callable[[int, int], ClientRun]


@dataclass(frozen=True)
class ClientPlan:
    """What the controller needs to know of the client and the window."""

    tool: str  # the tool's name, for reasons
    window_s: float  # the measured window's length
    warmup_s: float
    timeout_s: float  # the first run's limit, the faults' time not counted
    relaunch: Relaunch | None  # None: the client cannot be started again
    rides_through: bool = False  # it reconnects by itself after a server restart

    @classmethod
    def of(
        cls, workload: WorkloadTool, warmup: int, timeout_s: float, relaunch: Relaunch
    ) -> ClientPlan:
        """The plan of ``workload``'s client; ``relaunch`` kept only for a tool that can
        be started again for the window's rest (ResumableWorkload)."""
        expected = workload.expected_seconds(warmup) or 0
        return cls(
            tool=workload.info.name,
            window_s=expected - warmup,
            warmup_s=warmup,
            timeout_s=timeout_s,
            relaunch=relaunch if isinstance(workload, ResumableWorkload) else None,
            rides_through=workload.reconnects_itself,
        )


@dataclass
class Watched:
    """The watch's end: every run of the client (each finished) and why it ended."""

    runs: list[ClientRun]
    launched_s: list[float]  # each run's launch on the measured window's clock
    timeout_s: float  # the first run's time limit
    state: State = State.RUNNING
    reason: str | None = None  # the controller's own (it stopped the client, or no time)

    @property
    def timed_out(self) -> bool:
        return self.state is State.TIMED_OUT

    @property
    def last(self) -> proc.Finished:
        finished = self.runs[-1].finished
        assert finished is not None, "the watch ends with every run finished"
        return finished


@dataclass
class FaultController:
    """Watches the client's runs under ``faults`` (None: a trial without faults)."""

    plan: ClientPlan
    faults: Schedule | None
    clock: Callable[[], float] = time.monotonic
    abort: Callable[[], str | None] = lambda: None  # the server, interference, samplers
    poll: Callable[[], None] = lambda: None  # the live progress line
    sleep: Callable[[float], None] = time.sleep
    watched: Watched = field(init=False)
    _deadline: float = field(init=False, default=0.0)

    def watch(self, first: ClientRun) -> Watched:
        """From the first run's launch to a final state; every run is finished then, and
        every fault still in force ended."""
        self.watched = Watched([first], [-self.plan.warmup_s], self.plan.timeout_s)
        self._deadline = first.launched_at + self.plan.timeout_s
        if self.faults is not None:
            self.faults.start(first.launched_at + self.plan.warmup_s)
        try:
            while self.watched.state not in FINAL:
                self.step()
        finally:
            for run in self.watched.runs:
                run.stop()
            if self.faults is not None:
                # A server still frozen is thawed, a full disk freed, before anything
                # else (the samplers' last query) waits on them.
                self.faults.close()
        return self.watched

    @property
    def state(self) -> State:
        return self.watched.state

    @property
    def current(self) -> ClientRun:
        return self.watched.runs[-1]

    def step(self) -> None:
        """One look: the run's end, then the faults, then the aborts and the deadline."""
        if self.state is State.HELD:
            self._step_held()
        else:
            self._step_running()

    # -- RUNNING -------------------------------------------------------------------------

    def _step_running(self) -> None:
        done = self.current.wait(WAIT_S)
        if done is not None:
            self._run_ended(done)
            return
        self.poll()
        if self.faults is not None:
            fired = self._tick()
            if fired is None or self.state in FINAL:
                return
            if fired is not Fired.NOTHING:
                self._fault_hit_client(fired)
                return
        self._check_abort()

    def _run_ended(self, done: proc.Finished) -> None:
        if self._disk_ended(done):
            self._note_ended()
            self.watched.state = State.HELD
        elif done.returncode != 0 and (reason := self._abort_soon()):
            self.watched.state, self.watched.reason = State.STOPPED, reason
        else:
            self.watched.state = State.ENDED

    def _abort_soon(self) -> str | None:
        """What aborts the trial, looked at for a moment: a client that lost its server
        often ends before the server's own exit can be seen."""
        deadline = self.clock() + DEATH_SEEN_S
        while (reason := self.abort()) is None and self.clock() < deadline:
            self.sleep(0.05)
        return reason

    def _disk_ended(self, done: proc.Finished) -> bool:
        """The run failed inside the window after the disk was filled."""
        if self.faults is None or self.plan.relaunch is None or done.returncode == 0:
            return False
        return self._left_s() >= 1 and self.faults.disk_ended_run()

    def _fault_hit_client(self, fired: Fired) -> None:
        if fired is Fired.SERVER_RESTARTED and self.plan.rides_through:
            if self.current.wait(0) is not None:  # it ended before the restart finished
                self.watched.state = State.ENDED
            return  # else it rides through the restart on its own reconnects
        if self.plan.relaunch is None:
            self._stop(
                State.STOPPED,
                f"{self.plan.tool} ended with the fault and cannot be started again",
            )
            return
        self.current.stop()
        self._note_ended()
        self._resume()

    # -- HELD ----------------------------------------------------------------------------

    def _step_held(self) -> None:
        began = self.clock()
        self.sleep(WAIT_S)
        fired = self._tick()
        self._deadline += self.clock() - began  # waiting for the disk is not the tool's time
        if fired is None or self.state in FINAL:
            return
        assert self.faults is not None
        if reason := self.abort():  # a server the full disk brought down is not resumed
            self.watched.state, self.watched.reason = State.STOPPED, reason
        elif not self.faults.disk_is_full():
            self._resume()

    # -- shared --------------------------------------------------------------------------

    def _tick(self) -> Fired | None:
        """The faults that are due, fired; None when one failed (the trial stops)."""
        assert self.faults is not None
        began = self.clock()
        try:
            fired = self.faults.tick(self.current.kill)
        except DbrigError as exc:  # FaultFailed, or the server was not running
            self._stop(State.STOPPED, exc.message)
            return None
        except OSError as exc:  # deleting or filling a file
            self._stop(State.STOPPED, f"faults: {exc}")
            return None
        finally:
            self._deadline += self.clock() - began  # a restart is not the tool's time
        return fired

    def _check_abort(self) -> None:
        if reason := self.abort():
            self._stop(State.STOPPED, reason)
        elif self.clock() >= self._deadline:
            self._stop(State.TIMED_OUT, None)

    def _stop(self, state: State, reason: str | None) -> None:
        self.current.stop()
        self.watched.state, self.watched.reason = state, reason

    def _left_s(self) -> float:
        assert self.faults is not None
        return self.plan.window_s - self.faults.now_s()

    def _note_ended(self) -> None:
        assert self.faults is not None
        self.faults.client_ended(self.faults.now_s())

    def _resume(self) -> None:
        """The client started again for the window's rest, in whole seconds."""
        assert self.faults is not None and self.plan.relaunch is not None
        left = self._left_s()
        rest = math.floor(left)
        if rest < 1:
            self.watched.state, self.watched.reason = State.OVER, _too_late(self.plan.tool, left)
            return
        self.watched.launched_s.append(self.faults.client_resumed())
        run = self.plan.relaunch(rest, len(self.watched.runs) + 1)
        self.watched.runs.append(run)
        self.watched.state = State.RUNNING


def _too_late(tool: str, left_s: float) -> str:
    if left_s <= 0:
        return "the fault's recovery outlasted the measured window: nothing left to measure"
    shown = math.floor(left_s * 10) / 10  # 0.99 s is no whole second: never shown as 1.0
    return (
        f"{shown:.1f} s of the measured window were left after the fault: too little to "
        f"start {tool} again (it runs whole seconds)"
    )
