"""The agent's wire format: one JSON object per line, each way, over the agent's stdin/stdout.

The agent speaks first, once::

    {"hello": {"agent": "dbrig", "version": "0.1.0", "pid": 4242, "host": "db1"}}

then answers every request line with one response line, in order::

    {"op": "restore_data_set", "args": {"digest": "0a1b2c3d4e5f"}}
    {"ok": true, "result": 1.73}
    {"ok": false, "error": {"kind": "ServerError", "message": "...", "hint": null}}

An error travels as the name of its :mod:`dbrig.errors` class, its one-line message and
its hint, and is raised again on dbrig's side as that class, so a remote failure reads
(and exits) like a local one. Secrets (the benchmark account's password) travel only in
requests, on stdin: never on a command line, never in the agent's log.

A CPU profile's answer (``profile_stop``) has a shape of its own, checked on dbrig's
side (:func:`read_profile_answer`): the folded stacks, never perf's data file.

Pure functions: no I/O, tested without an agent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbrig import errors
from dbrig.errors import ConfigError, DbrigError, ServerError

AGENT_NAME = "dbrig"


class ProtocolError(ServerError):
    """A line that is not what the protocol says (a broken or foreign agent)."""


def _line(payload: dict[str, Any]) -> bytes:
    # json.dumps escapes every newline inside strings: one object is always one line.
    return (json.dumps(payload, separators=(",", ":"), default=str) + "\n").encode()


def _load(line: bytes | str, what: str) -> dict[str, Any]:
    text = line.decode(errors="replace") if isinstance(line, bytes) else line
    try:
        payload = json.loads(text)
    except ValueError:
        raise ProtocolError(f"the agent protocol: {what} is not JSON: {_clip(text)!r}") from None
    if not isinstance(payload, dict):
        raise ProtocolError(f"the agent protocol: {what} is not an object: {_clip(text)!r}")
    return payload


def _clip(text: str, limit: int = 120) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: str) -> str:
    """A message on one line (tracebacks and server logs have several)."""
    return " ".join(str(text).split())


# -- hello ----------------------------------------------------------------------------------


def encode_hello(version: str, pid: int, host: str) -> bytes:
    return _line({"hello": {"agent": AGENT_NAME, "version": version, "pid": pid, "host": host}})


def decode_hello(line: bytes | str, local_version: str, where: str) -> dict[str, Any]:
    """The agent's hello, checked: a dbrig agent of exactly ``local_version``."""
    hello = _load(line, "the agent's first line").get("hello")
    if not isinstance(hello, dict) or hello.get("agent") != AGENT_NAME:
        raise ProtocolError(
            f"{where}: the agent did not introduce itself: {_clip(str(line))!r}",
            hint="is python3 -m dbrig.remote.agent the dbrig agent there?",
        )
    remote = str(hello.get("version"))
    if remote != local_version:
        raise ConfigError(
            f"{where}: dbrig {remote} is installed there, this is dbrig {local_version}",
            hint=f"install dbrig {local_version} on that host (pip install dbrig=={local_version})",
        )
    return hello


# -- requests -------------------------------------------------------------------------------


def encode_request(op: str, args: dict[str, Any] | None = None) -> bytes:
    return _line({"op": op, "args": args or {}})


def decode_request(line: bytes | str) -> tuple[str, dict[str, Any]]:
    payload = _load(line, "a request")
    op, args = payload.get("op"), payload.get("args", {})
    if not isinstance(op, str) or not isinstance(args, dict):
        raise ProtocolError(f"the agent protocol: a request needs an op and args: {line!r}")
    return op, args


# -- responses ------------------------------------------------------------------------------


def encode_result(result: Any) -> bytes:
    return _line({"ok": True, "result": result})


def encode_error(exc: BaseException, where: str = "") -> bytes:
    """A failure as one line: a :class:`DbrigError` keeps its class, message and hint;
    anything else (a bug, an OSError) becomes a ServerError naming its type."""
    if isinstance(exc, DbrigError):
        kind, message, hint = type(exc).__name__, exc.message, exc.hint
    else:
        kind, message, hint = "ServerError", f"{type(exc).__name__}: {exc}", None
    if where and not message.startswith(where):
        message = f"{where}: {message}"
    error = {"kind": kind, "message": one_line(message), "hint": hint}
    return _line({"ok": False, "error": error})


def decode_response(line: bytes | str) -> Any:
    """The result of a response line, or its error raised as the class the agent named."""
    payload = _load(line, "a response")
    if payload.get("ok") is True:
        return payload.get("result")
    error = payload.get("error")
    if payload.get("ok") is not False or not isinstance(error, dict):
        raise ProtocolError(f"the agent protocol: not a response: {_clip(str(line))!r}")
    raise error_class(str(error.get("kind")))(
        one_line(str(error.get("message"))), hint=error.get("hint")
    )


def error_class(kind: str) -> type[DbrigError]:
    """The :mod:`dbrig.errors` class named ``kind`` (or ProtocolError); else ServerError."""
    found = ProtocolError if kind == ProtocolError.__name__ else getattr(errors, kind, None)
    if isinstance(found, type) and issubclass(found, DbrigError):
        return found
    return ServerError


# -- a CPU profile's answer ----------------------------------------------------------------


@dataclass(frozen=True)
class ProfileAnswer:
    """What ``profile_stop`` sends back: profile.folded's text, perf record's output, and
    the trial's metric and lines, as the agent's host computed them."""

    folded: str
    record_out: str
    metrics: dict[str, float]
    warnings: tuple[str, ...]


def profile_answer(
    folded: str, record_out: str, metrics: Mapping[str, float], warnings: list[str]
) -> dict[str, Any]:
    return {
        "folded": folded,
        "record_out": record_out,
        "metrics": dict(metrics),
        "warnings": warnings,
    }


def read_profile_answer(result: Any) -> ProfileAnswer:
    """``profile_stop``'s result, checked (a ProtocolError names what is wrong)."""
    if not isinstance(result, Mapping):
        raise ProtocolError(
            f"the agent protocol: a profile is not an object: {_clip(str(result))!r}"
        )
    folded, record_out = result.get("folded"), result.get("record_out")
    metrics, warnings = result.get("metrics"), result.get("warnings")
    if not isinstance(folded, str) or not isinstance(record_out, str):
        raise ProtocolError("the agent protocol: a profile needs folded and record_out texts")
    if not isinstance(metrics, Mapping) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in metrics.values()
    ):
        raise ProtocolError(f"the agent protocol: a profile's metrics are not numbers: {metrics!r}")
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise ProtocolError(f"the agent protocol: a profile's warnings are not lines: {warnings!r}")
    return ProfileAnswer(
        folded=folded,
        record_out=record_out,
        metrics={str(k): float(v) for k, v in metrics.items()},
        warnings=tuple(one_line(w) for w in warnings),
    )
