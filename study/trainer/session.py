"""A trial's model, optimizer and compiled functions, reused by the next trial when it can be.

Building and tracing is most of a short trial's cost. A `Session` holds what a trial built; the
worker keeps the last one in a `SessionCache`. The next trial with the same `session_key` (the
workload and its options, model, strategy, loss, precision, XLA, optimizer and resolved
schedule: everything baked into the traces, but not the learning rate, seed or, for data in
memory, the batch size) re-initialises it instead: a fresh model is built under the trial's seed (no tracing) and its
values assigned to the kept model's variables (weights, non-trainable state and dropout seed
state alike), the optimizer's variables go back to their just-built values, the learning rate
(a variable, also a schedule's base) is set and the example order restarts. A reused trial
gives exactly the curve a fresh one does (tested).

Example::

    session, timings, reused = open_session(spec, data, build, strategy, resolved, task, cache)
    session.start(spec.settings.seed)
    losses, _ = session.run(session.args(100))  # 100 steps, one compiled call
    session.evaluate()  # {"val_loss": ..., "val_accuracy": ...}
"""

from __future__ import annotations

import os
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from study.adapters import keras_internals, tf_internals
from study.config.trial import TrialSpec
from study.errors import FieldError, UsageError
from study.strategies import ResolvedStrategy
from study.trainer.inputs import ArrayFeed, StreamFeed, make_feed
from study.trainer.losses import Objective, objective
from study.trainer.metrics import Evaluator, model_metrics, reported_task
from study.trainer.optim import make_optimizer, resolved_schedule, set_learning_rate
from study.trainer.precision import dtype_policy, resolve_jit, resolve_precision
from study.trainer.steps import replica_step
from study.workloads.base import Dataset, Streams
from study.workloads.task import Task

#: How many sessions (model, optimizer, traced functions) a worker keeps for reuse by default:
#: enough for the strata a study visits in turn; ``$STUDY_KEPT_SESSIONS`` overrides it.
KEPT_SESSIONS = 8


@dataclass
class Session:
    """What one trial built: reusable by the next trial with the same ``key``.

    ``train_function`` is the compiled multi-step `tf.function` (for counting traces),
    ``train_chunk`` what `run` calls (its concrete function on the in-memory path).
    """

    key: tuple
    data: Dataset | Streams
    strategy: Any
    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    initial_optimizer: list[np.ndarray]
    objective: Objective
    task: Task
    evaluator: Evaluator
    feed: ArrayFeed | StreamFeed
    train_function: Any
    train_chunk: Callable[..., tf.Tensor]
    evaluate_function: Any
    precision: str
    jit: bool
    #: Reads `snapshot`'s variables in one call (made on first use; False: cannot be traced).
    reader: Any = None
    #: Exact steps' replay in one call (`study.trainer.replay`; False: it does not apply).
    replayer: Any = None

    def start(self, seed: int, batch_size: int | None = None) -> None:
        """Begin a trial's example order at its batch size."""
        self.feed.start(seed, batch_size)

    def set_batch(self, batch_size: int, rate: float) -> None:
        """Train the next steps at global batch ``batch_size`` and base rate ``rate`` (a batch
        schedule's stage; in memory the traced function takes any batch, nothing retraces).

        Raises:
            ValueError: a streamed feed (its pipeline batches at one size).
        """
        if not isinstance(self.feed, ArrayFeed):
            raise ValueError("a streamed feed trains at one batch size")
        self.feed.batch_size = batch_size
        set_learning_rate(self.optimizer, rate)

    def args(self, count: int) -> tuple:
        """Arguments of the next compiled call of ``count`` steps (host work, untimed)."""
        return self.feed.args(count)

    def run(self, args: tuple) -> tuple[np.ndarray, np.ndarray | None]:
        """Run the compiled steps and fetch their losses (the timed part of training) and, when
        the session measures the gradient noise scale, each step's ``[|G_small|^2, |G_big|^2]``.
        """
        out = self.train_chunk(*args)
        if isinstance(out, tuple):
            return out[0].numpy(), out[1].numpy()
        return out.numpy(), None

    def snapshot(self) -> tuple[list[np.ndarray], Any]:
        """Everything the next steps depend on: model and optimizer variables (weights, seed
        state, step counter, learning rate) and the example order's position. Exact steps take
        one at nearly every evaluation: one compiled call reads them (0.17 ms for the MLP's 14
        against 0.27 ms one by one)."""
        variables = list(self.model.variables) + list(self.optimizer.variables)
        self.reader = _state_reader(variables) if self.reader is None else self.reader
        values = self.reader() if self.reader is not False else variables
        return [v.numpy() for v in values], self.feed.position()

    def restore(self, snapshot: tuple[list[np.ndarray], Any]) -> None:
        """Return to a `snapshot`: the following steps replay exactly."""
        values, position = snapshot
        variables = list(self.model.variables) + list(self.optimizer.variables)
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)
        self.feed.seek(position)

    def evaluate(self) -> dict[str, float]:
        """Every reported metric on the whole validation set: one compiled call, one fetch."""
        values = self.evaluate_function().numpy()
        return {k: float(v) for k, v in zip(self.evaluator.keys, values, strict=True)}


class SessionCache:
    """The sessions of the last few keys, kept for following trials with the same key.

    A study alternates between strata (batch sizes) in one worker, so one kept session would be
    rebuilt at every switch; ``capacity`` sessions (default `KEPT_SESSIONS`, or
    ``$STUDY_KEPT_SESSIONS``) cover the strata a worker visits in turn. The least recently used
    session is dropped first (its model and traces are freed with it).
    """

    def __init__(self, capacity: int | None = None) -> None:
        if capacity is None:
            capacity = int(os.environ.get("STUDY_KEPT_SESSIONS", KEPT_SESSIONS))
        self.capacity = max(1, capacity)
        self._sessions: OrderedDict[tuple, Session] = OrderedDict()

    @property
    def session(self) -> Session | None:
        """The most recently used session."""
        return next(reversed(self._sessions.values()), None)

    def __len__(self) -> int:
        return len(self._sessions)

    def take(self, key: tuple, data: Any, strategy: Any) -> Session | None:
        """The kept session of ``key`` if it was built on these very data and strategy."""
        s = self._sessions.get(key)
        if s is not None and s.data is data and s.strategy is strategy:
            self._sessions.move_to_end(key)
            return s
        return None

    def make_room(self) -> None:
        """Drop least recently used sessions until one more fits (before building one)."""
        while len(self._sessions) >= self.capacity:
            self._sessions.popitem(last=False)

    def keep(self, session: Session) -> None:
        self._sessions[session.key] = session
        self._sessions.move_to_end(session.key)
        while len(self._sessions) > self.capacity:
            self._sessions.popitem(last=False)

    def clear(self) -> None:
        self._sessions.clear()


def session_key(spec: TrialSpec, task: Task, *, streamed: bool = False) -> tuple:
    """Everything a session's traces depend on: trials with equal keys can share one.

    The learning rate and seed are left out (set per trial); the schedule enters as the
    one it resolves to (its horizon depends on the step budget only without ``decay_steps``).
    The batch size enters only for streamed data (the pipeline batches); in memory, one trace
    takes index arrays of any batch size, so a study's strata share a session.
    """
    optimizer = {k: v for k, v in asdict(spec.optimizer).items() if k != "learning_rate"}
    schedule = resolved_schedule(spec.schedule, spec.step_limit())
    options = tuple(sorted((k, repr(v)) for k, v in spec.workload_options.items()))
    return (
        spec.workload,
        options,
        spec.model,
        spec.batch_size if streamed else None,
        spec.strategy,
        spec.settings.loss,
        spec.settings.precision,
        spec.settings.jit_compile,
        spec.settings.noise_every if spec.settings.noise_scale else None,
        tuple(sorted(optimizer.items())),
        schedule,
        task,
    )


def open_session(
    spec: TrialSpec,
    data: Dataset | Streams,
    build_model: Callable[[], keras.Model],
    strategy: Any,
    resolved: ResolvedStrategy,
    task: Task,
    cache: SessionCache | None = None,
) -> tuple[Session, dict[str, float], bool]:
    """A session ready for ``spec``: the cached one re-initialised, or a new one built, checked
    and traced. Returns it, the seconds spent (``build``, ``trace``) and whether it was reused.

    Raises:
        UsageError: the target names a metric the trial does not report (listing those it
            does), a bad loss, labels that do not fit the task, before any training step.
    """
    key = session_key(spec, task, streamed=isinstance(data, Streams))
    kept = cache.take(key, data, strategy) if cache is not None else None
    if kept is not None:
        start = time.perf_counter()
        if _reinitialise(kept, spec, build_model, strategy):
            kept.task.check_target(spec.target, workload=spec.workload)
            return kept, {"build": time.perf_counter() - start, "trace": 0.0}, True
    start = time.perf_counter()
    if cache is not None:
        cache.make_room()  # drop the least recently used model before building the next
    keras.backend.clear_session(free_memory=False)  # gc.collect() alone costs ~0.4 s here
    session, timings = _build(key, spec, data, build_model, strategy, resolved, task)
    timings["build"] = time.perf_counter() - start - timings["trace"]  # clearing included
    if cache is not None:
        cache.keep(session)
    return session, timings, False


def check_trial(
    spec: TrialSpec,
    data: Dataset | Streams,
    build_model: Callable[[], keras.Model],
    strategy: Any,
    resolved: ResolvedStrategy,
    task: Task,
) -> None:
    """Build the model once and check the loss, labels, metrics and target, without tracing or
    training (a study's preflight). Raises `UsageError` (or `FieldError`) on the first problem.

    Nothing global is reset (no seed, no Keras session), so a session kept for reuse stays valid.
    """
    check_schedule(spec, data, strategy.num_replicas_in_sync)
    precision = resolve_precision(spec.settings.precision, resolved.devices)
    with dtype_policy(precision), strategy.scope():
        model = build_model()
    _describe_trial(spec, data, model, strategy, task)


def check_schedule(spec: TrialSpec, data: Dataset | Streams, replicas: int) -> None:
    """A batch schedule this trial can train with, before anything is built.

    Raises:
        FieldError: ``batch_schedule.stages[i].batch_size`` not divisible by the replicas
            (or odd, measuring the noise scale on one replica).
        UsageError: streamed data (its pipeline batches at one size).
    """
    schedule = spec.batch_schedule
    if schedule is None:
        return
    if isinstance(data, Streams):
        raise UsageError(
            f"workload {spec.workload!r} streams its data (tf.data), whose pipeline batches at "
            "one size; a batch schedule needs data in memory (a Dataset of arrays)"
        )
    try:
        schedule.check_replicas(replicas, spec.strategy)
        if spec.settings.noise_scale and replicas == 1:
            schedule.check_replicas(2, "one replica measuring the noise scale (two halves)")
    except FieldError as err:
        raise FieldError(f"batch_schedule.{err.field}", err.rule, err.value) from None


def _describe_trial(
    spec: TrialSpec, data: Dataset | Streams, model: keras.Model, strategy: Any, task: Task
) -> tuple[Objective, Task, Evaluator, ArrayFeed | StreamFeed]:
    """Resolve the objective, feed and metrics of a built model; check outputs and target."""
    goal = objective(task, model, data.outputs, spec.settings.loss)
    feed = make_feed(data, goal, strategy, spec.batch_size)
    x, y = feed.sample()
    with strategy.scope():  # builds a model whose weights are created on first call
        out = model(x, training=False)
    _check_outputs(out, goal)
    reported = reported_task(task, model_metrics(model, goal, y, x))
    reported.check_target(spec.target, workload=spec.workload)
    return goal, reported, Evaluator(goal, reported.metrics, model), feed


def _check_outputs(out: Any, goal: Objective) -> None:
    if not hasattr(out, "shape"):
        raise FieldError(
            "model", detail=f"the model returned {type(out).__name__}; return one output tensor"
        )
    width = int(out.shape[-1]) if len(out.shape) > 1 else 1
    if width != goal.outputs:
        raise FieldError(
            "model",
            detail=f"the model outputs {width} value(s) per example; the workload's "
            f"{goal.kind.value} task needs {goal.outputs} (its num_classes)",
        )


def _build(
    key: tuple,
    spec: TrialSpec,
    data: Dataset | Streams,
    build_model: Callable[[], keras.Model],
    strategy: Any,
    resolved: ResolvedStrategy,
    task: Task,
) -> tuple[Session, dict[str, float]]:
    start = time.perf_counter()
    precision = resolve_precision(spec.settings.precision, resolved.devices)
    jit = resolve_jit(spec.settings.jit_compile, resolved.devices)
    keras.utils.set_random_seed(spec.settings.seed)
    with dtype_policy(precision), strategy.scope():
        model = build_model()
    goal, reported, evaluator, feed = _describe_trial(spec, data, model, strategy, task)
    step_limit = spec.step_limit()
    with strategy.scope():
        optimizer = make_optimizer(
            spec.optimizer, spec.schedule, step_limit, loss_scale=precision == "mixed_float16"
        )
        optimizer.build(model.trainable_variables)
    initial = [v.numpy() for v in optimizer.variables]
    built = time.perf_counter()

    settings = spec.settings
    noise = settings.noise_every if settings.noise_scale else 0
    step = replica_step(model, optimizer, goal, strategy, jit, noise=noise)
    train_function, train_chunk = feed.train_function(step)

    @tf.function(autograph=False)  # its loop is spelled out (`study.trainer.graph_loops`)
    def evaluate() -> tf.Tensor:
        state = feed.fold(
            lambda s, x, y: evaluator.update(s, y, goal.outputs_of(model(x, training=False))),
            evaluator.start(),
            goal.labels,
        )
        return evaluator.finish(state)

    evaluate_function = evaluate.get_concrete_function()
    session = Session(
        key=key,
        data=data,
        strategy=strategy,
        model=model,
        optimizer=optimizer,
        initial_optimizer=initial,
        objective=goal,
        task=reported,
        evaluator=evaluator,
        feed=feed,
        train_function=train_function,
        train_chunk=train_chunk,
        evaluate_function=evaluate_function,
        precision=precision,
        jit=jit,
    )
    _warm_up(session, spec.settings.seed)
    return session, {"build": built - start, "trace": time.perf_counter() - built}


def _state_reader(variables: list[Any]) -> Any:
    """A concrete function returning the values of ``variables`` (in order), or False when
    it cannot be traced."""
    try:
        return tf.function(
            lambda: [tf.identity(v) for v in variables], autograph=False
        ).get_concrete_function()
    except Exception:  # a variable kind that does not read inside a function
        return False


def warm_batches(session: Session, sizes: tuple[int, ...], seed: int) -> float:
    """`_warm_up` at each of ``sizes`` (a batch schedule's later stages), so the first call at
    a new batch size is not timed as training, as a fixed batch's is not; the seconds spent."""
    start = time.perf_counter()
    kept = session.feed.batch_size
    for size in sizes:
        session.feed.batch_size = size
        _warm_up(session, seed)
    session.feed.batch_size = kept
    return time.perf_counter() - start


def _warm_up(session: Session, seed: int) -> None:
    """Optimise and run one step untimed, then restore every variable.

    The first call of the compiled loop pays for graph optimisation and allocation, which is not
    training time; like the trace, it serves every later chunk length. Restoring the weights,
    seed state and optimizer state keeps the trial exactly as if the step had not run.
    """
    variables = list(session.model.variables) + list(session.optimizer.variables)
    saved = [v.numpy() for v in variables]
    session.run(session.feed.warm_args(seed))
    for variable, value in zip(variables, saved, strict=True):
        variable.assign(value)
    session.evaluate()  # its first call instantiates it too


def _reseed(seed: int) -> None:
    """`keras.utils.set_random_seed` without clearing TensorFlow's kernel cache.

    Setting TensorFlow's global seed the public way clears every compiled function's kernels,
    so a reused session would pay ~0.2-0.4 s here to instantiate them again; instead the same
    generators are set directly: Keras' global seed, Python's and NumPy's (which every Keras
    initializer and dropout seed draws from) and TensorFlow's eager seed
    (`study.adapters.tf_internals`, `study.adapters.keras_internals`). Falls back to the
    public call when TensorFlow's context has no such attributes.
    """
    if not tf_internals.set_eager_seed(seed):
        keras.utils.set_random_seed(seed)
        return
    keras_internals.set_global_seed_state(seed)
    random.seed(seed)
    np.random.seed(seed)


def _reinitialise(
    session: Session, spec: TrialSpec, build_model: Callable[[], keras.Model], strategy: Any
) -> bool:
    """Give the kept session a fresh start for ``spec``; False if the fresh model's variables do
    not match the kept one's (then the caller builds anew)."""
    _reseed(spec.settings.seed)
    with dtype_policy(session.precision), strategy.scope():
        fresh = build_model()
        fresh(session.feed.sample()[0], training=False)  # weights created on first call
    kept, values = session.model.variables, fresh.variables
    if len(kept) != len(values) or any(
        tuple(a.shape) != tuple(b.shape) for a, b in zip(kept, values, strict=True)
    ):
        return False
    for variable, value in zip(kept, values, strict=True):
        variable.assign(value)
    for variable, value in zip(session.optimizer.variables, session.initial_optimizer, strict=True):
        variable.assign(value)
    set_learning_rate(session.optimizer, spec.optimizer.learning_rate)
    return True
