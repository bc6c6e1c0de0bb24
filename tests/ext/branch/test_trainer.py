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


def test_the_reference_is_evaluated_as_the_branches_are(monkeypatch) -> None:
    """With ``recalibrate`` every evaluation of the reference follows BatchNorm's recalibration
    (the branches' evaluations do), so its progress over a window is read the same way."""
    import types

    from study.ext.branch import trainer
    from study.ext.branch.jobs import ReferenceJob

    calls: list[str] = []

    class Session:
        strategy = types.SimpleNamespace(num_replicas_in_sync=1)

        def start(self, seed: int, batch_size: int) -> None:
            calls.append("start")

        def evaluate(self) -> dict[str, float]:
            calls.append("evaluate")
            return {"val_loss": 1.0, "val_accuracy": 0.5}

        def snapshot(self) -> tuple[list, int]:
            return [], 0

    def train(session: Session, steps: int) -> tuple[list[float], None, float]:
        calls.append(f"train {steps}")
        return [1.0] * steps, None, 0.0

    monkeypatch.setattr(trainer, "_train", train)
    monkeypatch.setattr(trainer, "recalibrate_batchnorm", lambda s: calls.append("recalibrate"))
    cadence = types.SimpleNamespace(next_step=lambda step: step + 2)
    settings = types.SimpleNamespace(seed=0, cadence=cadence, noise_scale=False)
    never = types.SimpleNamespace(met_by=lambda metrics: False)
    spec = types.SimpleNamespace(settings=settings, batch_size=16, target=never)
    for recalibrate in (True, False):
        calls.clear()
        outcome = trainer.run_reference(
            ReferenceJob(spec, (2, 4), recalibrate=recalibrate), Session()
        )
        assert [c["step"] for c in outcome.curve] == [0, 2, 4]
        evaluations = [i for i, c in enumerate(calls) if c == "evaluate"]
        assert len(evaluations) == 3
        if recalibrate:
            assert all(calls[i - 1] == "recalibrate" for i in evaluations), calls
        else:
            assert "recalibrate" not in calls
