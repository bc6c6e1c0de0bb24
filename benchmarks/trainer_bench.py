"""Shared set-up for the trainer benchmarks: MNIST-1D MLP trials, one strategy per process.

Logical CPU devices are fixed when TensorFlow starts, so each strategy runs in a worker process:
a benchmark script calls `run_workers`, which re-runs the script with ``--worker STRATEGY`` and
reads the JSON its worker prints last. Not a benchmark itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

STRATEGIES = ("default", "mirrored:2")


@dataclass
class Bench:
    """TensorFlow, the strategy and the MNIST-1D data, ready to train trials in this process."""

    tf: Any
    keras: Any
    strategy: Any
    resolved: Any
    workload: Any
    data: Any
    strategy_name: str

    def trial(
        self,
        batch: int,
        steps: int,
        cadence: str,
        *,
        lr: float = 0.01,
        target: str = "val_accuracy>=2",
        seed: int = 0,
    ) -> Any:
        """Train one Nesterov MLP trial (by default to an unreachable target, so ``steps``)."""
        from study.config.target import Target
        from study.config.trial import (
            Budget,
            EvalCadence,
            OptimizerSpec,
            TrialSettings,
            TrialSpec,
        )
        from study.trainer.loop import train

        spec = TrialSpec(
            workload="mnist1d",
            batch_size=batch,
            optimizer=OptimizerSpec("nesterov", lr),
            target=Target.parse(target),
            strategy=self.strategy_name,
            settings=TrialSettings(
                budget=Budget(max_steps=steps), cadence=EvalCadence.parse(cadence), seed=seed
            ),
        )
        self.keras.backend.clear_session()
        return train(
            spec,
            self.data,
            lambda: self.workload.build_model("mlp", self.data),
            self.strategy,
            self.resolved,
        )


def start(strategy_name: str, samples: int = 10_000) -> Bench:
    """Import TensorFlow as a study's trial worker does (the logical devices `strategy_name`
    needs, deterministic ops, TensorFlow's default threads) and load MNIST-1D."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from study.strategies import build_strategy, configure_devices, probe_host, resolve

    configure_devices(tf, 2 if strategy_name.startswith("mirrored") else 1)
    tf.config.experimental.enable_op_determinism()
    import keras

    from study.workloads import get_workload

    workload = get_workload("mnist1d", {"samples": samples})
    resolved = resolve(strategy_name, probe_host(tf))
    strategy = build_strategy(tf, resolved)
    return Bench(tf, keras, strategy, resolved, workload, workload.load(), strategy_name)


def run_workers(script: str, args: list[str], strategies: tuple[str, ...] = STRATEGIES) -> dict:
    """Run ``script --worker NAME *args`` for each strategy; map NAME to its printed JSON."""
    out = {}
    for name in strategies:
        proc = subprocess.run(
            [sys.executable, script, "--worker", name, *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode:
            sys.exit(f"worker {name} failed:\n{proc.stderr[-3000:]}")
        out[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out
