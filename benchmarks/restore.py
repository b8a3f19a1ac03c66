#!/usr/bin/env python3
"""Restore and set-up costs on a datadir of sysbench tables, measured side by side.

Prepares sysbench tables in a sandbox (``--tables`` x ``--table-size``: 8 x 1M rows
is about 2 GiB) and snapshots it, then prints four ratios, each alternating A and B
(which goes first alternates per round) and giving the median and spread:

1. after a read-only trial: dbrig's restore ÷ ``rm -rf && cp -a`` of the whole datadir
   (issue 14's target: ≤ 0.1);
2. after an oltp_read_write trial: dbrig's restore ÷ copying just the changed files with
   ``cp -a`` (the same files, found beforehand, untimed; target ≤ 1.1), and where the
   restore's time went (scan, unlinking, cp, settle, manifest);
3. on XFS with reflink (a loop mount made here, as root): dbrig's restore after an
   oltp_read_write trial ÷ ``rm -rf && cp -a`` of the whole datadir on the work
   directory's filesystem (ext4 here; target ≤ 0.05);
4. the snapshot cache: a second run's set-up (fetching the cached snapshot and checking
   its digest) ÷ the first run's (init + prepare + snapshot + storing it in the cache),
   both timed in this process on the same data (target ≤ 0.1). The first run's set-up
   is made once; the ratio uses the median of the fetches.

    .venv/bin/python benchmarks/restore.py --rounds 5 --tables 8 --table-size 1000000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from dbrig import proc
from dbrig.host import probe
from dbrig.server import cache as sc
from dbrig.server import datadir as dd
from dbrig.server import manifest as mf
from dbrig.server.binary import find_server
from dbrig.server.sandbox import Sandbox
from dbrig.tools import sysbench

CONFIG = {"innodb_buffer_pool_size": "512M", "innodb_log_file_size": "96M"}


def tree_gib(root: Path) -> float:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**30


def whole_copy(snapshot: Path, datadir: Path) -> float:
    started = time.monotonic()
    shutil.rmtree(datadir)
    subprocess.run(["cp", "-a", str(snapshot), str(datadir)], check=True)
    return time.monotonic() - started


# Where a changed-files restore spends its time: seconds per phase of the last restore.
PHASES: dict[str, float] = defaultdict(float)
PHASE_HISTORY: list[dict[str, float]] = []
BASELINE_UNLINK: list[float] = []  # the cp-changed side's unlinks, per round
DIRTY: dict[str, list[str]] = defaultdict(list)  # /proc/meminfo Dirty + Writeback before each
# Both sides start from a clean page cache: otherwise up to GiBs of the trial's (and the
# previous side's) dirty pages are written back during whichever side runs next, and the
# ratio measures the disk's writeback more than the restore (--no-sync: as before).
SYNC_BEFORE_EACH = True


def dirty_kib() -> str:
    """Dirty and Writeback from /proc/meminfo: page cache still to reach the disk."""
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return "/".join(fields[k].split()[0] for k in ("Dirty", "Writeback"))


def _timed(name: str, fn: Callable) -> Callable:
    def wrapper(*args: object, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            PHASES[name] += time.perf_counter() - started

    return wrapper


def time_restore_phases() -> None:
    """Wrap the restore's steps (only in this script) to time them."""
    mf.scan = _timed("scan (lstat of every file)", mf.scan)
    mf.settle = _timed("settle (clock tick)", mf.settle)
    mf.save = _timed("manifest JSON", mf.save)
    dd._copy_files = _timed("unlink + cp", dd._copy_files)
    proc.run = _timed("cp (proc.run)", proc.run)


def print_phases() -> None:
    if not PHASE_HISTORY:
        return
    print("  dbrig restore by phase, median over rounds:", flush=True)
    for name in PHASE_HISTORY[0]:
        values = [h.get(name, 0.0) for h in PHASE_HISTORY]
        print(f"    {name}: {1000 * statistics.median(values):.1f} ms", flush=True)
    unlink = [h.get("unlink + cp", 0) - h.get("cp (proc.run)", 0) for h in PHASE_HISTORY]
    rest = [h["total"] - h.get("unlink + cp", 0) for h in PHASE_HISTORY]
    print(f"    of which unlinking the changed files: {1000 * statistics.median(unlink):.1f} ms")
    print(f"    everything but unlink + cp: {1000 * statistics.median(rest):.1f} ms", flush=True)
    if BASELINE_UNLINK:
        median = 1000 * statistics.median(BASELINE_UNLINK)
        print(f"  cp changed: unlinking the same files took {median:.1f} ms (median)")
    for name, values in DIRTY.items():
        print(f"  Dirty/Writeback KiB before each {name}: {', '.join(values)}", flush=True)


def changed_files_copy(snapshot: Path, datadir: Path) -> float:
    """The floor a restore of the changed files can reach: cp -a of exactly those files
    (found beforehand, untimed), one cp per directory, created files removed."""
    recorded = mf.load(dd.manifest_path(datadir))
    assert recorded is not None
    changes = mf.compare(recorded.tree, mf.scan(datadir))
    by_dir: dict[str, list[str]] = defaultdict(list)
    for rel in changes.changed:
        by_dir[os.path.dirname(rel)].append(rel)
    BASELINE_UNLINK.append(0.0)
    started = time.monotonic()
    for rel in changes.created_files:
        (datadir / rel).unlink()
    for parent, names in by_dir.items():
        unlinking = time.monotonic()
        for rel in names:
            (datadir / rel).unlink(missing_ok=True)
        BASELINE_UNLINK[-1] += time.monotonic() - unlinking
        sources = [str(snapshot / rel) for rel in names]
        subprocess.run(["cp", "-a", *sources, f"{datadir / parent}/"], check=True)
    return time.monotonic() - started


def dbrig_restore(snapshot: Path, datadir: Path) -> float:
    PHASES.clear()
    timing = dd.restore(snapshot, datadir)
    assert timing.path == "changed", timing
    PHASE_HISTORY.append({**PHASES, "total": timing.seconds})
    return timing.seconds


def trial(box: Sandbox, p: sysbench.SysbenchParams, test: str, work: Path) -> None:
    box.start(CONFIG)
    try:
        run = p.model_copy(update={"test": test, "time": 3, "threads": 2})
        argv = sysbench.build_command(run, box.endpoint(p.db), "run")
        proc.run(argv, timeout_s=60, stdout=work / f"{test}.out", merge_stderr=True)
    finally:
        box.stop()


def alternate(
    rounds: int,
    before: Callable[[], None],
    methods: dict[str, Callable[[], float]],
    after: Callable[[str], None] = lambda name: None,
) -> dict[str, list[float]]:
    names = list(methods)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            before()
            if SYNC_BEFORE_EACH:
                os.sync()  # untimed: the trial's writes and the other side's copy go out first
            DIRTY[name].append(dirty_kib())
            times[name].append(methods[name]())
            after(name)
        print("  round", i + 1, "  ".join(f"{n} {times[n][-1]:.3f} s" for n in names), flush=True)
    return times


def report(title: str, a: str, b: str, times: dict[str, list[float]], target: str) -> None:
    ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
    print(
        f"{title}: {a} / {b} median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} rounds; target {target}); "
        f"medians {statistics.median(times[a]):.3f} s vs {statistics.median(times[b]):.3f} s",
        flush=True,
    )


@contextlib.contextmanager
def xfs_loop_mount(size_bytes: int) -> Iterator[Path]:
    """An XFS filesystem with reflink in a sparse file, mounted; removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="dbrig-xfs-", dir="/tmp"))
    image, mount = work / "fs.img", work / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(size_bytes)
    try:
        subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], check=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
        try:
            yield mount
        finally:
            subprocess.run(["umount", str(mount)], check=True, timeout=120)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def prepare(box: Sandbox, p: sysbench.SysbenchParams, work: Path) -> None:
    box.initialize()
    box.start(CONFIG)
    box.prepare_accounts(p.db)
    argv = sysbench.build_command(p, box.endpoint(p.db), "prepare")
    if proc.run(argv, timeout_s=3600, stdout=work / "prepare.out").returncode:
        sys.exit("prepare failed")
    box.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--table-size", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: TMPDIR)")
    ap.add_argument("--skip", default="", help="comma-separated: readonly,readwrite,xfs,cache")
    ap.add_argument(
        "--no-sync", action="store_true", help="do not sync before each timed side (as before)"
    )
    args = ap.parse_args()
    global SYNC_BEFORE_EACH
    SYNC_BEFORE_EACH = not args.no_sync
    if args.rounds < 2:
        ap.error("--rounds: at least 2 (a spread needs two)")
    skip = set(filter(None, args.skip.split(",")))
    p = sysbench.SysbenchParams(tables=args.tables, table_size=args.table_size, threads=2)
    with tempfile.TemporaryDirectory(prefix="dbrig-restore-", dir=args.dir) as tmp:
        work = Path(tmp)
        box = Sandbox("bench", find_server(), work / "server")
        snapshot = work / "snapshot"
        try:
            started = time.monotonic()
            prepare(box, p, work)
            dd.snapshot(box.datadir, snapshot)
            first_setup = time.monotonic() - started
            fs = probe.filesystem_of(work).get("fstype", "?")
            print(
                f"datadir {tree_gib(snapshot):.2f} GiB ({args.tables} x {args.table_size} rows) "
                f"on {fs}, reflink {probe.supports_reflink(work)}; set-up {first_setup:.1f} s",
                flush=True,
            )
            if "readonly" not in skip:
                times = alternate(
                    args.rounds,
                    lambda: trial(box, p, "oltp_read_only", work),
                    {
                        "restore": lambda: dbrig_restore(snapshot, box.datadir),
                        "cp -a": lambda: whole_copy(snapshot, box.datadir),
                    },
                    lambda name: dd.record_manifest(box.datadir, snapshot),
                )
                report("after a read-only trial", "restore", "cp -a", times, "<= 0.1")
            if "readwrite" not in skip:
                time_restore_phases()
                PHASE_HISTORY.clear()
                times = alternate(
                    args.rounds,
                    lambda: trial(box, p, "oltp_read_write", work),
                    {
                        "restore": lambda: dbrig_restore(snapshot, box.datadir),
                        "cp changed": lambda: changed_files_copy(snapshot, box.datadir),
                    },
                    lambda name: dd.record_manifest(box.datadir, snapshot),
                )
                report("after an oltp_read_write trial", "restore", "cp changed", times, "<= 1.1")
                print_phases()
            if "xfs" not in skip:
                xfs_ratio(args.rounds, box, p, snapshot, work)
            if "cache" not in skip:
                cache_ratio(args.rounds, snapshot, work, first_setup)
        finally:
            box.close()


def xfs_ratio(
    rounds: int, box: Sandbox, p: sysbench.SysbenchParams, snapshot: Path, work: Path
) -> None:
    size = int(tree_gib(snapshot) * 2**30)
    with xfs_loop_mount(max(3 * size + 2**30, 2**31)) as mount:
        on_xfs = Sandbox("bench-xfs", box.binary, mount / "server")
        xfs_snapshot = mount / "snapshot"
        subprocess.run(["cp", "-a", str(snapshot), str(xfs_snapshot)], check=True)
        dd.restore(xfs_snapshot, on_xfs.datadir)
        try:
            times = alternate(
                rounds,
                lambda: None,
                {
                    "xfs restore": lambda: (
                        trial(on_xfs, p, "oltp_read_write", work),
                        dbrig_restore(xfs_snapshot, on_xfs.datadir),
                    )[1],
                    "ext4 cp -a": lambda: whole_copy(snapshot, box.datadir),
                },
            )
        finally:
            on_xfs.close()
    dd.record_manifest(box.datadir, snapshot)
    report("XFS workspace after oltp_read_write", "xfs restore", "ext4 cp -a", times, "<= 0.05")


def cache_ratio(rounds: int, snapshot: Path, work: Path, first_setup: float) -> None:
    cache = sc.SnapshotCache.open(work / "cache", say=print)
    key = {"data_set": "bench"}
    started = time.monotonic()
    assert cache.store(key, snapshot)
    first = first_setup + time.monotonic() - started
    fetches = []
    for i in range(rounds):
        target = work / f"fetched-{i}"
        started = time.monotonic()
        assert cache.fetch(key, target)
        fetches.append(time.monotonic() - started)
        shutil.rmtree(target)
    ratios = [f / first for f in fetches]
    how = "clones" if probe.supports_reflink(work) else "copies"
    print(
        f"snapshot cache: second run's set-up / first run's median "
        f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, "
        f"{rounds} fetches; target <= 0.1); {statistics.median(fetches):.2f} s vs {first:.1f} s "
        f"(cache on the work directory's filesystem: {how})",
        flush=True,
    )


if __name__ == "__main__":
    main()
