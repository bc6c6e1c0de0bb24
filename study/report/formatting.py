"""How the report writes numbers: readable values, intervals and confidence levels.

Every number a reader sees in the prose, the tables and the HTML cards goes through `fmt`;
intervals through `ci_text` (in sentences) or `interval_text` (in table cells); confidence
levels through `percent`, so a report made at 90% confidence says "90%" everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd


def fmt(value: Any, digits: int = 3) -> str:
    """A readable number: ``digits`` significant digits (whole numbers kept whole), thousands
    separated from 10,000 on, an exponent only below 1e-4 or from 1e12 on.

    Example: ``fmt(1170.0) == "1170"``, ``fmt(20992) == "20,992"``, ``fmt(0.01724) == "0.0172"``,
    ``fmt(math.inf) == "inf"``, ``fmt(None) == "-"``.
    """
    if value is None or value is pd.NA:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e12):
        return f"{x:.{digits - 1}e}"
    if x.is_integer() or abs(x) >= 10 ** (digits - 1):
        return f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:.0f}"
    return f"{x:.{digits}g}"


def percent(confidence: float) -> str:
    """A confidence level as a percentage.

    Example: ``percent(0.95) == "95%"``, ``percent(0.9) == "90%"``, ``percent(0.975) == "97.5%"``.
    """
    return f"{100 * confidence:.10g}%"


def ci_text(ci: Sequence[float] | None, confidence: float, digits: int = 3) -> str:
    """An interval for a sentence, or ``""`` without one.

    Example: ``ci_text((75, 601), 0.95) == " (95% CI 75 to 601)"``; ``ci_text(None, 0.95) == ""``.
    """
    if ci is None:
        return ""
    return f" ({percent(confidence)} CI {fmt(ci[0], digits)} to {fmt(ci[1], digits)})"


def interval_text(interval: Sequence[float] | None) -> str:
    """An interval for a table cell: ``"75 to 601"``, or ``"-"`` without one."""
    return "-" if interval is None else f"{fmt(interval[0])} to {fmt(interval[1])}"
