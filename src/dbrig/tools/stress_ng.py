"""stress-ng as background interference: parameters, command line, output parsing.

The runner starts stress-ng after the datadir restore and before warm-up. It stops
stress-ng with SIGTERM to its process group right after the measured window.
stress-ng catches SIGTERM and SIGINT, exits 0 and still prints its metrics.
A block whose stressors all have 0 workers means no stress-ng at all.
stress-ng itself reads ``--cpu 0`` as "one worker per online CPU", so
:func:`build_command` never passes a 0.

What :func:`parse` returns (from stress-ng 0.15.06's stderr), a :class:`StressNgResult`:

========================  =====================================================================
``version``               ``"0.15.06"``, or None. The normal output does not print it; ``-v``
                          and ``--version`` output does.
``timeout_s``             int s, from ``setting to a N second run per stressor``, or None
``workers``               ``(("cpu", 2), ("io", 1), ...)``, from ``dispatching hogs:``, in
                          stress-ng's order
``stressors``             one :class:`StressorMetrics` per row of the metrics table (below)
``misc_metrics``          :class:`MiscMetric` rows after ``miscellaneous metrics:``, e.g. hdd
                          ``5564.19`` ``"MB/sec read rate (geometic mean of 1 instances)"``
``errors``                ``fail:``/``error:`` lines and untagged lines such as option errors
                          (``Value 190 is out of range for cpu-load, ...``), without the
                          ``stress-ng: fail:  [pid]`` prefix. An ``unsuccessful run completed``
                          line is added here too.
``warnings``              ``warn:`` lines, without the prefix
``completed``             True when ``successful run completed`` was printed
``run_time_s``            float s, from ``... run completed in 5.01s``, or None
========================  =====================================================================

:class:`StressorMetrics` (one stressor, summed over its workers):

============================  =========  ===================================================
``stressor``                  str        ``cpu``, ``io``, ``hdd``, ``vm``, ...
``bogo_ops``                  int        bogo operations done
``real_time_s``               float s    wall-clock time the stressor ran
``usr_time_s``                float s    user CPU time, all workers together
``sys_time_s``                float s    system CPU time, all workers together
``bogo_ops_per_s_real``       float /s   bogo ops per second of wall-clock time
``bogo_ops_per_s_usr_sys``    float /s   bogo ops per second of usr+sys CPU time
``cpu_used_per_instance_pct`` float %    full ``--metrics`` and ``--yaml`` only, else None
``rss_max_kb``                int KB     full ``--metrics`` and ``--yaml`` only, else None
============================  =========  ===================================================

:func:`parse_yaml` reads the ``--yaml`` file into the same row shape.

With ``--log-brief`` stress-ng drops the ``stress-ng: info:`` tags. Without them, failures
cannot be told from notes, so untagged lines are not counted as errors in that output. Only an
``unsuccessful run completed`` line still counts.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field

from dbrig.errors import ConfigError, ParseError
from dbrig.metrics import Metric, produced_by
from dbrig.tools.base import ToolInfo, Usage

INFO = ToolInfo(name="stress-ng", binaries=("stress-ng",), package="stress-ng")

KEY_PATH = "interference.stress-ng"
CPU_STRESSOR = "cpu"

# stress-ng's own size syntax: a number with an optional b/k/m/g/t suffix, or a percentage.
# "256MB" is refused: stress-ng 0.15.06 silently reads it as 256 bytes. Only validated here
# (stress-ng parses it), so not dbrig.util.units.parse_size, which takes "MB" and no "%".
_BYTES_PATTERN = r"^\d+(\.\d+)?([bBkKmMgGtT]|%)?$"

# stress-ng(1) EXIT STATUS
_EXIT_MEANINGS = {
    1: "bad options or a fatal resource problem",
    2: "one or more stressors failed",
    3: "one or more stressors could not start for lack of resources",
    4: "one or more stressors are not implemented on this system",
    5: "a stressor was killed by an unexpected signal",
    6: "a stressor exited unexpectedly and its metrics are missing",
    7: "the bogo-ops metrics may be untrustworthy",
}


# --- parameters ------------------------------------------------------------------------------


class StressNgParams(BaseModel):
    """The scenario's ``interference.stress-ng`` block."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu: int = Field(0, ge=0, description="CPU stressor workers (--cpu); 0 means none.")
    cpu_load: int = Field(
        100, ge=0, le=100, description="Percent load each CPU worker aims for (-l / --cpu-load)."
    )
    cpu_method: str | None = Field(
        None,
        min_length=1,
        description="CPU stress method (--cpu-method), e.g. matrixprod; stress-ng's default: all.",
    )
    taskset: list[int] | None = Field(
        None,
        min_length=1,
        description=(
            "CPU cores to pin every stress-ng worker to (--taskset). "
            "There must be no more cpu workers than cores listed."
        ),
    )
    io: int = Field(0, ge=0, description="I/O sync stressor workers (--io); 0 means none.")
    hdd: int = Field(0, ge=0, description="Disk write/read stressor workers (--hdd); 0 means none.")
    hdd_bytes: str | None = Field(
        None,
        pattern=_BYTES_PATTERN,
        description='Bytes each hdd worker writes (--hdd-bytes), e.g. "256M", "1g", "5%".',
    )
    vm: int = Field(0, ge=0, description="Memory stressor workers (--vm); 0 means none.")
    vm_bytes: str | None = Field(
        None,
        pattern=_BYTES_PATTERN,
        description='Memory each vm worker maps (--vm-bytes), e.g. "256M", "10%".',
    )
    extra_args: list[str] = Field(
        default_factory=list,
        description=(
            "More stress-ng arguments, appended last, verbatim. They do not make the block "
            "active on their own."
        ),
    )
    host: str | None = Field(
        None,
        description=(
            "Run stress-ng on this host of the scenario's hosts: block, over ssh (e.g. the "
            "managed server's host; a matrix factor like any key). Unset: where dbrig runs."
        ),
    )

    @property
    def active(self) -> bool:
        """True when at least one stressor has workers, i.e. stress-ng should run at all."""
        return any(count > 0 for count in (self.cpu, self.io, self.hdd, self.vm))


def validate_for_host(params: StressNgParams, cpu_count: int) -> None:
    """Reject what this machine cannot do. Raises :class:`ConfigError` naming the key.

    Without ``taskset``, more cpu workers than cores is legitimate over-subscription. With
    ``taskset``, more cpu workers than pinned cores would make the workers share cores. Then
    none of them reaches ``cpu_load``: in the captured ``--cpu 2 -l 90 --taskset 0`` run, each
    worker got about 48 % of a core.
    """
    if cpu_count < 1:
        raise ValueError(f"cpu_count must be at least 1, got {cpu_count}")
    if params.taskset is None:
        return
    seen: set[int] = set()
    for core in params.taskset:
        if core < 0 or core >= cpu_count:
            raise ConfigError(
                f"{KEY_PATH}.taskset: core {core} does not exist "
                f"(this machine has {_describe_cores(cpu_count)})"
            )
        if core in seen:
            raise ConfigError(f"{KEY_PATH}.taskset: core {core} is listed twice")
        seen.add(core)
    if params.cpu > len(params.taskset):
        cores = _plural(len(params.taskset), "core")
        raise ConfigError(
            f"{KEY_PATH}.cpu: {params.cpu} cpu workers pinned to {cores} "
            f"(taskset {_join_cores(params.taskset)}); pinned workers would share cores and not "
            f"reach cpu_load {params.cpu_load}%",
            hint="use at most one cpu worker per taskset core, or drop taskset",
        )


def requested_cpu_seconds(params: StressNgParams, duration_s: float) -> float:
    """CPU seconds the interference asked for over ``duration_s``: workers × load × duration.

    Only the cpu stressor counts. The CPU that io/hdd/vm workers burn is a side effect, not a
    target.
    """
    if duration_s < 0:
        raise ValueError(f"duration_s must not be negative, got {duration_s}")
    return params.cpu * params.cpu_load / 100 * duration_s


def _describe_cores(cpu_count: int) -> str:
    return "core 0" if cpu_count == 1 else f"cores 0-{cpu_count - 1}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _join_cores(cores: list[int]) -> str:
    return ",".join(str(core) for core in cores)


# --- command line ----------------------------------------------------------------------------


def build_command(
    params: StressNgParams,
    *,
    binary: str = "stress-ng",
    timeout_s: int | None = None,
    yaml_path: str | None = None,
) -> list[str]:
    """The stress-ng argv for ``params``.

    A stressor with 0 workers is left out. ``--cpu 0`` would mean one worker per CPU.
    ``timeout_s`` becomes ``-t <N>s``, a safety net in case dbrig dies without stopping
    stress-ng. ``yaml_path`` becomes ``--yaml <path>``.

    Raises ValueError when ``params`` is not active. The caller checks ``params.active`` first.
    An empty argv would only fail later, in a harder-to-read way.
    """
    if not params.active:
        raise ValueError("stress-ng params have no workers; check params.active before building")
    if timeout_s is not None and timeout_s <= 0:
        # stress-ng reads -t 0 as "run forever", the opposite of a safety net
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    argv = [binary]
    if params.cpu > 0:
        argv += ["--cpu", str(params.cpu), "-l", str(params.cpu_load)]
        if params.cpu_method:
            argv += ["--cpu-method", params.cpu_method]
    if params.taskset:
        argv += ["--taskset", _join_cores(params.taskset)]
    if params.io > 0:
        argv += ["--io", str(params.io)]
    if params.hdd > 0:
        argv += ["--hdd", str(params.hdd)]
        if params.hdd_bytes:
            argv += ["--hdd-bytes", params.hdd_bytes]
    if params.vm > 0:
        argv += ["--vm", str(params.vm)]
        if params.vm_bytes:
            argv += ["--vm-bytes", params.vm_bytes]
    argv.append("--metrics-brief")
    if timeout_s is not None:
        argv += ["-t", f"{timeout_s}s"]
    if yaml_path is not None:
        argv += ["--yaml", yaml_path]
    argv += params.extra_args
    return argv


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StressorMetrics:
    """One row of stress-ng's metrics table (see the module docstring for units)."""

    stressor: str
    bogo_ops: int
    real_time_s: float
    usr_time_s: float
    sys_time_s: float
    bogo_ops_per_s_real: float
    bogo_ops_per_s_usr_sys: float
    cpu_used_per_instance_pct: float | None = None
    rss_max_kb: int | None = None


@dataclass(frozen=True)
class MiscMetric:
    """A stressor-specific extra, e.g. hdd ``5564.19`` ``MB/sec read rate (...)``."""

    stressor: str
    value: float
    description: str


@dataclass(frozen=True)
class StressNgResult:
    """What one stress-ng run printed (see the module docstring)."""

    version: str | None = None
    timeout_s: int | None = None
    workers: tuple[tuple[str, int], ...] = ()
    stressors: tuple[StressorMetrics, ...] = ()
    misc_metrics: tuple[MiscMetric, ...] = ()
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    completed: bool = False
    run_time_s: float | None = None


# --- parsing stderr --------------------------------------------------------------------------

_TAGGED = re.compile(r"^stress-ng: (?P<tag>[a-z]+):\s*\[\d+\] ?(?P<text>.*)$")
_ERROR_TAGS = frozenset({"fail", "error", "abort"})
_WARNING_TAGS = frozenset({"warn"})

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|inf|nan)"
_VERSION = re.compile(r"^stress-ng(?:, version)? (?P<version>\d+(?:\.\d+)+)\b")
_TIMEOUT = re.compile(r"^(?:setting|defaulting) to a (?P<seconds>\d+) second")
_DISPATCH = re.compile(r"^dispatching hogs: (?P<hogs>.*)$")
_HOG = re.compile(r"^(?P<count>\d+) (?P<stressor>\S+)$")
_RUN_COMPLETED = re.compile(
    rf"^(?P<outcome>successful|unsuccessful) run completed in (?P<seconds>{_NUM})s"
)
_TABLE_HEADER = re.compile(r"^stressor\s+bogo ops\s+real time")
_TABLE_UNITS = re.compile(r"^\(secs\)")
_MISC_HEADER = re.compile(r"^miscellaneous metrics:$")
_ROW = re.compile(
    rf"^(?P<stressor>[A-Za-z0-9][\w.-]*)\s+(?P<bogo_ops>\d+)\s+(?P<real_time_s>{_NUM})"
    rf"\s+(?P<usr_time_s>{_NUM})\s+(?P<sys_time_s>{_NUM})\s+(?P<bogo_ops_per_s_real>{_NUM})"
    rf"\s+(?P<bogo_ops_per_s_usr_sys>{_NUM})"
    rf"(?:\s+(?P<cpu_used_per_instance_pct>{_NUM})\s+(?P<rss_max_kb>\d+))?$"
)
_MISC_ROW = re.compile(rf"^(?P<stressor>[A-Za-z0-9][\w.-]*)\s+(?P<value>{_NUM})\s+(?P<desc>\S.*)$")


@dataclass
class _Collector:
    """Mutable scratch space while walking the lines; frozen into a result at the end."""

    version: str | None = None
    timeout_s: int | None = None
    workers: tuple[tuple[str, int], ...] = ()
    completed: bool = False
    run_time_s: float | None = None
    in_table: bool = False
    in_misc: bool = False
    rows: list[dict[str, str]] = field(default_factory=list)
    misc: list[MiscMetric] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse(text: str) -> StressNgResult:
    """Parse stress-ng's stderr (or stdout and stderr combined). Never raises on odd input."""
    lines = _split_lines(text)
    log_brief = any(tag is None and _DISPATCH.match(body) for tag, body in lines)
    found = _Collector()
    for tag, body in lines:
        if tag == "debug":
            _note_version(found, body)
        elif tag in _ERROR_TAGS:
            found.errors.append(body)
        elif tag in _WARNING_TAGS:
            found.warnings.append(body)
        elif _recognise(found, body):
            continue
        elif tag is None and not log_brief:
            found.errors.append(body)
    return StressNgResult(
        version=found.version,
        timeout_s=found.timeout_s,
        workers=found.workers,
        stressors=tuple(_metrics_row(raw) for raw in found.rows),
        misc_metrics=tuple(found.misc),
        errors=tuple(found.errors),
        warnings=tuple(found.warnings),
        completed=found.completed,
        run_time_s=found.run_time_s,
    )


def _split_lines(text: str) -> list[tuple[str | None, str]]:
    """Stage 1: each non-blank line as (tag or None when untagged, text after the prefix)."""
    lines: list[tuple[str | None, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        tagged = _TAGGED.match(line)
        if tagged:
            lines.append((tagged["tag"], tagged["text"].rstrip()))
        else:
            lines.append((None, line.strip()))
    return lines


def _recognise(found: _Collector, body: str) -> bool:
    """Stage 2 for info, metrc and untagged lines. False when the line means nothing to us."""
    stripped = body.strip()
    if _TABLE_HEADER.match(stripped):
        found.in_table, found.in_misc = True, False
        return True
    if _MISC_HEADER.match(stripped):
        found.in_table, found.in_misc = False, True
        return True
    if found.in_table and (_TABLE_UNITS.match(stripped) or _take_row(found, stripped)):
        return True
    if found.in_misc and _take_misc_row(found, stripped):
        return True
    return _take_run_info(found, stripped) or _note_version(found, stripped)


def _take_row(found: _Collector, text: str) -> bool:
    row = _ROW.match(text)
    if row:
        found.rows.append({k: v for k, v in row.groupdict().items() if v is not None})
    return row is not None


def _take_misc_row(found: _Collector, text: str) -> bool:
    row = _MISC_ROW.match(text)
    if row:
        found.misc.append(MiscMetric(row["stressor"], float(row["value"]), row["desc"]))
    return row is not None


def _take_run_info(found: _Collector, text: str) -> bool:
    if timeout := _TIMEOUT.match(text):
        found.timeout_s = int(timeout["seconds"])
    elif dispatch := _DISPATCH.match(text):
        found.workers = _parse_hogs(dispatch["hogs"])
    elif completed := _RUN_COMPLETED.match(text):
        found.completed = completed["outcome"] == "successful"
        found.run_time_s = float(completed["seconds"])
        if not found.completed:
            found.errors.append(text)
    else:
        return False
    return True


def _note_version(found: _Collector, text: str) -> bool:
    version = _VERSION.match(text)
    if version:
        found.version = version["version"]
    return version is not None


def _parse_hogs(hogs: str) -> tuple[tuple[str, int], ...]:
    """``"1 cpu, 1 io, 1 hdd"`` -> ``(("cpu", 1), ("io", 1), ("hdd", 1))``."""
    parsed = []
    for part in hogs.split(","):
        hog = _HOG.match(part.strip())
        if hog:
            parsed.append((hog["stressor"], int(hog["count"])))
    return tuple(parsed)


def _metrics_row(raw: Mapping[str, Any]) -> StressorMetrics:
    """Types and units for one row, from regex groups or from a ``--yaml`` entry."""
    cpu_pct = raw.get("cpu_used_per_instance_pct")
    rss = raw.get("rss_max_kb")
    return StressorMetrics(
        stressor=str(raw["stressor"]),
        bogo_ops=int(raw["bogo_ops"]),
        real_time_s=float(raw["real_time_s"]),
        usr_time_s=float(raw["usr_time_s"]),
        sys_time_s=float(raw["sys_time_s"]),
        bogo_ops_per_s_real=float(raw["bogo_ops_per_s_real"]),
        bogo_ops_per_s_usr_sys=float(raw["bogo_ops_per_s_usr_sys"]),
        cpu_used_per_instance_pct=None if cpu_pct is None else float(cpu_pct),
        rss_max_kb=None if rss is None else int(rss),
    )


# --- parsing --yaml --------------------------------------------------------------------------

_YAML_ROW_KEYS = {
    "stressor": "stressor",
    "bogo-ops": "bogo_ops",
    "wall-clock-time": "real_time_s",
    "user-time": "usr_time_s",
    "system-time": "sys_time_s",
    "bogo-ops-per-second-real-time": "bogo_ops_per_s_real",
    "bogo-ops-per-second-usr-sys-time": "bogo_ops_per_s_usr_sys",
    "cpu-usage-per-instance": "cpu_used_per_instance_pct",
    "max-rss": "rss_max_kb",
}
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"


class _NoSexagesimalLoader(yaml.SafeLoader):
    """A SafeLoader without YAML 1.1 base-60 numbers.

    The plain SafeLoader reads stress-ng's ``date-yyyy-mm-dd: 2026:11:21`` and
    ``time-hh-mm-ss: 22:39:21`` as base-60 integers (7294281, 81561). Here they stay strings.
    Every other int and float resolves as usual.
    """


_NoSexagesimalLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# PyYAML's own int and float patterns, minus their base-60 alternatives
_NoSexagesimalLoader.add_implicit_resolver(
    _FLOAT_TAG,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
        |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
_NoSexagesimalLoader.add_implicit_resolver(
    _INT_TAG,
    re.compile(
        r"""^(?:[-+]?0b[0-1_]+
        |[-+]?0[0-7_]+
        |[-+]?(?:0|[1-9][0-9_]*)
        |[-+]?0x[0-9a-fA-F_]+)$""",
        re.X,
    ),
    list("-+0123456789"),
)


def parse_yaml(text: str) -> dict[str, Any]:
    """Parse the file stress-ng writes with ``--yaml``.

    Returns a dict with these keys:

    - ``version``: str or None;
    - ``system_info``: the ``system-info`` mapping, with stress-ng's own keys; dates and times
      stay strings;
    - ``stressors``: a tuple of :class:`StressorMetrics`, shaped like :func:`parse`'s rows;
    - ``misc_metrics``: a tuple of :class:`MiscMetric`, one per extra key of a metrics entry,
      e.g. hdd ``mbsec-read-rate``. Its description is the YAML key.

    An empty document gives empty values. Raises :class:`ParseError` when the text is not
    YAML or a metrics entry lacks a column.
    """
    try:
        document = yaml.load(text, Loader=_NoSexagesimalLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ParseError(f"stress-ng --yaml output is not valid YAML: {exc}") from exc
    if not isinstance(document, dict):
        document = {}
    system_info = document.get("system-info") or {}
    version = system_info.get("stress-ng-version")
    stressors: list[StressorMetrics] = []
    misc: list[MiscMetric] = []
    for entry in document.get("metrics") or []:
        stressors.append(_yaml_row(entry))
        misc += [
            MiscMetric(str(entry["stressor"]), float(value), str(key))
            for key, value in entry.items()
            if key not in _YAML_ROW_KEYS
        ]
    return {
        "version": None if version is None else str(version),
        "system_info": system_info,
        "stressors": tuple(stressors),
        "misc_metrics": tuple(misc),
    }


def _yaml_row(entry: Any) -> StressorMetrics:
    if not isinstance(entry, dict):
        raise ParseError(f"stress-ng --yaml metrics entry is not a mapping: {entry!r}")
    raw = {field: entry[key] for key, field in _YAML_ROW_KEYS.items() if key in entry}
    try:
        return _metrics_row(raw)
    except KeyError as exc:
        raise ParseError(
            f"stress-ng --yaml metrics entry for {entry.get('stressor')!r} lacks {exc}"
        ) from exc
    except (TypeError, ValueError) as exc:
        raise ParseError(
            f"stress-ng --yaml metrics entry for {entry.get('stressor')!r} is malformed: {exc}"
        ) from exc


# --- judging a run ---------------------------------------------------------------------------


def failure_reason(result: StressNgResult, returncode: int) -> str | None:
    """Why this stress-ng run cannot be trusted as interference, or None when it is fine.

    stress-ng exits 0 when stopped by SIGTERM or SIGINT and still prints its metrics, so the
    runner's own stop is not a failure. A negative ``returncode`` (subprocess's "killed by
    signal N") is one: stress-ng did not get to clean up.
    """
    first_error = result.errors[0] if result.errors else None
    if returncode < 0:
        return f"stress-ng was killed by {_signal_name(-returncode)}"
    if returncode != 0:
        meaning = _EXIT_MEANINGS.get(returncode, "failed")
        detail = f": {first_error}" if first_error else ""
        return f"stress-ng exited with status {returncode} ({meaning}){detail}"
    if first_error:
        return f"stress-ng reported an error: {first_error}"
    if not result.completed:
        return "stress-ng did not report a completed run (its output may be truncated)"
    if not result.stressors:
        return "stress-ng printed no metrics (was --metrics-brief overridden?)"
    return None


def achieved_cpu_seconds(result: StressNgResult) -> float:
    """CPU seconds (usr + sys) the cpu stressor actually burned, for comparison with
    :func:`requested_cpu_seconds`."""
    return sum(
        row.usr_time_s + row.sys_time_s for row in result.stressors if row.stressor == CPU_STRESSOR
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# --- the tool seam ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StressNgTool:
    """stress-ng as an :class:`~dbrig.tools.base.InterferenceTool`."""

    params: StressNgParams
    key: ClassVar[str] = "stress-ng"
    info: ClassVar[ToolInfo] = INFO
    params_model: ClassVar[type[BaseModel]] = StressNgParams
    required_by_doctor: ClassVar[bool] = False
    column_prefix: ClassVar[str] = "stress"  # stress_cpu_pct...: the historic prefix
    inactive_note: ClassVar[str] = "every stress-ng stressor has 0 workers"
    achieved_ratio_metric: ClassVar[str | None] = "stress_achieved_ratio"

    def metrics(self) -> tuple[Metric, ...]:
        return produced_by(self.key)

    @property
    def host(self) -> str | None:
        return self.params.host

    @property
    def active(self) -> bool:
        return self.params.active

    def check_host(self, cpu_count: int) -> None:
        validate_for_host(self.params, cpu_count)

    def argv(self, binary: Path, limit_s: int) -> list[str]:
        return build_command(self.params, binary=str(binary), timeout_s=limit_s)

    def pinned_cores(self) -> list[int] | None:
        return list(self.params.taskset) if self.params.taskset else None

    def failure_reason(self, stderr: str, returncode: int) -> str | None:
        return failure_reason(parse(stderr), returncode)

    def analyse(self, stderr: str, usage: Usage) -> dict[str, float]:
        result = parse(stderr)
        asked = requested_cpu_seconds(self.params, usage.wall_s)
        achieved = usage.user_cpu_s + usage.sys_cpu_s
        return {
            "stress_cpu_s_requested": asked,
            "stress_cpu_s_achieved": achieved,
            "stress_achieved_ratio": achieved / asked if asked else float("nan"),
            "stress_bogo_ops": sum(r.bogo_ops for r in result.stressors),
            "stress_bogo_ops_per_s": sum(r.bogo_ops_per_s_real or 0 for r in result.stressors),
            "stress_usr_s": sum(r.usr_time_s or 0 for r in result.stressors),
            "stress_sys_s": sum(r.sys_time_s or 0 for r in result.stressors),
        }
