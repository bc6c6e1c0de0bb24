"""``study report``'s flags for the answer across targets: ``--targets`` and
``--predict-target`` (`study.analysis.target_prediction`).

Example::

    study report quickstart --targets auto
    study report quickstart --targets 0.3,0.4,0.5 --predict-target 0.6
"""

from __future__ import annotations

import argparse
import math
from typing import Literal

from study.config.target import Target
from study.errors import UsageError


def add_target_flags(p: argparse.ArgumentParser) -> None:
    """Add ``--targets`` and ``--predict-target`` to ``study report``."""
    p.add_argument(
        "--targets",
        metavar="LEVELS",
        help="also refit the answers at several levels of the target's metric and fit a law "
        "across them: 'auto' (levels from the one nearly every trial reached to the target) or "
        "a comma-separated list, e.g. 0.5,0.55,0.6",
    )
    p.add_argument(
        "--predict-target",
        metavar="LEVEL",
        help="predict the answers at a level the study did not reach, e.g. 0.7 or "
        "'val_accuracy>=0.7', from the law across targets (implies --targets auto); a level "
        "beyond the law's support is refused",
    )


def parse_levels(text: str | None) -> list[float] | Literal["auto"] | None:
    """``--targets``: None, ``"auto"`` or the levels.

    Raises:
        UsageError: not ``auto`` nor a list of finite numbers.
    """
    if text is None:
        return None
    if text.strip().lower() == "auto":
        return "auto"
    levels = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise UsageError(
                f"--targets must be 'auto' or a comma-separated list of levels of the target's "
                f"metric, e.g. 0.5,0.55,0.6 (got {text!r})"
            )
        levels.append(value)
    return levels


def parse_predict(text: str | None, target: Target | None) -> float | None:
    """``--predict-target``: a level of ``target``'s metric, given as a number or as a target
    on the same metric and direction (``val_accuracy>=0.7``).

    Raises:
        UsageError: not a number, or a target on another metric or direction.
    """
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        other = Target.parse(text, option="--predict-target")
        if target is not None and (other.metric, other.maximize) != (
            target.metric,
            target.maximize,
        ):
            raise UsageError(
                f"--predict-target must be a level of the report's target {target} (a number, "
                f"or {target.metric}{target.op}LEVEL); got {text!r}"
            ) from None
        value = other.threshold
    if not math.isfinite(value):
        raise UsageError(f"--predict-target must be a finite number, e.g. 0.7 (got {text!r})")
    return value
