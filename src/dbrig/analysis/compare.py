"""Baseline versus candidate, cell by cell and metric by metric: frames in, verdict rows out.

Pure: no file is read or written here. The inputs are :class:`RunInput` (a run's
``run.json`` as a dict and its ``results.csv`` as a frame); the output is a
:class:`CompareReport`, rendered by :mod:`dbrig.report.compare_text`.

Two ways to pick the sides:

* :func:`compare_runs`: two runs. Cells match on every factor column (full
  dotted paths, ``run.json`` ``factors``); a cell only one run has is listed,
  not compared.
* :func:`compare_groups`: one run split on one factor (``--by server``); cells
  match on the other factors. The baseline is the factor's first value in
  matrix order, or the one named.

Per matched cell and metric the repetitions that succeeded (``status == ok``)
go to :func:`dbrig.analysis.stats.compare_samples`. A row's ``verdict`` is one of
:data:`VERDICTS`:

* better / worse / unchanged / inconclusive / insufficient data: from stats
  (worse needs p < alpha and an effect of at least the threshold);
* changed: a significant change beyond the threshold in a metric whose good
  direction is unknown (never counted as a regression);
* failed: every trial of the cell failed on one side;
* incomparable: the environments differ in a way the compared factor does not
  explain (see :func:`environment_differences`), unless ``allow_env_diff``.

Row numbers keep the stats conventions: means in the metric's unit, ``*_pct``
in percent of the baseline mean, ``cv`` a fraction.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from dbrig.analysis.explain import CellExplanation
from dbrig.analysis.multiplicity import CORRECTIONS, FamilyDecision, decide_family
from dbrig.analysis.stats import Comparison, compare_samples, explain, verdict_for
from dbrig.errors import ConfigError
from dbrig.factors import short_factor_names
from dbrig.metrics import DERIVED, Direction, compared, direction_of

VERDICTS = (
    "worse",
    "failed",
    "incomparable",
    "better",
    "changed",
    "inconclusive",
    "insufficient data",
    "unchanged",
)

# Every tool's metrics: a run is compared on those it has. Then the costs per unit of work.
DEFAULT_METRICS = compared()
COST_METRICS = compared(DERIVED)

_IDENTITY_COLUMNS = frozenset({"trial", "cell", "repetition", "server", "status", "reason"})

# Server variables that name this instance (port, socket, uid) rather than configure it.
_INSTANCE_VARIABLES = frozenset(
    {"port", "report_port", "socket", "pid_file", "server_uid", "hostname", "report_host"}
)
_SOCKET_DIR = re.compile(r"/dbrig-[^/]+/")


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, eq=False)
class RunInput:
    """One saved run: ``label`` names it in reports, ``meta`` is run.json."""

    label: str
    meta: Mapping[str, Any]
    results: pd.DataFrame

    @property
    def factors(self) -> list[str]:
        """The factor columns (full dotted paths) in matrix order."""
        declared = [f for f in self.meta.get("factors") or [] if f in self.results.columns]
        return list(dict.fromkeys(declared))

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.meta.get("factor_labels") or {})


def normalize_value(value: Any) -> str | None:
    """A factor value as text that matches across runs: 2, 2.0 and "2" are all "2"."""
    if value is None:
        return None
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, np.integer):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return str(int(value)) if value.is_integer() else repr(float(value))
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return normalize_value(number) if math.isfinite(number) else value
    return str(value)


def resolve_factor(name: str, factors: Sequence[str], labels: Mapping[str, str]) -> str:
    """A factor named by full path, short label (``threads``) or unique dotted suffix."""
    if name in factors:
        return name
    by_label = [f for f in factors if labels.get(f) == name]
    if len(by_label) == 1:
        return by_label[0]
    by_suffix = [f for f in factors if f.endswith("." + name)]
    if len(by_suffix) == 1:
        return by_suffix[0]
    known = ", ".join(factors) or "none"
    if len(by_suffix) > 1:
        raise ConfigError(f"factor '{name}' is ambiguous: {', '.join(by_suffix)}")
    raise ConfigError(f"factor '{name}': no such factor (factors: {known})")


# --------------------------------------------------------------------------- environment


@dataclass(frozen=True)
class EnvDifference:
    """One way the two sides' environments differ.

    ``server`` is None for a host-wide difference, else "base/candidate" server
    names; ``explained_by`` names what accounts for it (the compared factor or
    the scenario's server config), None when nothing does.
    """

    what: str
    base: str | None
    candidate: str | None
    server: str | None = None
    explained_by: str | None = None


_HOST_FIELDS = (
    ("CPU model", ("environment", "host", "cpu_model")),
    ("CPU count", ("environment", "host", "cpu_count")),
    ("kernel", ("environment", "host", "kernel")),
    ("I/O scheduler", ("environment", "storage", "io_scheduler")),
    ("workload tool", ("environment", "tools", "workload")),
)
_SERVER_TOOL_PREFIX = "server:"  # environment.tools keys of server binaries (compared apart)


def environment_differences(
    base: Mapping[str, Any],
    candidate: Mapping[str, Any],
    server_pairs: Iterable[tuple[str, str]],
    *,
    explained_by: str | None = None,
    ignore_variables: Iterable[str] = (),
) -> list[EnvDifference]:
    """How two runs' environments differ: host, tools, and each compared server pair.

    Host: CPU model and count, kernel, I/O scheduler, the workload tool's and
    every interference tool's version. Servers (``base`` server name,
    ``candidate`` server name): flavor, version and every SHOW GLOBAL VARIABLES
    value, except those naming the instance (port, socket, uid, paths inside the
    run directory) and those in
    ``ignore_variables`` (varied by the matrix, so matched cell by cell).
    Server differences are explained by ``explained_by`` when given (the
    ``--by server`` factor); otherwise a variable is explained when the two
    scenarios set it differently in the server's ``config``.
    """
    fields = [*_HOST_FIELDS, *_interference_tool_fields(base, candidate)]
    host = [
        EnvDifference(what, a, b)
        for what, path in fields
        if (a := _env_text(base, path)) != (b := _env_text(candidate, path))
    ]
    ignored = {v.lower() for v in ignore_variables}
    servers = []
    for pair in dict.fromkeys(server_pairs):
        servers += _server_differences(base, candidate, pair, explained_by, ignored)
    return host + servers


def piece_differences(base: Mapping[str, Any], piece: Mapping[str, Any]) -> list[EnvDifference]:
    """How two pieces of one split run (``dbrig merge``) differ, by :func:`environment_differences`.

    Host and tools, and each server both pieces started; the variables the matrix
    varies are left out, since a server's variables are recorded in whichever cell
    first started it. One scenario means one server config, so nothing is explained.
    """
    servers = sorted(set(base.get("servers") or {}) & set(piece.get("servers") or {}))
    factors = [*(base.get("factors") or []), *(piece.get("factors") or [])]
    return environment_differences(
        base, piece, [(s, s) for s in servers], ignore_variables=factor_variables(factors)
    )


def _interference_tool_fields(
    *metas: Mapping[str, Any],
) -> list[tuple[str, tuple[str, str, str]]]:
    """Every interference tool either run recorded (stress-ng, ...), by its key."""
    keys: dict[str, None] = {}
    for meta in metas:
        tools = (meta.get("environment") or {}).get("tools") or {}
        keys.update(dict.fromkeys(k for k in tools if k != "workload"))
    return [
        (key, ("environment", "tools", key))
        for key in keys
        if not key.startswith(_SERVER_TOOL_PREFIX)
    ]


def _env_text(meta: Mapping[str, Any], path: Sequence[str]) -> str | None:
    node: Any = meta
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    if node is None:
        return None
    text = str(node)
    if path[1] == "tools":  # a version line: compare the version number only
        match = re.search(r"\d+(?:\.\d+)+", text)
        return match.group(0) if match else text
    return text


def _server_differences(
    base: Mapping[str, Any],
    candidate: Mapping[str, Any],
    pair: tuple[str, str],
    explained_by: str | None,
    ignored: set[str],
) -> list[EnvDifference]:
    base_name, cand_name = pair
    a = (base.get("servers") or {}).get(base_name) or {}
    b = (candidate.get("servers") or {}).get(cand_name) or {}
    label = base_name if base_name == cand_name else f"{base_name}/{cand_name}"
    found = [
        EnvDifference(f"server {key}", _text(a.get(key)), _text(b.get(key)), label, explained_by)
        for key in ("flavor", "version")
        if _text(a.get(key)) != _text(b.get(key))
    ]
    config_diffs = _scenario_config_differences(base, candidate, base_name, cand_name)
    vars_a = _instance_free(a.get("variables") or {}, _run_marks(base))
    vars_b = _instance_free(b.get("variables") or {}, _run_marks(candidate))
    for name in sorted(set(vars_a) | set(vars_b)):
        if name in ignored or vars_a.get(name) == vars_b.get(name):
            continue
        why = explained_by or ("scenario server config" if name in config_diffs else None)
        found.append(EnvDifference(name, vars_a.get(name), vars_b.get(name), label, why))
    return found


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _run_marks(meta: Mapping[str, Any]) -> list[str]:
    """Strings that place a value inside one particular run directory."""
    marks = []
    for server in (meta.get("servers") or {}).values():
        datadir = str((server.get("variables") or {}).get("datadir") or "")
        if "/servers/" in datadir:
            marks.append(datadir.split("/servers/")[0])
    return marks


def _instance_free(variables: Mapping[str, Any], run_marks: Sequence[str]) -> dict[str, str]:
    kept = {}
    for name, value in variables.items():
        key = name.lower()
        if key in _INSTANCE_VARIABLES or key.startswith("version"):
            continue
        text = str(value)
        for mark in run_marks:
            text = text.replace(mark, "<run>")
        kept[key] = _SOCKET_DIR.sub("/dbrig-<tmp>/", text)
    return kept


def _scenario_config_differences(
    base: Mapping[str, Any], candidate: Mapping[str, Any], base_server: str, cand_server: str
) -> set[str]:
    a = _scenario_config(base, base_server)
    b = _scenario_config(candidate, cand_server)
    return {key for key in set(a) | set(b) if a.get(key) != b.get(key)}


def _scenario_config(meta: Mapping[str, Any], server: str) -> dict[str, str]:
    scenario = meta.get("scenario") or {}
    spec = ((scenario.get("servers") or {}).get(server)) or scenario.get("server") or {}
    config = spec.get("config") or {}
    return {str(k).lower().replace("-", "_"): str(v) for k, v in config.items()}


def factor_variables(factors: Iterable[str]) -> set[str]:
    """Server variables a matrix varies: ``server.config.X`` or ``servers.N.config.X``."""
    names = set()
    for factor in factors:
        parts = factor.split(".")
        if len(parts) >= 3 and parts[-2] == "config" and parts[0] in ("server", "servers"):
            names.add(parts[-1].lower().replace("-", "_"))
    return names


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One cell x metric (x candidate) comparison.

    ``cell`` holds the matched (factor, value) pairs; ``label`` shows them with
    short factor names. ``stats`` carries the numbers even when ``verdict`` is
    overridden (failed, incomparable, changed); ``note`` says what the verdict
    rests on (stats.explain, or why there was no verdict). ``p_value`` is the
    test the gate used (the moderated t, or Welch's when a metric has too few
    cells to pool) and ``p_adjusted`` that p after the correction over every
    comparison of the report (see :mod:`dbrig.analysis.multiplicity`); both are
    None for a row that was not tested.
    """

    candidate: str
    cell: tuple[tuple[str, str | None], ...]
    label: str
    base_cell: str
    cand_cell: str
    metric: str
    direction: str | None
    verdict: str
    stats: Comparison
    trials_base: int
    trials_cand: int
    note: str
    p_value: float | None = None
    p_adjusted: float | None = None


@dataclass(frozen=True)
class CompareReport:
    """Everything one ``dbrig compare`` found; :mod:`dbrig.report.compare_text` renders it.

    ``baseline`` and ``candidates`` name the sides (run labels, or ``factor=value``
    with ``by``); ``factors`` are the factors cells were matched on;
    ``only_baseline``/``only_candidate`` list cells that had no partner.
    ``correction`` is how the error rate is held over the ``comparisons`` tested
    rows ("holm" or "none"), ``primary`` the metric given half of alpha, and
    ``tests`` the test used per metric. ``caveats`` say how the host disturbed either
    side's measurement (the runs' own warnings: steal, other load, swap...), one line each,
    side first; the command layer fills them in from the saved runs. ``explanations``
    say why, per matched pair of cells whose trials have profiles or server internals
    (:mod:`dbrig.analysis.explain`; the command layer reads them too).
    """

    baseline: str
    candidates: tuple[str, ...]
    by: str | None
    factors: tuple[str, ...]
    metrics: tuple[str, ...]
    threshold: float
    alpha: float
    allow_env_diff: bool
    differences: tuple[EnvDifference, ...]
    rows: tuple[Row, ...]
    only_baseline: tuple[str, ...] = ()
    only_candidate: tuple[str, ...] = ()
    correction: str = "holm"
    comparisons: int = 0
    primary: str | None = None
    tests: tuple[tuple[str, str], ...] = ()
    caveats: tuple[str, ...] = ()
    explanations: tuple[CellExplanation, ...] = ()

    def counts(self) -> dict[str, int]:
        """Rows per verdict, in :data:`VERDICTS` order, zero counts left out."""
        found = Counter(r.verdict for r in self.rows)
        return {v: found[v] for v in VERDICTS if found[v]}

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == "worse"]

    @property
    def unexplained(self) -> list[EnvDifference]:
        return [d for d in self.differences if d.explained_by is None]


def ok_values(frame: pd.DataFrame, metric: str) -> np.ndarray:
    """The metric over the trials that succeeded (all rows when there is no status column)."""
    if metric not in frame:
        return np.array([], dtype=float)
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    return pd.to_numeric(ok[metric], errors="coerce").to_numpy(dtype=float)


def cell_groups(frame: pd.DataFrame, factors: Sequence[str]) -> dict[tuple, pd.DataFrame]:
    """The frame's trials grouped by their normalised factor values, in order of appearance.

    A factor the frame lacks counts as None, so it matches no real value.
    """
    keys = [
        tuple(normalize_value(row.get(f)) if f in frame else None for f in factors)
        for row in frame.to_dict("records")
    ]
    positions: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        positions.setdefault(key, []).append(i)
    return {key: frame.iloc[rows] for key, rows in positions.items()}


@dataclass(frozen=True)
class _Side:
    """The trials of one matched cell on one side."""

    frame: pd.DataFrame

    @property
    def server(self) -> str:
        return str(self.frame["server"].iloc[0]) if "server" in self.frame else "default"

    @property
    def cell_id(self) -> str:
        return "+".join(dict.fromkeys(str(c) for c in self.frame["cell"]))

    @cached_property
    def _ok(self) -> pd.DataFrame:
        return self.frame[self.frame["status"] == "ok"] if "status" in self.frame else self.frame

    def values(self, metric: str) -> np.ndarray:
        if metric not in self._ok:
            return np.array([], dtype=float)
        return pd.to_numeric(self._ok[metric], errors="coerce").to_numpy(dtype=float)

    @cached_property
    def failure(self) -> str | None:
        """Why every trial failed, or None if any succeeded."""
        statuses = self.frame["status"] if "status" in self.frame else pd.Series(["ok"])
        if len(self.frame) == 0 or (statuses == "ok").any():
            return None
        reasons = (
            self.frame["reason"].dropna().astype(str).unique() if "reason" in self.frame else []
        )
        because = f" ({'; '.join(reasons)})" if len(reasons) else ""
        return f"all {len(self.frame)} trials failed{because}"


@dataclass(frozen=True)
class _Settings:
    threshold: float
    alpha: float
    allow_env_diff: bool
    correction: str = "holm"
    primary: str | None = None


def _cells(frame: pd.DataFrame, factors: Sequence[str]) -> dict[tuple, _Side]:
    return {key: _Side(part) for key, part in cell_groups(frame, factors).items()}


def cell_label(factors: Sequence[str], key: Sequence[str | None], labels: Mapping[str, str]) -> str:
    """e.g. "threads=1 cpu=0"; a factor the cell lacks shows as "-"."""
    parts = [
        f"{labels.get(f, f)}={'-' if v is None else v}" for f, v in zip(factors, key, strict=True)
    ]
    return " ".join(parts) or "(single cell)"


def _compare_cell(
    candidate: str,
    key: tuple,
    label: str,
    factors: Sequence[str],
    sides: tuple[_Side, _Side],
    metric: str,
    settings: _Settings,
    blocking: Sequence[EnvDifference],
) -> Row:
    base, cand = sides
    direction = direction_of(metric)
    result = compare_samples(
        base.values(metric),
        cand.values(metric),
        direction=direction or Direction.HIGHER_IS_BETTER,
        threshold=settings.threshold,
        alpha=settings.alpha,
    )
    verdict, note = result.verdict, explain(result, settings.threshold)
    if direction is None and verdict in ("better", "worse"):
        verdict = "changed"
        note = f"direction of {metric} unknown; {note}"
    for side, name in ((base, "baseline"), (cand, "candidate")):
        if metric not in side.frame:
            note = f"{metric} was not recorded in the {name}"
    failures = [(n, s.failure) for n, s in (("baseline", base), ("candidate", cand))]
    failures = [(n, why) for n, why in failures if why]
    if failures:
        verdict = "failed"
        note = "; ".join(f"{n}: {why}" for n, why in failures)
    elif blocking and not settings.allow_env_diff:
        verdict = "incomparable"
        note = "environment differs: " + ", ".join(d.what for d in blocking)
    return Row(
        candidate=candidate,
        cell=tuple(zip(factors, key, strict=True)),
        label=label,
        base_cell=base.cell_id,
        cand_cell=cand.cell_id,
        metric=metric,
        direction=direction.value if direction else None,
        verdict=verdict,
        stats=result,
        trials_base=len(base.frame),
        trials_cand=len(cand.frame),
        note=note,
    )


def _blocking(
    differences: Sequence[EnvDifference], base_server: str, cand_server: str
) -> list[EnvDifference]:
    """Unexplained differences that concern a cell run on these servers."""
    label = base_server if base_server == cand_server else f"{base_server}/{cand_server}"
    return [
        d for d in differences if d.explained_by is None and (d.server is None or d.server == label)
    ]


def choose_metrics(requested: Sequence[str], frames: Sequence[pd.DataFrame]) -> tuple[str, ...]:
    """The metrics asked for (each must be a column somewhere), else the defaults present."""
    if requested:
        wanted = list(dict.fromkeys(m.strip() for m in requested if m.strip()))
        for metric in wanted:
            if not any(metric in f.columns for f in frames):
                raise ConfigError(
                    f"--metric {metric}: no such column in the results "
                    f"(metrics: {_metric_names(frames)})"
                )
        return tuple(wanted)
    found = tuple(m for m in DEFAULT_METRICS if any(m in f and f[m].notna().any() for f in frames))
    if not found:
        raise ConfigError(
            f"no default metric in the results; name one with --metric "
            f"(metrics: {_metric_names(frames)})"
        )
    return found


def _metric_names(frames: Sequence[pd.DataFrame], limit: int = 15) -> str:
    names = [
        c
        for f in frames
        for c in f.columns
        if c not in _IDENTITY_COLUMNS
        and not c.startswith("time_")
        and "." not in c
        and pd.api.types.is_numeric_dtype(f[c])
    ]
    names = [m for m in DEFAULT_METRICS if m in names] + [
        n for n in names if n not in DEFAULT_METRICS
    ]
    names = list(dict.fromkeys(names))
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"


def merged_labels(factors: Sequence[str], runs: Sequence[RunInput]) -> dict[str, str]:
    """Short display names for factors: the runs' own factor_labels, else shortest suffixes."""
    labels = short_factor_names(list(factors))
    for run in runs:
        labels.update({k: v for k, v in run.labels.items() if k in factors})
    return labels


# --------------------------------------------------------------------------- comparing


def compare_runs(
    base: RunInput,
    candidate: RunInput,
    *,
    metrics: Sequence[str] = (),
    threshold: float = 0.05,
    alpha: float = 0.05,
    allow_env_diff: bool = False,
    correction: str = "holm",
    primary: str | None = None,
) -> CompareReport:
    """Compare two runs cell by cell; raises ConfigError when no cell is in both.

    ``correction`` and ``primary``: see :func:`gate_rows`.
    """
    factors = list(dict.fromkeys(base.factors + candidate.factors))
    labels = merged_labels(factors, [base, candidate])
    base_cells = _cells(base.results, factors)
    cand_cells = _cells(candidate.results, factors)
    common = [k for k in base_cells if k in cand_cells]
    if not common:
        raise ConfigError(
            f"{base.label} and {candidate.label} have no cell in common"
            + _factor_hint(base, candidate, base_cells, cand_cells, labels, factors)
        )
    chosen = choose_metrics(metrics, [base.results, candidate.results])
    settings = _settings(threshold, alpha, allow_env_diff, correction, primary, chosen)
    pairs = [(base_cells[k].server, cand_cells[k].server) for k in common]
    differences = environment_differences(
        base.meta, candidate.meta, pairs, ignore_variables=factor_variables(factors)
    )
    rows = _rows(
        candidate.label,
        common,
        chosen,
        factors,
        labels,
        base_cells,
        cand_cells,
        settings,
        differences,
    )
    rows, tests = gate_rows(rows, settings)
    return CompareReport(
        baseline=base.label,
        candidates=(candidate.label,),
        by=None,
        factors=tuple(factors),
        metrics=chosen,
        threshold=threshold,
        alpha=alpha,
        allow_env_diff=allow_env_diff,
        differences=tuple(differences),
        rows=tuple(rows),
        only_baseline=tuple(
            cell_label(factors, k, labels) for k in base_cells if k not in cand_cells
        ),
        only_candidate=tuple(
            cell_label(factors, k, labels) for k in cand_cells if k not in base_cells
        ),
        **_family_fields(rows, settings, tests),
    )


def _factor_hint(
    base: RunInput,
    candidate: RunInput,
    base_cells: Mapping[tuple, _Side],
    cand_cells: Mapping[tuple, _Side],
    labels: Mapping[str, str],
    factors: Sequence[str],
) -> str:
    if base.factors != candidate.factors:
        return (
            f" (factors differ: {', '.join(base.factors) or 'none'} versus "
            f"{', '.join(candidate.factors) or 'none'})"
        )
    first = cell_label(factors, next(iter(base_cells)), labels)
    other = cell_label(factors, next(iter(cand_cells)), labels)
    return f" (e.g. {first} versus {other})"


def compare_groups(
    run: RunInput,
    by: str,
    baseline: str | None = None,
    *,
    metrics: Sequence[str] = (),
    threshold: float = 0.05,
    alpha: float = 0.05,
    allow_env_diff: bool = False,
    correction: str = "holm",
    primary: str | None = None,
) -> CompareReport:
    """Split one run on factor ``by`` and compare each other value with the baseline value.

    Without ``baseline`` the factor must have exactly two values; the first in
    matrix order is the baseline. Raises ConfigError for an unknown factor, a
    factor with one value, more than two values and no baseline, or no cell
    in common.
    """
    factor, base_value, values = _split_on(run, by, baseline)
    others = [f for f in run.factors if f != factor]
    labels = merged_labels([factor, *others], [run])
    names = {v: f"{labels.get(factor, factor)}={v}" for v in values}
    column = run.results[factor].map(normalize_value)
    base_cells = _cells(run.results[column == base_value], others)
    chosen = choose_metrics(metrics, [run.results])
    settings = _settings(threshold, alpha, allow_env_diff, correction, primary, chosen)
    rows: list[Row] = []
    differences: list[EnvDifference] = []
    only_base: set[str] = set()
    only_cand: list[str] = []
    for value in (v for v in values if v != base_value):
        cand_cells = _cells(run.results[column == value], others)
        common = [k for k in base_cells if k in cand_cells]
        found = environment_differences(
            run.meta,
            run.meta,
            [(base_cells[k].server, cand_cells[k].server) for k in common],
            explained_by=factor if factor == "server" else None,
            ignore_variables=factor_variables(run.factors),
        )
        differences += [d for d in found if d not in differences]
        only_base |= {cell_label(others, k, labels) for k in base_cells if k not in cand_cells}
        only_cand += [
            f"{names[value]}: {cell_label(others, k, labels)}"
            for k in cand_cells
            if k not in base_cells
        ]
        rows += _rows(
            names[value], common, chosen, others, labels, base_cells, cand_cells, settings, found
        )
    if not rows:
        raise ConfigError(f"--by {by}: the groups of {run.label} have no cell in common")
    rows, tests = gate_rows(rows, settings)
    return CompareReport(
        baseline=names[base_value],
        candidates=tuple(names[v] for v in values if v != base_value),
        by=factor,
        factors=tuple(others),
        metrics=chosen,
        threshold=threshold,
        alpha=alpha,
        allow_env_diff=allow_env_diff,
        differences=tuple(differences),
        rows=tuple(rows),
        only_baseline=tuple(sorted(only_base)),
        only_candidate=tuple(only_cand),
        **_family_fields(rows, settings, tests),
    )


def _rows(
    candidate: str,
    common: list[tuple],
    metrics: Sequence[str],
    factors: Sequence[str],
    labels: Mapping[str, str],
    base_cells: Mapping[tuple, Any],
    cand_cells: Mapping[tuple, Any],
    settings: _Settings,
    differences: Sequence[EnvDifference],
) -> list[Row]:
    """One row per common cell and metric: the comparison, blocked by unexplained env diffs."""
    return [
        _compare_cell(
            candidate,
            key,
            cell_label(factors, key, labels),
            factors,
            (base_cells[key], cand_cells[key]),
            metric,
            settings,
            _blocking(differences, base_cells[key].server, cand_cells[key].server),
        )
        for key in common
        for metric in metrics
    ]


def _settings(
    threshold: float,
    alpha: float,
    allow_env_diff: bool,
    correction: str,
    primary: str | None,
    chosen: Sequence[str],
) -> _Settings:
    if correction not in CORRECTIONS:
        raise ConfigError(f"--correction {correction}: expected one of {', '.join(CORRECTIONS)}")
    if primary is not None and primary not in chosen:
        raise ConfigError(
            f"--primary {primary}: not among the compared metrics ({', '.join(chosen)})"
        )
    return _Settings(threshold, alpha, allow_env_diff, correction, primary or chosen[0])


_NOT_DECISIONS = frozenset({"failed", "incomparable"})


def gate_rows(rows: Sequence[Row], settings: _Settings) -> tuple[list[Row], dict[str, str]]:
    """Every tested row's verdict decided at the family level (multiplicity.py).

    The family is every row that got a test (not failed, not incomparable, not
    "insufficient data"): its p-value is the moderated t pooled over the
    metric's cells, adjusted by weighted Holm over all of them (``correction``
    "holm") or left alone ("none"). Better/worse then needs the adjusted p
    below alpha and a change of at least the threshold.
    """
    family = [r for r in rows if r.verdict not in _NOT_DECISIONS and r.stats.p_value is not None]
    decisions, tests = decide_family(
        [r.stats for r in family],
        [r.metric for r in family],
        primary=settings.primary,
        correction=settings.correction,
    )
    decided = {id(r): d for r, d in zip(family, decisions, strict=True) if d is not None}
    size = len(decided)
    out = [_decided(r, decided[id(r)], settings, size) if id(r) in decided else r for r in rows]
    return out, tests


def _decided(row: Row, decision: FamilyDecision, settings: _Settings, size: int) -> Row:
    s = row.stats
    assert s.delta_pct is not None and s.mde_pct is not None
    direction = direction_of(row.metric)
    verdict: str = verdict_for(
        s.delta_pct,
        decision.p_adjusted,
        s.mde_pct,
        settings.threshold,
        settings.alpha,
        direction or Direction.HIGHER_IS_BETTER,
    )
    if direction is None and verdict in ("better", "worse"):
        verdict = "changed"
    note = row.note
    alone = verdict_for(
        s.delta_pct,
        decision.p_value,
        s.mde_pct,
        settings.threshold,
        settings.alpha,
        direction or Direction.HIGHER_IS_BETTER,
    )
    significant_alone = alone in ("better", "worse")
    significant_now = verdict in ("better", "worse", "changed")
    if settings.correction == "holm" and size > 1 and significant_alone != significant_now:
        note = (
            f"p {decision.p_value:.2g} alone, {decision.p_adjusted:.2g} after Holm over "
            f"{size} comparisons; {note}"
        )
    return replace(
        row,
        verdict=verdict,
        note=note,
        p_value=decision.p_value,
        p_adjusted=decision.p_adjusted,
    )


def _family_fields(
    rows: Sequence[Row], settings: _Settings, tests: dict[str, str]
) -> dict[str, Any]:
    return {
        "correction": settings.correction,
        "comparisons": sum(r.p_adjusted is not None for r in rows),
        "primary": settings.primary,
        "tests": tuple(tests.items()),
    }


def _split_on(run: RunInput, by: str, baseline: str | None) -> tuple[str, str, list[str]]:
    """The ``--by`` factor's full path, its baseline value and all its values."""
    choices = [*run.factors, *([] if "server" in run.factors else ["server"])]
    factor = resolve_factor(by, choices, run.labels)
    values = _values_in_order(run, factor)
    if len(values) < 2:
        only = values[0] if values else "none"
        raise ConfigError(f"--by {by}: {factor} has a single value in {run.label} ({only})")
    if baseline is None:
        if len(values) > 2:
            raise ConfigError(
                f"--by {by}: {factor} has {len(values)} values ({', '.join(values)}); "
                "name the baseline with --baseline VALUE"
            )
        return factor, values[0], values
    base_value = normalize_value(baseline) or baseline
    if base_value not in values:
        raise ConfigError(
            f"--baseline {baseline}: not a value of {factor} (values: {', '.join(values)})"
        )
    return factor, base_value, values


def _values_in_order(run: RunInput, factor: str) -> list[str]:
    """The factor's values: matrix order from run.json cells, then any others seen."""
    declared = [
        normalize_value((c.get("factors") or {}).get(factor, c.get(factor)))
        for c in run.meta.get("cells") or []
    ]
    seen = [normalize_value(v) for v in run.results[factor]]
    present = set(seen)
    return [v for v in dict.fromkeys(declared + seen) if v is not None and v in present]
