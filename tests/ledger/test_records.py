"""The one encoding of trial results: what `encode_result` writes, `decode_result` reads back."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from study.config.hold import DEFAULT_HOLD, Hold
from study.config.space import Stratum
from study.ledger.records import (
    LedgerTrial,
    StudyRecord,
    TimingSummary,
    best_of,
    decode_result,
    decode_trial,
    encode_result,
)
from study.results import DataDescription, Measurement, TrialResult, TrialState


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


TIMINGS = {"build": 0.12, "trace": 0.3, "train": 0.5, "evaluate": 0.08, "bookkeeping": 0.05}


def test_timings_survive_encoding() -> None:
    original = result(timings={**TIMINGS, "wall": 1.05})
    attrs = json.loads(json.dumps(encode_result(original)))
    decoded = decode_result(attrs, batch_size=32)
    assert decoded.timings == {**TIMINGS, "wall": 1.05}
    assert dataclasses.replace(decoded, curve=()) == dataclasses.replace(original, curve=())


def test_records_without_timings_decode_to_none_measured() -> None:
    attrs = json.loads(json.dumps(encode_result(result())))
    assert attrs["timings"] == {}
    del attrs["timings"]  # a ledger written before timings existed
    assert decode_result(attrs).timings == {}
    assert decode_result({**attrs, "timings": None}).timings == {}


def test_non_finite_timings_are_not_stored() -> None:
    attrs = encode_result(result(timings={"train": 0.5, "build": math.nan, "wall": math.inf}))
    assert attrs["timings"] == {"train": 0.5}
    json.dumps(attrs, allow_nan=False)  # strict JSON: a storage can keep it


def test_timings_are_a_known_key_not_an_extra() -> None:
    attrs = encode_result(result(timings={"wall": 1.0}))
    trial = decode_trial(Stratum(32, "default"), 0, attrs, {"learning_rate": 0.1}, 1.0, open=False)
    assert trial.extras == {}
    assert trial.result is not None and trial.result.timings == {"wall": 1.0}


def timed(wall: float | None, train_seconds: float, **parts: float) -> TrialResult:
    timings = dict(parts) if wall is None else {**parts, "wall": wall}
    return TrialResult(state=TrialState.REACHED, train_seconds=train_seconds, timings=timings)


def test_timing_summary_means_each_part_over_the_trials_that_measured_it() -> None:
    summary = TimingSummary.of(
        [
            timed(1.0, 0.5, build=0.2, trace=0.1, train=0.5, evaluate=0.1, bookkeeping=0.1),
            timed(3.0, 1.5, build=0.4, trace=0.3, train=1.5, evaluate=0.5, bookkeeping=0.3),
            timed(None, 9.0, train=9.0),  # no wall time: not timed
        ]
    )
    assert summary.trials == 2
    assert summary.mean("wall") == pytest.approx(2.0)
    assert summary.mean("build") == pytest.approx(0.3)
    assert summary.mean("bookkeeping") == pytest.approx(0.2)
    assert summary.train_share == pytest.approx(0.5)
    assert summary.to_dict()["total_seconds"]["train"] == pytest.approx(2.0)
    assert list(summary.to_dict()["mean_seconds"]) == [
        "build",
        "trace",
        "train",
        "evaluate",
        "bookkeeping",
        "wall",
    ]


def test_timing_summary_without_trainer_parts_uses_the_training_seconds() -> None:
    summary = TimingSummary.of([timed(0.8, 0.1), timed(0.6, 0.3)])
    assert summary.to_dict() == {
        "trials": 2,
        "mean_seconds": {"train": pytest.approx(0.2), "wall": pytest.approx(0.7)},
        "total_seconds": {"train": pytest.approx(0.4), "wall": pytest.approx(1.4)},
        "train_share": pytest.approx(0.4 / 1.4),
    }
    assert summary.mean("build") is None


def test_timing_summary_of_no_timed_trial_is_empty() -> None:
    summary = TimingSummary.of([result(), TrialResult(state=TrialState.FAILED)])
    assert summary.trials == 0 and summary.train_share is None
    assert summary.to_dict() == {
        "trials": 0,
        "mean_seconds": {},
        "total_seconds": {},
        "train_share": None,
    }


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


def test_best_leaves_confirmation_trials_out() -> None:
    """A best point re-run under another seed measures the spread; a lucky seed is no best."""
    lucky = dataclasses.replace(reached(2, 80, 0.1), origin="confirm", extras={"seed": 1})
    best = best_of([reached(0, 120, 0.1), reached(1, 130, 0.2), lucky])
    assert best is not None and best.number == 0
    assert best_of([lucky]) is None


@pytest.mark.parametrize(
    "record",
    [
        StudyRecord("s", config_text="name: s", fingerprint="abc", tuner="both", trials_total=8),
        StudyRecord("i", kind="imported", source="/data", dataset="mnist", trials_total=9),
    ],
)
def test_study_record_round_trip(record: StudyRecord) -> None:
    assert StudyRecord.from_attrs(record.name, record.to_attrs()) == record


def test_crossings_that_fell_back_are_stored_with_the_result() -> None:
    hovering = dataclasses.replace(result(), fell_back=((12, 14), (15, 16)))
    attrs = json.loads(json.dumps(encode_result(hovering)))
    assert attrs["fell_back"] == [[12, 14], [15, 16]]
    assert decode_result(attrs, batch_size=32).fell_back == ((12, 14), (15, 16))
    plain = encode_result(result())
    assert "fell_back" not in plain and decode_result(plain).fell_back == ()


def test_a_study_records_its_hold_rule_and_older_ones_read_as_the_first_crossing() -> None:
    new = StudyRecord("s", config_text="name: s", hold=DEFAULT_HOLD.to_param())
    assert StudyRecord.from_attrs("s", new.to_attrs()).hold_rule == DEFAULT_HOLD
    older = StudyRecord.from_attrs("s", {"config_text": "name: s"})
    assert older.hold is None and older.hold_rule == Hold.OFF


DATA = DataDescription(
    name="tabular(rows=1500)",
    source="tabular(rows=1500, seed=0)",
    digest="0123456789abcdef",
    train_rows=1200,
    val_rows=300,
    schema=(("features", "float32[20]"), ("outputs", "3")),
)


def test_the_data_a_trial_trained_on_survive_encoding_and_older_records_have_none() -> None:
    attrs = json.loads(json.dumps(encode_result(result(dataset=DATA))))
    assert decode_result(attrs).dataset == DATA
    trial = decode_trial(Stratum(32, "default"), 0, attrs, {"learning_rate": 0.1}, 1.0, open=False)
    assert trial.extras == {}  # a known key, not an extra

    older = encode_result(result())
    assert "dataset" not in older  # nothing stored without a description
    assert decode_result(older).dataset is None
    assert decode_result({**attrs, "dataset": {"name": "x"}}).dataset is None  # unreadable
