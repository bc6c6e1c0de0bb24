"""`study.tuners.trial_frame.ledger_frame`: the model's frame of finished trials, made from
rows kept per trial object, the same as made afresh, and never shared with a caller."""

from __future__ import annotations

import dataclasses

import pandas as pd

from study.config.space import Stratum
from study.config.target import Target
from study.tuners import trial_frame
from study.tuners.trial_frame import ledger_frame
from tests.fakes import finished_trial, rising_curve

TARGET = Target.parse("val_accuracy>=0.6")


def trials(batch: int, *steps: int) -> list:
    return [
        finished_trial(Stratum(batch, "default"), i, 0.01 * (i + 1), rising_curve(batch, s), TARGET)
        for i, s in enumerate(steps)
    ]


def afresh(some: list) -> pd.DataFrame:
    trial_frame._ROWS.clear()
    return trial_frame._ledger_frame([t for t in some if t.result is not None])


def test_kept_rows_make_the_frame_made_afresh_and_a_new_object_its_own_row() -> None:
    some = trials(64, 300, 200) + trials(128, 150)
    first = ledger_frame(some)
    pd.testing.assert_frame_equal(first, afresh(some))
    faster = dataclasses.replace(some[1], result=trials(64, 300, 120)[1].result)
    changed = [some[0], faster, some[2]]
    assert ledger_frame(changed)["steps_to_target"].tolist()[1] < first["steps_to_target"][1]
    pd.testing.assert_frame_equal(ledger_frame(changed), afresh(changed))


def test_a_caller_may_change_its_frame() -> None:
    some = trials(32, 400, 500)
    mine = ledger_frame(some)
    mine["learning_rate"] = 0.0
    assert ledger_frame(some)["learning_rate"].tolist() == [0.01, 0.02]
