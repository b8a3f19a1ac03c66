"""The run report: one self-contained HTML page, its charts and the per-cell table.

``write_report(run_dir)`` renders a saved run directory (complete, interrupted
or still running); ``run_warnings(run_dir)`` lists where its numbers may lie,
for the page and the terminal alike.
"""

from dbrig.report.build import write_report
from dbrig.report.warnings import RunWarning, measurement_caveats, run_warnings

__all__ = ["RunWarning", "measurement_caveats", "run_warnings", "write_report"]
