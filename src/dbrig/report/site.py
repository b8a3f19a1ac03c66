"""``dbrig publish``: a static site of every saved run, a chart per headline metric and cell.

The site is files only (HTML, its inline script and JSON), so it opens from
``file://`` and from GitHub Pages and fetches nothing::

    SITE/
      manifest.json              every published run: its scenario, time and data file
      data/<run>.json            one run's means per cell and metric, and what of its
                                 run.json the change marks need (environment, servers,
                                 scenario): written once, when the run is first published
      runs/<run>/report.html     the run's report (copied; rendered first if the run has none)
      runs/<run>/compare.html    that run against the one before it
      index.html                 the scenarios
      scenario-<name>.html       a chart per metric and cell over the runs, steps marked

Adding a run writes its data file, report and compare page and then rebuilds the
pages from the data files alone, so publishing run 200 does not render runs 1-199
again. A run is known by its directory's name; one already in the manifest is left
as it is. The pages are rebuilt from data, in :mod:`dbrig.report.site_page`.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbrig import __version__, store
from dbrig.analysis import cells, history
from dbrig.analysis.compare import RunInput, compare_runs
from dbrig.errors import ConfigError, DbrigError
from dbrig.metrics import direction_of
from dbrig.report import compare_text, site_page
from dbrig.report.build import write_report
from dbrig.report.site_page import RunEntry, ScenarioPage
from dbrig.util import files as util_files

SITE_FORMAT = 1
MANIFEST = "manifest.json"
# run.json keys a change mark compares (dbrig.analysis.history.run_changes)
_META_KEYS = ("environment", "servers", "scenario", "raw_scenario", "factors")


@dataclass(frozen=True)
class PublishResult:
    """What one ``dbrig publish`` did."""

    site: Path
    added: tuple[str, ...]
    kept: int
    skipped: tuple[str, ...] = ()  # "<run>: why", one per run left out
    scenarios: tuple[str, ...] = ()


@dataclass
class _Site:
    root: Path
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # manifest: key -> entry

    @classmethod
    def open(cls, root: Path) -> _Site:
        manifest = root / MANIFEST
        if not root.exists():
            return cls(root)
        if not root.is_dir():
            raise ConfigError(f"--out {root}: not a directory")
        if not manifest.exists():
            if any(root.iterdir()):
                raise ConfigError(
                    f"--out {root}: not empty and not a dbrig site (no {MANIFEST}); "
                    "give a new or empty folder"
                )
            return cls(root)
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{manifest}: unreadable ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
            raise ConfigError(f"{manifest}: expected an object with a 'runs' object")
        if int(data.get("format") or 0) > SITE_FORMAT:
            raise ConfigError(f"{manifest}: written by a newer dbrig (format {data['format']})")
        return cls(root, dict(data["runs"]))

    def data(self, key: str) -> dict[str, Any]:
        path = self.root / self.runs[key]["data"]
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: unreadable ({exc}); publish into a new folder") from None

    def write_json(self, relative: str, value: Any) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        util_files.write_text_atomic(path, json.dumps(value, indent=1, sort_keys=True) + "\n")

    def write_text(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        util_files.write_text_atomic(path, text)

    def save_manifest(self) -> None:
        self.write_json(
            MANIFEST,
            {"format": SITE_FORMAT, "generator": f"dbrig {__version__}", "runs": self.runs},
        )


def publish(
    runs_dirs: Sequence[Path],
    out: Path,
    *,
    warn: Callable[[str], None] = lambda line: None,
) -> PublishResult:
    """Add every complete run under ``runs_dirs`` not yet in the site at ``out``, then
    rebuild its pages. ConfigError for a missing folder or a folder that is not a site."""
    for folder in runs_dirs:
        if not folder.is_dir():
            raise ConfigError(f"{folder}: no such directory")
    site = _Site.open(out)
    found = _candidate_runs(runs_dirs, site)
    added, skipped = [], []
    for key, path in found.items():
        try:
            run = _load(path)
        except DbrigError as exc:
            skipped.append(f"{path}: {exc}")
            warn(f"skipped: {exc}")
            continue
        _add_run(site, key, path, run)
        added.append(key)
    site.root.mkdir(parents=True, exist_ok=True)
    site.save_manifest()
    scenarios = _rebuild_pages(site, set(added), warn)
    return PublishResult(
        site.root, tuple(added), len(site.runs) - len(added), tuple(skipped), scenarios
    )


def _candidate_runs(runs_dirs: Sequence[Path], site: _Site) -> dict[str, Path]:
    """Run directories under the folders (or the folders themselves), by name, not yet published."""
    found: dict[str, Path] = {}
    for folder in runs_dirs:
        paths = [folder] if (folder / store.RUN_JSON).exists() else store.find_runs(folder)
        for path in paths:
            if path.name not in site.runs:
                found.setdefault(path.name, path.resolve())
    return found


def _load(path: Path) -> RunInput:
    run = store.RunDir.open(path)
    saved = run.saved()
    if saved.status != "complete":
        raise ConfigError(f"{path}: the run is {saved.status or 'of unknown status'}, not complete")
    results = run.results()
    if results.empty or "cell" not in results:
        raise ConfigError(f"{path}: no trial results saved")
    return RunInput(path.name, saved.to_json(), results)


def scenario_name(meta: Mapping[str, Any]) -> str:
    return str((meta.get("scenario") or {}).get("name") or "unnamed")


def run_record(key: str, source: Path, run: RunInput) -> dict[str, Any]:
    """The data file of one run: its means per cell and metric and what a change mark needs."""
    environment = run.meta.get("environment") or {}
    return {
        "format": SITE_FORMAT,
        "key": key,
        "source": str(source),
        "scenario": scenario_name(run.meta),
        "created_at": str(run.meta.get("created_at") or ""),
        "label": str(environment.get("label") or ""),
        "git": dict(environment.get("git") or {}),
        "trials_failed": run.meta.get("trials_failed"),
        "values": [
            {
                "cell": v.cell,
                "factors": [list(pair) for pair in v.factors],
                "metric": v.metric,
                "n": v.n,
                "mean": v.mean,
                "ci_low": v.ci_low,
                "ci_high": v.ci_high,
            }
            for v in cells.cell_values(run)
        ],
        "meta": {k: run.meta[k] for k in _META_KEYS if k in run.meta},
    }


def _add_run(site: _Site, key: str, source: Path, run: RunInput) -> None:
    record = run_record(key, source, run)
    record["report"] = _copy_report(site, key, source)
    data = f"data/{key}.json"
    site.write_json(data, record)
    site.runs[key] = {
        "scenario": record["scenario"],
        "created_at": record["created_at"],
        "data": data,
    }


def _copy_report(site: _Site, key: str, source: Path) -> str | None:
    page = source / "report.html"
    if not page.exists():
        try:
            page = write_report(source)
        except (DbrigError, OSError):
            return None
    target = site.root / "runs" / key / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(page, target)
    return f"runs/{key}/report.html"


def ordered_keys(runs: Mapping[str, Mapping[str, Any]], scenario: str) -> list[str]:
    """The scenario's runs, oldest first (run.json created_at, in UTC), then by name."""
    keys = [k for k, entry in runs.items() if entry.get("scenario") == scenario]
    return sorted(keys, key=lambda k: (_utc(str(runs[k].get("created_at") or "")), k))


def _utc(text: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return dt.datetime.min
    return when.astimezone(dt.UTC).replace(tzinfo=None) if when.tzinfo else when


def _rebuild_pages(site: _Site, added: set[str], warn: Callable[[str], None]) -> tuple[str, ...]:
    names = sorted({str(entry.get("scenario")) for entry in site.runs.values()})
    summaries = []
    for name in names:
        keys = ordered_keys(site.runs, name)
        records = [site.data(k) for k in keys]
        _refresh_compares(site, records, added, warn)
        page = scenario_page(name, records)
        site.write_text(site_page.scenario_file(name), site_page.scenario_html(page))
        summaries.append(page)
    site.write_text("index.html", site_page.index_html(summaries))
    return tuple(names)


def _refresh_compares(
    site: _Site, records: list[dict[str, Any]], added: set[str], warn: Callable[[str], None]
) -> None:
    """compare.html of each run against the one before it, written when either is new or the
    run before it changed (a run published late, with an older time, slots in between)."""
    for before, after in zip([None, *records], records, strict=False):
        if before is None:
            continue
        if (
            after.get("compared_with") == before["key"]
            and not {before["key"], after["key"]} & added
        ):
            continue
        after["compare"] = _write_compare(site, before, after, warn)
        after["compared_with"] = before["key"]
        site.write_json(site.runs[after["key"]]["data"], after)


def _write_compare(
    site: _Site, before: Mapping[str, Any], after: Mapping[str, Any], warn: Callable[[str], None]
) -> str | None:
    try:
        base = _load(Path(before["source"]))
        cand = _load(Path(after["source"]))
        report = compare_runs(base, cand)
    except DbrigError as exc:
        warn(f"no compare page for {after['key']} against {before['key']}: {exc}")
        return None
    relative = f"runs/{after['key']}/compare.html"
    site.write_text(relative, compare_text.to_html(report))
    return relative


def scenario_page(name: str, records: Sequence[Mapping[str, Any]]) -> ScenarioPage:
    """The scenario's runs (oldest first) as series per metric and cell, steps detected as
    ``dbrig history`` detects them, and what changed at each run."""
    changes = history.changes_between([r.get("meta") or {} for r in records])
    runs = tuple(
        RunEntry(
            key=r["key"],
            created_at=r.get("created_at") or "",
            label=point_label(r),
            commit=str((r.get("git") or {}).get("commit") or ""),
            report=r.get("report"),
            compare=r.get("compare"),
            changes=changed,
            trials_failed=r.get("trials_failed"),
        )
        for r, changed in zip(records, changes, strict=True)
    )
    metrics = list(dict.fromkeys(v["metric"] for r in records for v in r.get("values") or ()))
    histories = tuple(_history(name, metric, records, runs, changes) for metric in metrics)
    return ScenarioPage(name, runs, histories)


def _history(
    name: str,
    metric: str,
    records: Sequence[Mapping[str, Any]],
    runs: Sequence[RunEntry],
    changes: tuple[tuple[str, ...], ...],
) -> history.History:
    by_cell: dict[str, dict[str, Any]] = {}
    for index, record in enumerate(records):
        for value in record.get("values") or ():
            if value["metric"] == metric:
                by_cell.setdefault(value["cell"], {"factors": value["factors"]})[index] = value
    series = []
    for label, found in by_cell.items():
        points = [
            history.Point(run.key, run.created_at, 0)
            if (v := found.get(i)) is None
            else history.Point(
                run.key, run.created_at, v["n"], v["mean"], v.get("ci_low"), v.get("ci_high")
            )
            for i, run in enumerate(runs)
        ]
        cell = tuple((str(f), None if v is None else str(v)) for f, v in found["factors"])
        series.append(history.make_series(label, cell, points))
    return history.History(
        scenario=name,
        metric=metric,
        direction=direction_of(metric),
        runs=tuple(run.key for run in runs),
        created_at=tuple(run.created_at for run in runs),
        series=tuple(series),
        threshold=0.05,
        alpha=0.05,
        min_size=3,
        changes=changes,
    )


def point_label(record: Mapping[str, Any]) -> str:
    """How a run is named under its point: its --label, else commit@branch, else its time."""
    if record.get("label"):
        return str(record["label"])
    git = record.get("git") or {}
    if git.get("commit"):
        text = str(git["commit"])[:8]
        if git.get("branch"):
            text += f" {git['branch']}"
        return text + (" (dirty)" if git.get("dirty") else "")
    return str(record.get("created_at") or "")[:16].replace("T", " ") or str(record.get("key"))
