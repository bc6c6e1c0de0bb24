"""Precision and XLA as trial settings: resolution per device, the dtype policy scoped to the
model build, loss scaling for mixed_float16, and a few real steps of each on the CPU."""

from __future__ import annotations

import math
from typing import Any

import keras
import pytest

from study.config.trial import Budget
from study.results import TrialState
from study.trainer.loop import train
from study.trainer.precision import dtype_policy, resolve_jit, resolve_precision
from study.trainer.session import SessionCache
from study.workloads import get_workload
from tests.fakes import tabular_spec


@pytest.mark.parametrize(
    ("devices", "precision", "jit"),
    [
        (("/cpu:0",), "float32", False),
        (("/cpu:0", "/cpu:1"), "float32", False),
        (("/gpu:0",), "mixed_float16", True),
        (("/gpu:0", "/gpu:1"), "mixed_float16", True),
        (("/tpu",), "mixed_bfloat16", True),
    ],
)
def test_auto_resolves_per_device(devices: tuple[str, ...], precision: str, jit: bool) -> None:
    assert resolve_precision("auto", devices) == precision
    assert resolve_jit("auto", devices) is jit


def test_explicit_settings_win() -> None:
    assert resolve_precision("mixed_bfloat16", ("/cpu:0",)) == "mixed_bfloat16"
    assert resolve_precision("float32", ("/gpu:0",)) == "float32"
    assert resolve_jit("on", ("/cpu:0",)) is True
    assert resolve_jit("off", ("/tpu",)) is False


def test_dtype_policy_is_restored_even_after_an_error() -> None:
    before = keras.config.dtype_policy().name
    with pytest.raises(RuntimeError), dtype_policy("mixed_bfloat16"):
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
        raise RuntimeError("model failed to build")
    assert keras.config.dtype_policy().name == before


def xla_compiled(concrete: Any) -> bool:
    """Whether a concrete function calls a function marked for XLA compilation."""
    graph = concrete.graph.as_graph_def()
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    return any(n.attr["_XlaMustCompile"].b for n in nodes if "_XlaMustCompile" in n.attr)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "jit"),
    [("mixed_bfloat16", "off"), ("float32", "on"), ("mixed_float16", "off")],
)
def test_precision_and_xla_train_on_the_cpu(default_strategy, precision: str, jit: str) -> None:
    workload = get_workload("tabular", {"rows": 2000})
    data = workload.load()
    cache = SessionCache()
    spec = tabular_spec(budget=Budget(max_steps=30), precision=precision, jit_compile=jit)
    policy = keras.config.dtype_policy().name

    result = train(
        spec, data, lambda: workload.build_model("mlp", data), *default_strategy, cache=cache
    )

    session = cache.session
    assert result.state is TrialState.NOT_REACHED
    assert all(math.isfinite(m.train_loss) for m in result.curve[1:])
    assert all(math.isfinite(v) for m in result.curve for v in m.metrics.values())
    assert result.curve[-1].metrics["val_loss"] < result.curve[0].metrics["val_loss"]
    assert result.environment["precision"] == precision
    assert result.environment["jit_compile"] is (jit == "on")
    assert keras.config.dtype_policy().name == policy  # restored after the build
    compute = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}.get(precision, "float32")
    assert session.model.layers[0].compute_dtype == compute
    assert session.model.layers[0].variable_dtype == "float32"
    scaled = isinstance(session.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled is (precision == "mixed_float16")
    assert xla_compiled(session.train_chunk) is (jit == "on")
