"""The memory a plan needs: the largest buffer pool a cell's managed server starts with."""

from __future__ import annotations

from dbrig.run.dryrun import describe_memory
from dbrig.run.plan_memory import largest_buffer_pool
from dbrig.scenario import plan_from_dict

OLTP = {"sysbench": {"test": "oltp_read_only", "tables": 1, "table_size": 100, "time": 5}}


def test_the_largest_buffer_pool_of_the_matrix_is_the_plans_need() -> None:
    plan = plan_from_dict(
        {
            "name": "m",
            "server": {"config": {"innodb_buffer_pool_size": "64M"}},
            "workload": OLTP,
            "matrix": [{"server.config.innodb_buffer_pool_size": ["64M", "1G"]}],
        },
        seed=1,
    )
    pool = largest_buffer_pool(plan)
    assert pool is not None and pool.bytes == 2**30 and pool.written == "1G"
    line = describe_memory(plan)
    assert line == "memory: a buffer pool of 1G at the most (server.config.innodb_buffer_pool_size)"


def test_a_server_without_a_buffer_pool_setting_has_the_servers_default() -> None:
    plan = plan_from_dict({"name": "d", "workload": OLTP}, seed=1)
    pool = largest_buffer_pool(plan)
    assert pool is not None and pool.bytes == 128 * 2**20
    assert pool.written == "128.0 MiB (the default)"


def test_cells_with_no_server_need_no_buffer_pool() -> None:
    plan = plan_from_dict(
        {"name": "hw", "workload": {"sysbench": {"test": "cpu", "time": 2}}}, seed=1
    )
    assert largest_buffer_pool(plan) is None and describe_memory(plan) is None
