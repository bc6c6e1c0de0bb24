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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from study.config.hold import Crossings
from study.config.trial import TrialSpec
from study.errors import UsageError
from study.results import Measurement, TrialResult, TrialState
from study.strategies import ResolvedStrategy, StrategyKind, check_batch_divisible
from study.trainer.inputs import IndexStream
from study.trainer.noise import NoiseScale
from study.trainer.replay import replayer
from study.trainer.session import (
    Session,
    SessionCache,
    check_schedule,
    open_session,
    warm_batches,
)
from study.trainer.stages import Stages
from study.workloads.base import Dataset, Streams
from study.workloads.task import Task

__all__ = ["IndexStream", "MeasurementHook", "train"]

#: Called after every evaluation that did not end the trial (target met, diverged, budget spent),
#: replayed ones included; while a crossing of the target waits to hold it is shown the
#: evaluation where the crossing began. Return False to stop the trial (it is then ``pruned``).
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
    is the first step from which ``spec.target`` held through its hold window (`_run`;
    evaluations at step 0 and on the settings' ``cadence``; with ``exact_steps``, every step
    around a crossing, replayed) and whose ``fell_back`` lists the crossings that did not hold.
    With ``noise_scale`` every evaluation carries the gradient noise scale estimate.

    Raises:
        UsageError: a target the trial does not report, a bad loss or labels, before training.
    """
    replicas = strategy.num_replicas_in_sync
    check_batch_divisible(spec.batch_size, replicas, strategy=spec.strategy)
    if spec.batch_schedule is not None:
        check_schedule(spec, data, replicas)
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
    if spec.batch_schedule is not None:  # untimed, as the trial's first batch size was
        later = spec.batch_schedule.batch_sizes[1:]
        timings["trace"] = timings.get("trace", 0.0) + warm_batches(
            session, later, spec.settings.seed
        )
    environment = {
        "strategy": resolved.kind.value,
        "strategy_requested": spec.strategy,
        "seed": spec.settings.seed,
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
    run = _run(spec, session, hook, fused=resolved.kind is not StrategyKind.MULTI_WORKER_MIRRORED)
    environment["replay_steps"] = run.spent.replay_steps
    environment["discarded_steps"] = run.spent.discarded_steps
    reached = None
    if run.state is TrialState.REACHED:  # where the crossing that held began
        reached = next(m for m in run.curve if m.step == run.crossings.held)
    return TrialResult(
        state=run.state,
        steps_run=run.step,
        examples_run=spec.examples_at(run.step),
        train_seconds=run.seconds,
        steps_to_target=reached.step if reached else None,
        examples_to_target=reached.examples if reached else None,
        seconds_to_target=reached.train_seconds if reached else None,
        curve=tuple(run.curve),
        fell_back=tuple(run.crossings.fell_back),
        environment=environment,
        timings={
            **timings,
            "train": run.seconds,
            "evaluate": run.spent.evaluate,
            "replay": run.spent.replay,
        },
    )


@dataclass
class _Spent:
    """What a trial spent beside training: seconds evaluating and replaying (exact steps), the
    steps replayed one at a time and the chunk steps they replaced."""

    evaluate: float = 0.0
    replay: float = 0.0
    replay_steps: int = 0
    discarded_steps: int = 0


@dataclass(frozen=True)
class _Outcome:
    """How the cadence loop ended: the final ``state`` after ``step`` steps and ``seconds`` of
    training, what it ``spent`` beside, the ``curve`` and the ``crossings`` seen."""

    state: TrialState
    step: int
    seconds: float
    spent: _Spent
    curve: list[Measurement]
    crossings: Crossings


@dataclass
class _Progress:
    """The trial's state at an evaluation that did not meet the target: where a replay starts."""

    step: int = 0
    seconds: float = 0.0
    saved: Any = None
    noise: NoiseScale | None = None


@dataclass(frozen=True)
class _Scan:
    """Stepping one step at a time, evaluating after each (exact steps): at least through
    ``until`` (where the target was met after steps nobody looked at), then while a crossing is
    waiting to hold; each step counts ``pace`` training seconds (the chunk's, as a lone step
    carries per-call overhead a chunk does not)."""

    until: int
    pace: float


def _run(
    spec: TrialSpec,
    session: Session,
    hook: MeasurementHook | None,
    *,
    fused: bool = False,
) -> _Outcome:
    """The cadence loop: evaluate, decide, train to the next evaluation step.

    Steps to target follow the target's hold rule (`study.config.hold`): the first step from
    which the target holds at every step through its window. With ``exact_steps``, when an
    evaluation meets the target after unseen steps, the trial goes back to the last evaluation
    that did not (its saved state) and steps one at a time, evaluating after each, until a
    crossing has held through its window or fallen back past that evaluation; so the step is
    the same at any cadence. Evaluations are then never further apart than a window
    (`Hold.max_gap`), so no window that holds lies unseen between two that fail; without exact
    steps the rule reads the cadence's own evaluations (a crossing holds once every evaluation
    through its window met the target). With ``fused`` (one host) a replay that applies
    (`study.trainer.replay`, traced at the session's first replay) trains and evaluates the
    steps through the one that met the target in one call, then they are looked at one by one
    as before: a trial that ends among them ends at its step.
    """
    settings, target = spec.settings, spec.target
    step_limit = spec.step_limit()
    stages = Stages(spec, session)
    noise = _noise_scale(spec, session)
    crossings = Crossings(target.hold)
    curve: list[Measurement] = []
    spent = _Spent()
    step, seconds, pending_losses = 0, 0.0, []
    last = _Progress()
    scan: _Scan | None = None
    replayed: deque[tuple[float, dict[str, float], float]] = deque()  # trained ahead
    while True:
        if replayed:  # a step the replay's call trained and evaluated
            train_loss, metrics, pace = replayed.popleft()
            step, seconds = step + 1, seconds + pace
            spent.replay_steps += 1
        else:
            train_loss = float(np.mean(pending_losses)) if pending_losses else math.nan
            pending_losses = []
            start = time.perf_counter()
            metrics = session.evaluate()
            if scan:
                spent.replay += time.perf_counter() - start
            else:
                spent.evaluate += time.perf_counter() - start
        estimate = noise.estimate() if noise is not None else {}
        m = Measurement(
            step, spec.examples_at(step), seconds, train_loss, metrics, estimate, scan is not None
        )
        met = target.met_by(m.metrics)
        # steps since the previous evaluation, which failed and was saved, that nobody saw
        unseen = bool(curve) and last.saved is not None and last.step == curve[-1].step
        unseen = unseen and step - last.step > 1
        if met and settings.exact_steps and scan is None and not crossings.open and unseen:
            # met after steps nobody looked at: look at each of them, from the last failure
            scan = _Scan(until=step, pace=(seconds - last.seconds) / (step - last.step))
            spent.discarded_steps += step - last.step  # trained again, one at a time
            session.restore(last.saved)
            stages.forget()  # the restored optimizer holds the saved step's rate
            noise = copy.deepcopy(last.noise)
            step, seconds = last.step, last.seconds
        else:
            curve.append(m)
            state = _decide(spec, m, curve, crossings, hook, step_limit, met)
            if state is not None:
                return _Outcome(state, step, seconds, spent, curve, crossings)
            if scan is not None and step >= scan.until and not crossings.open:
                scan = None  # the crossing fell back: on with the cadence
        if replayed:
            continue
        if scan and fused and noise is None and (replay := replayer(session)) is not None:
            # Through the step that met the target in one call; past it one step a call (the
            # crossing may fall back there, and the cadence go on from that step).
            count = stages.enter(step, max(scan.until, step + 1))
            start = time.perf_counter()
            losses, rows = replay.run(session.args(count))
            spent.replay += time.perf_counter() - start
            replayed.extend((loss, row, scan.pace) for loss, row in zip(losses.tolist(), rows))
            continue
        stop = _next_stop(spec, step, step_limit, one=scan is not None or crossings.open)
        if scan is None and settings.exact_steps and stop - step > 1 and not met:
            last = _Progress(step, seconds, session.snapshot(), copy.deepcopy(noise))
        while step < stop:
            count = stages.enter(step, stop)  # within one stage of the batch schedule
            noise = _noise_for(spec, session, noise, stages.batch_size)
            args = session.args(count)
            start = time.perf_counter()  # the compiled call and fetching its losses
            losses, stats = session.run(args)
            elapsed = time.perf_counter() - start
            if scan is None:
                seconds += elapsed
            else:
                seconds += scan.pace * count
                spent.replay += elapsed
                spent.replay_steps += count
            step += count
            pending_losses.extend(losses.tolist())
            if noise is not None and stats is not None:
                noise.update(stats[:, 0], stats[:, 1])
            if not np.all(np.isfinite(losses)):
                break


def _decide(
    spec: TrialSpec,
    m: Measurement,
    curve: list[Measurement],
    crossings: Crossings,
    hook: MeasurementHook | None,
    step_limit: int | None,
    met: bool,
) -> TrialState | None:
    """After evaluation ``m`` (appended to ``curve``): the state the trial ends in, or None to
    train on. Reached once a crossing held; diverged on a non-finite loss; pruned when the
    hook says so; not reached at the step or time limit."""
    if crossings.observe(m.step, met) is not None:
        return TrialState.REACHED
    if not math.isfinite(m.metrics["val_loss"]) or (m.step and not math.isfinite(m.train_loss)):
        return TrialState.DIVERGED
    if hook is not None and not hook(_candidate(m, curve, crossings)):
        return TrialState.PRUNED
    limit = spec.settings.budget.max_seconds
    out_of_time = limit is not None and m.train_seconds >= limit
    if (step_limit is not None and m.step >= step_limit) or out_of_time:
        return TrialState.NOT_REACHED
    return None


def _candidate(m: Measurement, curve: list[Measurement], crossings: Crossings) -> Measurement:
    """What the measurement hook is shown: the evaluation itself, or, while a crossing waits to
    hold, the one where it began (the steps to target the trial would then have)."""
    if not crossings.open:
        return m
    return next(x for x in reversed(curve) if x.step == crossings.start)


def _next_stop(spec: TrialSpec, step: int, step_limit: int | None, *, one: bool) -> int:
    """The next evaluation step: the next one (``one``: while replaying, or while a crossing
    waits to hold with exact steps), else the cadence's, never further than the hold rule
    allows (`Hold.max_gap`) nor past the step budget."""
    settings = spec.settings
    if one and settings.exact_steps:
        stop = step + 1
    else:
        stop = settings.cadence.next_step(step)
        gap = spec.target.hold.max_gap(step) if settings.exact_steps else None
        if gap is not None:  # without exact steps, the rule reads the cadence's evaluations
            stop = min(stop, gap)
    return min(stop, step_limit) if step_limit is not None else stop


def _noise_scale(
    spec: TrialSpec, session: Session, batch_size: int | None = None
) -> NoiseScale | None:
    """The gradient noise scale estimator for the trial's two batch sizes (at ``batch_size``,
    default the trial's first), if it measures it."""
    if not spec.settings.noise_scale:
        return None
    batch = batch_size or spec.batch_size
    replicas = session.strategy.num_replicas_in_sync
    every = spec.settings.noise_every
    return NoiseScale(batch / max(replicas, 2), batch, every=every)


def _noise_for(
    spec: TrialSpec, session: Session, noise: NoiseScale | None, batch_size: int
) -> NoiseScale | None:
    """``noise``, or a fresh estimator when a batch schedule changed the batch (the two batch
    sizes it measures at change with it; its averages start again)."""
    if noise is None or noise.b_big == batch_size:
        return noise
    return _noise_scale(spec, session, batch_size)
