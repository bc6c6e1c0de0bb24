"""The built-in generated workloads: tabular, mnist1d and digits."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import study.workloads.mnist1d as mnist1d_module
from study.errors import UsageError
from study.workloads import get_workload
from study.workloads.base import Dataset

# Small but real configurations, so that the suite stays fast.
CONFIGS = {
    "tabular": {"rows": 1000},
    "mnist1d": {"samples": 500},
    "digits": {},
}
EXPECTED = {  # (train rows, val rows, features, classes)
    "tabular": (800, 200, 20, 2),
    "mnist1d": (400, 100, 40, 10),
    "digits": (1437, 360, 64, 10),
}


@pytest.fixture(params=sorted(CONFIGS))
def loaded(request: pytest.FixtureRequest, cache_dir: Path) -> tuple[str, Dataset]:
    name = request.param
    return name, get_workload(name, CONFIGS[name]).load()


def test_shapes_and_dtypes(loaded: tuple[str, Dataset]) -> None:
    name, data = loaded
    n_train, n_val, features, classes = EXPECTED[name]
    assert data.x_train.shape == (n_train, features)
    assert data.x_val.shape == (n_val, features)
    assert data.y_train.shape == (n_train,)
    assert data.y_val.shape == (n_val,)
    assert data.x_train.dtype == data.x_val.dtype == np.float32
    assert data.y_train.dtype == data.y_val.dtype == np.int32
    assert data.num_classes == classes
    assert data.input_shape == (features,)
    assert set(np.unique(data.y_train)) == set(range(classes))
    assert set(np.unique(data.y_val)) <= set(range(classes))
    assert np.isfinite(data.x_train).all() and np.isfinite(data.x_val).all()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_seed_same_arrays(name: str, cache_dir: Path) -> None:
    first = get_workload(name, CONFIGS[name]).load()
    # mnist1d would read its cache the second time; regenerate to compare generations
    for path in cache_dir.glob("*.npz"):
        path.unlink()
    second = get_workload(name, CONFIGS[name]).load()
    for field in ("x_train", "y_train", "x_val", "y_val"):
        np.testing.assert_array_equal(getattr(first, field), getattr(second, field))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_other_seed_other_arrays(name: str, cache_dir: Path) -> None:
    first = get_workload(name, CONFIGS[name]).load()
    other = get_workload(name, {**CONFIGS[name], "seed": 7}).load()
    assert not np.array_equal(first.x_train, other.x_train)


def test_unknown_model_is_refused() -> None:
    with pytest.raises(
        UsageError,
        match=r"^model: unknown model 'rnn' for workload 'mnist1d'; choose from mlp, cnn",
    ):
        get_workload("mnist1d").check_model("rnn")


# --- tabular -----------------------------------------------------------------------------------


def test_tabular_defaults_are_the_seed_table() -> None:
    data = get_workload("tabular").load()
    assert data.x_train.shape == (8000, 20)
    assert data.x_val.shape == (2000, 20)


def test_tabular_is_min_max_normalised() -> None:
    data = get_workload("tabular", {"rows": 1000, "features": 5}).load()
    x = np.concatenate([data.x_train, data.x_val])
    assert x.shape == (1000, 5)
    np.testing.assert_array_equal(x.min(axis=0), np.zeros(5, np.float32))
    np.testing.assert_array_equal(x.max(axis=0), np.ones(5, np.float32))


def test_tabular_classes_are_balanced_and_split_follows_option() -> None:
    data = get_workload("tabular", {"rows": 2000, "val_fraction": 0.25}).load()
    assert len(data.y_val) == 500
    assert 0.45 < np.concatenate([data.y_train, data.y_val]).mean() < 0.55


@pytest.mark.slow
def test_tabular_mlp_reaches_default_target_quickly() -> None:
    import keras

    workload = get_workload("tabular")
    data = workload.load()
    keras.utils.set_random_seed(0)
    model = workload.build_model("mlp", data)
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    _, start = model.evaluate(data.x_val, data.y_val, batch_size=1000, verbose=0)
    history = model.fit(
        data.x_train,
        data.y_train,
        batch_size=64,
        epochs=8,  # 1,000 steps; the target is first met after 250-650
        validation_data=(data.x_val, data.y_val),
        verbose=0,
    )
    assert 0.35 < start < 0.65  # not trivial: chance at step 0
    assert workload.default_target == "val_accuracy>=0.9"
    assert max(history.history["val_accuracy"]) >= 0.9


# --- mnist1d -----------------------------------------------------------------------------------


def test_mnist1d_cache_is_written_then_reused(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = get_workload("mnist1d", {"samples": 500, "seed": 1})
    assert workload.cache_path.parent == cache_dir
    first = workload.load()
    assert workload.cache_path.is_file()
    assert [p.name for p in cache_dir.iterdir()] == [workload.cache_path.name]  # no temp files

    def fail(*args: object) -> None:
        raise AssertionError("regenerated although cached")

    monkeypatch.setattr(mnist1d_module, "_generate", fail)
    second = get_workload("mnist1d", {"samples": 500, "seed": 1}).load()
    np.testing.assert_array_equal(first.x_train, second.x_train)
    np.testing.assert_array_equal(first.y_val, second.y_val)


def test_mnist1d_cache_is_keyed_by_options(cache_dir: Path) -> None:
    paths = {
        get_workload("mnist1d", options).cache_path
        for options in ({"samples": 500}, {"samples": 600}, {"samples": 500, "seed": 1})
    }
    assert len(paths) == 3


def test_mnist1d_corrupt_cache_is_regenerated(cache_dir: Path) -> None:
    workload = get_workload("mnist1d", {"samples": 500})
    expected = workload.load()
    workload.cache_path.write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match="unreadable MNIST-1D cache"):
        again = workload.load()
    np.testing.assert_array_equal(expected.x_train, again.x_train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        workload.load()  # the rewritten cache is valid


def test_mnist1d_leaves_global_rng_alone(cache_dir: Path) -> None:
    np.random.seed(123)
    expected = np.random.rand()
    np.random.seed(123)
    get_workload("mnist1d", {"samples": 500}).load()
    assert np.random.rand() == expected


# --- digits ------------------------------------------------------------------------------------


def test_digits_scaled_and_stratified() -> None:
    data = get_workload("digits").load()
    x = np.concatenate([data.x_train, data.x_val])
    assert x.min() == 0.0 and x.max() == 1.0
    counts = np.bincount(data.y_val, minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37  # ~20% of ~180 per class


# --- models ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "model", "params"),
    [
        ("tabular", "mlp", 20 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2),
        ("mnist1d", "mlp", 40 * 100 + 100 + 100 * 100 + 100 + 100 * 10 + 10),
        ("mnist1d", "cnn", (5 * 1 * 25 + 25) + 2 * (5 * 25 * 25 + 25) + (5 * 25 * 10 + 10)),
        ("digits", "mlp", 64 * 64 + 64 + 64 * 10 + 10),
    ],
)
def test_models_build_with_logits_per_class(
    name: str, model: str, params: int, cache_dir: Path
) -> None:
    workload = get_workload(name, CONFIGS[name])
    data = workload.load()
    net = workload.build_model(model, data)
    assert net.count_params() == params  # weights exist before any call
    logits = np.asarray(net(data.x_val[:3]))
    assert logits.shape == (3, data.num_classes)
