"""The model of every trial fitted ahead, off the worker's path: decisions lag one trial
(``tuner: {fit_ahead: true}``; off by default, see the last paragraph).

An allocation round by steps (`study.ext.allocation.step_plan`) and a designed proposal
(`study.tuners.designer.Designer`) each need the model of every trial (`design_model`), and a fit
takes about as long as one of the MNIST-1D question's trials. Fitted when a decision needs it,
it sat on the worker's path: the trainer idled while the model was fitted.

Here a decision uses the model of the trials finished *before the latest one* (`behind`: lag
one), whose fit ran in a background thread while the latest trial trained: a decision asks for
the fit of every finished trial (`fit_next`), and it starts (`release`) when the engine hands the
trial decided to its trainer, so it slows neither the rest of the decision nor a study that
ends there. Each decision still sees every finished trial in its other inputs (the
steps spent, the batch sizes' best steps and trial counts); only the model lags, as it already
did for a study with two workers, whose decisions are made while the other trial trains. Where
the latest trial ran is known even though its outcome is not in the fit: the model's covariance
counts it as seen (`seen`, exact under the model's normal approximation), so a decision does not
send the next trial where the latest one already looked.

Decisions stay reproducible: which trials a decision's model is fitted to depends only on the
ledger (the latest-finished trial by its stored finish time, `behind`), never on whether a fit
happened to be done, and every fit runs in the one background thread, in the order it was asked
for (a kept fit to a subset of the trials, `design_model`'s rule beyond 100 trials, is then the
same at every run). A decision waits for its fit when that fit is still running (its seconds:
`Phase.FIT_WAIT`); a resumed run asks for the same fits, fitted anew. A decision that needs no
model (the steps are spent, every batch size has its most trials) starts no fit.

Off by default: on a 2-core machine TensorFlow's trainer uses both cores, so a fit beside it
takes its CPU from the trial and the wall did not move (docs/benchmarks/speed.md), and on the
MNIST-1D MLP question's twelve stability runs the lag cost some accuracy (alpha within 0.15 of
the truth in 7 runs against 10). Off, every decision fits every finished trial first, as before.

Example: after trial 12 finishes, the round that gives trial 13 uses the model of trials 1-11
(fitted while trial 12 trained) and starts fitting trials 1-12 while trial 13 trains.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pandas as pd

from study.ledger import LedgerTrial
from study.phases import PHASES, Phase
from study.results import TrialState
from study.tuners.design import DesignModel, design_model, fit_key
from study.tuners.seen import narrowed
from study.tuners.trial_frame import ledger_frame

#: The fits asked for that are kept (their futures), the latest by when they were asked for.
KEPT = 8

_executor: ThreadPoolExecutor | None = None
_futures: OrderedDict[tuple[bytes, int], Future[DesignModel | None]] = OrderedDict()
#: Fits `fit_next` asked for, not started yet (`release`).
_deferred: list[tuple[pd.DataFrame, int]] = []
_lock = threading.Lock()


def counts(trial: LedgerTrial) -> bool:
    """Whether ``trial`` is one the model reads (`ledger_frame`'s rows: finished, counted,
    not failed)."""
    return (
        trial.result is not None
        and trial.status.counts()
        and trial.status is not (TrialState.FAILED)
    )


def behind(trials: Sequence[LedgerTrial]) -> list[LedgerTrial]:
    """``trials`` less the latest-finished one the model reads (by the ledger's finish time;
    ties by batch size, strategy and number): the trials a decision's model is fitted to.

    Example: trials finished at times 1, 3 and 2 give those finished at 1 and 2.
    """
    read = [t for t in trials if counts(t)]
    if not read:
        return list(trials)
    latest = max(read, key=_finished)
    return [t for t in trials if t is not latest]


def _finished(trial: LedgerTrial) -> tuple[float, int, str, int]:
    stamp = trial.finished_at if trial.finished_at is not None else float("-inf")
    return (stamp, trial.stratum.batch_size, trial.stratum.strategy, trial.number)


def ahead(trials: pd.DataFrame, accelerators: int = 8) -> Future[DesignModel | None]:
    """The fit of ``trials`` (`ledger_frame`'s columns) in the background thread: started now,
    unless it was asked for already (then that one)."""
    return _submit(trials, accelerators)[0]


def _submit(trials: pd.DataFrame, accelerators: int) -> tuple[Future[DesignModel | None], bool]:
    """`ahead`, and whether the fit was asked for already. The fits `fit_next` asked for start
    first: every fit starts in the order it was asked for."""
    global _executor
    if _deferred:
        release()
    _, _, key = fit_key(trials, accelerators)
    with _lock:
        future = _futures.get(key)
        if future is not None:
            _futures.move_to_end(key)
            return future, True
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="study-fit")
        future = _executor.submit(design_model, trials, accelerators)
        _futures[key] = future
        while len(_futures) > KEPT:
            _futures.popitem(last=False)
    return future, False


def model_for(trials: pd.DataFrame, accelerators: int = 8) -> DesignModel | None:
    """The model fitted to ``trials``: its background fit (`ahead`; one asked for already
    counts as kept, `Phase.FITS_KEPT`), waited for if it still runs (`Phase.FIT_WAIT`)."""
    future, asked = _submit(trials, accelerators)
    if asked:
        PHASES.add(Phase.FITS_KEPT, 0.0)
    if future.done():
        return future.result()
    with PHASES.timing(Phase.FIT_WAIT):
        return future.result()


def lagged_fit(
    trials: Sequence[LedgerTrial], *, ahead: bool = True
) -> Callable[[pd.DataFrame, int], DesignModel | None]:
    """The fit a decision among ``trials`` uses (`plan_step`'s and `design_rate`'s ``fit``): the
    model of `lagged_frame` (`model_for`) that has seen where the latest trial ran (`seen`);
    without ``ahead`` (``tuner.fit_ahead`` off), `design_model` fitted on the spot."""
    if not ahead:
        return design_model
    read = [t for t in trials if counts(t)]
    latest = max(read, key=_finished) if read else None
    return lambda frame, accelerators: seen(model_for(frame, accelerators), latest)


def seen(model: DesignModel | None, latest: LedgerTrial | None) -> DesignModel | None:
    """``model`` with its parameters' covariance narrowed by the ``latest`` trial it was not
    fitted to, when that one reached the target (`study.tuners.seen.narrowed`): a decision's
    gains count the latest trial as seen even though its outcome is not in the fit yet, so
    trial after trial does not go where the latest one already looked."""
    if model is None or latest is None or latest.steps_to_target is None:
        return model
    b, lr = np.array([latest.stratum.batch_size]), np.array([latest.learning_rate])
    return replace(model, surrogate=narrowed(model.surrogate, b, lr))


def lagged_frame(trials: Sequence[LedgerTrial], *, ahead: bool = True) -> pd.DataFrame:
    """The trials a decision's model is fitted to (`behind`; without ``ahead``, all of them), as
    the model reads them."""
    return ledger_frame(behind(trials) if ahead else trials)


def fit_next(trials: Sequence[LedgerTrial], accelerators: int = 8, *, ahead: bool = True) -> None:
    """Ask for the fit the next decision needs, of every trial of ``trials`` the model reads:
    started by `release` when the trial being decided starts training (so it does not slow the
    rest of the decision), or by the next decision that asks for a fit, if that comes first."""
    if not ahead:
        return
    frame = ledger_frame(trials)
    if len(frame):
        with _lock:
            _deferred.append((frame, accelerators))


def release() -> None:
    """Start the fits asked for by `fit_next`, in the order asked (the engine calls it as it
    hands a trial to its trainer)."""
    with _lock:
        asked = list(_deferred)
        _deferred.clear()
    for frame, accelerators in asked:
        _submit(frame, accelerators)
