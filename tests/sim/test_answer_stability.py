"""`benchmarks/answer_stability.py`'s reading of fewer trials per batch size (``--keep-trials``)."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest
from answer_stability import first_trials, keep_trials, trial_steps


def table() -> pd.DataFrame:
    """Two batch sizes, three trials each (made in the order of ``stratum_trial``), two
    evaluations per trial."""
    rows = []
    for batch, first in ((16, 0), (64, 3)):
        for k in range(3):
            for step in (0, 10 * (k + 1) * (64 // batch)):
                rows.append(
                    {"batch_size": batch, "trial": first + k, "stratum_trial": k, "step": step}
                )
    return pd.DataFrame(rows)


def test_only_the_first_trials_of_the_named_sizes_are_kept() -> None:
    kept = first_trials(table(), {16: 2})
    assert sorted(kept.loc[kept.batch_size == 16, "trial"].unique()) == [0, 1]
    assert sorted(kept.loc[kept.batch_size == 64, "trial"].unique()) == [3, 4, 5]
    assert first_trials(table(), {}).equals(table())


def test_training_steps_are_each_trials_last_step_summed() -> None:
    assert trial_steps(table()) == 40 + 80 + 120 + 10 + 20 + 30
    assert trial_steps(first_trials(table(), {16: 1, 64: 1})) == 40 + 10


def test_keep_trials_reads_batch_equals_trials() -> None:
    assert keep_trials("16=5, 32=6") == {16: 5, 32: 6}
    for bad in ("16", "16=0", "x=2", "16=-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="BATCH=TRIALS"):
            keep_trials(bad)
