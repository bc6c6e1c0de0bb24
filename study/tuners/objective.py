"""The objective every tuner minimises: steps to target, or a penalty that ranks below them."""

from __future__ import annotations

import math

from study.config.target import Target
from study.results import TrialResult, TrialState


def score(result: TrialResult, step_limit: int, target: Target) -> float:
    """Reached: its steps to target. Not reached or pruned: ``2 * limit * (1 + shortfall)`` with
    the final relative shortfall from the target in [0, 1]. Diverged or failed: ``5 * limit``.

    Example: with a 1,000-step limit and target ``val_accuracy>=0.8``, a trial that stopped at
    0.6 scores ``2000 * (1 + 0.25) = 2500``.
    """
    limit = float(max(1, step_limit))
    if result.state is TrialState.REACHED and result.steps_to_target is not None:
        return float(result.steps_to_target)
    if result.state in (TrialState.NOT_REACHED, TrialState.PRUNED) and result.curve:
        value = result.curve[-1].metrics.get(target.metric, math.nan)
        scale = max(abs(target.threshold), 1e-12)
        gap = (
            (target.threshold - value) / scale
            if target.maximize
            else (value - target.threshold) / scale
        )
        shortfall = min(1.0, max(0.0, gap)) if math.isfinite(gap) else 1.0
        return 2.0 * limit * (1.0 + shortfall)
    return 5.0 * limit


def explain(result: TrialResult, step_limit: int, target: Target) -> str:
    """What `score` gives this result, in words (stored with the trial for Optuna users).

    Example: "penalty 2500 = 2 x 1000-step limit x (1 + 0.25 shortfall): never reached
    val_accuracy>=0.8".
    """
    value = score(result, step_limit, target)
    if result.state is TrialState.REACHED:
        return f"{value:.0f} steps to {target}"
    if value >= 5.0 * max(1, step_limit):
        return f"penalty {value:.0f} = 5 x {step_limit}-step limit: {result.state.value}"
    shortfall = value / (2.0 * max(1, step_limit)) - 1.0
    what = "pruned before" if result.state is TrialState.PRUNED else "never"
    return (
        f"penalty {value:.0f} = 2 x {step_limit}-step limit x (1 + {shortfall:.2f} shortfall): "
        f"{what} reached {target}"
    )
