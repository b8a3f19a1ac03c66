"""SHOW GLOBAL STATUS for the status sampler of a trial whose server a fault may take
away and bring back."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from dbrig.run.faults import FaultFailed


def resilient_status(connect: Callable[[], Any], fetch: Callable[[Any], Mapping[str, str]]):
    """A SHOW GLOBAL STATUS fetch that survives the server's restart: on an error it
    reconnects once, and while the server is away repeats its last snapshot (the
    rates are then zero, and the counters' fall after the restart leaves a blank)."""
    state: dict[str, Any] = {"conn": None, "last": None}

    def take() -> Mapping[str, str]:
        for _attempt in range(2):
            try:
                if state["conn"] is None:
                    state["conn"] = connect()
                state["last"] = fetch(state["conn"])
                return state["last"]
            except Exception:
                close(state)
        if state["last"] is None:
            raise FaultFailed("server status query failed and the server did not answer")
        return state["last"]

    def close(s: dict[str, Any] = state) -> None:
        conn, s["conn"] = s["conn"], None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    take.close = close  # type: ignore[attr-defined]
    return take
