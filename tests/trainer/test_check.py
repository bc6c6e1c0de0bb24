"""`check_workload` in one process: a passing workload and one line for each way it can fail."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from study.errors import FieldError, UsageError
from study.trainer.check import WorkloadCheck, check_workload
from study.workloads.base import Dataset, Workload
from study.workloads.options import Option, integer

HERE = __name__


class Good(Workload):
    """Two separable blobs; option ``rows``; model ``mlp`` (and ``wide``: three outputs)."""

    name: ClassVar[str] = "blobs"
    models: ClassVar[tuple[str, ...]] = ("mlp", "wide", "broken", "nan")
    option_specs: ClassVar[dict[str, Option]] = {"rows": Option(200, integer(minimum=10))}

    def load(self) -> Any:
        rng = np.random.default_rng(0)
        rows = self.options["rows"]
        y = rng.integers(0, 2, rows).astype("int32")
        x = (rng.normal(size=(rows, 4)) + 2 * y[:, None]).astype("float32")
        cut = rows * 4 // 5
        return Dataset(x[:cut], y[:cut], x[cut:], y[cut:], num_classes=2)

    def build_model(self, model: str, data: Any) -> Any:
        import keras

        if model == "broken":
            raise RuntimeError("no such layer")
        layers = [keras.Input(data.input_shape), keras.layers.Dense(3 if model == "wide" else 2)]
        if model == "nan":
            layers.append(keras.layers.Lambda(lambda t: t * np.inf))
        return keras.Sequential(layers)


class LoadFails(Good):
    def load(self) -> Any:
        raise KeyError("column 'y'")


class LoadsDict(Good):
    def load(self) -> Any:
        return {"x": np.zeros((4, 2))}


class NoValidation(Good):
    def load(self) -> Any:
        data = super().load()
        return Dataset(data.x_train, data.y_train, data.x_val[:0], data.y_val[:0], 2)


class LabelTooLarge(Good):
    def load(self) -> Any:
        data = super().load()
        return Dataset(data.x_train, data.y_train + 2, data.x_val, data.y_val, 2)


def test_a_good_workload_passes_with_a_summary() -> None:
    check = check_workload(f"{HERE}:Good", {"rows": "100"}, batch_size=16)
    assert isinstance(check, WorkloadCheck)
    assert (check.workload, check.model, check.task) == ("blobs", "mlp", "multiclass")
    assert (check.train_rows, check.val_rows, check.input_shape) == (80, 20, (4,))
    assert (check.input_dtype, check.outputs, check.parameters) == ("float32", 2, 10)
    assert np.isfinite(check.loss) and set(check.metrics) >= {"val_loss", "val_accuracy"}
    assert check.summary().startswith("blobs/mlp: 80 train and 20 validation rows of (4,)")


@pytest.mark.parametrize(
    ("spec", "kwargs", "field", "message"),
    [
        ("Good", {"options": {"colour": 1}}, "workload_options", "takes no option 'colour'"),
        ("Good", {"options": {"rows": 2}}, "workload_options.rows", "must be an integer >= 10"),
        ("Missing", {}, "workload", "has no attribute 'Missing'"),
        ("Good", {"model": "rnn"}, "model", "unknown model 'rnn' for workload 'blobs'"),
        ("Good", {"model": "broken"}, "model", "building model 'broken' of workload 'blobs'"),
        ("Good", {"model": "wide"}, "model", "the model outputs 3 value(s) per example"),
        ("Good", {"strategy": "multi_worker_mirrored"}, "strategy", "runs in one process"),
        ("Good", {"strategy": "mirrored:0"}, "strategy", ""),
    ],
)
def test_field_errors_name_the_field(spec: str, kwargs: dict, field: str, message: str) -> None:
    options = kwargs.pop("options", None)
    with pytest.raises(FieldError) as excinfo:
        check_workload(f"{HERE}:{spec}", options, **kwargs)
    assert excinfo.value.field == field
    assert message in str(excinfo.value)


@pytest.mark.parametrize(
    ("spec", "kwargs", "message"),
    [
        ("LoadFails", {}, "workload 'blobs': load() failed (KeyError: \"column 'y'\"); fix load()"),
        ("LoadsDict", {}, "load() returned dict; return a study.workloads.base.Dataset("),
        ("NoValidation", {}, "x_val has shape (0, 4): the val split is empty"),
        ("LabelTooLarge", {}, "y_train holds label 3, but num_classes is 2"),
        ("Good", {"model": "nan"}, "the loss after one step is nan"),
    ],
)
def test_each_problem_is_one_line(spec: str, kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        check_workload(f"{HERE}:{spec}", **kwargs)
    text = str(excinfo.value)
    assert message in text and "\n" not in text
