"""What the outage tests share (test_storage_outage.py, test_tracking_outage.py and the chaos
driver `tests.chaos`): a study whose trials last long enough for a service to go away under
them, and how many of its trials finished so far, read while a service may be down."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.runner.conftest import Store, counted, tiny_study

#: A user's own model (``model: paced:build``) for studies that must last: the tabular
#: workload's MLP with a pause of `PAUSE_S` in every training step (a stateful NumPy function
#: whose output is added times zero, so it runs each step and changes nothing). A trial then
#: lasts its wall time sleeping rather than computing: these tests need time to pass under
#: a running study, not work (6,000 real steps cost ~4x the CPU of 1,500 paced ones).
PAUSE_S = 0.0015
PACED_MODEL = f"""
import time

import keras
import tensorflow as tf


def _pause():
    time.sleep({PAUSE_S})
    return 0.0


class Pace(keras.layers.Layer):
    def call(self, x, training=None):
        if not training:
            return x
        pause = tf.reshape(tf.numpy_function(_pause, [], tf.float64, stateful=True), [])
        return x + tf.cast(tf.stop_gradient(pause), x.dtype) * 0.0


def build(input_shape, outputs):
    return keras.Sequential([
        keras.Input(input_shape),
        keras.layers.Dense(64, activation="relu"),
        Pace(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(outputs),
    ])
"""


def lasting_study(name: str, per_stratum: int) -> dict[str, Any]:
    """`tiny_study` with trials of a few seconds each: a target out of reach and no pruning,
    so every trial trains its 1,500 paced steps (`PACED_MODEL`, evaluated every 250) and the
    study outlasts a worker's start, an outage and a restart. Each directory a `study`
    process runs in needs the model's module: `write_paced`."""
    return tiny_study(
        name=name,
        trials_per_stratum=per_stratum,
        target="val_accuracy>=0.999",
        budget={"max_steps": 1500},
        eval_every=250,
        model="paced:build",
        tuner={"pruning": False},
    )


def write_paced(directory: Path) -> None:
    """Put `PACED_MODEL` where a `study` process started in ``directory`` imports it
    (``python -m study`` has its working directory on the module path, as its workers do)."""
    (directory / "paced.py").write_text(PACED_MODEL, encoding="utf-8")


def finished(store: Store, data: Mapping[str, Any], fresh: bool = False) -> int:
    """Trials of the study ``data`` that finished so far: 0 before its ledger exists or while
    its storage does not answer. ``fresh``: read the ledger afresh (a journal file another
    process appends to); without it, one storage is polled (no connection per poll)."""
    if not store.started():
        return 0
    try:
        return sum(len(counted(t)) for t in store.trials(data, fresh=fresh).values())
    except Exception:
        return 0
