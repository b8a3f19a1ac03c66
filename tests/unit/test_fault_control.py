"""The fault controller's state machine (run/fault_control.py), one test per row of the
table in docs/architecture.md ("The fault controller"), with a fake clock, a fake client
and a fake fault schedule: no process, no server, no sleep."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dbrig import proc
from dbrig.run.fault_control import ClientPlan, FaultController, State, Watched
from dbrig.run.faults import FaultFailed, Fired

WINDOW_S = 10.0
WARMUP_S = 2.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeRun:
    """A client run that ends by itself at ``ends_at`` (None: runs until stopped)."""

    def __init__(self, clock: Clock, ends_at: float | None, returncode: int = 0) -> None:
        self.clock = clock
        self.launched_at = clock.now
        self.ends_at = ends_at
        self.returncode = returncode
        self.finished: proc.Finished | None = None
        self.stopped = False
        self.output = Path("workload.out")
        self.pid = None
        self.start_delay_s = 0.0

    def _finish(self, returncode: int) -> proc.Finished:
        self.finished = proc.Finished(("tool",), returncode, 1.0, 0.1, 0.1)
        return self.finished

    def wait(self, timeout_s: float) -> proc.Finished | None:
        ends = self.ends_at
        if self.finished is None and ends is not None and ends <= self.clock.now + timeout_s:
            self.clock.now = max(self.clock.now, ends)
            return self._finish(self.returncode)
        if self.finished is None:
            self.clock.now += timeout_s
        return self.finished

    def stop(self, grace_s: float = 5.0) -> proc.Finished:
        if self.finished is None and self.ends_at is not None and self.ends_at <= self.clock.now:
            self._finish(self.returncode)  # it had ended: stopping reaps it
        if self.finished is None:
            self.stopped = True
            self._finish(-15)
        assert self.finished is not None
        return self.finished

    def kill(self) -> None:
        self.ends_at, self.returncode = self.clock.now, -9


@dataclass
class FakeFaults:
    """A schedule firing ``fires`` (window-clock second -> what it does), each taking
    ``takes_s`` of the clock (a restart); ``raises`` fails the fault instead."""

    clock: Clock
    fires: dict[float, Fired] = field(default_factory=dict)
    takes_s: float = 0.0
    raises: Exception | None = None
    full_between: tuple[float, float] | None = None  # a disk_full fault's span
    notes: list[tuple[str, float]] = field(default_factory=list)
    closed: bool = False
    _start: float = 0.0
    _disk_ended: bool = False

    def start(self, measure_start: float) -> None:
        self._start = measure_start

    def now_s(self) -> float:
        return self.clock.now - self._start

    def tick(self, kill_client: Callable[[], None]) -> Fired:
        due = [t for t in self.fires if t <= self.now_s()]
        if not due:
            return Fired.NOTHING
        if self.raises is not None:
            raise self.raises
        fired = self.fires.pop(min(due))
        if fired is Fired.CLIENT_KILLED:
            kill_client()
        self.clock.now += self.takes_s
        return fired

    def disk_ended_run(self) -> bool:
        if self.full_between is None or self._disk_ended:
            return False
        self._disk_ended = self.full_between[0] <= self.now_s()
        return self._disk_ended

    def disk_is_full(self) -> bool:
        return self.full_between is not None and self.now_s() < self.full_between[1]

    def client_ended(self, t_s: float) -> None:
        self.notes.append(("client run ended", t_s))

    def client_resumed(self) -> float:
        self.notes.append(("client restarted", self.now_s()))
        return self.now_s()

    def close(self) -> None:
        self.closed = True


@dataclass
class Rig:
    clock: Clock
    faults: FakeFaults | None
    relaunched: list[int] = field(default_factory=list)  # each relaunch's seconds
    aborts: list[str | None] = field(default_factory=list)
    died_at_s: float | None = None  # the server is dead from then on (window clock)

    def first_run(self, lasts_s: float | None = WARMUP_S + WINDOW_S, rc: int = 0) -> FakeRun:
        ends = None if lasts_s is None else self.clock.now + lasts_s
        return FakeRun(self.clock, ends, rc)

    def relaunch(self, seconds: int, number: int) -> FakeRun:
        self.relaunched.append(seconds)
        return FakeRun(self.clock, self.clock.now + seconds, 0)

    def controller(
        self, *, resumable: bool = True, rides_through: bool = False, timeout_s: float = 30
    ) -> FaultController:
        plan = ClientPlan(
            tool="sysbench",
            window_s=WINDOW_S,
            warmup_s=WARMUP_S,
            timeout_s=timeout_s,
            relaunch=self.relaunch if resumable else None,  # type: ignore[arg-type]
            rides_through=rides_through,
        )

        def abort() -> str | None:
            if self.died_at_s is not None and self.faults is not None:
                dead = self.faults.now_s() >= self.died_at_s
                return "server 'default' died (killed by SIGABRT)" if dead else None
            return self.aborts.pop(0) if self.aborts else None

        return FaultController(
            plan, self.faults, clock=self.clock, abort=abort, sleep=self.clock.sleep
        )

    def watch(self, first: FakeRun | None = None, **plan: bool) -> Watched:
        return self.controller(**plan).watch(first or self.first_run())  # type: ignore[arg-type]


def rig(**faults: object) -> Rig:
    clock = Clock()
    return Rig(clock, FakeFaults(clock, **faults))  # type: ignore[arg-type]


def no_fault_rig() -> Rig:
    return Rig(Clock(), None)


def assert_all_finished(watched: Watched) -> None:
    assert all(run.finished is not None for run in watched.runs)


# -- RUNNING ---------------------------------------------------------------------------------


def test_running_then_the_client_ends_by_itself_ended() -> None:
    for r in (no_fault_rig(), rig()):
        watched = r.watch()
        assert watched.state is State.ENDED and watched.reason is None
        assert len(watched.runs) == 1 and watched.last.returncode == 0


def test_running_a_tick_with_nothing_fired_stays_running() -> None:
    r = rig(fires={5.0: Fired.NOTHING})
    controller = r.controller()
    watched = controller.watch(r.first_run())
    assert watched.state is State.ENDED and len(watched.runs) == 1
    assert r.relaunched == [] and r.faults is not None and r.faults.notes == []


def test_a_client_that_reconnects_rides_through_the_restart() -> None:
    r = rig(fires={4.0: Fired.SERVER_RESTARTED}, takes_s=2.0)
    watched = r.watch(rides_through=True, resumable=False)
    assert watched.state is State.ENDED and watched.reason is None
    assert len(watched.runs) == 1 and not watched.runs[0].stopped  # type: ignore[attr-defined]


def test_the_client_ended_before_the_restart_finished_is_its_own_end() -> None:
    """The durability-loss bug: the acked-writes client's time ran out while the server
    restarted (at 9.5 s of a 10 s window, a restart of 3 s). Its end is the trial's end:
    no reason, nothing popped from an empty list."""
    r = rig(fires={9.5: Fired.SERVER_RESTARTED}, takes_s=3.0)
    watched = r.watch(rides_through=True, resumable=False)
    assert watched.state is State.ENDED and watched.reason is None
    assert len(watched.runs) == 1 and watched.last.returncode == 0
    assert r.relaunched == []


def test_a_fault_that_ends_a_resumable_run_starts_it_again_for_the_rest() -> None:
    r = rig(fires={3.0: Fired.SERVER_RESTARTED}, takes_s=1.5)
    watched = r.watch()
    assert watched.state is State.ENDED and watched.reason is None
    assert len(watched.runs) == 2 and watched.runs[0].stopped  # type: ignore[attr-defined]
    # The fault fired on the first tick at or after 3 s; the restart took 1.5 s.
    assert r.faults is not None
    (ended, _), (restarted, restarted_at) = r.faults.notes
    assert (ended, restarted) == ("client run ended", "client restarted")
    assert 4.5 <= restarted_at < 4.75
    assert r.relaunched == [math.floor(WINDOW_S - restarted_at)]
    assert watched.launched_s == [-WARMUP_S, restarted_at]
    assert_all_finished(watched)


def test_a_killed_client_is_started_again() -> None:
    r = rig(fires={2.0: Fired.CLIENT_KILLED})
    watched = r.watch()
    assert watched.state is State.ENDED and len(watched.runs) == 2
    assert watched.runs[0].finished is not None and watched.runs[0].finished.returncode == -9
    assert r.relaunched == [8]  # killed on the tick at 2 s: the 8 s left


def test_a_second_fault_starts_the_client_a_third_time() -> None:
    r = rig(fires={2.0: Fired.CLIENT_KILLED, 5.0: Fired.SERVER_RESTARTED}, takes_s=0.5)
    watched = r.watch()
    assert watched.state is State.ENDED and len(watched.runs) == 3
    assert len(watched.launched_s) == 3 and watched.launched_s == sorted(watched.launched_s)


def test_the_fault_fires_in_the_last_second_of_the_window_over() -> None:
    r = rig(fires={WINDOW_S - 0.6: Fired.CLIENT_KILLED})
    watched = r.watch()
    assert watched.state is State.OVER
    assert watched.reason is not None and "too little to start sysbench again" in watched.reason
    assert len(watched.runs) == 1 and r.relaunched == []
    assert_all_finished(watched)


def test_a_freeze_in_force_when_the_watch_ends_is_ended_with_it() -> None:
    """A client killed during a freeze in the last second: the watch is OVER at once,
    and the frozen server is thawed before the samplers' last query would wait on it."""
    r = rig(fires={WINDOW_S - 0.4: Fired.CLIENT_KILLED})
    watched = r.watch()
    assert watched.state is State.OVER
    assert r.faults is not None and r.faults.closed


def test_a_restart_that_outlasts_the_window_over() -> None:
    r = rig(fires={8.0: Fired.SERVER_RESTARTED}, takes_s=5.0)
    watched = r.watch()
    assert watched.state is State.OVER
    assert watched.reason == (
        "the fault's recovery outlasted the measured window: nothing left to measure"
    )
    assert_all_finished(watched)


def test_a_client_that_can_neither_resume_nor_reconnect_is_stopped() -> None:
    r = rig(fires={3.0: Fired.SERVER_RESTARTED})
    watched = r.watch(resumable=False)
    assert watched.state is State.STOPPED
    assert watched.reason == "sysbench ended with the fault and cannot be started again"
    assert_all_finished(watched)


def test_a_client_kill_is_no_ride_through() -> None:
    r = rig(fires={3.0: Fired.CLIENT_KILLED})
    watched = r.watch(resumable=False, rides_through=True)
    assert watched.state is State.STOPPED and "cannot be started again" in (watched.reason or "")


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (FaultFailed("kill_server: no recovery after SIGKILL: x"), "kill_server: no recovery"),
        (OSError(28, "No space left on device"), "faults: [Errno 28] No space left"),
    ],
)
def test_a_failed_fault_stops_the_client(error: Exception, reason: str) -> None:
    r = rig(fires={3.0: Fired.SERVER_RESTARTED}, raises=error)
    watched = r.watch()
    assert watched.state is State.STOPPED and (watched.reason or "").startswith(reason)
    assert watched.runs[0].stopped  # type: ignore[attr-defined]


def test_an_abort_stops_the_client() -> None:
    for r in (no_fault_rig(), rig()):
        r.aborts = [None, None, "server 'default' died: killed by signal 9"]
        watched = r.watch()
        assert watched.state is State.STOPPED and watched.reason is not None
        assert "died" in watched.reason and watched.runs[0].stopped  # type: ignore[attr-defined]


def test_the_time_limit_times_out_a_client_that_never_ends() -> None:
    r = no_fault_rig()
    watched = r.watch(r.first_run(lasts_s=None), timeout_s=5)  # type: ignore[arg-type]
    assert watched.state is State.TIMED_OUT and watched.timed_out and watched.reason is None
    assert r.clock.now >= 105


def test_the_faults_own_time_is_not_the_tools() -> None:
    """A restart of 20 s against a limit of 15 s: the limit is pushed back by it."""
    r = rig(fires={3.0: Fired.SERVER_RESTARTED}, takes_s=20.0)
    watched = r.watch(rides_through=True, resumable=False, timeout_s=15)  # type: ignore[arg-type]
    # It rode through, then its time ran out on its own (ended), not the limit.
    assert watched.state is State.ENDED


# -- HELD ------------------------------------------------------------------------------------


def test_a_run_failed_on_the_full_disk_is_held_then_started_again_once_freed() -> None:
    r = rig(full_between=(2.0, 5.0))
    controller = r.controller()
    first = r.first_run(lasts_s=WARMUP_S + 3.0, rc=1)  # fails at 3 s, the disk still full
    controller.watched = Watched([first], [-WARMUP_S], 30)
    controller._deadline = r.clock.now + 30
    assert r.faults is not None
    r.faults.start(r.clock.now + WARMUP_S)
    while controller.state is State.RUNNING:
        controller.step()
    assert controller.state is State.HELD and r.relaunched == []
    controller.step()
    assert controller.state is State.HELD  # still full at 3.25 s
    while controller.state is State.HELD:
        controller.step()
    assert controller.state is State.RUNNING and len(controller.watched.runs) == 2
    assert r.relaunched == [math.floor(WINDOW_S - controller.watched.launched_s[1])]
    assert 5.0 <= controller.watched.launched_s[1] < 5.5


def test_held_past_the_windows_last_second_over() -> None:
    r = rig(full_between=(2.0, WINDOW_S - 0.5))
    watched = r.watch(r.first_run(lasts_s=WARMUP_S + 3.0, rc=1))
    assert watched.state is State.OVER and "too little" in (watched.reason or "")


def test_held_then_the_server_dies_stopped() -> None:
    r = rig(full_between=(2.0, 6.0))
    r.aborts = [None] * 14 + ["server 'default' died"]
    watched = r.watch(r.first_run(lasts_s=WARMUP_S + 3.0, rc=1))
    assert watched.state is State.STOPPED and watched.reason == "server 'default' died"


def test_a_run_that_failed_on_the_full_disk_and_cannot_resume_ended() -> None:
    r = rig(full_between=(2.0, 5.0))
    watched = r.watch(r.first_run(lasts_s=WARMUP_S + 3.0, rc=1), resumable=False)
    assert watched.state is State.ENDED and watched.last.returncode == 1


def test_a_failed_run_with_no_disk_fault_ended() -> None:
    r = rig()
    watched = r.watch(r.first_run(lasts_s=WARMUP_S + 3.0, rc=1))
    assert watched.state is State.ENDED and watched.last.returncode == 1


def test_held_then_a_fault_fails_stopped() -> None:
    """A kill_server due while the client waits for the disk, and its restart fails."""
    failed = FaultFailed("kill_server: no recovery after SIGKILL: server 'default' exited")
    r = rig(full_between=(2.0, 6.0), fires={3.5: Fired.SERVER_RESTARTED}, raises=failed)
    watched = r.watch(r.first_run(lasts_s=WARMUP_S + 3.0, rc=1))
    assert watched.state is State.STOPPED
    assert (watched.reason or "").startswith("kill_server: no recovery")
    assert r.faults is not None and r.faults.closed


def test_a_failed_run_whose_server_is_seen_dead_a_moment_later_is_stopped_with_its_death() -> None:
    """The client noticed the lost server first (error 2013) and ended; the server's own
    exit shows a moment later: that death is the reason, not the client's error."""
    for r in (no_fault_rig(), rig()):
        r.aborts = [None, None, "server 'default' died (killed by SIGKILL)"]
        watched = r.watch(r.first_run(lasts_s=WARMUP_S + 1.0, rc=1))
        assert watched.state is State.STOPPED
        assert watched.reason == "server 'default' died (killed by SIGKILL)"


def test_held_the_server_the_full_disk_brought_down_is_not_resumed() -> None:
    """The run failed at 3 s on the full disk, the server died of it at 3.2 s; the disk
    is freed at 3.5 s: no client is started against the dead server."""
    r = rig(full_between=(2.0, 3.5))
    r.died_at_s = 3.2
    controller = r.controller()
    first = r.first_run(lasts_s=WARMUP_S + 3.0, rc=1)
    states = []
    controller.watched = Watched([first], [-WARMUP_S], 30)  # type: ignore[list-item]
    controller._deadline = r.clock.now + 30
    assert r.faults is not None
    r.faults.start(r.clock.now + WARMUP_S)
    while controller.state not in (State.STOPPED, State.ENDED, State.OVER):
        controller.step()
        states.append(controller.state)
    assert State.HELD in states and controller.state is State.STOPPED
    assert r.relaunched == []
