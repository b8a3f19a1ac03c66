"""``python3 -m dbrig.remote.probe [basedir]``: what preflight asks a server's host.

One JSON line on stdout: this dbrig's version and the server the agent would run
there (:func:`dbrig.server.binary.find_server`), or the reason it finds none. Kept
apart from the agent so the question costs an interpreter start, not the agent's
imports (pymysql, psutil, the samplers): preflight asks it of every server host.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import dbrig
from dbrig.errors import DbrigError
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


def main() -> int:
    print(json.dumps(probe_server(sys.argv[1] if len(sys.argv) > 1 else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
