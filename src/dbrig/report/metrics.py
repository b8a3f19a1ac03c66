"""The headline metrics a saved run measured, as the report shows them (:mod:`dbrig.metrics`)."""

from __future__ import annotations

import pandas as pd

from dbrig.metrics import DEFAULT_PERCENTILE, Metric, headline


def headline_metrics(results: pd.DataFrame) -> list[Metric]:
    """The headline metrics this run measured, with the latency percentile it used."""
    measured = {c for c in results.columns if results[c].notna().any()}
    return list(headline(measured, _percentile(results)))


def _percentile(results: pd.DataFrame) -> str:
    if "percentile" in results:
        values = results["percentile"].dropna()
        if not values.empty:
            value = float(values.iloc[0])
            return f"{value:g}"
    return str(DEFAULT_PERCENTILE)
