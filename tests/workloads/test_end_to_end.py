"""`study train` on the file-backed workloads, end to end: subprocesses of ``python -m study``
on files written into tmp_path (a streamed CSV, a folder of PNGs, TFRecords); the runs that
train go through `study.cli.main` in the test process, the bad input through a process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests import cli
from tests.inprocess import study_here


def study(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m study train ARGS --no-track`` in ``cwd`` with a private cache (a process
    forked from the tests' zygote, `tests.cli.study`)."""
    return cli.study("train", *args, "--no-track", cwd=cwd, timeout=240)


def trained(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "reached", out
    return out


def train_here(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """``study train ARGS --no-track`` through `study.cli.main` in this process, in ``cwd`` with
    a private cache (the trial still trains in a spawned worker)."""
    return study_here(monkeypatch, capsys, "train", *args, "--no-track", cwd=cwd)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("study train: error: ")
    return lines[0].removeprefix("study train: error: ")


def write_tfrecords(path: Path, rows: int, seed: int, width: int = 6) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(rows):
            x = rng.normal(size=width).astype(np.float32)
            feature = {
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x[0] > x[1])])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


@pytest.mark.slow
def test_streamed_csv_regression_reaches_its_mse_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(3000, 3))
    price = 300 + 80 * x[:, 0] - 40 * x[:, 1] * x[:, 2] + rng.normal(0, 5, 3000)
    lines = ["a,b,c,price"] + [f"{a:.4f},{b:.4f},{c:.4f},{p:.2f}" for (a, b, c), p in zip(x, price)]
    (tmp_path / "houses.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = trained(
        train_here(
            monkeypatch,
            capsys,
            *("--workload", "csv", "--csv", "houses.csv", "--label", "price"),
            *("--workload-option", "task=regression", "--workload-option", "streamed=true"),
            *("--batch-size", "32", "--lr", "0.05", "--max-steps", "3000"),
            *("--target", "val_mse<=0.2", "--json"),
            cwd=tmp_path,
        )
    )
    assert out["final"]["val_mse"] <= 0.2
    assert {"val_loss", "val_mse", "val_rmse", "val_mae"} <= set(out["final"])


@pytest.mark.slow
def test_image_folder_trains_the_resnet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(1)
    colours = {"red": (200, 40, 40), "green": (40, 200, 40), "blue": (40, 40, 200)}
    for name, colour in colours.items():
        (tmp_path / "pictures" / name).mkdir(parents=True)
        for i in range(30):
            noise = rng.integers(-70, 70, size=(10, 10, 3))
            pixels = np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(tmp_path / "pictures" / name / f"{i}.png")
    out = trained(
        train_here(
            monkeypatch,
            capsys,
            *("--workload", "images", "--workload-option", "path=pictures"),
            *("--workload-option", "image_size=8", "--model", "resnet"),
            *("--batch-size", "16", "--lr", "0.05", "--max-steps", "400", "--json"),
            cwd=tmp_path,
        )
    )
    assert out["final"]["val_accuracy"] >= 0.9  # the default target


@pytest.mark.slow
def test_tfrecord_binary_reaches_its_auc_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for k in range(2):
        write_tfrecords(tmp_path / f"train-{k}.tfrecord", 600, seed=k)
    write_tfrecords(tmp_path / "val.tfrecord", 300, seed=9)
    out = trained(
        train_here(
            monkeypatch,
            capsys,
            *("--workload", "tfrecord", "--workload-option", "train=train-*.tfrecord"),
            *("--workload-option", "val=val.tfrecord", "--workload-option", "label=y"),
            *("--workload-option", "features=x:float32[6],y:int64[]"),
            *("--workload-option", "task=binary"),
            *("--batch-size", "32", "--lr", "0.05", "--max-steps", "2000", "--json"),
            cwd=tmp_path,
        )
    )
    assert out["final"]["val_auc"] >= 0.9  # the default target


@pytest.mark.slow
def test_tfrecord_spec_mismatch_is_one_line(tmp_path: Path) -> None:
    write_tfrecords(tmp_path / "train.tfrecord", 20, seed=0)
    write_tfrecords(tmp_path / "val.tfrecord", 10, seed=1, width=5)
    proc = study(
        *("--workload", "tfrecord", "--workload-option", "train=train.tfrecord"),
        *("--workload-option", "val=val.tfrecord", "--workload-option", "label=y"),
        *("--workload-option", "features=x:float32[6],y:int64[]"),
        *("--batch-size", "8", "--lr", "0.1"),
        cwd=tmp_path,
    )
    assert one_line_error(proc) == (
        "--workload-option features: val.tfrecord: feature 'x' has 5 float value(s) in its "
        "first record, but the spec float32[6] needs 6"
    )


def test_bad_files_are_refused_before_training(tmp_path: Path) -> None:
    (tmp_path / "pictures" / "only").mkdir(parents=True)
    proc = study(
        *("--workload", "images", "--workload-option", "path=pictures"),
        *("--batch-size", "8", "--lr", "0.1"),
        cwd=tmp_path,
    )
    assert one_line_error(proc).startswith(
        "--workload-option path: 'pictures' needs at least two class folders (found only 'only')"
    )
    (tmp_path / "three.csv").write_text("x,y\n1,a\n2,b\n3,c\n", encoding="utf-8")
    proc = study(
        *("--workload", "csv", "--csv", "three.csv", "--label", "y"),
        *("--workload-option", "task=binary", "--batch-size", "8", "--lr", "0.1"),
        cwd=tmp_path,
    )
    assert one_line_error(proc) == (
        "--label: column 'y' in three.csv has 3 values ('a', 'b', 'c'); task binary needs "
        "exactly two (or use task multiclass)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pictures", "three.csv"]
