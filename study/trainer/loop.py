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

import math
import time
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from study.config.trial import TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.strategies import ResolvedStrategy, check_batch_divisible
from study.trainer.inputs import IndexStream
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

    ``task`` is the workload's (default: multi-class classification); ``spec.loss`` overrides
    its loss. With a ``cache``, a session kept from the previous trial is reused when the trial
    allows it. Returns a `TrialResult` whose ``steps_to_target`` is the first evaluation step at
    which ``spec.target`` held (evaluations at step 0 and on ``spec.cadence``).

    Raises:
        UsageError: a target the trial does not report, a bad loss or labels, before training.
    """
    replicas = strategy.num_replicas_in_sync
    check_batch_divisible(spec.batch_size, replicas, strategy=spec.strategy)
    task = task if task is not None else Task.multiclass()
    session, timings, reused = open_session(
        spec, data, build_model, strategy, resolved, task, cache
    )
    session.start(spec.seed, spec.batch_size)
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
    state, step, seconds, evaluating, curve = _run(spec, session, hook)
    reached = curve[-1] if state is TrialState.REACHED else None
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
        timings={**timings, "train": seconds, "evaluate": evaluating},
    )


def _run(
    spec: TrialSpec, session: Session, hook: MeasurementHook | None
) -> tuple[TrialState, int, float, float, list[Measurement]]:
    """The cadence loop: evaluate, decide, train to the next evaluation step.

    Returns the final state, steps run, training seconds, evaluation seconds and the curve.
    """
    step_limit = spec.budget.step_limit(spec.batch_size)
    max_chunk = session.feed.max_steps_per_call
    curve: list[Measurement] = []
    step, seconds, evaluating, pending_losses = 0, 0.0, 0.0, []
    while True:
        train_loss = float(np.mean(pending_losses)) if pending_losses else math.nan
        pending_losses = []
        start = time.perf_counter()
        metrics = session.evaluate()
        evaluating += time.perf_counter() - start
        m = Measurement(step, step * spec.batch_size, seconds, train_loss, metrics)
        curve.append(m)
        if spec.target.met_by(m.metrics):
            return TrialState.REACHED, step, seconds, evaluating, curve
        if not math.isfinite(m.metrics["val_loss"]) or (step and not math.isfinite(train_loss)):
            return TrialState.DIVERGED, step, seconds, evaluating, curve
        if hook is not None and not hook(m):
            return TrialState.PRUNED, step, seconds, evaluating, curve
        out_of_time = spec.budget.max_seconds is not None and seconds >= spec.budget.max_seconds
        if (step_limit is not None and step >= step_limit) or out_of_time:
            return TrialState.NOT_REACHED, step, seconds, evaluating, curve
        stop = spec.cadence.next_step(step)
        if step_limit is not None:
            stop = min(stop, step_limit)
        while step < stop:
            count = min(stop - step, max_chunk)
            args = session.args(count)
            start = time.perf_counter()  # the compiled call and fetching its losses
            losses = session.run(args)
            seconds += time.perf_counter() - start
            step += count
            pending_losses.extend(losses.tolist())
            if not np.all(np.isfinite(losses)):
                break
