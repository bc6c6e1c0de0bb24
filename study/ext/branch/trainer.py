"""Branch trials in the trainer: a reference run that saves its state at checkpoints, and
branches that load one and train a window at another batch size.

Both reuse the trial's session (`study.trainer.session`): its `Session.snapshot` holds every
variable the next steps depend on (model weights and seed state, optimizer slots, step counter
and learning rate), here written to bytes (`state_bytes`) and read back into a session built
for the branch (`load_state`), whose learning rate is then set to the branch's. A branch's
example order is its own (the session starts the feed under the branch's seed): its replicates
differ in the examples they see, which is the branch-to-branch noise CBS(t)'s interval is
read from.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from study.adapters import keras_internals
from study.errors import UsageError
from study.ext.branch.jobs import (
    BranchJob,
    BranchOutcome,
    Checkpoint,
    ReferenceJob,
    ReferenceOutcome,
)
from study.strategies import ResolvedStrategy, check_batch_divisible
from study.trainer.noise import NoiseScale
from study.trainer.optim import set_learning_rate
from study.trainer.session import Session, SessionCache, open_session
from study.workloads.base import Dataset, Streams
from study.workloads.task import Task

__all__ = [
    "batchnorm_layers",
    "evaluation_steps",
    "load_state",
    "recalibrate_batchnorm",
    "run_branch",
    "run_job",
    "run_reference",
    "state_bytes",
]


def state_bytes(session: Session) -> bytes:
    """The session's model and optimizer variables as an ``.npz`` (``v0``, ``v1``, ...)."""
    values, _position = session.snapshot()
    buffer = io.BytesIO()
    np.savez(buffer, **{f"v{i}": v for i, v in enumerate(values)})
    return buffer.getvalue()


def load_state(session: Session, blob: bytes) -> None:
    """Assign a `state_bytes` blob to the session's variables.

    Raises:
        UsageError: the blob holds another model's variables (count or shapes differ).
    """
    with np.load(io.BytesIO(blob)) as stored:
        values = [stored[f"v{i}"] for i in range(len(stored.files))]
    variables = list(session.model.variables) + list(session.optimizer.variables)
    shapes = [tuple(v.shape) for v in variables]
    if len(values) != len(variables) or any(
        tuple(a.shape) != b for a, b in zip(values, shapes, strict=True)
    ):
        raise UsageError(
            f"the checkpoint holds {len(values)} variables that do not match this model's "
            f"{len(variables)}; branch from a checkpoint of the same workload, model and optimizer"
        )
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)


def run_job(
    job: ReferenceJob | BranchJob,
    data: Dataset | Streams,
    build_model: Callable[[], keras.Model],
    strategy: Any,
    resolved: ResolvedStrategy,
    *,
    task: Task | None = None,
    cache: SessionCache | None = None,
) -> ReferenceOutcome | BranchOutcome:
    """Open the session of the job's spec (the trial's, `open_session`: kept in ``cache``) and
    run the job in it: a reference (`run_reference`) or a branch (`run_branch`).

    Raises:
        UsageError: the batch size does not divide over the strategy's replicas.
    """
    spec = job.spec
    check_batch_divisible(spec.batch_size, strategy.num_replicas_in_sync, strategy=spec.strategy)
    task = task if task is not None else Task.multiclass()
    session, _timings, _reused = open_session(
        spec, data, build_model, strategy, resolved, task, cache
    )
    if isinstance(job, ReferenceJob):
        return run_reference(job, session)
    return run_branch(job, session)


def run_reference(job: ReferenceJob, session: Session) -> ReferenceOutcome:
    """Train the reference through its last checkpoint step (and its end step, and on to
    ``until_target`` while it has not met the target); save its state at each checkpoint.

    Evaluations: step 0, the settings' cadence and every checkpoint, each after BatchNorm's
    recalibration when ``job.recalibrate`` (as the branches'; it sets only the layers' moving
    statistics, which training in training mode does not read). The first evaluation that
    meets the target gives its steps to target (the first crossing: the reference is a
    yardstick for the cost, not a result of the study).
    """
    spec = job.spec
    session.start(spec.settings.seed, spec.batch_size)
    replicas = session.strategy.num_replicas_in_sync
    noise = None
    if spec.settings.noise_scale:
        every = spec.settings.noise_every
        noise = NoiseScale(spec.batch_size / max(replicas, 2), spec.batch_size, every=every)
    checkpoints: list[Checkpoint] = []
    curve: list[dict[str, float]] = []
    wanted = sorted(set(job.checkpoint_steps))
    last = max(wanted[-1], job.end_step or 0)
    until = max(last, job.until_target or 0)  # past it only while the target is not met
    step, seconds, losses, since = 0, 0.0, [], []
    reached: int | None = None
    next_eval = 0
    while True:
        if step == next_eval or step in wanted:
            if job.recalibrate:
                recalibrate_batchnorm(session)
            metrics = session.evaluate()
            loss = float(np.mean(losses)) if losses else math.nan
            curve.append({"step": step, "examples": step * spec.batch_size, "train_loss": loss})
            curve[-1].update(metrics)
            losses = []
            if reached is None and spec.target.met_by(metrics):
                reached = step
            if step in wanted:
                ckpt_loss = float(np.mean(since)) if since else math.nan
                checkpoints.append(
                    Checkpoint(
                        index=len(checkpoints),
                        step=step,
                        examples=step * spec.batch_size,
                        metrics=metrics,
                        train_loss=ckpt_loss,
                        noise=noise.estimate() if noise is not None else {},
                        blob=state_bytes(session),
                    )
                )
                since = []
            if step == next_eval:
                next_eval = spec.settings.cadence.next_step(step)
        if step >= last and (reached is not None or step >= until):
            break
        bound = last if step < last else until
        stop = min(next_eval, bound, *(w for w in wanted if w > step))
        chunk, stats, elapsed = _train(session, stop - step)
        seconds += elapsed
        step = stop
        losses.extend(chunk)
        since.extend(chunk)
        if noise is not None and stats is not None:
            noise.update(stats[:, 0], stats[:, 1])
        if not np.all(np.isfinite(chunk)):
            return ReferenceOutcome(
                tuple(checkpoints), tuple(curve), reached, seconds, "the reference run diverged"
            )
    return ReferenceOutcome(tuple(checkpoints), tuple(curve), reached, seconds)


def run_branch(job: BranchJob, session: Session) -> BranchOutcome:
    """Load the checkpoint, train ``job.steps`` steps at the branch's batch size and rate
    (the example order under its seed), evaluate (``job.evaluations`` times over the window's
    last quarter, averaged: the last iterate of a small batch jitters with its gradient noise,
    and one evaluation reads that jitter as much as the branch's progress)."""
    spec = job.spec
    load_state(session, job.blob)
    set_learning_rate(session.optimizer, spec.optimizer.learning_rate)
    session.start(spec.settings.seed, spec.batch_size)
    marks = evaluation_steps(job.steps, job.evaluations)
    losses: list[float] = []
    seconds, done, seen = 0.0, 0, []
    for mark in marks:
        chunk, _stats, elapsed = _train(session, mark - done)
        losses.extend(chunk)
        seconds += elapsed
        done = mark
        if job.recalibrate:
            recalibrate_batchnorm(session)
        seen.append(session.evaluate())
    tail = losses[-max(1, len(losses) // 4) :]
    metrics = {k: float(np.mean([m[k] for m in seen])) for k in seen[-1]}
    return BranchOutcome(
        metrics=metrics,
        train_loss=float(np.mean(tail)),
        steps=job.steps,
        train_seconds=seconds,
    )


#: The share of a branch's window, at its end, that its evaluations spread over.
TAIL = 0.25
#: Training examples (the first ones, the same for every branch) whose statistics a branch's
#: BatchNorm layers take before each evaluation (`recalibrate_batchnorm`).
BN_CALIBRATION = 2048


def batchnorm_layers(model: keras.Model) -> list[keras.layers.BatchNormalization]:
    """Every BatchNormalization layer of ``model``, nested ones included."""
    return [
        layer
        for layer in keras_internals.nested_layers(model)
        if isinstance(layer, keras.layers.BatchNormalization)
    ]


def recalibrate_batchnorm(session: Session, examples: int = BN_CALIBRATION) -> int:
    """Give every BatchNorm layer the statistics of the first ``examples`` training examples
    (one forward pass in training mode with the layers' momentum at 0; nothing is trained), so
    that an evaluation does not read moving averages that lag the weights by a number of steps
    that depends on the batch size: after a window of W examples a batch of B has taken W / B
    steps, and with momentum 0.99 a branch at 16 x B0 still evaluates with ~90% of the
    checkpoint's statistics where B0's has replaced most of them. How many layers (0: none, or
    streamed data, which is left as it is)."""
    layers = batchnorm_layers(session.model)
    if not layers or not isinstance(session.data, Dataset):
        return 0
    x = session.data.x_train[:examples]
    momenta = [layer.momentum for layer in layers]
    try:
        for layer in layers:
            layer.momentum = 0.0
        with session.strategy.scope():
            session.model(x, training=True)
    finally:
        for layer, momentum in zip(layers, momenta, strict=True):
            layer.momentum = momentum
    return len(layers)


def evaluation_steps(steps: int, evaluations: int) -> tuple[int, ...]:
    """The steps a branch of ``steps`` evaluates at: ``evaluations`` of them evenly over its
    last quarter, the last at ``steps`` (distinct; e.g. 128 steps, 4 evaluations: 104, 112,
    120, 128)."""
    n = max(1, min(int(evaluations), steps))
    if n == 1:
        return (steps,)
    start = steps - steps * TAIL
    marks = [round(start + (steps - start) * (i + 1) / n) for i in range(n)]
    out: list[int] = []
    for mark in marks:
        mark = max(1, min(steps, mark))
        if not out or mark > out[-1]:
            out.append(mark)
    return tuple(out)


def _train(session: Session, steps: int) -> tuple[list[float], np.ndarray | None, float]:
    """``steps`` training steps in compiled chunks: their losses, noise statistics, seconds."""
    losses: list[float] = []
    stats_all: list[np.ndarray] = []
    seconds, done = 0.0, 0
    while done < steps:
        count = min(steps - done, session.feed.max_steps_per_call)
        args = session.args(count)
        start = time.perf_counter()
        out, stats = session.run(args)
        seconds += time.perf_counter() - start
        losses.extend(out.tolist())
        if stats is not None:
            stats_all.append(stats)
        done += count
        if not np.all(np.isfinite(out)):
            break
    return losses, (np.concatenate(stats_all) if stats_all else None), seconds
