"""Operating-system settings as matrix factors: I/O scheduler, read-ahead, page cache.

``system.io_scheduler`` and ``system.read_ahead_kb`` apply to the block device
under the server's datadir; ``system.drop_caches: true`` empties the page cache
before every trial. Each value is checked before the run starts (root, the
device offers it), set before the trial, read back and recorded in the trial,
and every original value is put back at the end of the run, on error and on
Ctrl-C. For a managed server on another host the same code runs there, in dbrig's
agent (:mod:`dbrig.remote.agent`), against the device under that host's datadir.

Seed 003 compared cfq/noop/deadline; today's multi-queue names are none,
mq-deadline, kyber and bfq, whichever ``/sys/block/<dev>/queue/scheduler``
offers.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dbrig import proc
from dbrig.errors import ConfigError, ServerError
from dbrig.host.probe import block_device_of, parse_scheduler

log = logging.getLogger(__name__)


DEVICE_SETTINGS = ("io_scheduler", "read_ahead_kb")  # of the block device, not the host


class SystemSettings(BaseModel):
    """The scenario's ``system`` block."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    io_scheduler: str | None = Field(
        None, description="I/O scheduler of the datadir's block device (none, mq-deadline, ...)"
    )
    read_ahead_kb: int | None = Field(
        None, ge=0, le=1 << 20, description="read-ahead of the datadir's block device, KiB"
    )
    drop_caches: bool = Field(False, description="sync and drop the page cache before each trial")

    @property
    def device_setting(self) -> str | None:
        """The first setting of the block device this block sets (:data:`DEVICE_SETTINGS`),
        or None when it sets only host-wide ones (drop_caches) or nothing."""
        return next((k for k in DEVICE_SETTINGS if getattr(self, k) is not None), None)

    @property
    def active(self) -> bool:
        return self.io_scheduler is not None or self.read_ahead_kb is not None or self.drop_caches


class BlockDevice:
    """The tunables of one block device under ``/sys/block``."""

    def __init__(self, name: str, sys_root: Path = Path("/sys")) -> None:
        self.name = name
        self.queue = sys_root / "block" / name / "queue"

    def exists(self) -> bool:
        return self.queue.is_dir()

    def scheduler(self) -> tuple[str | None, list[str]]:
        return parse_scheduler(self._read("scheduler"))

    def read_ahead_kb(self) -> int:
        return int(self._read("read_ahead_kb"))

    def set_scheduler(self, name: str) -> str:
        self._write("scheduler", name)
        active, _ = self.scheduler()
        if active != name:
            raise ServerError(
                f"system.io_scheduler: set {name} on {self.name}, reads back {active}"
            )
        return active

    def set_read_ahead_kb(self, kib: int) -> int:
        self._write("read_ahead_kb", str(kib))
        value = self.read_ahead_kb()
        if value != kib:
            raise ServerError(f"system.read_ahead_kb: set {kib} on {self.name}, reads back {value}")
        return value

    def _read(self, leaf: str) -> str:
        return (self.queue / leaf).read_text().strip()

    def _write(self, leaf: str, value: str) -> None:
        try:
            (self.queue / leaf).write_text(value)
        except OSError as exc:
            raise ServerError(
                f"cannot write {value} to {self.queue / leaf}: {exc.strerror or exc}"
            ) from None


def device_under(path: Path) -> BlockDevice | None:
    """The block device holding ``path`` (or its nearest existing parent); read-only."""
    name = block_device_of(path)
    return BlockDevice(name) if name else None


def check(
    wanted: list[SystemSettings], device: BlockDevice | None, *, is_root: bool | None = None
) -> None:
    """Refuse, before anything runs, settings this machine cannot apply."""
    active = [s for s in wanted if s.active]
    if not active:
        return
    root = os.geteuid() == 0 if is_root is None else is_root
    if not root:
        raise ConfigError("system: changing the I/O scheduler, read-ahead or caches needs root")
    needs_device = any(s.io_scheduler or s.read_ahead_kb is not None for s in active)
    if not needs_device:
        return
    if device is None or not device.exists():
        name = device.name if device else "?"
        raise ConfigError(f"system: no block device queue for the datadir ({name}) under /sys")
    _, offered = device.scheduler()
    for s in active:
        if s.io_scheduler and s.io_scheduler not in offered:
            raise ConfigError(
                f"system.io_scheduler: '{s.io_scheduler}' is not offered by {device.name} "
                f"(expected one of: {', '.join(offered)})"
            )


class SystemState:
    """Applies settings trial by trial and puts the originals back at the end."""

    def __init__(
        self,
        device: BlockDevice | None,
        drop_caches_file: Path | None = None,
        memo: Path | None = None,
    ) -> None:
        """``memo``: a file that keeps the original values as soon as they are read, so
        a process killed before its restore leaves them for the next one (the agent's)."""
        self.device = device
        self.drop_caches_file = drop_caches_file or Path("/proc/sys/vm/drop_caches")
        self.memo = memo
        self._original: dict[str, Any] = self._read_memo()

    @property
    def originals(self) -> dict[str, Any]:
        """The values to put back, by setting."""
        return dict(self._original)

    def apply(self, settings: SystemSettings) -> dict[str, Any]:
        """Set what the trial asks for; returns the values read back, for the trial record.

        A setting this trial leaves unset goes back to its original value, so a cell
        without it does not inherit the previous cell's.
        """
        applied: dict[str, Any] = {}
        if self.device:
            scheduler = settings.io_scheduler or self._original.get("io_scheduler")
            if scheduler:
                self._remember("io_scheduler", lambda: self.device.scheduler()[0])
                applied["io_scheduler"] = self.device.set_scheduler(scheduler)
            read_ahead = settings.read_ahead_kb
            if read_ahead is None:
                read_ahead = self._original.get("read_ahead_kb")
            if read_ahead is not None:
                self._remember("read_ahead_kb", self.device.read_ahead_kb)
                applied["read_ahead_kb"] = self.device.set_read_ahead_kb(read_ahead)
        if settings.drop_caches:
            os.sync()
            self.drop_caches_file.write_text("3\n")
            applied["drop_caches"] = True
        return applied

    def _remember(self, key: str, read: Any) -> None:
        if key not in self._original:
            self._original[key] = read()
            self._write_memo()

    def _read_memo(self) -> dict[str, Any]:
        if self.memo is None or not self.memo.is_file():
            return {}
        try:
            saved = json.loads(self.memo.read_text())
        except (OSError, ValueError) as exc:
            log.error("cannot read the original system settings from %s: %s", self.memo, exc)
            return {}
        return {k: v for k, v in saved.items() if k in ("io_scheduler", "read_ahead_kb")}

    def _write_memo(self) -> None:
        if self.memo is None:
            return
        partial = self.memo.with_name(self.memo.name + ".partial")
        device = {"device": self.device.name} if self.device else {}
        partial.write_text(json.dumps({**self._original, **device}))
        partial.replace(self.memo)

    def restore(self) -> None:
        """Put every changed setting back as it was before the run."""
        if not self.device:
            return
        original = dict(self._original)
        if original.get("io_scheduler"):
            self._quietly(self.device.set_scheduler, original["io_scheduler"])
        if "read_ahead_kb" in original:
            self._quietly(self.device.set_read_ahead_kb, original["read_ahead_kb"])
        self._original.clear()  # only now: an interrupted restore can be run again
        if self.memo is not None:
            self.memo.unlink(missing_ok=True)

    def _quietly(self, setter: Any, value: Any) -> None:
        try:
            setter(value)
        except ServerError as exc:
            log.error("putting back a system setting failed: %s", exc)


MEMO_PREFIX = "dbrig-system-"  # + the pid of the dbrig that wrote it + ".json", in $TMPDIR


def run_memo(tmp: Path | None = None) -> Path:
    """Where this dbrig keeps the original values while its run changes them: a dbrig
    killed before its restore leaves the file for the next run (a reboot resets both)."""
    return (tmp or Path(tempfile.gettempdir())) / f"{MEMO_PREFIX}{os.getpid()}.json"


def restore_orphaned(tmp: Path | None = None, sys_root: Path = Path("/sys")) -> list[str]:
    """Put back the settings a dbrig now dead left changed (SIGKILL gives it no chance
    to), from its memo; returns one line per memo handled, for a warning."""
    said = []
    for memo in sorted((tmp or Path(tempfile.gettempdir())).glob(f"{MEMO_PREFIX}*.json")):
        pid = memo.name.removeprefix(MEMO_PREFIX).removesuffix(".json")
        if not pid.isdigit() or proc.alive(int(pid)):
            continue
        try:
            device = json.loads(memo.read_text()).get("device")
        except (OSError, ValueError):
            device = None
        if not device:
            memo.unlink(missing_ok=True)
            continue
        state = SystemState(BlockDevice(device, sys_root=sys_root), memo=memo)
        originals = ", ".join(f"{k}={v}" for k, v in state.originals.items())
        if os.geteuid() != 0:
            said.append(f"cannot put back {originals} on {device} (dbrig pid {pid}'s): not root")
            continue
        state.restore()
        said.append(f"put back {originals} on {device}, left changed by dbrig pid {pid}")
    return said
