"""Finished trials as the model of every trial reads them (`fit_surrogate`'s columns): one
row per trial, made once per trial object and kept (a decision at thousands of trials makes
its frame from rows it has), the last frames kept while the trials are the same objects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from study.analysis.likelihood import LAST_STEP
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STATE
from study.ledger import LedgerTrial
from study.results import TrialState
from study.tuners.same_trials import SameTrials

__all__ = ["ledger_frame"]


def ledger_frame(trials: Sequence[LedgerTrial]) -> pd.DataFrame:
    """Finished trials as the model reads them (`fit_surrogate`'s columns); the frame of the
    last call again (a copy) while ``trials`` are the same objects (`SameTrials`)."""
    return _frames([t for t in trials if t.result is not None]).copy()  # running: no row


def _ledger_frame(trials: Sequence[LedgerTrial]) -> pd.DataFrame:
    rows = [row for row in map(_row, trials) if row is not None]
    numbers = np.array([row[1:] for row in rows], dtype=float).reshape(len(rows), 4)
    states = [row[0] for row in rows]
    # Typed even with no rows (parallel workers claim a designed slot before any trial ends).
    return pd.DataFrame(
        {
            BATCH_SIZE: numbers[:, 0],
            LEARNING_RATE: numbers[:, 1],
            STATE: pd.Series(states, dtype=None if states else object),
            "steps_to_target": numbers[:, 2],
            LAST_STEP: numbers[:, 3],
        }
    )


_frames = SameTrials(_ledger_frame, keep=4)
#: Each finished trial's row, by object (kept with it, so its id stays its own): a decision's
#: frame of thousands of trials is made from the rows of trials read back as the same objects.
_ROWS: dict[int, tuple[LedgerTrial, tuple[str, float, float, float, float] | None]] = {}
_ROWS_KEPT = 100_000


def _row(t: LedgerTrial) -> tuple[str, float, float, float, float] | None:
    kept = _ROWS.get(id(t))
    if kept is not None and kept[0] is t:
        return kept[1]
    row = _frame_row(t)
    if len(_ROWS) >= _ROWS_KEPT:
        _ROWS.clear()
    _ROWS[id(t)] = (t, row)
    return row


def _frame_row(t: LedgerTrial) -> tuple[str, float, float, float, float] | None:
    """``(state, batch size, rate, steps to target, steps run)`` of a trial the model reads."""
    if t.result is None or not t.status.counts() or t.status is TrialState.FAILED:
        return None
    reached = t.status is TrialState.REACHED and t.result.steps_to_target is not None
    steps = float(t.result.steps_to_target) if reached else math.inf  # type: ignore[arg-type]
    return (
        t.status.value,
        float(t.stratum.batch_size),
        float(t.learning_rate),
        steps,
        float(t.result.steps_run),
    )
