"""The task contract: metrics, directions, losses and target checks, without TensorFlow."""

from __future__ import annotations

import pytest

from study.config.rules import FieldError
from study.config.target import Target
from study.workloads import get_workload
from study.workloads.task import Direction, Task, TaskKind, direction_of


def test_builtin_tasks_report_their_metrics() -> None:
    assert Task.multiclass().keys == ("val_loss", "val_accuracy", "val_error")
    assert Task.binary().keys == ("val_loss", "val_accuracy", "val_error", "val_auc")
    assert "val_exact_match" in Task.multilabel().keys
    assert Task.regression().keys == ("val_loss", "val_mse", "val_rmse", "val_mae")
    assert Task.regression(loss="mae").loss == "mae"
    assert not Task.regression().from_logits and Task.binary().from_logits


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("val_loss", Direction.MINIMIZE),
        ("val_auc", Direction.MAXIMIZE),
        ("val_mean_squared_error", Direction.MINIMIZE),
        ("val_precision", Direction.MAXIMIZE),
        ("val_top_k_categorical_accuracy", Direction.MAXIMIZE),
        ("val_hinge", Direction.MINIMIZE),
        ("val_msle", Direction.MINIMIZE),
        ("val_mape", Direction.MINIMIZE),
        ("val_logcosh", Direction.MINIMIZE),
        ("val_kld", Direction.MINIMIZE),
        ("val_recall", Direction.MAXIMIZE),
    ],
)
def test_direction_of_a_metric_known_by_name(name: str, direction: Direction) -> None:
    assert direction_of(name) is direction


def test_unknown_target_metric_lists_the_reported_ones() -> None:
    with pytest.raises(FieldError) as err:
        Task.multiclass().check_target(Target.parse("nosuchmetric>=0.5"), workload="mnist1d")
    assert str(err.value) == (
        "target: unknown metric 'nosuchmetric'; workload 'mnist1d' reports val_loss, "
        "val_accuracy, val_error"
    )


@pytest.mark.parametrize(
    ("task", "target", "fix"),
    [
        (Task.multiclass(), "val_loss>=0.3", "write val_loss<=0.3"),
        (Task.binary(), "val_auc<0.9", "write val_auc>0.9"),
        (Task.regression(), "val_mse>=0.1", "write val_mse<=0.1"),
    ],
)
def test_target_against_the_metric_direction_is_refused(task: Task, target: str, fix: str) -> None:
    with pytest.raises(FieldError, match=fix):
        task.check_target(Target.parse(target), workload="w")


def test_targets_in_the_metric_direction_pass() -> None:
    Task.binary().check_target(Target.parse("val_auc>=0.9"), workload="w")
    Task.regression().check_target(Target.parse("val_mae<0.5"), workload="w")


def test_losses_must_suit_the_task() -> None:
    assert Task.multiclass().with_loss("my.mod:loss").custom_loss
    assert Task.multilabel().with_loss("binary_crossentropy").kind is TaskKind.MULTILABEL
    with pytest.raises(FieldError, match="does not suit a multiclass task"):
        Task.multiclass().with_loss("mse")
    with pytest.raises(FieldError, match="unknown loss 'l2'"):
        Task.regression().with_loss("l2")
    with pytest.raises(FieldError, match="expected module:callable"):
        Task.regression().with_loss(":f")


def test_named_tasks_and_extra_metrics() -> None:
    assert Task.named("binary") == Task.binary()
    with pytest.raises(FieldError, match="unknown task 'ranking'"):
        Task.named("ranking")
    task = Task.multiclass().with_metrics(
        (Task.binary().metric("val_auc"), Task.multiclass().metric("val_loss"))
    )
    assert task.keys == ("val_loss", "val_accuracy", "val_error", "val_auc")


def test_callable_loss_is_described_by_its_import_path() -> None:
    def hinge(y_true, y_pred):  # pragma: no cover - never called
        return y_pred

    described = Task.binary().with_loss(hinge).describe()
    assert described["loss"].endswith("hinge") and described["task"] == "binary"


def test_workload_checks_targets_through_its_task() -> None:
    workload = get_workload("mnist1d", {"samples": 200})
    assert workload.metrics == ("val_loss", "val_accuracy", "val_error")
    with pytest.raises(FieldError, match="lower val_error is better"):
        workload.check_target(Target.parse("val_error>0.5"))


def test_open_metrics_let_a_compiled_models_metric_through_with_its_direction() -> None:
    task = Task.multiclass()
    task.check_target(Target.parse("val_top3>=0.9"), workload="w", open_metrics=True)
    with pytest.raises(FieldError, match="lower val_hinge is better"):
        task.check_target(Target.parse("val_hinge>=0.2"), workload="w", open_metrics=True)
