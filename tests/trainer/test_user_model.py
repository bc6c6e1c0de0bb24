"""The user's own Keras model (``--model module:callable``): uncompiled it trains on the task's
loss; compiled, on its own loss, reporting its own metrics too; the optimizer is always the
trial's. A target the model does not report is refused before any step."""

from __future__ import annotations

import textwrap
import uuid
from typing import Any

import numpy as np
import pytest

from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec
from study.errors import UsageError
from study.results import TrialResult
from study.trainer import loop
from study.trainer import session as session_module
from study.trainer.loop import train
from tests.fakes import spec_of
from tests.trainer.conftest import TaskWorkload

pytestmark = pytest.mark.slow

MODELS = """
    import keras


    def plain(input_shape, outputs):
        return keras.Sequential(
            [
                keras.Input(input_shape),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(outputs),
            ]
        )


    def compiled(input_shape, outputs):
        model = plain(input_shape, outputs)
        model.compile(
            optimizer=keras.optimizers.SGD(learning_rate=100.0),  # never used
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseTopKCategoricalAccuracy(k=2, name="top2"), "accuracy"],
        )
        return model


    def compiled_mae(input_shape, outputs):
        model = plain(input_shape, outputs)
        model.compile(loss="mae", metrics=[keras.metrics.MeanSquaredLogarithmicError(name="log_error")])
        return model
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The user's model module on sys.path; its name."""
    directory = tmp_path_factory.mktemp("models")
    name = f"user_models_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text(textwrap.dedent(MODELS), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(directory))
        yield name


def run(
    workload: TaskWorkload, model: str, strategy: Any, target: str, **changes: Any
) -> tuple[TrialResult, np.ndarray, Any]:
    """Train the user's model; also return its untrained validation outputs and the data."""
    data = workload.load()
    initial: list[np.ndarray] = []

    def build() -> Any:
        built = workload.build(model, data)
        initial.append(np.asarray(built(data.x_val)).astype(np.float64))
        return built

    fields: dict[str, Any] = {
        "workload": "tasks",
        "model": model,
        "batch_size": 32,
        "optimizer": OptimizerSpec(name="adam", learning_rate=0.01),
        "target": Target.parse(target),
        "budget": Budget(max_steps=40),
        "cadence": EvalCadence(kind="fixed", every=20),
        "strategy": "default",
    }
    spec = spec_of(**{**fields, **changes})
    result = train(spec, data, build, *strategy, task=workload.task)
    return result, initial[0], data


def test_uncompiled_model_trains_on_the_task(models: str, default_strategy) -> None:
    result, _, _ = run(
        TaskWorkload("multiclass"), f"{models}:plain", default_strategy, "val_error<=0"
    )

    assert result.environment["loss"] == "sparse_categorical_crossentropy"
    assert tuple(result.curve[0].metrics) == ("val_loss", "val_accuracy", "val_error")
    assert result.curve[-1].metrics["val_loss"] < result.curve[0].metrics["val_loss"]


def test_compiled_metrics_are_reported_over_the_whole_set(models: str, default_strategy) -> None:
    result, initial, data = run(
        TaskWorkload("multiclass"), f"{models}:compiled", default_strategy, "val_top2>=1.01"
    )

    keys = ("val_loss", "val_accuracy", "val_error", "val_top2")  # "accuracy" reported once
    assert all(tuple(m.metrics) == keys for m in result.curve)
    top2 = np.argsort(-initial, axis=1)[:, :2]
    expected = np.mean([y in row for y, row in zip(data.y_val, top2, strict=True)])
    assert result.curve[0].metrics["val_top2"] == pytest.approx(expected, abs=1e-7)
    assert result.environment["loss"] == "sparse_categorical_crossentropy"


def test_optimizer_is_the_trials_not_the_compiled_one(models: str, default_strategy) -> None:
    """Same loss and initial weights: the compiled model (SGD at 100) trains exactly like the
    uncompiled one under the trial's Adam."""
    workload = TaskWorkload("multiclass")
    compiled, _, _ = run(workload, f"{models}:compiled", default_strategy, "val_error<=0")
    plain, _, _ = run(workload, f"{models}:plain", default_strategy, "val_error<=0")

    assert [m.train_loss for m in compiled.curve[1:]] == [m.train_loss for m in plain.curve[1:]]
    assert [m.metrics["val_loss"] for m in compiled.curve] == [
        m.metrics["val_loss"] for m in plain.curve
    ]


def test_compiled_loss_replaces_the_tasks(models: str, default_strategy) -> None:
    result, initial, data = run(
        TaskWorkload("regression", outputs=2),
        f"{models}:compiled_mae",
        default_strategy,
        "val_log_error<=0",
    )

    mae = np.abs(initial - data.y_val).mean()
    assert result.environment["loss"] == "mae"
    assert result.curve[0].metrics["val_loss"] == pytest.approx(mae, rel=1e-5)
    assert "val_log_error" in result.curve[0].metrics
    assert result.curve[-1].metrics["val_loss"] < result.curve[0].metrics["val_loss"]


def test_target_the_model_does_not_report_fails_before_any_step(
    models: str, default_strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real_run = session_module.Session.run
    monkeypatch.setattr(
        session_module.Session, "run", lambda self, args: calls.append(1) or real_run(self, args)
    )

    with pytest.raises(UsageError) as info:
        run(TaskWorkload("multiclass"), f"{models}:compiled", default_strategy, "val_top5>=0.5")

    assert str(info.value) == (
        "target: unknown metric 'val_top5'; workload 'tasks' reports val_loss, val_accuracy, "
        "val_error, val_top2"
    )
    assert calls == []


def test_a_compiled_models_own_metrics_replay_as_one_call_a_step_does(
    models: str, default_strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exact steps with the model's own metrics: the replay in one compiled call
    (`study.trainer.replay`) resets and folds them at every step, as separate evaluations do."""

    def replayed() -> TrialResult:
        result, _, _ = run(
            TaskWorkload("multiclass"),
            f"{models}:compiled",
            default_strategy,
            "val_top2>=0.9",
            budget=Budget(max_steps=300),
            cadence=EvalCadence.parse("geometric:1.3"),
        )
        return result

    fast = replayed()
    monkeypatch.setattr(loop, "replayer", lambda session: None)
    slow = replayed()
    assert fast.steps_to_target is not None and any(m.fine for m in fast.curve)
    assert [(m.step, m.train_loss, dict(m.metrics)) for m in fast.curve] == [
        (m.step, m.train_loss, dict(m.metrics)) for m in slow.curve
    ]
