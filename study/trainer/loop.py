"""The steps-to-target training loop.

One compiled `tf.function` runs many training steps per call (a `tf.while_loop` around
`strategy.run`), so per-step Python overhead vanishes; it returns after exactly as many steps as
remain until the next evaluation. One trace, made and run once before the clock starts, serves
every chunk length a cadence asks for (and, through the `SessionCache`, every following trial
with the same model, batch size, strategy and optimizer). Only the compiled calls are timed:
building, tracing, the warm-up step and evaluation are excluded from training seconds and
reported apart in ``TrialResult.timings``. The loss and metrics come from the workload's `Task`
(or the user's compiled model); each evaluation is one compiled call over the whole
validation set.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from study.config.trial import TrialSpec
from study.errors import UsageError
from study.results import Measurement, TrialResult, TrialState
from study.strategies import ResolvedStrategy, check_batch_divisible
from study.trainer.inputs import IndexStream
from study.trainer.noise import NoiseScale
from study.trainer.session import Session, SessionCache, open_session
from study.workloads.base import Dataset, Streams
from study.workloads.task import Task

__all__ = ["IndexStream", "MeasurementHook", "train"]

#: Called after every evaluation that did not end the trial (target met, diverged, budget spent);
#: return False to stop the trial (it is then ``pruned``).
MeasurementHook = Callable[[Measurement], bool]


def train(
    spec: TrialSpec,
    data: Dataset | Streams,
    build_model: Callable[[], keras.Model],
    strategy: Any,
    resolved: ResolvedStrategy,
    hook: MeasurementHook | None = None,
    *,
    task: Task | None = None,
    cache: SessionCache | None = None,
) -> TrialResult:
    """Train until the target holds, the budget runs out, the loss diverges or `hook` says stop.

    ``task`` is the workload's (default: multi-class classification); the settings' ``loss``
    (`TrialSettings`) overrides its loss. With a ``cache``, a session kept from the previous
    trial is reused when the trial allows it. Returns a `TrialResult` whose ``steps_to_target``
    is the first evaluation step at which ``spec.target`` held (evaluations at step 0 and on the
    settings' ``cadence``; with ``exact_steps``, every step between the last two of them,
    replayed: `_replay`). With ``noise_scale`` every evaluation carries the gradient noise scale
    estimate.

    Raises:
        UsageError: a target the trial does not report, a bad loss or labels, before training.
    """
    replicas = strategy.num_replicas_in_sync
    check_batch_divisible(spec.batch_size, replicas, strategy=spec.strategy)
    if spec.settings.noise_scale and replicas == 1 and spec.batch_size % 2:
        raise UsageError(
            f"noise_scale on one replica splits the batch into two halves: batch size "
            f"{spec.batch_size} is odd; use an even batch size"
        )
    task = task if task is not None else Task.multiclass()
    session, timings, reused = open_session(
        spec, data, build_model, strategy, resolved, task, cache
    )
    session.start(spec.settings.seed, spec.batch_size)
    environment = {
        "strategy": resolved.kind.value,
        "strategy_requested": spec.strategy,
        "replicas": replicas,
        "per_replica_batch": spec.batch_size // replicas,
        "devices": ",".join(resolved.devices),
        "input": session.feed.kind,
        "task": session.objective.kind.value,
        "loss": session.objective.name,
        "precision": session.precision,
        "jit_compile": session.jit,
        "reused": reused,
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
    }
    state, step, seconds, spent, curve = _run(spec, session, hook)
    environment["replay_steps"] = spent["replay_steps"]
    reached = None
    if state is TrialState.REACHED:  # the first evaluation, fine or on the cadence, that met it
        reached = next(m for m in curve if spec.target.met_by(m.metrics))
    return TrialResult(
        state=state,
        steps_run=step,
        examples_run=step * spec.batch_size,
        train_seconds=seconds,
        steps_to_target=reached.step if reached else None,
        examples_to_target=reached.examples if reached else None,
        seconds_to_target=reached.train_seconds if reached else None,
        curve=tuple(curve),
        environment=environment,
        timings={
            **timings,
            "train": seconds,
            "evaluate": spent["evaluate"],
            "replay": spent["replay"],
        },
    )


@dataclass
class _Progress:
    """The trial's state at its latest cadence evaluation: what a replay starts from."""

    step: int = 0
    seconds: float = 0.0
    saved: Any = None
    noise: NoiseScale | None = None


def _run(
    spec: TrialSpec, session: Session, hook: MeasurementHook | None
) -> tuple[TrialState, int, float, dict[str, float], list[Measurement]]:
    """The cadence loop: evaluate, decide, train to the next evaluation step.

    When the target first holds at a cadence evaluation, `_replay` finds the exact step
    (``exact_steps``). Returns the final state, steps run, training seconds, the seconds of
    evaluation and replay (and the replayed steps) and the curve.
    """
    settings = spec.settings
    step_limit = settings.budget.step_limit(spec.batch_size)
    max_chunk = session.feed.max_steps_per_call
    noise = _noise_scale(spec, session)
    curve: list[Measurement] = []
    spent = {"evaluate": 0.0, "replay": 0.0, "replay_steps": 0}
    step, seconds, pending_losses = 0, 0.0, []
    last = _Progress()
    while True:
        train_loss = float(np.mean(pending_losses)) if pending_losses else math.nan
        pending_losses = []
        start = time.perf_counter()
        metrics = session.evaluate()
        spent["evaluate"] += time.perf_counter() - start
        estimate = noise.estimate() if noise is not None else {}
        m = Measurement(step, step * spec.batch_size, seconds, train_loss, metrics, estimate)
        curve.append(m)
        if spec.target.met_by(m.metrics):
            if settings.exact_steps and last.saved is not None and step - last.step > 1:
                start = time.perf_counter()
                fine = _replay(spec, session, last, step, seconds)
                spent["replay"] += time.perf_counter() - start
                spent["replay_steps"] += len(fine)
                curve[-1:-1] = fine  # in step order, before the cadence evaluation
            return TrialState.REACHED, step, seconds, spent, curve
        if not math.isfinite(m.metrics["val_loss"]) or (step and not math.isfinite(train_loss)):
            return TrialState.DIVERGED, step, seconds, spent, curve
        if hook is not None and not hook(m):
            return TrialState.PRUNED, step, seconds, spent, curve
        limit = settings.budget.max_seconds
        out_of_time = limit is not None and seconds >= limit
        if (step_limit is not None and step >= step_limit) or out_of_time:
            return TrialState.NOT_REACHED, step, seconds, spent, curve
        stop = settings.cadence.next_step(step)
        if step_limit is not None:
            stop = min(stop, step_limit)
        if settings.exact_steps and stop - step > 1:
            last = _Progress(step, seconds, session.snapshot(), copy.deepcopy(noise))
        while step < stop:
            count = min(stop - step, max_chunk)
            args = session.args(count)
            start = time.perf_counter()  # the compiled call and fetching its losses
            losses, stats = session.run(args)
            seconds += time.perf_counter() - start
            step += count
            pending_losses.extend(losses.tolist())
            if noise is not None and stats is not None:
                noise.update(stats[:, 0], stats[:, 1])
            if not np.all(np.isfinite(losses)):
                break


def _noise_scale(spec: TrialSpec, session: Session) -> NoiseScale | None:
    """The gradient noise scale estimator for the trial's two batch sizes, if it measures it."""
    if not spec.settings.noise_scale:
        return None
    replicas = session.strategy.num_replicas_in_sync
    every = spec.settings.noise_every
    return NoiseScale(spec.batch_size / max(replicas, 2), spec.batch_size, every=every)


def _replay(
    spec: TrialSpec, session: Session, last: _Progress, met_at: int, seconds: float
) -> list[Measurement]:
    """Return to the state of the previous cadence evaluation and train one step at a time,
    evaluating after each, until the target holds (at most until ``met_at``, where it held).

    Returns the fine evaluations (marked ``fine``); the last one is where the target first held,
    unless it first held at ``met_at`` itself. Training seconds of a fine evaluation are those
    of the previous cadence evaluation plus its steps at the following chunk's pace (a replay
    step alone carries per-call overhead that a chunk does not).
    """
    session.restore(last.saved)
    noise = copy.deepcopy(last.noise)
    pace = (seconds - last.seconds) / (met_at - last.step)
    fine: list[Measurement] = []
    for step in range(last.step + 1, met_at):
        losses, stats = session.run(session.args(1))
        if noise is not None and stats is not None:
            noise.update(stats[:, 0], stats[:, 1])
        metrics = session.evaluate()
        m = Measurement(
            step,
            step * spec.batch_size,
            last.seconds + (step - last.step) * pace,
            float(losses[0]),
            metrics,
            noise.estimate() if noise is not None else {},
            fine=True,
        )
        fine.append(m)
        if spec.target.met_by(metrics):
            break
    return fine
