"""The answers a user acts on, each with its interval, from one model of every trial.

`scaling_answers` reads a fitted `Surrogate` and gives B_noise, S_min, E_min, the best-rate
exponent alpha, the end of perfect scaling and the start of maximal data parallelism (Shallue et
al.'s rules of `study.analysis.regimes` applied to the model's S(B) at the measured batch
sizes), the critical batch size at a stated overhead, and the batch size and learning rate for N
accelerators (the rule of `study.analysis.recommend`: the largest batch size that reached the
target, divisible by N, no larger than ``max(end of perfect scaling, critical batch size)``: a
run there costs at most ``overhead`` more examples than perfect scaling, or scales perfectly).

Every interval comes from the same draws of the model's parameters (`Surrogate.draws`): the
share ``confidence`` of draws in the middle, so the trial-to-trial noise (seed-to-seed noise
and the jagged response to the learning rate, which the model's ``sigma`` measures) is in every
one of them. Batch-size answers are read on the measured batch sizes, their intervals too.

Example::

    answers = scaling_answers(fit_surrogate(trials), accelerators=8)
    answers.recommended_batch.text()  # "512 (256-512)"
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from study.analysis.fitting import CONFIDENCE, as_number, open_range_words
from study.analysis.likelihood import LOG_STEPS_MAX, log_steps_curve
from study.analysis.regimes import TOLERANCE, regime_bounds
from study.analysis.surrogate import (
    Param,
    Surrogate,
    log_best_lr,
    mean_log_steps,
    steps_curve,
)
from study.analysis.threads import one_blas_thread
from study.config.study import DEFAULT_OVERHEAD
from study.config.target import Target

OVERHEAD = DEFAULT_OVERHEAD
"""The critical batch size's overhead (Zhang et al. 2024): the batch size whose steps are this
much above perfect scaling's, ``S(B) = (1 + overhead) E_min / B`` (`overhead_batch_size`)."""

ANSWER_MODEL = (
    "11: knee q, overhead under the knee, batch up to the critical batch size, Student-t draws "
    "(at least 1.5 degrees of freedom, no n/(n-p) factor) mixed with the knee held at q = 1 "
    "and at q = 8 by their likelihoods (q = 1 one unit less; their sandwiches without flat "
    "directions; each held fit descended again until it settles), each component's share by "
    "largest remainders from a stream of its own, sandwich through each trial's leverage (HC2), "
    "best rate capped at twice the highest rate tried, S(B)'s intervals open where B_noise's "
    "draws reach its search range"
)
"""The version of the answers' model and rules, stamped in every report.json
(``about.answer_model``): raise it whenever a change moves an answer, so that a report made by
another version is told apart (the shipped examples are checked against it)."""

DRAWS = 4000
"""Parameter draws behind every interval."""

DEFAULT_ACCELERATORS = 8
"""The accelerators answers are given for when none are named."""


@dataclass(frozen=True)
class Answer:
    """One answer: ``estimate`` with its interval ``low``-``high``; ``batch`` when it is read on
    the measured batch sizes (an infinite ``high``: "beyond the measured batch sizes").
    ``open_low`` / ``open_high`` mark an end of an answer of the S(B) curve that is the end of
    B_noise's search range, not a bound the trials give (`scaling_answers`): the number stays
    (every surface states the same one), and the answer is written "at least 66"."""

    name: str
    estimate: float
    low: float
    high: float
    batch: bool = False
    open_low: bool = False
    open_high: bool = False

    def covers(self, value: float) -> bool:
        return bool(self.low <= value <= self.high)

    @property
    def bounded(self) -> bool:
        """Whether the trials bound the answer on both sides (no open end)."""
        return not (self.open_low or self.open_high)

    def text(self, digits: int = 3) -> str:
        """``"512 (256-512)"``; a batch answer whose interval is the estimate alone: ``"512"``;
        an open end: ``"589 (at least 66)"``, ``"8590 (not bounded by the trials)"``."""
        show = _batch_text if self.batch else (lambda x: _number(x, digits))
        if self.batch and self.low == self.high == self.estimate:
            return show(self.estimate)
        return f"{show(self.estimate)} ({self.range_text(digits)})"

    def range_text(self, digits: int = 3) -> str:
        """The interval alone: ``"128-256"`` (``"256"`` when it is one value); an open end in
        words: ``"at least 66"``, ``"at most 300"``, ``"not bounded by the trials"``."""
        show = _batch_text if self.batch else (lambda x: _number(x, digits))
        if not self.batch:
            words = open_range_words(self.low, self.high, show, self.open_low, self.open_high)
            if words is not None:
                return words
        return show(self.low) if self.low == self.high else f"{show(self.low)}-{show(self.high)}"

    def to_dict(self) -> dict[str, float | str | None]:
        """``estimate``, ``low`` and ``high`` (an infinite end is None), and ``open`` (``"low"``,
        ``"high"`` or ``"both"``) where an end is open."""
        out: dict[str, float | str | None] = {
            "estimate": _plain(self.estimate),
            "low": _plain(self.low),
            "high": _plain(self.high),
        }
        if not self.bounded:
            out["open"] = _OPEN[(self.open_low, self.open_high)]
        return out


_OPEN = {(True, False): "low", (False, True): "high", (True, True): "both"}


@dataclass(frozen=True)
class Answers:
    """The model's answers (see the module). ``ok``/``reason``; ``surrogate``; ``confidence``,
    ``tolerance``, ``overhead``, ``accelerators``; one `Answer` per quantity (None when not
    ok, or ``recommended_*`` when no batch size that reached the target divides by
    ``accelerators``); ``sigma`` (trial-to-trial spread of log steps)."""

    ok: bool
    reason: str = ""
    surrogate: Surrogate | None = field(default=None, repr=False)
    confidence: float = CONFIDENCE
    tolerance: float = TOLERANCE
    overhead: float = OVERHEAD
    accelerators: int = 1
    b_noise: Answer | None = None
    s_min: Answer | None = None
    e_min: Answer | None = None
    alpha: Answer | None = None
    sigma: Answer | None = None
    critical_batch: Answer | None = None
    perfect_end: Answer | None = None
    max_parallel_start: Answer | None = None
    recommended_batch: Answer | None = None
    recommended_lr: Answer | None = None
    step_speedup: Answer | None = None

    def to_metrics(self) -> dict[str, float]:
        """Flat numbers for a tracking server: ``answer/<name>`` and ``answer/<name>_low`` /
        ``_high`` (non-finite ends left out)."""
        out: dict[str, float] = {}
        for name in ANSWER_NAMES:
            answer = getattr(self, name)
            if answer is None:
                continue
            for suffix, value in (
                ("", answer.estimate),
                ("_low", answer.low),
                ("_high", answer.high),
            ):
                if math.isfinite(value):
                    out[f"answer/{name}{suffix}"] = float(value)
        return out

    def items(self) -> list[Answer]:
        """The answers that exist, in a fixed order."""
        return [a for a in (getattr(self, n) for n in ANSWER_NAMES) if a is not None]


ANSWER_NAMES = (
    "b_noise", "s_min", "e_min", "alpha", "sigma", "critical_batch", "perfect_end",
    "max_parallel_start", "recommended_batch", "recommended_lr", "step_speedup",
)  # fmt: skip


@one_blas_thread
def study_answers(
    table: pd.DataFrame,
    target: Target,
    *,
    accelerators: int = DEFAULT_ACCELERATORS,
    confidence: float = CONFIDENCE,
    overhead: float = OVERHEAD,
) -> Answers:
    """The answers of a study's measurement table for ``target`` (its hold rule applied):
    `trial_crossings`, `censored_trials`, `fit_surrogate`, `scaling_answers`."""
    from study.analysis.crossings import trial_crossings
    from study.analysis.surrogate import censored_trials, fit_surrogate

    trials = trial_crossings(table, target)
    surrogate = fit_surrogate(censored_trials(trials, table))
    return scaling_answers(
        surrogate, accelerators=accelerators, confidence=confidence, overhead=overhead
    )


@one_blas_thread
def scaling_answers(
    surrogate: Surrogate,
    *,
    accelerators: int = 1,
    tolerance: float = TOLERANCE,
    overhead: float = OVERHEAD,
    confidence: float = CONFIDENCE,
    draws: int = DRAWS,
    seed: int = 0,
) -> Answers:
    """Every answer of the module from ``surrogate``, with ``confidence`` intervals.

    Raises:
        ValueError: if ``accelerators < 1``, ``confidence`` is not in (0, 1) or ``overhead``
            is not positive.
    """
    if accelerators < 1:
        raise ValueError(f"accelerators must be >= 1 (got {accelerators})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    if overhead <= 0.0:
        raise ValueError(f"overhead must be > 0 (got {overhead})")
    settings = {
        "confidence": confidence,
        "tolerance": tolerance,
        "overhead": overhead,
        "accelerators": accelerators,
    }
    if not surrogate.ok:
        return Answers(ok=False, reason=surrogate.reason, surrogate=surrogate, **settings)
    theta = np.vstack([surrogate.theta, surrogate.draws(draws, seed)])
    tail = (1.0 - confidence) / 2.0
    edge = _at_search_edge(surrogate, theta[1:])

    def answer(
        name: str, values: np.ndarray, *, batch: bool = False, curve: bool = False
    ) -> Answer:
        rest = values[1:]
        known = ~np.isnan(rest)
        rest = rest[known]
        if batch:
            low, high = _discrete_quantiles(rest, tail)
        else:
            low, high = _continuous_quantiles(rest, tail)
        open_low, open_high = _open_ends(rest, edge[known], low, high) if curve else (False, False)
        return Answer(name, float(values[0]), low, high, batch, open_low, open_high)

    measured = np.asarray(surrogate.batch_sizes, dtype=float)
    reached = np.asarray(surrogate.reached_batch_sizes, dtype=float)
    # A draw far out in a tail (a knee on its cap, free to soften) stays a finite number.
    log_b_noise, log_s_min = theta[:, Param.LOG_B_NOISE], theta[:, Param.LOG_S_MIN]
    b_noise = np.exp(np.minimum(log_b_noise, LOG_STEPS_MAX))
    s_min = np.exp(np.minimum(log_s_min, LOG_STEPS_MAX))
    curve = steps_curve(theta, reached)
    k, start = regime_bounds(reached, curve, tolerance)
    perfect_end = reached[k]
    max_start = np.where(start >= 0, reached[np.maximum(start, 0)], math.inf)
    knee = np.exp(theta[:, Param.LOG_KNEE])
    critical = overhead_batch_size(b_noise, knee, overhead)
    chosen = _choose(reached, accelerators, np.maximum(perfect_end, critical))
    x = np.log(measured / surrogate.b_ref)
    alpha = _slope(log_best_lr(theta, measured, surrogate.b_ref), x)
    out = {
        "b_noise": answer("B_noise", b_noise, curve=True),
        "s_min": answer("S_min", s_min, curve=True),
        "e_min": answer(
            "E_min", np.exp(np.minimum(log_s_min + log_b_noise, LOG_STEPS_MAX)), curve=True
        ),
        "alpha": answer("alpha", alpha),
        "sigma": answer("sigma", _unbiased(surrogate) * np.exp(theta[:, Param.LOG_SIGMA])),
        "critical_batch": answer(
            f"critical batch size ({overhead:.0%} overhead)",
            critical,
            curve=True,
        ),
        "perfect_end": answer("perfect scaling ends at", perfect_end, batch=True),
        "max_parallel_start": answer("maximal data parallelism from", max_start, batch=True),
    }
    if not np.isnan(chosen[0]):
        base, pick = float(reached[0]), float(chosen[0])
        with np.errstate(over="ignore"):  # a draw far in a tail: an unbounded rate
            lr = np.exp(log_best_lr(theta, [pick], surrogate.b_ref)[:, 0])
        log_ratio = log_steps_curve(np.atleast_2d(theta), [base]) - log_steps_curve(
            np.atleast_2d(theta), [pick]
        )
        speedup = np.exp(log_ratio[:, 0])
        out["recommended_batch"] = answer(
            f"batch size for {accelerators} accelerator(s)", chosen, batch=True
        )
        name = f"best learning rate at batch {as_number(pick)}"
        rate = answer(name, lr)
        safest = _safest_rate(surrogate, theta, pick, rate)
        out["recommended_lr"] = dataclasses.replace(rate, estimate=safest)
        out["step_speedup"] = answer(
            f"speed-up in steps, batch {as_number(pick)} over {as_number(base)}",
            speedup,
            curve=True,
        )
    return Answers(ok=True, surrogate=surrogate, **settings, **out)


def overhead_batch_size(
    b_noise: float | np.ndarray, knee: float | np.ndarray, overhead: float
) -> np.ndarray:
    """The batch size whose steps exceed perfect scaling's by ``overhead`` under
    ``S(B) = S_min (1 + (B_noise / B)^q)^(1/q)``: ``B_noise ((1 + overhead)^q - 1)^(1/q)``.

    ``overhead * B_noise`` only for McCandlish et al.'s ``q = 1``; about ``B_noise`` itself for
    ``q`` near 4 (at B_noise the overhead is ``2^(1/q) - 1``).

    Example: ``overhead_batch_size(100, 1, 0.2) == 20``; ``overhead_batch_size(100, 2, 0.2)``
    is ``100 * sqrt(0.44)``, about 66.
    """
    q = np.asarray(knee, dtype=float)
    with np.errstate(over="ignore"):
        return np.asarray(b_noise, dtype=float) * np.expm1(q * np.log1p(overhead)) ** (1.0 / q)


def overhead_at(
    batch_size: float | np.ndarray, b_noise: float | np.ndarray, knee: float | np.ndarray
) -> np.ndarray:
    """How far steps at ``batch_size`` exceed perfect scaling's under the knee curve:
    ``(1 + (B / B_noise)^q)^(1/q) - 1`` (the inverse of `overhead_batch_size`)."""
    q = np.asarray(knee, dtype=float)
    ratio = np.asarray(batch_size, dtype=float) / np.asarray(b_noise, dtype=float)
    with np.errstate(over="ignore"):
        return np.expm1(np.logaddexp(0.0, q * np.log(ratio)) / q)


# ------------------------------------------------------------------------------------ pieces


def _safest_rate(surrogate: Surrogate, theta: np.ndarray, batch: float, rate: Answer) -> float:
    """The rate with the fewest steps on average over the model's draws, within the interval of
    the best rate: where steps rise steeply above the optimum (a cliff before divergence), the
    uncertain optimum is best approached from below."""
    rates = np.geomspace(rate.low, rate.high, 64) if rate.high > rate.low else np.array([rate.low])
    sample = theta[:: max(1, theta.shape[0] // 400)]
    b = np.full(rates.size, float(batch))
    with np.errstate(divide="ignore"):  # a rate of 0 (a draw far in a tail) is out of reach
        log_steps = mean_log_steps(sample, b, np.log(rates), surrogate.b_ref)  # draws x rates
    # The log of the mean steps over draws (no overflow where a draw's steps are huge).
    return float(rates[int(np.argmin(special.logsumexp(log_steps, axis=0)))])


def _choose(batches: np.ndarray, accelerators: int, limits: np.ndarray) -> np.ndarray:
    """Per limit: the largest batch size divisible by ``accelerators`` up to it, else the
    smallest divisible one (NaN when none divides)."""
    divisible = batches[np.mod(batches, accelerators) == 0]
    if divisible.size == 0:
        return np.full(limits.shape, np.nan)
    index = np.searchsorted(divisible, limits, side="right") - 1
    return np.where(index >= 0, divisible[np.maximum(index, 0)], divisible[0])


def _unbiased(surrogate: Surrogate) -> float:
    """The small-sample correction of a maximum-likelihood spread: ``sqrt(n / dof)`` over the
    trials' information ``n`` in exact observations and the degrees of freedom left of it
    (`study.analysis.covariance.residual_dof`)."""
    return math.sqrt(surrogate.effective_trials / max(surrogate.dof, 1.0))


def _slope(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per row of ``y``: the least-squares slope over ``x`` (the power law closest to the
    model's best rates over the measured batch sizes)."""
    xc = x - x.mean()
    return (y - y.mean(axis=1, keepdims=True)) @ xc / float(xc @ xc)


def _at_search_edge(surrogate: Surrogate, draws: np.ndarray) -> np.ndarray:
    """Per draw: whether its B_noise sits on an end of the range the model searches
    (`study.analysis.surrogate`: a factor of 1,000 beyond the measured batch sizes), where
    `Surrogate.draws` clips the tail of a B_noise the trials do not pin."""
    if not surrogate.bounds:
        return np.zeros(draws.shape[0], dtype=bool)
    low, high = surrogate.bounds[Param.LOG_B_NOISE]
    log_b_noise = draws[:, Param.LOG_B_NOISE]
    return (log_b_noise <= low) | (log_b_noise >= high)


def _open_ends(values: np.ndarray, edge: np.ndarray, low: float, high: float) -> tuple[bool, bool]:
    """Whether ``low`` and ``high`` are ends the trials do not set: the draws beyond such an end
    are mostly draws whose B_noise sits on the end of the model's search range
    (`_at_search_edge`), at least halfway from their share of all draws to all of them. Such an
    end is the search range's, not a bound the trials give.

    Example: when 3% of the draws put B_noise on the range's upper end and every draw above
    ``high`` is one of them, ``high`` is open ("at least ``low``").
    """
    share = float(np.mean(edge)) if edge.size else 0.0
    if share == 0.0:
        return False, False
    needed = max(0.5, share + 0.5 * (1.0 - share))

    def set_by_edge(beyond: np.ndarray) -> bool:
        return bool(beyond.any()) and float(np.mean(edge[beyond])) >= needed

    return set_by_edge(values <= low), set_by_edge(values >= high)


def _continuous_quantiles(values: np.ndarray, tail: float) -> tuple[float, float]:
    """The tail quantiles of values, interpolated; an end between two infinite draws (a rate
    far in a tail overflows) is that infinity, not NaN."""
    with np.errstate(invalid="ignore"):  # inf - inf while interpolating
        ends = np.quantile(values, [tail, 1.0 - tail])
    if np.isnan(ends).any():
        ends = np.where(
            np.isnan(ends), np.quantile(values, [tail, 1.0 - tail], method="nearest"), ends
        )
    return float(ends[0]), float(ends[1])


def _discrete_quantiles(values: np.ndarray, tail: float) -> tuple[float, float]:
    """The tail quantiles of values on a grid, taken on the grid (lower and higher)."""
    finite_share = np.mean(np.isfinite(values))
    low = float(np.quantile(values, tail, method="lower"))
    high = (
        math.inf
        if finite_share < 1.0 - tail
        else float(np.quantile(values, 1.0 - tail, method="higher"))
    )
    return low, high


def _batch_text(x: float) -> str:
    return "beyond the measured sizes" if math.isinf(x) else f"{as_number(x)}"


def _number(x: float, digits: int = 3) -> str:
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _plain(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)
