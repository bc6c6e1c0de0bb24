"""The one encoding of trial results: what `encode_result` writes, `decode_result` reads back."""

from __future__ import annotations

import json
import math

import pytest

from study.config.space import Stratum
from study.ledger.records import (
    LedgerTrial,
    StudyRecord,
    best_of,
    decode_result,
    decode_trial,
    encode_result,
)
from study.results import Measurement, TrialResult, TrialState


def result(**changes) -> TrialResult:
    fields = {
        "state": TrialState.REACHED,
        "steps_run": 20,
        "examples_run": 640,
        "train_seconds": 0.5,
        "steps_to_target": 20,
        "examples_to_target": 640,
        "seconds_to_target": 0.5,
        "curve": (
            Measurement(0, 0, 0.0, 2.3, {"val_accuracy": 0.1, "val_loss": math.nan}),
            Measurement(20, 640, 0.5, 0.4, {"val_accuracy": 0.9, "val_loss": 0.3}),
        ),
        "environment": {"replicas": 2, "strategy": "mirrored"},
    }
    fields.update(changes)
    return TrialResult(**fields)


def test_a_result_survives_encoding() -> None:
    original = result()
    attrs = json.loads(json.dumps(encode_result(original)))  # as a storage keeps it
    decoded = decode_result(attrs, batch_size=32)
    assert decoded.curve[0].metrics["val_loss"] != decoded.curve[0].metrics["val_loss"]  # NaN
    assert decoded.curve[1] == original.curve[1]
    assert (decoded.state, decoded.steps_to_target, decoded.environment) == (
        TrialState.REACHED,
        20,
        {"replicas": 2, "strategy": "mirrored"},
    )
    assert json.loads(attrs["curve"])[0]["val_loss"] is None  # JSON has no NaN


def test_errors_are_stored_as_their_tail() -> None:
    attrs = encode_result(result(state=TrialState.FAILED, error="x" * 5000 + "the end"))
    assert len(attrs["error"]) == 4000 and attrs["error"].endswith("the end")
    assert encode_result(result(error=None))["error"] is None


def test_decoded_trial_keeps_bookkeeping_apart_from_extras() -> None:
    attrs = {
        **encode_result(result()),
        "tuner": "keras-tuner",
        "origin": "retry",
        "owner": "host:1:2",
        "keras_tuner_trial": "03",
    }
    trial = decode_trial(Stratum(32, "default"), 4, attrs, {"learning_rate": 0.1}, 1.0, open=False)
    assert (trial.tuner, trial.origin, trial.owner) == ("keras-tuner", "retry", "host:1:2")
    assert trial.extras == {"keras_tuner_trial": "03"}
    assert (trial.steps_to_target, trial.learning_rate) == (20, 0.1)


def test_a_running_trial_has_no_result() -> None:
    trial = decode_trial(Stratum(8, "default"), 0, {"status": "running"}, {}, None, open=True)
    assert trial.status is TrialState.RUNNING and trial.result is None
    assert trial.steps_to_target is None and math.isnan(trial.learning_rate)


def test_curve_rows_without_examples_count_the_batch() -> None:
    attrs = {"status": "not_reached", "curve": json.dumps([{"step": 10, "val/error": 0.5}])}
    (m,) = decode_result(attrs, batch_size=64).curve
    assert (m.step, m.examples, m.metrics) == (10, 640, {"val/error": 0.5})
    assert math.isnan(m.train_seconds) and math.isnan(m.train_loss)


def reached(number: int, steps: int | None, lr: float) -> LedgerTrial:
    state = TrialState.REACHED if steps is not None else TrialState.NOT_REACHED
    return LedgerTrial(
        Stratum(32, "default"),
        number,
        state,
        params={"learning_rate": lr},
        result=TrialResult(state=state, steps_to_target=steps),
    )


def test_best_is_fewest_steps_then_smaller_learning_rate() -> None:
    trials = [reached(0, 120, 0.3), reached(1, 150, 0.2), reached(2, 120, 0.1), reached(3, None, 1)]
    best = best_of(trials)
    assert best is not None and best.number == 2
    assert best_of([reached(0, None, 0.1)]) is None


@pytest.mark.parametrize(
    "record",
    [
        StudyRecord("s", config_text="name: s", fingerprint="abc", tuner="both", trials_total=8),
        StudyRecord("i", kind="imported", source="/data", dataset="mnist", trials_total=9),
    ],
)
def test_study_record_round_trip(record: StudyRecord) -> None:
    assert StudyRecord.from_attrs(record.name, record.to_attrs()) == record
