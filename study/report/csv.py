"""The CSV report: the report's tables, one file each, as `study.analysis.table.to_csv` writes
them (``inf`` is written as ``inf``).

``trials.csv`` (one row per trial), ``steps_to_result.csv`` (per batch size),
``steps_by_strategy.csv`` (per batch size and strategy), ``by_strategy.csv`` (the seed
experiments' table), ``throughput.csv`` and ``measurements.csv`` (the measurement table);
with a throughput probe also ``time_to_result.csv`` (`study.analysis.time_model`), and with a
predicted B_simple ``predicted_noise.csv`` (the estimates it combines).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from study.analysis.table import to_csv

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport


def write_csv(report: ScalingReport, out_dir: str | Path) -> dict[str, Path]:
    """Write the report's tables into ``out_dir``; return the files keyed by file name."""
    out = Path(out_dir)
    tables = {
        "trials.csv": report.trials,
        "steps_to_result.csv": report.steps,
        "steps_by_strategy.csv": report.steps_by_strategy,
        "by_strategy.csv": report.strategies,
        "throughput.csv": report.throughput,
        "measurements.csv": report.table,
    }
    if report.time_model.ok:
        tables["time_to_result.csv"] = report.time_model.table
    if report.predicted_noise.ok:
        tables["predicted_noise.csv"] = report.predicted_noise.estimates
    return {name: to_csv(df, out / name) for name, df in tables.items()}
