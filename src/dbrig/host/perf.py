"""Whether this machine can record CPU profiles with ``perf`` (docs/profiling.md).

Three ways it cannot, each a one-line reason: perf is not installed (Debian's
``linux-perf``), the kernel refuses a user that is not root
(``/proc/sys/kernel/perf_event_paranoid`` above 1: no kernel stacks, no other
process), or the ``perf_event_open`` system call is not there (a container whose
seccomp profile blocks it, a kernel built without it): a one-second ``perf stat`` of
``true`` tells.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dbrig import proc

PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
# Above this a user that is not root cannot record kernel stacks or another user's process.
MAX_PARANOID_FOR_USERS = 1
NOT_INSTALLED = "perf is not installed"
INSTALL_HINT = "install Debian's linux-perf, as make demo and make test do"


def paranoid_level(path: Path = PARANOID) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def paranoid_problem(level: int | None, euid: int) -> str | None:
    """The kernel's refusal for this user, as a line (None: it lets dbrig record)."""
    if euid == 0 or level is None or level <= MAX_PARANOID_FOR_USERS:
        return None
    return (
        f"the kernel refuses CPU profiles to a user that is not root "
        f"({PARANOID} is {level}, needs {MAX_PARANOID_FOR_USERS} or less: "
        f"sysctl kernel.perf_event_paranoid={MAX_PARANOID_FOR_USERS}, or run dbrig as root)"
    )


def perf_problem() -> str | None:
    """Why perf cannot record here, in one line; None when it can."""
    if shutil.which("perf") is None:
        return NOT_INSTALLED
    if (problem := paranoid_problem(paranoid_level(), os.geteuid())) is not None:
        return problem
    code, output = proc.capture(["perf", "stat", "-e", "cpu-clock", "-x", ",", "--", "true"])
    if code != 0:
        last = (output.strip().splitlines() or ["no output"])[-1].strip()
        return f"perf cannot open a CPU event here (perf_event_open refused: {last})"
    return None
