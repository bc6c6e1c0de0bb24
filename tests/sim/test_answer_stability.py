"""`benchmarks/answer_stability.py`'s readings of the cached runs: fewer trials per batch size
(``--keep-trials``) and trials stopped on their own curves (``--stop-slower``)."""

from __future__ import annotations

import argparse
import dataclasses

import pandas as pd
import pytest
from answer_stability import first_trials, keep_trials, stop_slower, trial_steps

from study.config.hold import Hold
from study.config.target import Target


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


def curves() -> pd.DataFrame:
    """One batch size, four trials evaluated every 10 steps, accuracy rising linearly from 0.1
    to 0.6 in 100 steps (trial 0), 200 (trial 1: twice as slow, pruned at the best's 100), 100
    (trial 2) and 50 (trial 3); each ends 10 steps after its hit (or at the best's 100)."""
    rows = []
    for trial, (to_target, end) in enumerate(((100, 110), (200, 100), (100, 110), (50, 60))):
        for step in range(0, end + 1, 10):
            rows.append(
                {
                    "batch_size": 16,
                    "trial": trial,
                    "stratum_trial": trial,
                    "learning_rate": 0.1,
                    "state": "reached" if to_target <= end else "pruned",
                    "step": step,
                    "examples": 16 * step,
                    "train_seconds": 0.01 * step,
                    "val_accuracy": min(0.1 + 0.5 * step / to_target, 0.7),
                }
            )
    return pd.DataFrame(rows)


def test_stop_slower_cuts_a_trial_that_fell_behind_the_best_and_only_that() -> None:
    target = dataclasses.replace(Target.parse("val_accuracy>=0.6"), hold=Hold.OFF)
    cut = stop_slower(curves(), target, 1.5)
    ends = cut.groupby("trial")["step"].max().to_dict()
    # Trial 1 at step 20 (the best's 20%) has the accuracy trial 0 had at 10: 2x behind.
    assert ends == {0: 110, 1: 20, 2: 110, 3: 60}
    assert set(cut.loc[cut.trial == 1, "state"]) == {"pruned"}
    assert set(cut.loc[cut.trial != 1, "state"]) == {"reached"}
    assert trial_steps(cut) == 110 + 20 + 110 + 60
    assert stop_slower(curves(), target, 2.5).equals(curves())  # 2x behind is within 2.5x


@pytest.mark.extension("allocation")  # the question files spend a budget: allocation.mode steps
def test_each_question_file_states_its_budget_and_even_allocation_is_cached_apart() -> None:
    import copy

    import yaml
    from answer_stability import QUESTIONS, allocation_of, runs_path, table_path

    from study.config.studyfile import parse_study

    budgets = {"mlp-nesterov": 21_000, "cnn-adam": 16_000}
    for question, file in QUESTIONS.items():
        data = yaml.safe_load(file.read_text())
        config = parse_study({**copy.deepcopy(data), **allocation_of("steps")}, "q.yaml")
        assert config.allocation.mode == "steps" and config.allocation.steps == budgets[question]
        even = parse_study({**copy.deepcopy(data), **allocation_of("even")}, "q.yaml")
        assert even.allocation.mode.value == "even"
        assert table_path(question, 0, "even") != table_path(question, 0)
        assert runs_path(question, "even") != runs_path(question)
        assert runs_path(question) == runs_path(question, "steps")
