"""The gradient noise scale: the two-batch-size estimator (pure) and the trainer's measurement
on a linear regression whose |G|^2 and tr(Sigma) are computed exactly from the per-example
gradients (the learning rate is ~0, so the parameters, and the truth, stay put)."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec
from study.errors import UsageError
from study.trainer.inputs import MeasuredSteps, chunk_loop
from study.trainer.loop import train
from study.trainer.noise import BLOCK_STEPS, KEYS, STEP_DECAY, WINDOW_STEPS, NoiseScale, unbiased
from study.workloads import Dataset
from study.workloads.task import Task
from tests.fakes import tabular_spec
from tests.trainer.conftest import run_script

# -- the estimator -------------------------------------------------------------------------------


def test_unbiased_recovers_the_gradient_and_trace_from_expected_norms() -> None:
    grad_sq, trace = 2.5, 400.0
    expected = {b: grad_sq + trace / b for b in (16, 64)}  # E|G_B|^2 = |G|^2 + tr(Sigma)/B
    assert unbiased(expected[16], expected[64], 16, 64) == pytest.approx((grad_sq, trace))
    with pytest.raises(ValueError, match="b_small < b_big"):
        unbiased(1.0, 1.0, 64, 64)


def test_moving_averages_divide_numerator_and_denominator_separately() -> None:
    noise = NoiseScale(b_small=8, b_big=16)
    assert noise.estimate() == {}
    # Two steps whose per-step ratios average to something else than the ratio of averages.
    g2 = [(1.0 + 80.0 / 8, 1.0 + 80.0 / 16), (3.0 + 40.0 / 8, 3.0 + 40.0 / 16)]
    noise.update([s for s, _ in g2], [b for _, b in g2])
    noise.update([math.nan], [1.0])  # skipped
    out = noise.estimate()
    assert noise.steps == 2
    weights = np.array([noise.decay, 1.0])  # the later step weighs more; bias-corrected
    grad_sq = float(np.average([1.0, 3.0], weights=weights))
    trace = float(np.average([80.0, 40.0], weights=weights))
    assert out["grad_sq"] == pytest.approx(grad_sq)
    assert out["trace_sigma"] == pytest.approx(trace)
    assert out["b_simple"] == pytest.approx(trace / grad_sq)


# -- the trainer's measurement against the exact truth ---------------------------------------


def linear_problem(n: int = 8192, d: int = 8, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    w = rng.normal(size=(d,)).astype(np.float32)
    y = (x @ w + rng.normal(scale=8.0, size=n)).astype(np.float32)
    return Dataset(x, y, x[:256], y[:256], num_classes=1)


def linear_model(d: int) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((d,)),
            keras.layers.Dense(1, kernel_initializer="zeros", bias_initializer="zeros"),
        ]
    )


def exact_noise_scale(data: Dataset, kernel: np.ndarray, bias: float) -> float:
    """tr(Sigma) / |G|^2 of the per-example gradients of (x.w + b - y)^2 over the training set."""
    x, y = data.x_train.astype(np.float64), data.y_train.astype(np.float64)
    residual = x @ kernel.astype(np.float64).ravel() + bias - y
    per_example = np.column_stack([2 * residual[:, None] * x, 2 * residual])  # [n, d + 1]
    mean = per_example.mean(axis=0)
    trace = ((per_example - mean) ** 2).sum(axis=1).mean()
    return float(trace / (mean @ mean))


def measure(data: Dataset, strategy, batch: int = 64, steps: int = 8000) -> dict[str, float]:
    """B_simple after ``steps`` steps (500 measured: one step in the default 16)."""
    spec = tabular_spec(
        batch_size=batch,
        optimizer=OptimizerSpec("sgd", 1e-9),  # the parameters (and the truth) stay put
        target=Target.parse("val_mse<=0"),
        budget=Budget(max_steps=steps),
        cadence=EvalCadence.parse(str(steps)),
        noise_scale=True,
    )
    result = train(
        spec,
        data,
        lambda: linear_model(data.input_shape[0]),
        *strategy,
        task=Task.regression(target="val_mse<=0"),
    )
    assert [set(m.noise) for m in result.curve[1:]] == [set(KEYS)]
    assert result.curve[0].noise == {}  # no step yet
    return dict(result.curve[-1].noise)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_trainer_recovers_the_exact_noise_scale_on_one_device(default_strategy, seed) -> None:
    data = linear_problem(seed=seed)
    truth = exact_noise_scale(data, np.zeros(8), 0.0)
    assert 20 < truth < 2000  # a problem where both batch sizes see signal and noise

    measured = measure(data, default_strategy)

    assert measured["b_simple"] == pytest.approx(truth, rel=0.10)
    assert measured["b_simple_low"] < measured["b_simple"] < measured["b_simple_high"]
    assert measured["b_simple_low"] <= truth <= measured["b_simple_high"]


def test_noise_scale_needs_an_even_batch_on_one_replica(default_strategy) -> None:
    data = linear_problem(n=256)
    with pytest.raises(UsageError, match="batch size 63 is odd"):
        measure(data, default_strategy, batch=63, steps=2)


MIRRORED_SCRIPT = """
import json
import numpy as np
import tensorflow as tf
from study.strategies import HostInfo, build_strategy, configure_devices, resolve
configure_devices(tf, 2)
from tests.trainer.test_noise_scale import exact_noise_scale, linear_problem, measure

resolved = resolve("mirrored:2", HostInfo())
strategy = (build_strategy(tf, resolved), resolved)
out = {}
for seed in (0, 1):
    data = linear_problem(seed=seed)
    out[seed] = [exact_noise_scale(data, np.zeros(8), 0.0), measure(data, strategy)["b_simple"]]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_mirrored_replicas_give_the_exact_noise_scale() -> None:
    """On two logical CPUs (a subprocess: devices are fixed when TensorFlow starts) the
    per-replica gradients are the small batch and the all-reduced one the big batch."""
    for truth, measured in run_script(MIRRORED_SCRIPT).values():
        assert measured == pytest.approx(truth, rel=0.10)


# -- how often it is measured ---------------------------------------------------------------------


@pytest.mark.parametrize("every", [1, 2, 16])
def test_memory_and_window_span_the_same_training_steps_at_any_cadence(every: int) -> None:
    noise = NoiseScale(b_small=8, b_big=16, every=every)
    assert noise.decay == pytest.approx(STEP_DECAY**every)
    assert noise.decay ** (1600 / every) == pytest.approx(0.99**100, rel=1e-6)
    assert noise.window * every == pytest.approx(WINDOW_STEPS, abs=every)
    assert noise.block * every == pytest.approx(BLOCK_STEPS, abs=every)
    with pytest.raises(ValueError, match="every >= 1"):
        NoiseScale(b_small=8, b_big=16, every=0)


@pytest.mark.parametrize(
    ("every", "first", "steps"), [(4, 3, 10), (4, 0, 9), (16, 5, 3), (1, 7, 4)]
)
def test_a_chunk_measures_exactly_the_steps_whose_number_is_a_multiple(
    default_strategy, every: int, first: int, steps: int
) -> None:
    """Measured steps (global number a multiple of ``every``) return their statistics; the
    others are plain steps with NaN rows, wherever the chunk starts."""
    strategy = default_strategy[0]
    counter = tf.Variable(first, dtype=tf.int64)
    plain = lambda x, y: tf.reduce_sum(x)  # noqa: E731
    measured = lambda x, y: (tf.reduce_sum(x) + 1000.0, tf.stack([tf.reduce_sum(x), -1.0]))  # noqa: E731
    step = MeasuredSteps(plain, measured, lambda: counter, every, extras=2)

    @tf.function
    def run(n: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        def batch(i: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            return tf.fill([1], tf.cast(i, tf.float32)), tf.zeros([1])

        return chunk_loop(strategy, step, n, batch)

    losses, stats = (t.numpy() for t in run(tf.constant(steps)))
    hits = [i for i in range(steps) if (first + i) % every == 0]
    assert stats.shape == (steps, 2)
    assert [i for i in range(steps) if not np.isnan(stats[i, 0])] == hits
    assert [i for i in range(steps) if losses[i] >= 1000] == hits
    assert stats[hits, 0].tolist() == [float(i) for i in hits]
    assert np.isnan(np.delete(stats, hits, axis=0)).all()
