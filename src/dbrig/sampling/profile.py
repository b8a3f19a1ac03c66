"""CPU profiles: ``perf record`` of the server during the measured window, folded stacks.

Two pure halves, as for a tool: :func:`record_argv` and :func:`script_argv` say what
the run side starts (``run/samplers.py``, through ``proc``), and :func:`fold` turns
``perf script``'s text into folded stacks; :func:`finish` reads the trial's files
and gives its metric and the lines for the trial's warnings.

profile.folded (one line per distinct stack)
--------------------------------------------
``root;caller;...;leaf count``: the process's name first (the server's, or the
client's when it is recorded too), then its frames from the
outermost caller to the function the sample landed in, and how many samples had that
stack. A kernel frame ends in ``[k]``; a frame perf could not name is
``[unknown] (<binary>)``. Lines are sorted, so two runs of the same profile give the
same file. Frame names never hold ``;`` (perf's demangled C++ names may hold spaces).

profile.out: ``perf record``'s own output (the lines behind a warning).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

FOLDED = "profile.folded"
PERF_DATA = "profile.perf.data"  # removed once folded: perf script needs this host's binaries
SCRIPT = "profile.script"  # perf script's text, removed once folded
RECORD_OUT = "profile.out"  # perf record's stdout and stderr
KERNEL_MARK = " [k]"
UNKNOWN = "[unknown]"

# "mariadbd 27900  2974.047758:   10101010 cpu-clock: " (the name may hold spaces,
# perf writes "pid/tid" with some options)
_HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?P<pid>\d+)(?:/\d+)?\s+[\d.]+:\s+(?:\d+\s+)?\S+:")
# "\t  ffffffff820cc4a5 unix_stream_sendmsg+0x5 ([kernel.kallsyms])"
_FRAME = re.compile(r"^\s+[0-9a-fA-F]+\s+(?P<symbol>.*?)\s+\((?P<dso>[^()]*)\)\s*$")
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")


def record_argv(pids: list[int], frequency: int, data: Path) -> list[str]:
    """``perf record`` of processes and the threads they start, with call stacks, on the
    software clock event (a virtual machine has no hardware counters). The run side
    starts it when the measured window starts: perf's own delay (``-D``) leaves the
    threads created meanwhile disabled (run/samplers.py, ``WindowStart``)."""
    return [
        *("perf", "record", "-F", str(frequency), "-g", "-e", "cpu-clock"),
        *("-p", ",".join(str(pid) for pid in pids), "-o", str(data)),
    ]


def script_argv(data: Path) -> list[str]:
    """``perf script`` printing every sample of ``data`` with its stack."""
    return ["perf", "script", "-i", str(data)]


def fold(text: str) -> Counter[str]:
    """``perf script`` output as folded stacks (stack -> samples); "" gives nothing."""
    stacks: Counter[str] = Counter()
    root: str | None = None
    frames: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            _add(stacks, root, frames)
            root, frames = None, []
        elif (header := _HEADER.match(line)) is not None and not line[0].isspace():
            _add(stacks, root, frames)
            root, frames = _clean(header["comm"]), []
        elif root is not None and (frame := _FRAME.match(line)) is not None:
            frames.append(frame_name(frame["symbol"], frame["dso"]))
    _add(stacks, root, frames)
    return stacks


def frame_name(symbol: str, dso: str) -> str:
    """One frame as the folded file writes it: the symbol without its offset."""
    name = _OFFSET.sub("", symbol.strip())
    binary = dso.rsplit("/", 1)[-1]
    if not name or name == UNKNOWN:
        return _clean(f"{UNKNOWN} ({binary or '?'})")
    if binary == "[kernel.kallsyms]":
        return _clean(name) + KERNEL_MARK
    return _clean(name)


def _clean(name: str) -> str:
    return name.replace(";", ":").strip()


def _add(stacks: Counter[str], root: str | None, frames: list[str]) -> None:
    """perf prints the leaf first: the folded stack starts at the root."""
    if root is None:
        return
    stacks[";".join([root, *reversed(frames)])] += 1


def folded_text(stacks: Mapping[str, int]) -> str:
    return "".join(f"{stack} {count}\n" for stack, count in sorted(stacks.items()))


@dataclass(frozen=True)
class ProfileOutcome:
    """What a trial's profile adds to it: its metric and the lines for its warnings."""

    metrics: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def outcome(stacks: Mapping[str, int], record_out: str, pid: int | None) -> ProfileOutcome:
    """The trial's ``profile_samples`` and a warning for the way the profile fell short:
    no server process, perf could not attach, no samples, or samples whose leaf frame
    has no name."""
    samples = sum(stacks.values())
    metrics = {"profile_samples": float(samples)}
    if pid is None:
        return ProfileOutcome(metrics, ("profile: no server process to record (no pid)",))
    if samples == 0:
        problem = _perf_error(record_out)
        if problem:
            why = f"profile: perf could not record the server (pid {pid}): {problem}"
        else:
            why = (
                f"profile: perf recorded no samples of the server (pid {pid}): "
                "was it idle, or did the workload end before its warm-up did?"
            )
        return ProfileOutcome(metrics, (why,))
    if (unnamed := _unnamed_leaves(stacks, samples)) is not None:
        return ProfileOutcome(metrics, (unnamed,))
    return ProfileOutcome(metrics)


def _leaf(stack: str) -> str:
    return stack.rsplit(";", 1)[-1]


def _unnamed_leaves(stacks: Mapping[str, int], samples: int) -> str | None:
    """A line on the samples whose leaf perf could not name, by binary (None: none).
    A stripped binary's static functions are such leaves: their time is charged to an
    ``[unknown]`` frame under the caller that has a name."""
    binaries: Counter[str] = Counter()
    for stack, count in stacks.items():
        if (leaf := _leaf(stack)).startswith(UNKNOWN):
            binaries[leaf.removeprefix(UNKNOWN).strip(" ()")] += count
    unknown = sum(binaries.values())
    if not unknown:
        return None
    where = ", ".join(f"{binary} {100 * n / samples:.0f} %" for binary, n in binaries.most_common())
    return (
        f"profile: {100 * unknown / samples:.0f} % of the samples landed in functions perf "
        f"could not name ([unknown]; {where}): those binaries have no symbol for them "
        "(their debug symbols would name them)"
    )


_PERF_ERROR = re.compile(
    r"(Couldn't|Error|error|failed|Permission denied|No such process|not permitted)"
)


def _perf_error(record_out: str) -> str | None:
    """perf record's first line that says why it recorded nothing."""
    for line in record_out.splitlines():
        if _PERF_ERROR.search(line):
            return line.strip()
    return None


def finish(folder: Path, pid: int | None) -> ProfileOutcome:
    """Fold the trial's ``perf script`` text into profile.folded (removing the raw files)
    and say what the trial gets from it."""
    script = folder / SCRIPT
    stacks = fold(script.read_text(errors="replace")) if script.exists() else Counter()
    (folder / FOLDED).write_text(folded_text(stacks))
    record = folder / RECORD_OUT
    record_out = record.read_text(errors="replace") if record.exists() else ""
    for scratch in (script, folder / PERF_DATA):
        scratch.unlink(missing_ok=True)
    return outcome(stacks, record_out, pid)
