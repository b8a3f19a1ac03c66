"""Scenarios made from the schema's parts, for the plan's property test.

:func:`scenario` builds one from a ``pick`` (choose one of a list): hypothesis passes
its draws, a seeded ``random.Random`` its ``choice``, so both explore the same space:
matrix blocks of different tests (some needing a server, some none), faults, a clone
workspace, client hosts, managed and external servers, interference. Many of them are
refused (a fault on a cell with no server, a 100P workspace, a host that does not
answer): the property is that the dry run and the run agree on which.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
Pick = Callable[[Sequence[T]], T]

SERVER_TESTS = ["oltp_read_only", "oltp_point_select", "oltp_read_write"]
NO_SERVER_TESTS = ["cpu", "memory", "fileio"]
FILEIO = {"file_test_mode": "rndrd", "file_total_size": "8M", "file_num": 2}
PASSWORD_ENV = "DBRIG_PLAN_TEST_PW"
PASSWORDS = ["plain", "it's", 'it\'s "both"']  # the last: sysbench cannot be given it


def scenario(pick: Pick, closed_port: int, *, small: bool = False) -> dict[str, Any]:
    """One scenario; ``small`` keeps to what runs here in seconds (no other host, no
    external server, no fault, no workspace). Mostly coherent (a family of tests: with a
    server, with none, or the base naming only ``time`` and the blocks choosing hardware
    tests), sometimes not, so that both acceptance and every kind of refusal are seen."""
    family = pick(["server", "server", "none", "time-only"])
    workload: dict[str, Any] = {"time": pick([2, 3] if small else [2, 3, 4, 8]), "threads": 1}
    if family == "server":
        base = pick([None, *SERVER_TESTS])
        workload.update(tables=1, table_size=100)
    else:
        base = pick(NO_SERVER_TESTS) if family == "none" else None
        if base == "fileio":
            workload.update(FILEIO)
    if base is not None:
        workload["test"] = base
    raw: dict[str, Any] = {"name": "gen", "workload": {"sysbench": workload}, "warmup": 0}
    blocks = [_block(pick, family) for _ in range(pick([0, 1, 1, 2] if small else [0, 1, 2, 3]))]
    if blocks or family == "time-only":
        raw["matrix"] = blocks or [{"workload.sysbench.test": ["cpu", "memory"]}]
    raw.update(_interference(pick))
    # Now and then a server's keys for a family that needs none: refused, as it must be.
    with_server = family == "server" or pick([True, False, False, False, False, False])
    if not small and with_server:
        raw.update(_server(pick, closed_port))
        if "servers" in raw:  # choose among them in every block
            for block in raw.setdefault("matrix", []) or [{}]:
                block["server"] = ["a", "b"]
            raw["matrix"] = raw["matrix"] or [{"server": ["a", "b"]}]
        if raw.get("server", {}).get("kind") != "external" or pick([True, False, False]):
            raw.update(_faults(pick))
    if not small:
        raw.update(_workspace(pick))
        raw.update(_client_host(pick, closed_port, raw))
    elif family == "server" and pick([True, False]):
        raw["server"] = {"config": {"innodb_buffer_pool_size": "64M"}}
    return raw


def _block(pick: Pick, family: str) -> dict[str, list[Any]]:
    """A matrix block of the family's tests (now and then of the other's, or both),
    maybe crossed with threads."""
    mine = "server" if family == "server" else pick(["none", "fileio"])
    kind = pick([*[mine] * 12, "server", "none", "mixed"])
    if kind == "fileio":
        block: dict[str, list[Any]] = {"workload.sysbench.test": ["fileio"]}
        block.update({f"workload.sysbench.{k}": [v] for k, v in FILEIO.items()})
    elif kind == "mixed":
        block = {"workload.sysbench.test": [pick(SERVER_TESTS), pick(["cpu", "memory"])]}
    else:
        tests = SERVER_TESTS if kind == "server" else ["cpu", "memory"]
        block = {"workload.sysbench.test": sorted({pick(tests), pick(tests)})}
    if pick([True, False, False]):
        block["workload.sysbench.threads"] = [1, 2]
    return block


def _interference(pick: Pick) -> dict[str, Any]:
    chosen = pick([None, {"cpu": 1, "cpu_load": 20}, {"cpu": 1, "taskset": [0]}])
    return {} if chosen is None else {"interference": {"stress-ng": chosen}}


def _server(pick: Pick, closed_port: int) -> dict[str, Any]:
    kind = pick(["default", "default", "config", "two", "external"])
    if kind == "config":
        return {"server": {"config": {"innodb_buffer_pool_size": "64M"}}}
    if kind == "two":
        return {"servers": {"a": {}, "b": {"config": {"innodb_flush_log_at_trx_commit": 2}}}}
    if kind == "external":
        spec = {"kind": "external", "host": "127.0.0.1", "port": closed_port, "user": "u"}
        return {"server": {**spec, "password_env": PASSWORD_ENV, "reset": "none"}}
    return {}


def _faults(pick: Pick) -> dict[str, Any]:
    kind = pick([None, None, None, "kill_server", "disk_full"])
    if kind == "kill_server":
        return {"faults": {"kill_server": {"signal": "KILL", "at": pick([0, 1])}}}
    if kind == "disk_full":
        return {"faults": {"disk_full": {"at": 0, "for": 1, "size": pick(["100M", "1G"])}}}
    return {}


def _workspace(pick: Pick) -> dict[str, Any]:
    image = pick([None, None, None, None, "100M", "1G", "100P"])
    return {} if image is None else {"workspace": {"image": image}}


def _client_host(pick: Pick, closed_port: int, raw: dict[str, Any]) -> dict[str, Any]:
    if pick([True, False, False, False, False, False, False, False]):
        raw["workload"]["sysbench"]["host"] = "c1"
        return {"hosts": {"c1": {"ssh": "root@127.0.0.1", "port": closed_port}}}
    return {}


def password(pick: Pick) -> str:
    return pick(PASSWORDS)
