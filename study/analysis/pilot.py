"""A pilot run's gradient noise scale, and the study it suggests (pure functions, no TensorFlow).

A pilot is one short trial at a small batch size that measures B_simple = tr(Sigma) / |G|^2
(`study.trainer.noise`). McCandlish et al. (2018) found the critical batch size tracks it, so a
study's batch-size grid should straddle it widely enough to show all three regimes: perfect
scaling well below, diminishing returns around, maximal data parallelism well above.

`Pilot` (`study.ledger.notes`) is what is stored (``ledger.notes.set_pilot``);
`suggest_batch_sizes` and `learning_rate_ranges` make the suggestion, `suggest` puts it
together (`study.analysis.pilot_text` shows both as text).

Example: a pilot at batch 8 with B_simple = 100 suggests 8, 16, ..., 2048 (about B_simple / 16 to
16 x B_simple: 6 to 1600, as powers of two), and, from a pilot rate of 0.01, the rate at batch
64 between 0.01 x 8^0.5 = 0.028 (square-root scaling) and 0.01 x 8 = 0.08 (linear scaling).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from study.ledger.notes import Pilot

if TYPE_CHECKING:
    from study.config.trial import TrialSpec
    from study.results import TrialResult

#: The suggested grid reaches about this factor below and above B_simple.
SPAN = 16.0
#: The fewest batch sizes a suggested grid has (when the training set allows).
LEAST_SIZES = 6
#: The learning rate's scaling exponents: ``lr(B) = lr_pilot (B / B_pilot)^alpha`` for alpha
#: between the square-root rule (0.5) and the linear rule (1.0).
ALPHAS: tuple[float, float] = (0.5, 1.0)


def pilot_curve(rows: Sequence[Mapping[str, Any]]) -> tuple[tuple[int, float, float, float], ...]:
    """``(step, b_simple, low, high)`` of every evaluation with an estimate, by step.

    ``rows`` are ``{"step": ..., "noise": {...}}`` mappings (a `Measurement`'s fields);
    evaluations without a noise estimate are left out; a step seen twice keeps its last.
    """
    points: dict[int, tuple[int, float, float, float]] = {}
    for row in rows:
        noise = row.get("noise") or {}
        if "b_simple" not in noise:
            continue
        step = int(row["step"])
        points[step] = (
            step,
            float(noise["b_simple"]),
            float(noise.get("b_simple_low", math.nan)),
            float(noise.get("b_simple_high", math.nan)),
        )
    return tuple(points[s] for s in sorted(points))


def noise_at_result(result: TrialResult) -> tuple[int, dict[str, float]] | None:
    """The gradient noise scale estimate (step, values) where a trial's result is read: at
    steps to target if it was reached, else at its last evaluation; None if not measured.

    Example: a trial that met its target at step 41 (a fine evaluation) gives ``(41, {"b_simple":
    ..., "b_simple_low": ..., ...})``, the estimate after 41 steps.
    """
    at = result.steps_to_target if result.steps_to_target is not None else result.steps_run
    measured = [m for m in result.curve if m.noise and m.step <= at]
    if not measured:
        return None
    last = max(measured, key=lambda m: (m.step, not m.fine))
    return last.step, dict(last.noise)


def pilot_from_result(spec: TrialSpec, result: TrialResult) -> Pilot:
    """The pilot's noise scale from its trial: the curve (the cadence's evaluations up to where
    the result is read, and that one), and the estimate there (`noise_at_result`)."""
    found = noise_at_result(result)
    at_step, noise = found if found else (result.steps_run, {})
    rows = [m for m in result.curve if m.step <= at_step and (not m.fine or m.step == at_step)]
    return Pilot(
        batch_size=spec.batch_size,
        # As asked (mirrored:2), or as resolved when asked for auto.
        strategy=str(
            result.environment.get("strategy", spec.strategy)
            if spec.strategy == "auto"
            else spec.strategy
        ),
        learning_rate=spec.learning_rate,
        seed=spec.settings.seed,
        steps_run=result.steps_run,
        target=str(spec.target),
        at_step=at_step,
        b_simple=float(noise.get("b_simple", math.nan)),
        b_simple_low=float(noise.get("b_simple_low", math.nan)),
        b_simple_high=float(noise.get("b_simple_high", math.nan)),
        curve=pilot_curve([{"step": m.step, "noise": m.noise} for m in rows]),
    )


def suggest_batch_sizes(
    b_simple: float,
    *,
    largest: int,
    unit: int = 1,
    span: float = SPAN,
    least: int = LEAST_SIZES,
) -> tuple[int, ...]:
    """A geometric grid ``unit x 2^k`` from about ``b_simple / span`` to ``b_simple x span``.

    Sizes are multiples of ``unit`` (every strategy's replica count divides them) and at most
    ``largest`` (the training set). When clipping leaves fewer than ``least`` sizes, the grid
    grows on the side that has room, so it still spans all three regimes as far as it can.

    Example: ``suggest_batch_sizes(100, largest=8000)`` is ``(8, 16, ..., 2048)`` (9 sizes);
    ``suggest_batch_sizes(2000, largest=8000)`` stops at 4096 and reaches down to 128.

    Raises:
        ValueError: ``b_simple`` is not a positive number, or no multiple of ``unit`` fits
            under ``largest``.
    """
    if not (math.isfinite(b_simple) and b_simple > 0):
        raise ValueError(f"B_simple must be a positive number (got {b_simple})")
    if unit < 1 or unit > largest:
        raise ValueError(f"no batch size that is a multiple of {unit} fits in {largest} examples")
    top = math.floor(math.log2(largest / unit))  # unit x 2^top <= largest
    low = max(0, round(math.log2(b_simple / span / unit)))
    high = min(top, round(math.log2(b_simple * span / unit)))
    low, high = min(low, top), max(high, 0)
    while high - low + 1 < least and (low > 0 or high < top):
        if high < top:
            high += 1
        if high - low + 1 < least and low > 0:
            low -= 1
    return tuple(unit * 2**k for k in range(low, high + 1))


def learning_rate_ranges(
    batch_sizes: Sequence[int],
    pilot_batch: int,
    pilot_rate: float,
    alphas: tuple[float, float] = ALPHAS,
) -> dict[int, tuple[float, float]]:
    """Per batch size, the pilot's rate scaled by ``(B / pilot_batch)^alpha`` for alpha over
    ``alphas``: ``(low, high)``, rounded to 3 significant digits.

    Example: pilot batch 8 at rate 0.01: batch 32 gets ``(0.02, 0.04)``, batch 2 ``(0.0025,
    0.005)`` (below the pilot the linear rule gives the lower rate).
    """
    out: dict[int, tuple[float, float]] = {}
    for size in batch_sizes:
        ratio = size / pilot_batch
        rates = [pilot_rate * ratio**alpha for alpha in alphas]
        out[int(size)] = (_round3(min(rates)), _round3(max(rates)))
    return out


def study_range(
    ranges: Mapping[int, tuple[float, float]], pilot_rate: float
) -> tuple[float, float]:
    """One learning-rate range covering every batch size's range and the pilot's rate (a study
    file has one range; each batch size's search is centred within it by transfer)."""
    low = min([pilot_rate, *(lo for lo, _ in ranges.values())])
    high = max([pilot_rate, *(hi for _, hi in ranges.values())])
    if not low < high:  # a grid of the pilot's batch size alone
        low, high = pilot_rate / 3, pilot_rate * 3
    return _round3(low), _round3(high)


def suggest(
    pilot: Pilot, strategies: Sequence[str], train_examples: int, *, unit: int = 1
) -> dict[str, Any]:
    """The study a pilot suggests, JSON-ready: batch sizes around its B_simple, the
    learning-rate range of each and one range covering them all.

    ``unit`` is what every size must be a multiple of (the least common multiple of the
    strategies' replica counts); no size exceeds ``train_examples``.

    Example: a pilot at batch 8, rate 0.01 with B_simple 100, 8,000 examples: ``batch_sizes``
    8 to 2048, ``learning_rate`` (0.01, 2.56).
    """
    sizes = suggest_batch_sizes(pilot.b_simple, largest=train_examples, unit=unit)
    ranges = learning_rate_ranges(sizes, pilot.batch_size, pilot.learning_rate)
    low, high = study_range(ranges, pilot.learning_rate)
    return {
        "batch_sizes": list(sizes),
        "learning_rate_by_batch_size": {str(b): list(r) for b, r in ranges.items()},
        "learning_rate": [low, high],
        "alphas": list(ALPHAS),
        "strategies": list(strategies),
        "train_examples": train_examples,
    }


def _round3(value: float) -> float:
    return float(f"{value:.3g}")
