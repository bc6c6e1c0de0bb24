"""Training each task kind through `study.trainer.loop.train`: the reported metrics are the
task's, computed exactly on the whole validation set (checked against numpy at step 0, on the
untrained model), and the loss goes down."""

from __future__ import annotations

import math
import textwrap
import uuid
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSpec
from study.errors import UsageError
from study.results import TrialResult, TrialState
from study.trainer import inputs
from study.trainer import session as session_module
from study.trainer.loop import train
from study.workloads.task import Task
from tests.fakes import spec_of
from tests.trainer.conftest import TaskWorkload, huber, sigmoid_bce, softmax_ce

pytestmark = pytest.mark.slow


def spec_for(task: Task, **changes: Any) -> TrialSpec:
    fields: dict[str, Any] = {
        "workload": "tasks",
        "batch_size": 32,
        "optimizer": OptimizerSpec(name="adam", learning_rate=0.01),
        "target": Target.parse(task.keys[0] + "<=-1"),  # never met: the whole budget runs
        "budget": Budget(max_steps=40),
        "cadence": EvalCadence(kind="fixed", every=20),
        "strategy": "default",
    }
    fields.update(changes)
    return spec_of(**fields)


def run(
    workload: TaskWorkload, strategy: Any, monkeypatch: pytest.MonkeyPatch, **changes: Any
) -> tuple[TrialResult, np.ndarray, Any]:
    """Train ``workload`` on uneven validation chunks of 13; also return the untrained model's
    validation outputs and the data."""
    monkeypatch.setattr(inputs, "_MAX_EVAL_CHUNK", 13)
    data = workload.load()
    initial: list[np.ndarray] = []

    def build() -> Any:
        model = workload.build_model("mlp", data)
        initial.append(np.asarray(model(data.x_val)))
        return model

    spec = spec_for(workload.task, **changes)
    result = train(spec, data, build, *strategy, task=workload.task)
    return result, initial[0].astype(np.float64), data


def reference(kind: str, out: np.ndarray, y: np.ndarray, loss: str = "mse") -> dict[str, float]:
    if kind == "multiclass":
        accuracy = np.mean(out.argmax(1) == y)
        return {"val_loss": softmax_ce(out, y).mean(), "val_accuracy": accuracy}
    if kind == "regression":
        y = y.reshape(out.shape)
        per = {"mse": ((out - y) ** 2).mean(1), "huber": huber(out, y)}[loss]
        mse = ((out - y) ** 2).mean()
        return {
            "val_loss": per.mean(),
            "val_mse": mse,
            "val_rmse": np.sqrt(mse),
            "val_mae": np.abs(out - y).mean(),
        }
    y = y.reshape(out.shape)
    right = (out > 0) == (y > 0.5)
    return {
        "val_loss": sigmoid_bce(out, y).mean(),
        "val_accuracy": right.mean(),
        "val_exact_match": right.all(1).mean(),
        "val_auc": roc_auc_score(y.ravel(), out.ravel()),
    }


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        ("multiclass", {}),
        ("binary", {}),
        ("multilabel", {}),
        ("regression", {}),
        ("regression", {"loss": "huber"}),
    ],
)
def test_each_task_kind_trains_and_reports_its_metrics(
    kind: str, options: dict, default_strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = TaskWorkload(kind, **options)
    result, initial, data = run(workload, default_strategy, monkeypatch)

    assert result.state is TrialState.NOT_REACHED
    assert [m.step for m in result.curve] == [0, 20, 40]
    assert all(tuple(m.metrics) == workload.task.keys for m in result.curve)
    expected = reference(kind, initial, data.y_val, options.get("loss", "mse"))
    for key in workload.task.keys:
        value = expected[key] if key in expected else 1 - expected["val_accuracy"]  # val_error
        assert result.curve[0].metrics[key] == pytest.approx(value, rel=1e-5, abs=1e-9), key
    assert all(math.isfinite(m.train_loss) for m in result.curve[1:])
    assert result.curve[-1].metrics["val_loss"] < 0.9 * result.curve[0].metrics["val_loss"]
    assert result.environment["task"] == kind


def test_custom_loss_module_trains(
    tmp_path, default_strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"cubic_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            import tensorflow as tf

            def abs_cubed(y_true, y_pred):
                return tf.reduce_mean(tf.abs(y_true - y_pred) ** 3, axis=-1)
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    workload = TaskWorkload("regression")
    result, initial, data = run(workload, default_strategy, monkeypatch, loss=f"{name}:abs_cubed")

    cubed = (np.abs(initial - data.y_val) ** 3).mean(1).mean()
    assert result.curve[0].metrics["val_loss"] == pytest.approx(cubed, rel=1e-5)
    assert result.environment["loss"] == f"{name}:abs_cubed"
    assert result.curve[-1].metrics["val_loss"] < 0.9 * result.curve[0].metrics["val_loss"]


def test_unknown_target_metric_fails_before_any_step(
    default_strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real_run = session_module.Session.run
    monkeypatch.setattr(
        session_module.Session, "run", lambda self, args: calls.append(1) or real_run(self, args)
    )
    workload = TaskWorkload("binary")
    spec = spec_for(workload.task, target=Target.parse("val_mse<=0.1"))

    data = workload.load()

    with pytest.raises(
        UsageError, match=r"unknown metric 'val_mse'.*reports val_loss, val_accuracy"
    ):
        train(
            spec,
            data,
            lambda: workload.build_model("mlp", data),
            *default_strategy,
            task=workload.task,
        )
    assert calls == []


def test_divergence_is_a_non_finite_loss(default_strategy, monkeypatch) -> None:
    workload = TaskWorkload("regression")
    result, _, _ = run(
        workload,
        default_strategy,
        monkeypatch,
        optimizer=OptimizerSpec(name="sgd", learning_rate=1e4),
        budget=Budget(max_steps=200),
    )

    assert result.state is TrialState.DIVERGED
    assert result.steps_run < 200
