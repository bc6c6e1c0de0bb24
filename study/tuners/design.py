"""Proposals from the model of every trial: the learning rate whose outcome narrows the answer most.

With ``tuner.design`` (on by default), half the trials of a stratum from its third on (numbers
2, 3, 6, 7, 10, 11, ...: as many in each backend's turn) are proposed by the designer
(`study.tuners.designer.Designer`) instead of the stratum's sampler, once at least three batch
sizes of its strategy reached the target (the model needs them). It takes the model of every
trial (`study.analysis.surrogate`) fitted to the study's finished trials but the latest (fitted
ahead, while that trained: `study.tuners.fit_ahead`) and, over
learning rates around the model's best rate at the stratum's batch size, picks the one whose
outcome is expected to shrink, per training step it costs, the variances of the two
quantities the answer rests on: ``log B_noise`` (the regimes, the critical batch size and the
batch-size recommendation are functions of it) and the log of the best learning rate at the
recommended batch size (`information_gain`). A trial there is seen only when it reaches the
target before it is stopped (its budget, or the pruning at the stratum's best steps so far), so
the gain is weighted by the model's chance of that.

The model is trusted at a stratum only once its trials bracket the stratum's best (`bracket_rate`):
before that, a designed trial goes halfway (in log) from the best to the nearest rate tried
more than `BRACKET` times away, or, while the stratum's best is slower than the other batch
sizes allow (none reached the target, or only at rates far from its optimum), to the middle of
the widest gap between the rates tried. A model fitted while a batch size has seen only rates
far below its optimum reads those slow trials as its curve, and a design from it puts every
later trial there too: on the MNIST-1D MLP question (tuner seed 7) the fit after 28 trials read
a best rate falling with the batch size (alpha -0.68) and B_noise 159, every later trial at batch
1024 went below 0.03 (its optimum is near 0.6), and the study read B_noise 332. Bracketing
first, twelve runs of the question read B_noise within 1.35 times of each other, against 1.80
without (`benchmarks/answer_truth.py`; docs/answers.md).

The gain of one observation ``y = mu(x) + sigma z`` for a quantity with gradient ``c`` is the
reduction of its variance under the model's normal approximation, ``(c' S g)**2 / (sigma**2 +
g' S g)`` with ``g = d mu / d theta`` and ``S`` the parameters' covariance. Learning-rate
transfer is the special case of a model that knows only the best rates: it centres the search
on the prediction; this puts the trial where the prediction is least certain and matters most.

Other metaparameters of the space keep the values of the stratum's best trial.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from study.analysis.answers import scaling_answers
from study.analysis.surrogate import (
    LAST_STEP,
    PARAMS,
    Param,
    Surrogate,
    fit_surrogate,
    mean_log_steps,
    mean_log_steps_gradient,
)
from study.analysis.table import BATCH_SIZE, LEARNING_RATE
from study.analysis.threads import one_blas_thread
from study.ledger.records import Origin
from study.phases import PHASES, Phase
from study.tuners.seen import narrowed

#: The origin of a trial the designer proposed.
DESIGN: Origin = "design"
#: The ledger extra holding a designed trial's expected gain.
GAIN = "design_gain"
#: The ledger extra of a designed trial placed to bracket its stratum's best (``"bracket"``) or
#: in the widest gap of a stratum whose optimum is not found yet (``"gap"``), not by the model.
PROBE = "design_probe"
#: The first trial number of a stratum the designer may propose (the sampler's start comes first).
FIRST = 2
#: Candidate rates span this factor below and above the model's best rate.
SPAN = (8.0, 4.0)
#: Candidate rates per proposal.
CANDIDATES = 48
#: The answers a designed learning rate narrows: ``log B_noise`` and the log best rate at the
#: recommended batch size.
RATE_ANSWERS = ("b_noise", "best_lr")
#: What a choice between batch sizes narrows (`study.ext.allocation.step_plan`): those and
#: alpha, the best rate's slope over the batch sizes, which only trials at the ends of the grid
#: pin.
BATCH_ANSWERS = ("b_noise", "best_lr", "alpha")


@dataclass(frozen=True)
class Design:
    """The chosen learning rate, its expected relative variance reduction per 1,000 steps
    (``gain``), the model's median steps there, its chance of reaching the target and its
    expected steps (``cost``: its steps if it reaches the target, else its budget)."""

    learning_rate: float
    gain: float
    steps: float
    reach: float
    cost: float = math.nan


def information_gain(
    surrogate: Surrogate,
    batch_size: float,
    rates: np.ndarray,
    *,
    budget: float,
    recommended: float,
    answers: Sequence[str] = RATE_ANSWERS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate rate: the expected relative variance reduction of the ``answers`` (summed;
    `answer_gradients`) per 1,000 expected steps, the median steps and the chance of reaching
    the target within ``budget`` steps."""
    theta, cov, sigma = surrogate.theta, surrogate.covariance, surrogate.sigma
    b = np.full(rates.size, float(batch_size))
    log_lr = np.log(rates)
    mu = mean_log_steps(theta, b, log_lr, surrogate.b_ref)
    free = np.flatnonzero(np.diag(cov) > 0)
    grad = np.zeros((rates.size, theta.size))
    grad[:, free] = mean_log_steps_gradient(theta, free, b, log_lr, surrogate.b_ref).T
    targets = answer_gradients(surrogate, recommended, answers)
    spread = np.einsum("ij,jk,ik->i", grad, cov, grad)
    gain = np.zeros(rates.size)
    for c in targets:
        variance = float(c @ cov @ c)
        if variance > 0:
            gain += (grad @ cov @ c) ** 2 / (sigma**2 + spread) / variance
    reach, cost = expected_cost(mu, sigma, budget)
    return reach * gain / (cost / 1000.0), np.exp(mu), reach


def answer_gradients(
    surrogate: Surrogate, recommended: float, answers: Sequence[str]
) -> np.ndarray:
    """One row per answer: its gradient in the model's parameters (each is linear in them).
    ``b_noise``: ``log B_noise``; ``best_lr``: ``log lr*(recommended)``; ``alpha``: the
    least-squares slope of ``log lr*`` over the measured batch sizes (as the report reads it)."""
    rows = np.zeros((len(answers), len(PARAMS)))
    x = math.log(recommended / surrogate.b_ref)
    measured = np.log(np.asarray(surrogate.batch_sizes, dtype=float) / surrogate.b_ref)
    centred = measured - measured.mean()
    for row, name in zip(rows, answers, strict=True):
        if name == "b_noise":
            row[Param.LOG_B_NOISE] = 1.0
        elif name == "best_lr":
            row[Param.LR_LEVEL], row[Param.ALPHA] = 1.0, x
            row[Param.BETA] = x * x
        elif name == "alpha":
            row[Param.ALPHA] = 1.0
            spread = float(centred @ centred)
            row[Param.BETA] = float(measured**2 @ centred) / spread if spread else 0.0
        else:
            raise ValueError(
                f"answer_gradients: unknown answer {name!r}; use b_noise, best_lr or alpha"
            )
    return rows


def expected_cost(mu: np.ndarray, sigma: float, budget: float) -> tuple[np.ndarray, np.ndarray]:
    """A trial's chance of reaching the target within ``budget`` steps and its expected steps,
    when its log steps are normal (``mu``, ``sigma``): its steps if it reaches, else the budget
    (at most 10 times the most steps of the candidates, when unbounded)."""
    log_budget = math.log(budget) if math.isfinite(budget) else math.inf
    reach = stats.norm.cdf((log_budget - mu) / sigma)
    steps = np.exp(mu + sigma**2 / 2)
    cost = reach * np.minimum(steps, budget) + (1.0 - reach) * min(budget, 10 * float(steps.max()))
    return reach, cost


@dataclass(frozen=True)
class DesignModel:
    """The model of every trial fitted for a design, and the batch size it recommends."""

    surrogate: Surrogate
    recommended: float


#: Fits `design_model` keeps (the latest, by the trials they were fitted to).
FITS_KEPT = 4
#: Up to this many trials, every new set of trials is fitted anew (a study of tens of trials
#: decides as it always did: serving kept fits from 10 trials on, refitted at 10% new ones,
#: made the MNIST-1D MLP question's answers less stable over its six runs).
REFIT_ALL_BELOW = 100
#: Beyond `REFIT_ALL_BELOW`, a kept fit serves trials it did not see (counting them as seen:
#: `study.tuners.seen.narrowed`) until they are this share of the trials it was fitted to, or
#: `SURPRISE_SHARE` of them when one of the new outcomes surprises it (`_surprises`).
REFIT_SHARE = 0.05
SURPRISE_SHARE = 0.01
SURPRISE_Z = 2.576


@dataclass(frozen=True)
class _Kept:
    """A fit `design_model` keeps: its model and the row hashes of the trials it saw."""

    model: DesignModel | None
    rows: np.ndarray


_FITS: OrderedDict[tuple[bytes, int], _Kept] = OrderedDict()
_FITS_LOCK = threading.Lock()


def design_model(trials: pd.DataFrame, accelerators: int = 8) -> DesignModel | None:
    """The model of every trial fitted to ``trials`` (`ledger_frame`'s columns) with its
    recommended batch size; None when it cannot be fitted yet. A fit to the same trials as one
    of the last `FITS_KEPT` is not made again (an allocation round and the designed proposal
    after it; designed proposals while no trial finished): the trials are put in one order
    first, since the order of the sums changes the fit in its last digits.

    A study of more than `REFIT_ALL_BELOW` trials is not refitted at every trial (the fit's
    cost grows with the trials, so a study's would grow with their square): a kept fit to a
    subset of ``trials`` serves, its covariance narrowed by the new trials that reached the
    target (`narrowed`), until the trials it did not see are `REFIT_SHARE` of those it saw, or
    `SURPRISE_SHARE` when one of them surprises it (`_surprises`). Its refit starts from the
    kept fit's parameters too (`fit_surrogate`'s ``start``)."""
    trials, hashes, key = fit_key(trials, accelerators)
    with _FITS_LOCK:
        kept = _FITS.get(key)
        older = None if kept is not None else _older(trials, hashes, accelerators)
    if kept is not None:
        PHASES.add(Phase.FITS_KEPT, 0.0)
        return kept.model
    if older is not None and not _stale(older, trials, hashes):
        PHASES.add(Phase.FITS_KEPT, 0.0)
        if older.model is None:
            return None
        new = trials[~np.isin(hashes, older.rows) & np.isfinite(trials["steps_to_target"])]
        b, lr = new[BATCH_SIZE].to_numpy(), new[LEARNING_RATE].to_numpy()
        return replace(older.model, surrogate=narrowed(older.model.surrogate, b, lr))
    start = older.model.surrogate.theta if older is not None and older.model else None
    with PHASES.timing(Phase.FITS):
        model = _fit_design_model(trials, accelerators, start)
    with _FITS_LOCK:
        _FITS[key] = _Kept(model, np.sort(hashes))
        while len(_FITS) > FITS_KEPT:
            _FITS.popitem(last=False)
    return model


def fit_key(
    trials: pd.DataFrame, accelerators: int = 8
) -> tuple[pd.DataFrame, np.ndarray, tuple[bytes, int]]:
    """``trials`` in one order, their row hashes and the key of their fit: the allocation's
    round and the designer's proposal list the same trials in different orders, and a fit's
    sums (its last digits) follow the order."""
    trials = trials.sort_values(list(trials.columns), kind="mergesort", ignore_index=True)
    hashes = pd.util.hash_pandas_object(trials, index=False).to_numpy()
    return trials, hashes, (hashes.tobytes(), accelerators)


def _older(trials: pd.DataFrame, hashes: np.ndarray, accelerators: int) -> _Kept | None:
    """The kept fit (with `_FITS_LOCK` held) to the most trials, more than `REFIT_ALL_BELOW`,
    all of them among ``trials`` (by their row ``hashes``); None if there is none."""
    if len(trials) <= REFIT_ALL_BELOW:
        return None
    found = [
        kept
        for (_, kept_for), kept in _FITS.items()
        if kept_for == accelerators
        and REFIT_ALL_BELOW < kept.rows.size < hashes.size
        and np.isin(kept.rows, hashes).all()
    ]
    return max(found, key=lambda kept: kept.rows.size, default=None)


def _stale(kept: _Kept, trials: pd.DataFrame, hashes: np.ndarray) -> bool:
    """Whether ``kept`` must be refitted for ``trials``: the trials it did not see reach
    `REFIT_SHARE` of those it saw, or `SURPRISE_SHARE` with one `_surprises` it."""
    new = ~np.isin(hashes, kept.rows)
    count, seen = int(new.sum()), kept.rows.size
    if count >= REFIT_SHARE * seen:
        return True
    return count >= SURPRISE_SHARE * seen and _surprises(kept.model, trials[new])


def _surprises(model: DesignModel | None, trials: pd.DataFrame) -> bool:
    """Whether an outcome of ``trials`` lies outside ``model``'s `SURPRISE_Z` interval of log
    steps (a reached trial's steps; a trial that did not reach the target where it ran past
    the interval's top), or at a batch size it was not fitted to (always, with no model)."""
    if model is None:
        return True
    surrogate = model.surrogate
    b = trials[BATCH_SIZE].to_numpy(float)
    if not np.isin(b, surrogate.batch_sizes).all():
        return True
    steps = trials["steps_to_target"].to_numpy(float)
    reached = np.isfinite(steps)
    ran = trials[LAST_STEP].to_numpy(float) if LAST_STEP in trials else np.zeros(len(trials))
    seen = np.where(reached, steps, ran)
    lr = trials[LEARNING_RATE].to_numpy(float)
    with np.errstate(divide="ignore"):
        z = (np.log(seen) - mean_log_steps(surrogate.theta, b, np.log(lr), surrogate.b_ref)) / (
            surrogate.sigma
        )
    return bool(np.any(np.where(reached, np.abs(z), z) > SURPRISE_Z))


@one_blas_thread
def _fit_design_model(
    trials: pd.DataFrame, accelerators: int, start: np.ndarray | None = None
) -> DesignModel | None:
    surrogate = fit_surrogate(trials, misfit_test=False, start=start, readings=False)
    if not surrogate.ok:
        return None
    answers = scaling_answers(surrogate, accelerators=accelerators, draws=200)
    recommended = (
        answers.recommended_batch.estimate
        if answers.recommended_batch is not None
        else max(surrogate.batch_sizes)
    )
    return DesignModel(surrogate, float(recommended))


@one_blas_thread
def best_design(
    model: DesignModel,
    batch_size: float,
    bounds: tuple[float, float],
    *,
    budget: float,
    answers: Sequence[str] = RATE_ANSWERS,
) -> Design | None:
    """The learning rate at ``batch_size`` within ``bounds`` that narrows ``answers`` most per
    step for a trial stopped after ``budget`` steps (None when no candidate has a finite
    gain)."""
    surrogate = model.surrogate
    best = float(surrogate.best_lr(batch_size)[0])
    low = max(bounds[0], best / SPAN[0])
    high = min(bounds[1], best * SPAN[1])
    if not low < high:
        low, high = bounds
    rates = np.geomspace(low, high, CANDIDATES)
    gain, steps, reach = information_gain(
        surrogate, batch_size, rates, budget=budget, recommended=model.recommended, answers=answers
    )
    if not np.any(np.isfinite(gain)):
        return None
    i = int(np.nanargmax(gain))
    _, cost = expected_cost(np.log(steps), surrogate.sigma, budget)
    return Design(float(rates[i]), float(gain[i]), float(steps[i]), float(reach[i]), float(cost[i]))


def design_rate(
    trials: pd.DataFrame,
    batch_size: float,
    bounds: tuple[float, float],
    *,
    budget: float,
    accelerators: int = 8,
    fit: Callable[[pd.DataFrame, int], DesignModel | None] = design_model,
) -> Design | None:
    """The most informative learning rate at ``batch_size`` within ``bounds`` (None when the
    model cannot be fitted yet); the model is ``fit``'s (`design_model`, or one made ahead)."""
    model = fit(trials, accelerators)
    return None if model is None else best_design(model, batch_size, bounds, budget=budget)


#: A designed trial first brackets its stratum's best: while the nearest rate tried above (or
#: below) the best reached trial is more than this factor away, it goes halfway there (in log);
#: without a best to trust, while a gap between the rates tried spans this factor squared.
BRACKET = 4.0


def bracket_rate(
    best: float | None,
    tried: Sequence[float],
    bounds: tuple[float, float],
    factor: float = BRACKET,
) -> float | None:
    """Where a designed trial goes before the model is trusted, or None once it may be.

    With a ``best`` rate (the stratum's best trial, when it is as fast as the other batch sizes
    say it can be): halfway (in log) to the nearest rate ``tried`` on the side where that is
    farthest, when it is more than ``factor`` away (the search range's end stands in where none
    was tried). Without one (no trial reached the target, or the best is slower than the other
    batch sizes allow: the stratum's optimum is not found yet): the middle of the widest gap
    between the rates tried and the range's ends, when that spans more than ``factor ** 2``.

    Example: the best at 0.5 with 0.3 and 0.9 tried: None; with 0.3 and 3.0 tried: 1.22. No
    best, with 0.0012, 0.0027, 0.026 and 2.04 tried in 0.001 to 3: 0.23.
    """
    if best is None:
        edges = sorted({bounds[0], bounds[1], *(r for r in tried if bounds[0] < r < bounds[1])})
        ratio, low, high = max((b / a, a, b) for a, b in itertools.pairwise(edges))
        return math.sqrt(low * high) if ratio > factor**2 else None
    above = [r for r in tried if r > best * (1.0 + 1e-9)]
    below = [r for r in tried if r < best / (1.0 + 1e-9)]
    up, down = min(above, default=bounds[1]), max(below, default=bounds[0])
    ratio, edge = max((up / best, up), (best / down, down))
    return math.sqrt(best * edge) if ratio > factor else None


def designed(number: int) -> bool:
    """Whether trial ``number`` of a stratum is the designer's: 2, 3, 6, 7, 10, 11, ..."""
    return number >= FIRST and number % 4 in (2, 3)
