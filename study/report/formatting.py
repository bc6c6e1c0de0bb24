"""How the report writes numbers, intervals, confidence levels, lists, sentences and paths.

Every number a reader sees in the prose, the tables, the HTML cards and the figure legends goes
through `fmt`, at three significant digits; intervals through `ci_text` (in sentences) or
`interval_text` (in table cells); confidence levels through `percent`, so a report made at 90%
confidence says "90%" everywhere. Lists go through `join_words` ("8, 16 and 32") and notes
taken from the fits through `sentence`. File paths and storage URLs go through `display_path` and
`display_storage`, so no report names a directory of the machine that made it or a password.
(The JSON report keeps full precision: it writes numbers, not these strings.)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.fitting import as_number, open_range_words
from study.paths import masked

DIGITS = 3
"""Significant digits of every number the report shows."""


def fmt(value: Any) -> str:
    """A readable number: `DIGITS` (three) significant digits, thousands separated from 10,000 on,
    an exponent only below 1e-4 or from 1e12 on. Whole numbers are counts (steps, examples,
    batch sizes, trials) and are kept whole.

    Example: ``fmt(1.0199) == "1.02"``, ``fmt(4333.7) == "4330"``, ``fmt(1170.0) == "1170"``,
    ``fmt(20992) == "20,992"``, ``fmt(0.01724) == "0.0172"``, ``fmt(math.inf) == "inf"``,
    ``fmt(None) == "-"``.
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
        return f"{x:.{DIGITS - 1}e}"
    if not x.is_integer():
        rounded = float(f"{x:.{DIGITS}g}")
        if abs(rounded) < 10 ** (DIGITS - 1):
            return f"{x:.{DIGITS}g}"
        x = rounded  # no decimals left: 397, 4330, 43,300
    return f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:.0f}"


def percent(confidence: float) -> str:
    """A confidence level as a percentage.

    Example: ``percent(0.95) == "95%"``, ``percent(0.9) == "90%"``, ``percent(0.975) == "97.5%"``.
    """
    return f"{100 * confidence:.10g}%"


def ci_text(ci: Sequence[float] | None, confidence: float) -> str:
    """An interval for a sentence, or ``""`` without one.

    Example: ``ci_text((75, 601), 0.95) == " (95% CI 75 to 601)"``; ``ci_text(None, 0.95) == ""``.
    """
    if ci is None:
        return ""
    return f" ({percent(confidence)} CI {span_text(ci[0], ci[1])})"


def interval_text(interval: Sequence[float] | None) -> str:
    """An interval for a table cell: ``"75 to 601"``, or ``"-"`` without one."""
    return "-" if interval is None else span_text(interval[0], interval[1])


def span_text(low: float, high: float) -> str:
    """A continuous interval as the tables and sentences write it: ``"75 to 601"``; an open
    end in words (``"at least 75"``, `study.analysis.fitting.open_range_words`)."""
    return open_range_words(low, high, fmt) or f"{fmt(low)} to {fmt(high)}"


def r_squared_text(r_squared: float) -> str:
    """R^2 at three significant digits, but never rounded up to a perfect fit.

    Example: ``r_squared_text(0.9731) == "0.973"``, ``r_squared_text(0.99987) == "> 0.999"``.
    """
    text = fmt(r_squared)
    return "> 0.999" if text == "1" and r_squared < 1 else text


def join_words(values: Iterable[Any], last: str = ", ") -> str:
    """Values as a list in a sentence: numbers shown plainly (`as_number`), strings as they are,
    the last two joined by ``last``.

    Example: ``join_words([8, 32.0, 128]) == "8, 32, 128"``, ``join_words([8, 16, 32],
    last=" and ") == "8, 16 and 32"``, ``join_words(["adam", "sgd"], last=" or ") == "adam or
    sgd"``.
    """
    items = [v if isinstance(v, str) else str(as_number(v)) for v in values]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + last + items[-1]


def sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter and a full stop.

    Example: ``sentence("excluded 2 trials") == "Excluded 2 trials."``.
    """
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def display_path(path: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None) -> str:
    """A file path as a report shows it: relative to the working directory ``cwd`` when inside
    it, else the bare file name; never an absolute path of the machine that made the report.

    Example: in ``/home/ana/proj``, ``/home/ana/proj/search_spaces/q.yaml`` is shown as
    ``search_spaces/q.yaml``, ``/data/q.yaml`` and ``../q.yaml`` as ``q.yaml``.
    """
    text = os.fspath(path)
    if not text:
        return text
    normal = os.path.normpath(text)
    if not os.path.isabs(normal):
        inside = normal.split(os.sep)[0] != os.pardir
        return PurePosixPath(*Path(normal).parts).as_posix() if inside else Path(normal).name
    base = os.path.normpath(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    for root, target in ((base, normal), (os.path.realpath(base), os.path.realpath(normal))):
        if os.path.commonpath([root, target]) == root and target != root:
            return Path(os.path.relpath(target, root)).as_posix()
    return Path(normal).name


def display_storage(url: str, cwd: str | os.PathLike[str] | None = None) -> str:
    """A storage URL or file as a report shows it: any password masked, file paths shown as
    `display_path` shows them.

    Example: ``postgresql://user:secret@host/db`` is shown as ``postgresql://user:***@host/db``;
    in ``/home/ana/proj``, ``sqlite:////home/ana/proj/mlruns/s.db`` as ``sqlite:///mlruns/s.db``
    and ``/home/ana/proj/mlruns/optuna.journal`` as ``mlruns/optuna.journal``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return display_path(url, cwd)
    if not rest:
        return url
    if scheme.startswith("sqlite"):
        path, query_sep, query = rest.removeprefix("/").partition("?")
        shown = display_path(path, cwd) if path and path != ":memory:" else path
        return masked(f"{scheme}:///{shown}{query_sep}{query}")
    return masked(url)
