"""Per-cell means over the measure phase of the sampler CSVs: :func:`summarize_cell`."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

import pandas as pd

from dbrig.sampling.procs import KERNEL_ROLE
from dbrig.sampling.schedule import MEASURE


def _measured(path: Path) -> pd.DataFrame | None:
    """The measure-phase rows of one sampler CSV, or None if there are none."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    frame = pd.read_csv(path, on_bad_lines="skip")
    if "phase" not in frame.columns:
        return None
    frame = frame[frame["phase"] == MEASURE]
    return frame if len(frame) else None


def _weighted_mean(values: pd.Series, weights: pd.Series) -> float | None:
    """Time-weighted mean: rows covering longer intervals count more; empty rows are left out."""
    values = pd.to_numeric(values, errors="coerce")
    weights = pd.to_numeric(weights, errors="coerce")
    keep = values.notna() & weights.notna() & (weights > 0)
    if not keep.any():
        return None
    return float((values[keep] * weights[keep]).sum() / weights[keep].sum())


def _integral(rates: pd.Series, weights: pd.Series) -> float | None:
    """Sum of rate * interval over the rows with a value: the total over the window."""
    rates = pd.to_numeric(rates, errors="coerce")
    weights = pd.to_numeric(weights, errors="coerce")
    keep = rates.notna() & weights.notna()
    if not keep.any():
        return None
    return float((rates[keep] * weights[keep]).sum())


def _mean(values: Iterable[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def _put(summary: dict[str, float], key: str, value: float | None) -> None:
    if value is not None and math.isfinite(value):
        summary[key] = float(value)


def _summarize_cpu(frame: pd.DataFrame, pinned_cores: Collection[int] | None) -> dict[str, float]:
    summary: dict[str, float] = {}
    busy: dict[int, float | None] = {}
    iowait, steal = [], []
    for core, rows in frame.groupby("core"):
        busy[int(core)] = _weighted_mean(rows["busy_pct"], rows["interval_s"])
        iowait.append(_weighted_mean(rows["iowait_pct"], rows["interval_s"]))
        steal.append(_weighted_mean(rows["steal_pct"], rows["interval_s"]))
    _put(summary, "cpu_busy_pct", _mean(busy.values()))
    for core, value in sorted(busy.items()):
        _put(summary, f"cpu_busy_pct_core{core}", value)
    if pinned_cores is not None:
        _put(summary, "pinned_cores_busy_pct", _mean(busy.get(core) for core in pinned_cores))
    _put(summary, "iowait_pct", _mean(iowait))
    _put(summary, "steal_pct", _mean(steal))
    return summary


def _summarize_disk(frame: pd.DataFrame) -> dict[str, float]:
    summary: dict[str, float] = {}
    weights = frame["interval_s"]
    ios_per_s = frame["reads_per_s"] + frame["writes_per_s"]
    devices = [rows for _, rows in frame.groupby("device")]

    def total(column: pd.Series) -> float | None:
        per_device = [_weighted_mean(column[rows.index], weights[rows.index]) for rows in devices]
        known = [value for value in per_device if value is not None]
        return sum(known) if known else None

    _put(summary, "disk_iops", total(ios_per_s))
    _put(summary, "disk_read_mb_per_s", total(frame["read_mb_per_s"]))
    _put(summary, "disk_write_mb_per_s", total(frame["write_mb_per_s"]))
    ios = ios_per_s * weights
    with_await = frame["await_ms"].notna() & ios.notna() & (ios > 0)
    if with_await.any():
        _put(
            summary,
            "disk_await_ms",
            float((frame["await_ms"][with_await] * ios[with_await]).sum() / ios[with_await].sum()),
        )
    utils = [_weighted_mean(rows["util_pct"], rows["interval_s"]) for rows in devices]
    _put(summary, "disk_util_pct", _mean(utils))
    return summary


def _summarize_memory(frame: pd.DataFrame) -> dict[str, float]:
    summary: dict[str, float] = {}
    for column in ("swap_in_mb_per_s", "swap_out_mb_per_s"):
        _put(summary, column, _weighted_mean(frame[column], frame["interval_s"]))
    available = pd.to_numeric(frame["available_mb"], errors="coerce")
    if available.notna().any():
        _put(summary, "mem_available_mb_min", float(available.min()))
    return summary


def role_key(role: str, prefixes: Mapping[str, str] | None = None) -> str:
    """The prefix of a role's summary keys: the one ``prefixes`` gives it (an interference
    tool's ``column_prefix``), else its name sanitised (``my-tool`` -> ``my_tool``)."""
    return (prefixes or {}).get(role) or re.sub(r"\W+", "_", role).strip("_").lower()


def _summarize_procs(frame: pd.DataFrame, prefixes: Mapping[str, str]) -> dict[str, float]:
    summary: dict[str, float] = {}
    for role, rows in frame.groupby("role"):
        key, weights = role_key(str(role), prefixes), rows["interval_s"]
        cpu_s = _integral(rows["cpu_pct"], weights)
        _put(summary, f"{key}_cpu_pct", _weighted_mean(rows["cpu_pct"], weights))
        _put(summary, f"{key}_cpu_s", None if cpu_s is None else cpu_s / 100.0)
        if role == KERNEL_ROLE:  # their CPU only: no memory, switches or I/O of their own
            continue
        rss = pd.to_numeric(rows["rss_mb"], errors="coerce")
        if rss.notna().any():
            _put(summary, f"{key}_rss_mb_max", float(rss.max()))
        _put(summary, f"{key}_ctx_switches", _integral(rows["ctx_switches_per_s"], weights))
        _put(summary, f"{key}_read_mb_per_s", _weighted_mean(rows["read_mb_per_s"], weights))
        _put(summary, f"{key}_write_mb_per_s", _weighted_mean(rows["write_mb_per_s"], weights))
    return summary


def _other_cpu_pct(cpu: pd.DataFrame, procs: pd.DataFrame | None, sampler_pct: float) -> float:
    """The host's CPU busy in processes dbrig did not start, % of the host (mean over
    cores): busy time less steal and interrupts (the hypervisor's, and the kernel's work
    for everyone), less the followed processes', the kernel threads' (writeback, loop
    devices, journals: mostly the server's I/O) and the samplers' own share."""
    process_busy = cpu["busy_pct"].copy()
    for column in ("steal_pct", "irq_pct", "softirq_pct"):
        if column in cpu:
            process_busy -= pd.to_numeric(cpu[column], errors="coerce").fillna(0.0)
    per_core = [
        _weighted_mean(process_busy[rows.index], rows["interval_s"])
        for _, rows in cpu.groupby("core")
    ]
    busy = _mean(per_core) or 0.0
    # Each process's CPU over the whole window: one that ran half of it counts half.
    window_s = _mean(float(rows["interval_s"].sum()) for _, rows in cpu.groupby("core"))
    ours = sampler_pct
    if procs is not None and window_s:
        for _, rows in procs.groupby("role"):
            ours += (_integral(rows["cpu_pct"], rows["interval_s"]) or 0.0) / window_s
    return max(0.0, busy - ours / max(1, len(per_core)))


def _summarize_status(frame: pd.DataFrame) -> dict[str, float]:
    summary: dict[str, float] = {}
    if "questions_per_s" in frame.columns:
        _put(
            summary,
            "questions_per_s",
            _weighted_mean(frame["questions_per_s"], frame["interval_s"]),
        )
    reads_col, requests_col = (
        "innodb_buffer_pool_reads_per_s",
        "innodb_buffer_pool_read_requests_per_s",
    )
    if reads_col in frame.columns and requests_col in frame.columns:
        both = frame[frame[reads_col].notna() & frame[requests_col].notna()]
        reads = _integral(both[reads_col], both["interval_s"])
        requests = _integral(both[requests_col], both["interval_s"])
        if reads is not None and requests:
            _put(summary, "buffer_pool_hit_ratio", 1.0 - reads / requests)
    return summary


def _summarize_sampler(frame: pd.DataFrame) -> dict[str, float]:
    shares = []
    for _, rows in frame.groupby("sampler"):
        keep = rows["cpu_s"].notna() & rows["interval_s"].notna()
        seconds = rows["interval_s"][keep].sum()
        if seconds > 0:
            shares.append(100.0 * float(rows["cpu_s"][keep].sum()) / float(seconds))
    summary: dict[str, float] = {}
    if shares:
        _put(summary, "sampler_cpu_pct", sum(shares))
    return summary


def summarize_cell(
    cell_dir: Path | str,
    *,
    pinned_cores: Collection[int] | None = None,
    processes_here: bool = True,
    role_prefixes: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Per-cell means over the measure phase of the sampler CSVs in ``cell_dir``.

    Keys (absent when their file is missing, has no measure rows, or the value is undefined):

    - cpu.csv: ``cpu_busy_pct`` (mean over cores), ``cpu_busy_pct_core<N>``,
      ``pinned_cores_busy_pct`` (mean over ``pinned_cores``), ``iowait_pct``, ``steal_pct``;
    - disk.csv: ``disk_iops``, ``disk_read_mb_per_s``, ``disk_write_mb_per_s`` (summed over
      devices), ``disk_await_ms`` (weighted by I/O count), ``disk_util_pct`` (mean over devices);
    - memory.csv: ``swap_in_mb_per_s``, ``swap_out_mb_per_s``, ``mem_available_mb_min``;
    - procs.csv, per role (``server``, ``workload``, an interference tool's: its
      ``role_prefixes`` entry, else its name sanitised):
      ``<role>_cpu_pct`` (100 = one core), ``<role>_cpu_s`` (CPU seconds in the window),
      ``<role>_rss_mb_max``, ``<role>_ctx_switches`` (count in the window),
      ``<role>_read_mb_per_s``, ``<role>_write_mb_per_s``;
    - status.csv: ``questions_per_s``, ``buffer_pool_hit_ratio`` (1 - reads / read requests
      over the window);
    - sampler.csv: ``sampler_cpu_pct`` (both samplers' own CPU, % of one core);
    - cpu.csv with procs.csv and sampler.csv: ``other_cpu_pct`` (:func:`_other_cpu_pct`),
      only when every followed process ran on the host cpu.csv describes
      (``processes_here``; with the server on another host, cpu.csv is its host's and
      procs.csv mixes both hosts').

    Means are weighted by each row's ``interval_s``.
    """
    cell = Path(cell_dir)
    summarizers: list[tuple[str, Callable[[pd.DataFrame], dict[str, float]]]] = [
        ("cpu.csv", lambda frame: _summarize_cpu(frame, pinned_cores)),
        ("disk.csv", _summarize_disk),
        ("memory.csv", _summarize_memory),
        ("procs.csv", lambda frame: _summarize_procs(frame, role_prefixes or {})),
        ("status.csv", _summarize_status),
        ("sampler.csv", _summarize_sampler),
    ]
    summary: dict[str, float] = {}
    frames = {name: _measured(cell / name) for name, _ in summarizers}
    for filename, summarize in summarizers:
        if (frame := frames[filename]) is not None:
            summary.update(summarize(frame))
    cpu = frames["cpu.csv"]
    if processes_here and cpu is not None and frames["sampler.csv"] is not None:
        other = _other_cpu_pct(cpu, frames["procs.csv"], summary.get("sampler_cpu_pct", 0.0))
        _put(summary, "other_cpu_pct", other)
    return summary
