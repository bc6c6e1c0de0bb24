"""What Optuna readers see of a finished trial (`optuna.load_study`, optuna-dashboard, the
Optuna backend's sampler): every number in the study's units and direction, steps to the
target, fewer is better (``minimize``).

- **Value.** A reached trial's steps to target; a not-reached one's penalty
  ``2 x step limit x (1 + shortfall)`` and a diverged one's ``5 x step limit`` (both in steps,
  above every reached trial); a failed one has none. A pruned trial's value is the steps it
  ran, a lower bound: it had not reached the target by then, so it needs *more than* that
  many steps (the user attribute ``steps_more_than`` says so). Optuna itself would give it
  its last intermediate value, so `Claims.finish` closes it without `Study.tell`'s rule.
- **Intermediate values.** The distance to the target at each evaluation, in the metric's
  units: ``threshold - value`` for a ``>``/``>=`` target, ``value - threshold`` for a
  ``<``/``<=`` one, so it falls as the trial improves and is <= 0 once the target is met.
  Why a distance: Optuna compares intermediate values in the study's direction (minimize):
  its pruners at one step, and TPE ranks pruned trials by (the furthest step, then the
  smallest last intermediate value). An accuracy there would rank the worst trial best; a
  distance ranks the trial closest to the target first, needs no step limit, and reads the
  same at every step. (User attribute ``intermediate_values`` says what they are.)
- **The target metric's own curve** stays readable in the user attribute ``target_curve``
  (``val_accuracy by step: 0=0.1, 20=0.32, ...``; the whole curve is in the ledger).

Ledgers written before this stored a pruned trial's last accuracy as its value and the
accuracies as intermediate values; the ledger's own reading never uses either (it decodes
`records`), so they still read the same through `study status` and `study report`.
"""

from __future__ import annotations

import math
from typing import Any

from study.config.target import Target
from study.ledger.records import VIEW_KEYS
from study.results import Measurement, TrialResult, TrialState

STEPS_MORE_THAN, INTERMEDIATE, TARGET_CURVE = VIEW_KEYS


def distance(value: float, target: Target) -> float:
    """How far ``value`` of the target metric is from the target (<= 0 once met).

    Example: 0.45 against ``val_accuracy>=0.5`` is 0.05; 0.2 against ``val_loss<=0.3`` is -0.1.
    """
    gap = target.threshold - value if target.maximize else value - target.threshold
    return float(gap)


def intermediate_values(result: TrialResult, target: Target, most: int) -> dict[int, float]:
    """A trial's Optuna intermediate values: ``step -> distance`` at (at most ``most``)
    evaluations of its curve."""
    raw = thinned(result.curve, target.metric, most)
    return {step: distance(value, target) for step, value in raw.items()}


def view_attrs(result: TrialResult, target: Target | None, most: int) -> dict[str, Any]:
    """The user attributes that say what Optuna readers see (see the module docstring)."""
    attrs: dict[str, Any] = {}
    if result.state is TrialState.PRUNED:
        attrs[STEPS_MORE_THAN] = int(result.steps_run)
    if target is not None and result.curve:
        sign = f"{target.threshold:g} - {target.metric}"
        if not target.maximize:
            sign = f"{target.metric} - {target.threshold:g}"
        attrs[INTERMEDIATE] = f"distance to {target}: {sign} (fewer is better, <= 0 once met)"
        raw = thinned(result.curve, target.metric, most)
        points = ", ".join(f"{step}={value:.4g}" for step, value in raw.items())
        attrs[TARGET_CURVE] = f"{target.metric} by step: {points}"
    return attrs


def pruned_meaning(steps: int, told: str | None) -> str:
    """What a pruned trial's Optuna value says (``told``: what the tuners were told)."""
    tail = f"; the tuners were told: {told}" if told else ""
    return f"more than {steps} steps (pruned at step {steps}, before the target){tail}"


def thinned(curve: tuple[Measurement, ...], metric: str, most: int) -> dict[int, float]:
    """At most ``most`` points ``step -> metric`` of a curve, spread evenly over its evaluations
    (first and last kept), finite values only (what `study.ledger.optuna_view` shows Optuna).

    Example: 197 evaluations and ``most=50`` keep evaluations 0, 4, 8, ..., 196.
    """
    points = [(m.step, m.metrics.get(metric, math.nan)) for m in curve]
    points = [(step, float(v)) for step, v in points if v is not None and math.isfinite(v)]
    if len(points) > most:
        last = len(points) - 1
        points = [points[round(i * last / (most - 1))] for i in range(most)]
    return dict(points)
