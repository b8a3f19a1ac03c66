"""Charts of the run report: pure functions from frames to matplotlib Figures, then PNG bytes.

The charts live in four modules; this one names what the report's sections draw with:

- :mod:`dbrig.report.chart_base`: the style, figures of a fixed layout, PNG bytes;
- :mod:`dbrig.report.factor_chart`: a factor's value against the headline metrics;
- :mod:`dbrig.report.cell_chart`: the throughput overview and one figure per cell;
- :mod:`dbrig.report.panels`: one sampled quantity drawn on one axes.
"""

from __future__ import annotations

from dbrig.report.cell_chart import CellSamples, cell_figure, timeseries_grid
from dbrig.report.chart_base import (
    DPI,
    MAX_PLOT_POINTS,
    PALETTE,
    STYLE,
    TIME_LABEL,
    Marker,
    png_bytes,
)
from dbrig.report.factor_chart import MIN_INTERVAL_N, FactorPoints, factor_chart, spread_kind
from dbrig.report.panels import Buckets, Series, downsample

__all__ = [
    "DPI",
    "MAX_PLOT_POINTS",
    "MIN_INTERVAL_N",
    "PALETTE",
    "STYLE",
    "TIME_LABEL",
    "Buckets",
    "CellSamples",
    "FactorPoints",
    "Marker",
    "Series",
    "cell_figure",
    "downsample",
    "factor_chart",
    "png_bytes",
    "spread_kind",
    "timeseries_grid",
]
