"""Faults injected into a trial under load, their timeline, and what recovery they cost.

A scenario's ``faults:`` block (:class:`dbrig.scenario.model.Faults`) names up to
three faults, each at ``at`` seconds into the measured window. The trial's watch
loop calls :meth:`FaultInjector.tick` every quarter second; the injector fires
what is due:

- ``kill_server``: SIGKILL or SIGTERM to the managed server, a wait for it to exit,
  a restart on the same datadir (no restore) with the cell's settings, and a first
  query; the InnoDB crash recovery is then read from the error log the restart
  wrote. SIGSTOP freezes it instead, and SIGCONT follows ``for`` seconds later.
- ``kill_client``: SIGKILL to the workload tool (a client crash).
- ``delete_file``: a file of the datadir unlinked (the server keeps what it has open).

``tick`` says what the faults that fired did to the client (:class:`Fired`): the
fault controller (run/fault_control.py) decides what follows, e.g. the workload
started again for the rest of the window (:class:`~dbrig.tools.base.ResumableWorkload`).
A restart that fails, or a server that does not exit after its signal within
``timeout``, raises :class:`FaultFailed`: the trial fails with that reason and the run
goes on.

Every step is stamped on the measured window's clock (seconds after the warm-up)
and written with the recovery details to the trial's ``faults.json``.
"""

from __future__ import annotations

import contextlib
import enum
import json
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dbrig.analysis.recovery import (
    ClientRun,
    parse_recovery_log,
    recovery_metrics,
    throughput_recovery,
    window_rate,
)
from dbrig.errors import DbrigError
from dbrig.metrics import throughput_metrics
from dbrig.run.disk_fault import (
    FILLER,
    error_lines,
    fill,
    first_errors,
    free_kb,
    on_workspace,
    read_from,
    unshare,
)
from dbrig.run.fault_timeline import (
    FAULT_METRIC_NAMES,
    Event,
    client_out_s,
    client_window_s,
)
from dbrig.scenario.model import (
    DeleteFile,
    DiskFull,
    Faults,
    KillClient,
    KillServer,
    ManagedServer,
)
from dbrig.server.handles import ManagedServerHandle

TIMELINE_FILE = "faults.json"
_SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "STOP": signal.SIGSTOP}


def describe(faults: Faults, rides_through: bool = False) -> list[str]:
    """One line per fault, for the dry run: what happens when. ``rides_through``: the
    workload reconnects by itself, so a restart does not end its run."""
    lines = []
    for key, fault in faults.given.items():
        when = f"at {fault.at:g} s"
        if isinstance(fault, KillServer) and fault.ends_client:
            client = (
                "the workload reconnects by itself"
                if rides_through
                else "the workload started again for the rest of the window"
            )
            lines.append(
                f"{key}: SIG{fault.signal} {when}, restart on the same datadir (timeout "
                f"{fault.timeout:g} s), {client}"
            )
        elif isinstance(fault, KillServer):
            lines.append(f"{key}: SIGSTOP {when}, SIGCONT {fault.frozen_s:g} s later")
        elif isinstance(fault, KillClient):
            lines.append(f"{key}: SIGKILL to the workload {when}, started again at once")
        elif isinstance(fault, DiskFull):
            lines.append(
                f"{key}: the datadir's filesystem filled {when}, freed {fault.for_:g} s later"
            )
        else:
            lines.append(f"{key}: delete <datadir>/{fault.path} {when}")
    return lines


class Fired(enum.Enum):
    """What the faults that fired on a tick did to the client."""

    NOTHING = "nothing"  # no fault, or none the client notices at once
    SERVER_RESTARTED = "server restarted"  # killed and restarted: its connections dropped
    CLIENT_KILLED = "client killed"


class FaultFailed(DbrigError):
    """A fault's recovery failed: the trial fails with this reason."""


class FaultInjector:
    """Fires a trial's faults on time and records what happened."""

    def __init__(
        self,
        faults: Faults,
        server: ManagedServerHandle,
        spec: ManagedServer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.faults = faults
        self.server = server
        self.spec = spec
        self.clock = clock
        self.events: list[Event] = []
        self.metrics: dict[str, float] = {}
        self.recovery: dict[str, Any] = {}
        self.server_errors: list[str] = []  # [ERROR] lines logged while the disk was full
        self._pending = list(faults.given.values())
        self._measure_start: float | None = None
        self._cont_due: float | None = None
        self._free_due: float | None = None
        self._filler: Path | None = None
        self._disk_log_offset = 0
        self._disk_resumed = False
        self._disrupted_at: float | None = None
        self._disruption_ended_at: float | None = None  # a freeze thawed, a disk freed

    # -- the schedule ---------------------------------------------------------------

    def start(self, measure_start: float) -> None:
        """The measured window starts at ``measure_start`` on the clock."""
        self._measure_start = measure_start

    def now_s(self) -> float:
        assert self._measure_start is not None, "start() first"
        return self.clock() - self._measure_start

    def _note(self, what: str, **detail: Any) -> float:
        t = self.now_s()
        self.events.append(Event(round(t, 3), what, detail))
        return t

    def tick(self, kill_client: Callable[[], None]) -> Fired:
        """Fire what is due; what it did to the client."""
        if self._measure_start is None:
            return Fired.NOTHING
        fired = Fired.NOTHING
        if self._cont_due is not None and self.clock() >= self._cont_due:
            self._thaw()
        if self._free_due is not None and self.clock() >= self._free_due:
            self._free_disk()
        while self._pending and self._pending[0].at <= self.now_s():
            fault = self._pending.pop(0)
            self.metrics.setdefault("fault_at_s", self.now_s())
            if not isinstance(fault, DeleteFile):  # the fault the throughput recovers from
                self._disrupted_at = self.now_s()
            if isinstance(fault, KillServer):
                if self._kill_server(fault) and fired is Fired.NOTHING:
                    fired = Fired.SERVER_RESTARTED
            elif isinstance(fault, KillClient):
                self._note("client killed", signal="KILL")
                kill_client()
                fired = Fired.CLIENT_KILLED
            elif isinstance(fault, DeleteFile):
                self._delete_file(fault)
            elif isinstance(fault, DiskFull):
                self._fill_disk(fault)
        return fired

    def close(self) -> None:
        """A server still frozen is thawed, a full disk freed (the trial ended first)."""
        if self._cont_due is not None:
            self._thaw()
        if self._filler is not None:
            self._free_disk()

    def disk_ended_run(self) -> bool:
        """True (once) when the workload's run ended after the disk was filled: the
        trial waits for the disk to be freed and starts it again."""
        freed = any(e.what == "disk freed" for e in self.events)
        if self._disk_resumed or (self._filler is None and not freed):
            return False
        self._disk_resumed = True
        return True

    def disk_is_full(self) -> bool:
        return self._free_due is not None

    # -- the faults --------------------------------------------------------------------

    def _kill_server(self, fault: KillServer) -> bool:
        sandbox = self.server.sandbox
        sent = self._note("signal sent", signal=fault.signal)
        sandbox.signal(_SIGNALS[fault.signal])
        if fault.signal == "STOP":
            self._cont_due = self.clock() + fault.frozen_s
            return False
        if not sandbox.wait_exit(fault.timeout):
            raise FaultFailed(
                f"kill_server: the server still ran {fault.timeout:g} s after SIG{fault.signal}"
            )
        gone = self._note("server gone")
        self.metrics["server_exit_s"] = gone - sent
        log_offset = sandbox.log_size
        self._restart(fault, sent)
        log_text = read_from(sandbox.error_log, log_offset)
        found = parse_recovery_log(log_text)
        self.metrics.update(recovery_metrics(found))
        self.recovery = {
            "crash_recovery": found.crash_recovery,
            "redo_bytes": found.redo_bytes,
            "pages_to_recover": found.pages_to_recover,
            "trx_to_roll_back": found.trx_to_roll_back,
            "rows_to_undo": found.rows_to_undo,
            "log_stamps": {k: v.isoformat(sep=" ") for k, v in found.stamps.items()},
        }
        return True

    def _restart(self, fault: KillServer, sent: float) -> None:
        """Start again on the datadir as the fault left it, and ask one query."""
        sandbox = self.server.sandbox
        restarted = self._note("restart")
        saved = sandbox.startup_timeout_s
        sandbox.startup_timeout_s = fault.timeout
        try:
            self.server.start(self.spec)
            with contextlib.closing(sandbox.connect()) as conn, conn.cursor() as cur:
                cur.execute("SELECT 1")
        except DbrigError as exc:
            self._note("restart failed", reason=exc.message)
            reason = f"kill_server: no recovery after SIG{fault.signal}: {exc.message}"
            raise FaultFailed(reason) from exc
        except Exception as exc:  # the first query failed: pymysql's errors
            self._note("restart failed", reason=str(exc))
            raise FaultFailed(
                f"kill_server: the restarted server failed its first query: {exc}"
            ) from exc
        finally:
            sandbox.startup_timeout_s = saved
        answered = self._note("first query")
        self.metrics["restart_to_query_s"] = answered - restarted
        self.metrics["downtime_s"] = answered - sent

    def _thaw(self) -> None:
        self._cont_due = None
        with contextlib.suppress(DbrigError, ProcessLookupError):
            self.server.sandbox.signal(signal.SIGCONT)
        thawed = self._note("signal sent", signal="CONT")
        self._disruption_ended_at = thawed
        frozen = next(e.t_s for e in self.events if e.detail.get("signal") == "STOP")
        self.metrics["downtime_s"] = thawed - frozen

    def _fill_disk(self, fault: DiskFull) -> None:
        """Fill the filesystem under the datadir with one preallocated file, chunk by
        chunk until no chunk fits (the last few KiB the filesystem keeps for itself)."""
        sandbox = self.server.sandbox
        home = sandbox.datadir.parent
        if not on_workspace(home):
            raise FaultFailed(f"disk_full: {home} is not on a filesystem dbrig made; not filled")
        self._disk_log_offset = sandbox.log_size
        unshared_mb = round(unshare(sandbox.datadir) / 2**20, 1)
        self._filler = home / FILLER  # set first: close() removes a filler cut short too
        filled_mb = round(fill(self._filler) / 2**20, 1)
        self._note(
            "disk filled", unshared_mb=unshared_mb, filled_mb=filled_mb, free_kb=free_kb(home)
        )
        self.metrics["disk_fill_mb"] = filled_mb
        self._free_due = self.clock() + fault.for_

    def _free_disk(self) -> None:
        self._free_due = None
        filler, self._filler = self._filler, None
        if filler is not None:
            filler.unlink(missing_ok=True)
        freed = self._note("disk freed")
        self._disruption_ended_at = freed
        filled = next(e.t_s for e in self.events if e.what == "disk filled")
        self.metrics["disk_full_s"] = freed - filled
        logged = read_from(self.server.sandbox.error_log, self._disk_log_offset)
        self.metrics["server_log_errors"] = float(len(error_lines(logged)))
        self.server_errors = first_errors(logged)

    def _delete_file(self, fault: DeleteFile) -> None:
        path = self.server.sandbox.datadir / fault.path
        if not path.is_file():
            self._note("file not found", path=fault.path)
            raise FaultFailed(f"delete_file: {fault.path} is not a file in the datadir")
        path.unlink()
        self._note("file deleted", path=fault.path)

    # -- after the trial -----------------------------------------------------------------

    def client_resumed(self) -> float:
        return self._note("client restarted")

    def client_started(self, t_s: float) -> None:
        """The restarted client said it started (sysbench: every thread connected)."""
        self.events.append(Event(round(t_s, 3), "client started"))

    def client_ended(self, t_s: float) -> None:
        self.events.append(Event(round(t_s, 3), "client run ended"))

    def explain_client_end(self, reason: str | None, run: int = 0) -> None:
        """What the workload said when a fault ended its run number ``run`` (0: the
        first), its failure reason, on that run's "client run ended" event."""
        ended = [e for e in self.events if e.what == "client run ended"]
        if run < len(ended) and reason:
            ended[run].detail["reason"] = reason

    def analyse(
        self,
        intervals: pd.DataFrame | None,
        interval_s: float | None,
        window_s: float,
        counted: Sequence[ClientRun] = (),
        counted_window_s: float | None = None,
    ) -> dict[str, float]:
        """The fault metrics, throughput recovery included (from the combined interval
        series on the measured clock: ``t_s`` is where each interval ends). The window's
        rate comes from ``counted``, what each run of the client counted itself (its
        summary), not from the progress lines: a second without a line, or a line
        printed twice, would skew it. ``counted_window_s``: the part of the window those
        runs counted over, where the trial knows it (a client started again runs whole
        seconds: the window's rest rounded down)."""
        out = dict(self.metrics)
        client_out = client_out_s(self.events)
        if client_out is not None:
            out["client_out_s"] = client_out
        fault_at = self._disrupted_at
        if intervals is None or interval_s is None or fault_at is None or intervals.empty:
            return out
        rate = next(
            (m.name for m in throughput_metrics(per_interval=True) if m.name in intervals), None
        )
        if rate is None:
            return out
        ends = [float(t) for t in intervals["t_s"]]
        rates = [float(r) for r in intervals[rate]]
        errors = (
            list(map(float, intervals["errors_per_s"])) if "errors_per_s" in intervals else None
        )
        back = throughput_recovery(
            ends,
            rates,
            fault_at,
            interval_s=interval_s,
            errors_per_s=errors,
            fault_end_s=self._disruption_ended_at,
        )
        if errors is not None:
            out["client_errors"] = back.errors
        recovered = back.recovered_after(fault_at)
        if recovered is not None:
            out["throughput_recovered_s"] = recovered
            self.events.append(Event(round(back.recovered_at_s or 0, 3), "throughput recovered"))
        window = counted_window_s or client_window_s(self.events, ends, window_s, interval_s)
        whole = window_rate(counted, window)
        if whole is not None and rate == "tps":
            out["fault_window_tps"] = whole
        return out

    def timeline(self) -> list[dict[str, Any]]:
        ordered = sorted(self.events, key=lambda e: e.t_s)
        return [{"t_s": e.t_s, "event": e.what, **e.detail} for e in ordered]

    def save(self, folder: Path, metrics: Mapping[str, float]) -> None:
        data = {
            "faults": self.faults.model_dump(by_alias=True, exclude_none=True),
            "timeline": self.timeline(),
            "innodb_recovery": self.recovery,
            "server_errors": self.server_errors,
            "metrics": {k: v for k, v in metrics.items() if k in FAULT_METRIC_NAMES},
        }
        (folder / TIMELINE_FILE).write_text(json.dumps(data, indent=2) + "\n")
