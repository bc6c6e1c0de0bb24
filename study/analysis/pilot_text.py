"""A pilot's noise scale and its suggested study, as the lines ``study noise-scale`` prints.

Example: ``interval_text(26.8, math.inf)`` is ``"26.8 to inf"``; `format_table` gives one line
per evaluation step (step, B_simple, its 95% interval), `format_suggestion` the batch sizes
and learning-rate ranges of `study.analysis.pilot.suggest`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from study.analysis.pilot import ALPHAS, Pilot

__all__ = ["TABLE_ROWS", "format_suggestion", "format_table", "interval_text"]

#: Rows of the printed table (evaluations spread over the run; the JSON output has them all).
TABLE_ROWS = 20


def format_table(pilot: Pilot, rows: int = TABLE_ROWS) -> str:
    """Evaluation steps with B_simple and its 95% interval (at most ``rows``, spread evenly,
    the last and the one where the result is read kept)."""
    points = list(pilot.curve)
    if len(points) > rows:
        last = len(points) - 1
        keep = {round(i * last / (rows - 1)) for i in range(rows)}
        keep |= {i for i, p in enumerate(points) if p[0] == pilot.at_step}
        points = [p for i, p in enumerate(points) if i in keep]
    lines = [f"{'step':>8}  {'B_simple':>10}  {'95% interval':>24}"]
    for step, value, low, high in points:
        lines.append(f"{step:>8}  {_num(value):>10}  {interval_text(low, high):>24}")
    return "\n".join(lines)


def format_suggestion(suggestion: Mapping[str, Any], pilot: Pilot) -> str:
    """The suggested batch sizes, each one's learning-rate range and the study's range."""
    sizes = suggestion["batch_sizes"]
    lines = [
        f"suggested batch sizes: {', '.join(map(str, sizes))} (powers of two from about "
        f"B_simple/16 to 16 x B_simple, at most the {suggestion['train_examples']} training "
        "examples)",
        f"learning rate per batch size: the pilot's {pilot.learning_rate:.3g} x "
        f"(B/{pilot.batch_size})^alpha, alpha from {ALPHAS[0]} (square-root rule) to "
        f"{ALPHAS[1]} (linear rule):",
    ]
    for size in sizes:
        low, high = suggestion["learning_rate_by_batch_size"][str(size)]
        lines.append(f"  {size:>8}: {low:.3g} to {high:.3g}")
    low, high = suggestion["learning_rate"]
    lines.append(f"study learning-rate range: {low:.3g} to {high:.3g} (log scale)")
    return "\n".join(lines)


def interval_text(low: float, high: float) -> str:
    """``"26.8 to 90.1"``; ``"26.8 to inf"`` when only the lower end is finite (some resampled
    windows have no positive |G|^2: no upper bound); ``"-"`` when there is none."""
    if not math.isfinite(low):
        return "-"
    return f"{_num(low)} to {_num(high) if math.isfinite(high) else 'inf'}"


def _num(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else ("inf" if value > 0 else "-")
