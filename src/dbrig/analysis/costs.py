"""Cost per unit of work: what a unit costs the server, whatever the throughput.

The workload tool names its units (:class:`dbrig.metrics.WorkUnit`: sysbench's
transactions and queries, tpcc's committed New-Orders); this module divides the
server's CPU time, context switches and storage reads and writes over the measured
window by each unit's count. Pure: a trial's metrics in, the cost columns out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dbrig.metrics import REGISTRY, WorkUnit

_ORDER = {m.name: i for i, m in enumerate(REGISTRY)}


def derived_costs(metrics: Mapping[str, float], units: Iterable[WorkUnit]) -> dict[str, float]:
    """The cost columns of ``units`` that ``metrics`` can give, in registry order.

    A unit counted 0 times (or not at all) gives none; a cost whose measurement is
    missing (no ``server_cpu_s``: no sampler) is left out.
    """
    window = metrics.get("measured_time_s") or 0
    costs = _server_costs(metrics, window)
    out: dict[str, float] = {}
    for unit in units:
        count = _count(metrics, unit, window)
        if count <= 0:
            continue
        for cost in unit.costs:
            if (total := costs.get(cost)) is not None:
                out[f"{cost}_per_{unit.name}"] = total / count
    return dict(sorted(out.items(), key=lambda item: _ORDER.get(item[0], len(_ORDER))))


def _count(metrics: Mapping[str, float], unit: WorkUnit, window: float) -> float:
    count = metrics.get(unit.count) or 0
    return count * window / 60 if unit.per_minute else count


def _server_costs(metrics: Mapping[str, float], window: float) -> dict[str, float]:
    """Each cost's total over the measured window, where it was measured."""
    totals: dict[str, float] = {}
    if "server_cpu_s" in metrics:
        totals["server_cpu_us"] = metrics["server_cpu_s"] * 1e6
    if "server_wait_s" in metrics:
        totals["wait_us"] = metrics["server_wait_s"] * 1e6
    if "server_ctx_switches" in metrics:
        totals["ctx_switches"] = metrics["server_ctx_switches"]
    for cost, rate in (
        ("kb_read", "server_read_mb_per_s"),
        ("kb_written", "server_write_mb_per_s"),
    ):
        if window > 0 and (value := metrics.get(rate)) is not None:
            totals[cost] = value * window * 1024
    return totals
