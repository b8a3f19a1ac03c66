"""results.csv kept current while a run goes, at a flat cost per trial.

Rebuilding results.csv and results.parquet after every trial costs time in proportion to the trials
already saved. :class:`ResultsLog` instead keeps the rows in memory and, after
each trial, appends that trial's line to results.csv: one ``write`` of a whole
line, so a crash leaves the file readable, missing at most the trial being
saved. The file is rewritten (to a temporary file renamed into place) only
when a trial brings a column the file has no header for, or replaces a row (a
failed trial retried); the column set only grows, so that happens a bounded
number of times per run. While a run is going the rows are in completion
order. When it starts or resumes, and when it ends or stops, both files are
rewritten from every trial.json, sorted, with the Parquet file in one go
(``benchmarks/store_scale.py`` measures the alternatives; see
docs/benchmarks.md).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from dbrig.store.model import TrialResult
from dbrig.store.results import RESULTS_CSV, result_row, results_frame
from dbrig.store.rundir import RunDir
from dbrig.util.files import naming_a_full_disk, write_text_atomic


class ResultsLog:
    """results.csv of a run being executed, one appended line per saved trial."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.path = run.path / RESULTS_CSV
        self._results: dict[str, TrialResult] = {}  # in completion order
        self._rows: dict[str, dict[str, Any]] = {}
        self._columns: list[str] = []  # results.csv's header
        self._known: set[str] = set()

    @classmethod
    def open(cls, run: RunDir) -> ResultsLog:
        """The saved trials, with results.csv and results.parquet rewritten from them."""
        log = cls(run)
        for result in run.trials().values():
            log._keep(result)
        if log._results:
            log.finish()
        return log

    @property
    def results(self) -> dict[str, TrialResult]:
        return dict(self._results)

    def add(self, result: TrialResult) -> None:
        """The trial's row into results.csv: appended, or the file rewritten if it must be."""
        replaced = result.trial in self._results
        self._keep(result)
        new = [c for c in self._rows[result.trial] if c not in self._known]
        if replaced or new or not self.path.exists():
            self._columns += new
            self._known.update(new)
            self._rewrite_csv()
        else:
            self._append_csv(self._rows[result.trial])

    def finish(self) -> None:
        """Both files as the trials on disk give them, sorted: what readers of a finished run
        see. A trial saved but not yet added (a signal between the two) is read back."""
        on_disk = self.run.trial_ids()
        for trial_id in on_disk:
            if trial_id not in self._results:
                self._keep(self.run.trial(trial_id))
        if not on_disk:
            return  # a run stopped before its first trial has no results to write
        frame = results_frame(self._results[t] for t in sorted(on_disk))
        self.run.write_results(frame)
        self._columns = [str(c) for c in frame.columns]
        self._known = set(self._columns)

    # -- internals ------------------------------------------------------------------------

    def _keep(self, result: TrialResult) -> None:
        self._results.pop(result.trial, None)  # a retried trial moves to the end
        self._rows.pop(result.trial, None)
        self._results[result.trial] = result
        self._rows[result.trial] = result_row(result)

    def _lines(self, rows: Iterable[dict[str, Any]]) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        for row in rows:
            writer.writerow([_cell_text(row.get(c)) for c in self._columns])
        return buffer.getvalue()

    def _append_csv(self, row: dict[str, Any]) -> None:
        with naming_a_full_disk(self.path), open(self.path, "a") as handle:
            handle.write(self._lines([row]))  # one write of whole lines

    def _rewrite_csv(self) -> None:
        header = io.StringIO()
        csv.writer(header, lineterminator="\n").writerow(self._columns)
        write_text_atomic(self.path, header.getvalue() + self._lines(self._rows.values()))


def _cell_text(value: Any) -> Any:
    """A value as pandas writes it: empty for None and NaN."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return value
