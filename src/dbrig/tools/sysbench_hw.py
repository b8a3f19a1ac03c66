"""sysbench's hardware tests (cpu, memory, threads, mutex, fileio).

Pure helpers for :mod:`dbrig.tools.sysbench`: which options belong to which test,
how they become argv, and what a fileio data set is.

What needs a server
-------------------
The five hardware tests never connect to a database. A Lua script is not read for
clues: it gets a server unless its scenario declares ``needs_server: false``, and the
commands it defines are asked of sysbench (:mod:`dbrig.tools.lua_script`).

What a fileio data set is
-------------------------
``sysbench fileio prepare`` writes ``file_num`` files of zeros adding up to
``file_total_size`` in its working directory. Checked on 1.0.20: files prepared
with ``--file-block-size`` 4096 and 65536 have the same bytes, and a run with
another block size reads them fine, while a run with another total size or file
count stops with ``FATAL: Size of file 'test_file.0' is 2MiB, but at least 4MiB is
expected``. So the key is (file_num, file_total_size in bytes, directory): the
block size, the test mode and the flags change the run, not the files.

Except ``seqwr``, the "sequential write (creation) test": it opens the files
with truncation and writes them anew (checked on 1.0.20: after a prepare of
2 x 32 MiB, ``seqwr --events=10`` leaves files of 160 KiB and 0 bytes, and
every later mode then fails with "Size of file ... is expected"). So seqwr
cells never share the prepared files: they have a data set of their own,
with nothing to prepare (seqwr makes its files itself), in a folder of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from dbrig.tools.base import CellCheck, HostFacts, Setting
from dbrig.util.units import parse_size, size_text, to_float

HardwareTest = Literal["cpu", "memory", "threads", "mutex", "fileio"]

# Every option of each test, by sysbench's own name (dashes become underscores).
TEST_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "cpu": ("cpu_max_prime",),
    "memory": ("memory_block_size", "memory_total_size", "memory_oper", "memory_access_mode"),
    "threads": ("thread_yields", "thread_locks"),
    "mutex": ("mutex_num", "mutex_locks", "mutex_loops"),
    "fileio": (
        "file_num",
        "file_total_size",
        "file_test_mode",
        "file_io_mode",
        "file_extra_flags",
        "file_fsync_freq",
        "file_fsync_all",
        "file_rw_ratio",
        "file_block_size",
        "directory",
    ),
}
ALL_TEST_OPTIONS = frozenset(o for names in TEST_OPTIONS.values() for o in names)
# Options that are dbrig's, not sysbench's: never rendered as --flags.
DBRIG_ONLY = frozenset({"directory"})
BOOL_HW_OPTIONS = frozenset({"file_fsync_all"})
SIZE_OPTIONS = frozenset({"memory_block_size", "memory_total_size", "file_total_size"})
FILEIO_DEFAULT_NUM = 128  # sysbench 1.0.20's --file-num default
FILEIO_DEFAULT_TOTAL = "2G"  # and its --file-total-size default


def wrong_test_options(test: str, given: Mapping[str, object]) -> list[str]:
    """The hardware options set in ``given`` that ``test`` does not take."""
    allowed = set(TEST_OPTIONS.get(test, ()))
    return [name for name, value in given.items() if value is not None and name not in allowed]


def option_flag(name: str, value: object) -> str:
    """``--file-total-size=64M``; booleans as on/off, as sysbench wants them."""
    if isinstance(value, bool):
        value = "on" if value else "off"
    return f"--{name.replace('_', '-')}={value}"


def test_flags(test: str, values: Mapping[str, object]) -> list[str]:
    """The test's own options that are set, in the order sysbench documents them."""
    return [
        option_flag(name, values[name])
        for name in TEST_OPTIONS[test]
        if name not in DBRIG_ONLY and values.get(name) is not None
    ]


def fileio_file_flags(values: Mapping[str, object]) -> list[str]:
    """What prepare, run and cleanup must agree on: the file count and the total size."""
    return [
        option_flag("file_num", values.get("file_num") or FILEIO_DEFAULT_NUM),
        option_flag("file_total_size", values.get("file_total_size") or FILEIO_DEFAULT_TOTAL),
    ]


def fileio_total_bytes(values: Mapping[str, object]) -> int:
    """The size fileio's prepare writes, in bytes."""
    return parse_size(values.get("file_total_size") or FILEIO_DEFAULT_TOTAL) or 0


# --- the report's warnings about the hardware tests ------------------------------------------


def cell_test(setting: Setting) -> str | None:
    """A cell's test as saved (None for a Lua script, or when the block leaves it out)."""
    return None if setting("script") else setting("test")


def _page_cache(setting: Setting, host: HostFacts) -> tuple[str, float] | None:
    """fileio on files that fit in RAM measures the page cache unless O_DIRECT skips it."""
    ram = host.memory_bytes
    if not ram or cell_test(setting) != "fileio" or setting("file_extra_flags") == "direct":
        return None
    size = parse_size(setting("file_total_size") or FILEIO_DEFAULT_TOTAL)
    if size is None or size >= ram:
        return None
    return f"file_total_size {size_text(size)} < RAM {size_text(ram)}", ram / max(size, 1)


def _threads_over_cores(setting: Setting, host: HostFacts) -> tuple[str, float] | None:
    """cpu and mutex answer a per-core question; more threads than cores time-share them."""
    cores = host.cpu_count
    test = cell_test(setting)
    threads = to_float(setting("threads")) or 1
    if not cores or test not in ("cpu", "mutex") or threads <= cores:
        return None
    plural = "s" if cores != 1 else ""
    return f"{test} with {threads:.0f} threads on {cores:.0f} core{plural}", threads / cores


CELL_CHECKS = (
    CellCheck(
        "page_cache",
        summary="fileio fits in RAM",
        suffix=" without file_extra_flags: direct: the page cache is measured, not the disk; "
        "use direct or files larger than RAM",
        where="the file_total_size of every cell in the report's matrix table",
        check=_page_cache,
    ),
    CellCheck(
        "threads_over_cores",
        summary="more threads than cores",
        suffix=" (more threads than cores: this measures time-sharing, not per-core speed)",
        where="the threads of every cell in the report's matrix table",
        check=_threads_over_cores,
    ),
)
