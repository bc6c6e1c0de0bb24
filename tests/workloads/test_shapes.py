"""The shapes workload: drawn images, their cache, the two models and a `study train` smoke run."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import study.workloads.shapes as shapes_module
from study.errors import UsageError
from study.workloads import available, get_workload
from study.workloads.shapes import CLASSES, render
from tests.cli import study

SMALL = {"samples": 300, "size": 16}


def test_registered_as_a_builtin() -> None:
    assert "shapes" in available()
    workload = get_workload("shapes")
    assert workload.models == ("resnet", "cnn")
    assert workload.default_target == "val_accuracy>=0.8"
    assert workload.options == {"samples": 12_500, "size": 16, "noise": 0.15, "seed": 0}


def test_render_shapes_dtype_and_balanced_labels() -> None:
    images, labels = render(205, size=12, noise=0.05, seed=3)
    assert images.shape == (205, 12, 12, 3)
    assert images.dtype == np.uint8
    assert labels.dtype == np.int32
    counts = np.bincount(labels, minlength=len(CLASSES))
    assert counts.min() == 20 and counts.max() == 21  # 205 = 10 x 20 + 5
    assert images.min() < 40 and images.max() > 215  # dark and light colours both occur


def test_render_is_deterministic_per_seed_and_leaves_global_rng_alone() -> None:
    np.random.seed(123)
    expected = np.random.rand()
    np.random.seed(123)
    first = render(50, size=16, noise=0.05, seed=1)
    assert np.random.rand() == expected
    again = render(50, size=16, noise=0.05, seed=1)
    other = render(50, size=16, noise=0.05, seed=2)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other[0])


def test_noise_option_adds_pixel_noise() -> None:
    clean, labels = render(50, size=16, noise=0.0, seed=1)
    noisy, same_labels = render(50, size=16, noise=0.2, seed=1)
    np.testing.assert_array_equal(labels, same_labels)
    difference = noisy.astype(float) - clean.astype(float)
    assert 20 < difference.std() < 60  # 0.2 x 255 = 51, less where clipped at 0 or 255


def test_classes_are_different_shapes() -> None:
    """The signed distance functions disagree where their shapes differ (negative = inside)."""
    origin, corner = np.zeros(1), np.full(1, 0.68)
    inside_at_origin = {name: bool(sdf(origin, origin)[0] < 0) for name, sdf in CLASSES.items()}
    assert not inside_at_origin["ring"] and not inside_at_origin["frame"]  # hollow
    assert inside_at_origin["disk"] and inside_at_origin["square"] and inside_at_origin["plus"]
    assert CLASSES["square"](corner, corner)[0] < 0 < CLASSES["disk"](corner, corner)[0]
    assert CLASSES["plus"](corner, corner)[0] > 0
    shapes = [
        np.sign(sdf(*np.meshgrid(np.linspace(-1, 1, 21), np.linspace(-1, 1, 21))))
        for sdf in CLASSES.values()
    ]
    pairs = [(a, b) for a in range(len(shapes)) for b in range(a + 1, len(shapes))]
    assert all(not np.array_equal(shapes[a], shapes[b]) for a, b in pairs)


def test_load_splits_and_scales(cache_dir: Path) -> None:
    workload = get_workload("shapes", {**SMALL, "size": 12})
    data = workload.load()
    assert data.x_train.shape == (240, 12, 12, 3)
    assert data.x_val.shape == (60, 12, 12, 3)
    assert data.y_train.shape == (240,) and data.y_val.shape == (60,)
    assert data.x_train.dtype == data.x_val.dtype == np.float32
    assert data.y_train.dtype == data.y_val.dtype == np.int32
    assert data.input_shape == (12, 12, 3)
    assert data.num_classes == 10
    assert data.x_train.min() >= 0.0 and data.x_train.max() <= 1.0
    images, labels = render(300, size=12, noise=workload.options["noise"], seed=0)
    np.testing.assert_array_equal(data.y_val, labels[240:])
    np.testing.assert_allclose(data.x_val, images[240:] / np.float32(255.0))


def test_cache_is_written_then_reused(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workload = get_workload("shapes", SMALL)
    assert workload.cache_path.parent == cache_dir
    first = workload.load()
    assert workload.cache_path.is_file()
    assert [p.name for p in cache_dir.iterdir()] == [workload.cache_path.name]  # no temp files

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("redrawn although cached")

    monkeypatch.setattr(shapes_module, "render", fail)
    second = get_workload("shapes", SMALL).load()
    np.testing.assert_array_equal(first.x_train, second.x_train)
    np.testing.assert_array_equal(first.y_val, second.y_val)


def test_cache_is_keyed_by_every_option(cache_dir: Path) -> None:
    variants = [SMALL, {**SMALL, "samples": 400}, {**SMALL, "size": 12}]
    variants += [{**SMALL, "noise": 0.1}, {**SMALL, "seed": 1}]
    assert len({get_workload("shapes", o).cache_path for o in variants}) == len(variants)


def test_corrupt_cache_is_redrawn(cache_dir: Path) -> None:
    workload = get_workload("shapes", SMALL)
    expected = workload.load()
    workload.cache_path.write_bytes(b"not a zip file")
    with pytest.warns(UserWarning, match="unreadable shapes cache"):
        again = workload.load()
    np.testing.assert_array_equal(expected.x_train, again.x_train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        workload.load()  # the rewritten cache is valid


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"noise": -0.1}, "workload option 'noise' must be a number in [0, 1) (got -0.1)"),
        ({"noise": "lots"}, "workload option 'noise' must be a number in [0, 1) (got 'lots')"),
        ({"size": 4}, "workload option 'size' must be an integer >= 8 (got 4)"),
        ({"samples": 10}, "workload option 'samples' must be an integer >= 100 (got 10)"),
    ],
)
def test_bad_options_name_the_option(options: dict, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        get_workload("shapes", options)
    assert str(excinfo.value) == message


def test_noise_zero_is_accepted() -> None:
    assert get_workload("shapes", {"noise": 0}).options["noise"] == 0.0


@pytest.mark.parametrize(
    ("model", "params", "adds"),
    [
        # stem 3x3x3x16 + BN; block 16: 2 x (3x3x16x16 + BN); block 32: 1x1 projection + BN,
        # 3x3x16x32 + BN, 3x3x32x32 + BN; Dense 32 -> 10. BN holds 4 numbers per channel.
        ("resnet", 432 + 64 + 2 * (2304 + 64) + (512 + 128) + (4608 + 128) + (9216 + 128) + 330, 2),
        ("cnn", (432 + 16) + (2304 + 16) + (4608 + 32) + (9216 + 32) + 330, 0),
    ],
)
def test_models_build_with_logits_per_class(
    model: str, params: int, adds: int, cache_dir: Path
) -> None:
    workload = get_workload("shapes", SMALL)
    data = workload.load()
    net = workload.build_model(model, data)
    assert net.count_params() == params
    assert sum(type(layer).__name__ == "Add" for layer in net.layers) == adds  # the skips
    logits = np.asarray(net(data.x_val[:3]))
    assert logits.shape == (3, 10)
    assert np.isfinite(logits).all()


@pytest.mark.slow
def test_study_train_smoke_run(tmp_path: Path) -> None:
    args = ["--workload", "shapes", "--workload-option", "samples=200", "--batch-size", "16"]
    args += ["--lr", "0.05", "--max-steps", "6", "--strategy", "default", "--no-track"]
    proc = study("train", *args, "--json", cwd=tmp_path, timeout=240)  # its cache: tmp_path/cache
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["steps_run"] <= 6
    assert out["status"] in ("reached", "not_reached")
    assert 0.0 <= out["final"]["val_accuracy"] <= 1.0
    assert list((tmp_path / "cache").glob("shapes-*.npz"))  # the images were cached
    assert not (tmp_path / "mlruns").exists()
