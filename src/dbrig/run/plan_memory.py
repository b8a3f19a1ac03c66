"""The memory a plan needs on this machine: the largest buffer pool a cell's managed
server starts with (one server runs at a time: each trial starts and stops its own).

A buffer pool larger than the machine's memory cannot be measured (the server swaps,
or the kernel ends it mid-trial), so the plan refuses it before the run starts; the
dry run says how much the largest one is.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbrig.errors import ConfigError
from dbrig.run.plan_cells import cell_needs_server
from dbrig.run.remote_servers import server_key
from dbrig.scenario import Cell, ManagedServer, Plan
from dbrig.util.units import parse_size, size_text

# MariaDB's and MySQL 8's innodb_buffer_pool_size when my.cnf sets none.
DEFAULT_BUFFER_POOL_BYTES = 128 * 2**20
BUFFER_POOL = "innodb_buffer_pool_size"


@dataclass(frozen=True)
class BufferPool:
    """A cell's managed server's buffer pool here, and the key that sets it."""

    bytes: int
    key: str  # as the scenario would write it: server.config.innodb_buffer_pool_size
    written: str  # the size as written, or the default's


def largest_buffer_pool(plan: Plan) -> BufferPool | None:
    """The largest buffer pool of a managed server on this machine; None: no cell starts
    one here (no server, an external one, or one on another host)."""
    pools = [pool for cell in plan.cells if (pool := _buffer_pool(plan, cell)) is not None]
    return max(pools, key=lambda pool: pool.bytes, default=None)


def check_memory(plan: Plan, total_bytes: int) -> None:
    """Refuse a buffer pool larger than this machine's ``total_bytes`` of memory."""
    pool = largest_buffer_pool(plan)
    if pool is not None and pool.bytes > total_bytes:
        raise ConfigError(
            f"{plan.source}: {pool.key}: {pool.written} is more than this machine's "
            f"{size_text(total_bytes)} of memory",
            hint="give the buffer pool a size this machine can hold",
        )


def _buffer_pool(plan: Plan, cell: Cell) -> BufferPool | None:
    spec = cell.scenario.server_specs.get(cell.server)
    if not isinstance(spec, ManagedServer) or spec.host is not None:
        return None
    if not cell_needs_server(cell):
        return None
    key = server_key(plan, cell.server, f"config.{BUFFER_POOL}")
    written = spec.config.get(BUFFER_POOL)
    size = parse_size(written) if written is not None else DEFAULT_BUFFER_POOL_BYTES
    if size is None:  # not a size dbrig can read (the server refuses it when it starts)
        return None
    shown = str(written) if written is not None else f"{size_text(size)} (the default)"
    return BufferPool(size, key, shown)
