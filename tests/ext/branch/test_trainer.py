"""Where a branch evaluates in its window (`study.ext.branch.trainer.evaluation_steps`)."""

from __future__ import annotations

from study.ext.branch.trainer import evaluation_steps


def test_evaluations_spread_over_the_windows_last_quarter_ending_at_its_end() -> None:
    assert evaluation_steps(128, 4) == (104, 112, 120, 128)
    assert evaluation_steps(128, 1) == (128,)
    assert evaluation_steps(10, 4) == (8, 9, 10)  # distinct steps only
    assert evaluation_steps(1, 4) == (1,)
    assert evaluation_steps(3, 0) == (3,)


def test_batchnorm_takes_fixed_examples_statistics_and_nothing_else_changes() -> None:
    import types

    import keras
    import numpy as np
    import tensorflow as tf

    from study.ext.branch.trainer import batchnorm_layers, recalibrate_batchnorm
    from study.workloads.base import Dataset

    inner = keras.Sequential([keras.layers.Dense(4), keras.layers.BatchNormalization()])
    inputs = keras.Input((3,))
    model = keras.Model(
        inputs, keras.layers.Dense(2)(keras.layers.BatchNormalization()(inner(inputs)))
    )
    layers = batchnorm_layers(model)
    assert len(layers) == 2  # the nested one too
    rng = np.random.default_rng(0)
    x = (3.0 + 2.0 * rng.standard_normal((3000, 3))).astype("float32")
    data = Dataset(x, np.zeros(3000, "int32"), x[:10], np.zeros(10, "int32"), 2)
    weights = [w.numpy().copy() for w in model.trainable_weights]
    session = types.SimpleNamespace(model=model, data=data, strategy=tf.distribute.get_strategy())
    assert recalibrate_batchnorm(session, examples=2048) == 2
    first = inner.layers[1]
    hidden = inner.layers[0](x[:2048]).numpy()
    np.testing.assert_allclose(first.moving_mean.numpy(), hidden.mean(axis=0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(first.moving_variance.numpy(), hidden.var(axis=0), rtol=1e-3)
    assert all(layer.momentum == 0.99 for layer in layers)  # given back
    for before, after in zip(weights, model.trainable_weights, strict=True):
        np.testing.assert_array_equal(before, after.numpy())
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    session.model = plain
    assert recalibrate_batchnorm(session) == 0
