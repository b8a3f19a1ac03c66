"""``python3 -m dbrig.remote.probe [basedir] [--system JSON --home DIR] [--perf]``: what
preflight asks a server's host.

One JSON line on stdout: this dbrig's version and the server the agent would run
there (:func:`dbrig.server.binary.find_server`), or the reason it finds none; with
``--system`` (a JSON list of the cells' ``system`` blocks), whether this host can
apply them to the device under ``--home`` (the agent's datadirs, relative: to this
user's home), checked by :func:`dbrig.host.settings.check` as a local run checks
its own; with ``--perf``, whether perf can record CPU profiles there
(:func:`dbrig.host.perf.perf_problem`, the check a local run makes). Kept apart
from the agent so the question costs an interpreter start, not the agent's imports
(pymysql, psutil, the samplers): preflight asks it of every server host.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import dbrig
from dbrig.errors import ConfigError, DbrigError
from dbrig.server.binary import find_server

PROBE_MODULE = "dbrig.remote.probe"


def probe_server(basedir: str | None) -> dict[str, Any]:
    """This dbrig's version and the server under ``basedir`` (else on PATH) here."""
    answer: dict[str, Any] = {"version": dbrig.__version__}
    try:
        binary = find_server(Path(basedir) if basedir else None)
    except DbrigError as exc:
        answer["error"] = exc.message
        answer["hint"] = exc.hint
        return answer
    answer["server"] = {
        "mysqld": str(binary.mysqld),
        "flavor": binary.flavor,
        "version": binary.version,
        "version_line": binary.version_line,
        "install_db": str(binary.install_db) if binary.install_db else None,
        "basedir": str(binary.basedir) if binary.basedir else None,
    }
    return answer


def probe_system(wanted: list[dict[str, Any]], home: str) -> dict[str, Any]:
    """Whether this host can apply ``wanted`` under ``home``: {} or the refusal."""
    from dbrig.host import settings  # pydantic: only when a scenario has system settings

    where = Path(home).expanduser()
    if not where.is_absolute():
        where = Path.home() / where
    try:
        blocks = [settings.SystemSettings(**block) for block in wanted]
        settings.check(blocks, settings.device_under(where))
    except ConfigError as exc:
        return {"error": exc.message, "hint": exc.hint}
    return {}


def probe_perf() -> dict[str, Any]:
    """Whether perf can record the server here: {} or why not."""
    from dbrig.host.perf import perf_problem

    problem = perf_problem()
    return {} if problem is None else {"error": problem}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python3 -m {PROBE_MODULE}")
    parser.add_argument("basedir", nargs="?")
    parser.add_argument("--system", help="JSON list of system blocks to check")
    parser.add_argument("--home", default=".", help="where the datadirs go")
    parser.add_argument("--perf", action="store_true", help="check that perf can record here")
    args = parser.parse_args(argv)
    answer = probe_server(args.basedir)
    if args.system:
        answer["system"] = probe_system(json.loads(args.system), args.home)
    if args.perf:
        answer["perf"] = probe_perf()
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
