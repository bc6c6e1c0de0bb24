"""Check a workload before a study: import it, build it, load its data, train one step, evaluate.

`check_workload` runs in the calling process, with the trainer's own session (the model built in
the strategy's scope, the compiled step and evaluation that trials use); TensorFlow is imported
only once the data have been loaded and checked. Each way a workload can be wrong is one
`UsageError` (a `FieldError` on the field at fault where there is one) naming what is wrong and
how to fix it; success returns a `WorkloadCheck`::

    check = check_workload("my_workloads:Blobs", {"samples": 2000})
    check.summary()
    # blobs/mlp: 1,600 train and 400 validation rows of (8,) float32, 2 classes (multiclass);
    # 354 parameters; loss 0.7013 after one step on default; val_loss 0.6911, val_accuracy 0.52
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from study.config.target import Target
from study.config.trial import OptimizerSpec, TrialSpec
from study.errors import FieldError, InfeasibleError, UsageError
from study.strategies import StrategyKind, StrategySpec
from study.workloads.base import Dataset, Streams, Workload
from study.workloads.data_check import check_data
from study.workloads.resolve import resolve_workload

__all__ = ["WorkloadCheck", "check_workload"]


@dataclass(frozen=True)
class WorkloadCheck:
    """What a passing check found: the data, the model and one training step's outcome."""

    workload: str
    model: str
    task: str
    strategy: str
    batch_size: int
    train_rows: int
    val_rows: int
    input_shape: tuple[int, ...]
    input_dtype: str
    outputs: int
    parameters: int
    loss: float
    metrics: Mapping[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        """Two lines: the data and model, then the step's loss and the metrics after it."""
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in self.metrics.items())
        return (
            f"{self.workload}/{self.model}: {self.train_rows:,} train and {self.val_rows:,} "
            f"validation rows of {self.input_shape} {self.input_dtype}, {self.outputs} "
            f"output(s) ({self.task}); {self.parameters:,} parameters\n"
            f"loss {self.loss:.4g} after one step at batch {self.batch_size} on "
            f"{self.strategy}; {metrics}"
        )


def check_workload(
    spec: str,
    options: Mapping[str, Any] | None = None,
    *,
    model: str | None = None,
    strategy: str = "default",
    batch_size: int = 32,
    loss: str | None = None,
    learning_rate: float = 0.01,
    seed: int = 0,
) -> WorkloadCheck:
    """Check the workload ``spec`` (a built-in name or ``module:callable``) end to end.

    Raises:
        FieldError: on ``workload``, ``workload_options[.<option>]``, ``model``, ``loss``,
            ``strategy`` or ``batch_size``.
        UsageError: ``load()`` fails or returns bad data; the model cannot be built, trained or
            evaluated; the loss after one step is not finite.
    """
    resolved = resolve_workload(spec, options, model=model, loss=loss, validate=True)
    workload, model_name, task = resolved.workload, resolved.model, resolved.task
    data = _load(workload)
    check_data(data, task.kind)
    parsed = StrategySpec.parse(strategy)
    if parsed.kind is StrategyKind.MULTI_WORKER_MIRRORED:
        raise FieldError(
            "strategy",
            value=strategy,
            detail="a check runs in one process; use default, one_device or mirrored:N",
        )
    trial = TrialSpec(
        workload=spec,
        batch_size=batch_size,
        optimizer=OptimizerSpec(name="sgd", learning_rate=learning_rate),
        target=Target.parse(task.default_target),
        model=model_name,
        workload_options=dict(options or {}),
        strategy=str(parsed),
    )
    built, resolved_strategy = _strategy(parsed)
    return _train_one_step(trial, workload, data, task, built, resolved_strategy, seed)


def _load(workload: Workload) -> Dataset | Streams:
    try:
        data = workload.load()
    except UsageError:
        raise
    except Exception as exc:  # the user's load() failed
        raise UsageError(
            f"workload {workload.name!r}: load() failed ({_reason(exc)}); fix load(), it runs "
            "in the trainer worker before every trial"
        ) from exc
    if not isinstance(data, (Dataset, Streams)):
        raise UsageError(
            f"workload {workload.name!r}: load() returned {type(data).__name__}; return a "
            "study.workloads.base.Dataset(x_train, y_train, x_val, y_val, num_classes) or Streams"
        )
    return data


def _strategy(parsed: StrategySpec) -> tuple[Any, Any]:
    """The strategy built in this process (its logical CPUs split first, if still possible)."""
    from study.deps import quiet_stderr, require_tensorflow
    from study.strategies import build_strategy, configure_devices, probe_host, resolve

    require_tensorflow()
    with quiet_stderr():
        import tensorflow as tf
    with contextlib.suppress(RuntimeError):  # TensorFlow already started here: keep its devices
        configure_devices(tf, parsed.logical_cpus)
    try:
        resolved = resolve(str(parsed), probe_host(tf))
        return build_strategy(tf, resolved), resolved
    except InfeasibleError as exc:
        raise FieldError(
            "strategy", value=str(parsed), detail=f"cannot run here ({exc}); try default"
        ) from None


def _train_one_step(
    trial: TrialSpec,
    workload: Workload,
    data: Dataset | Streams,
    task: Any,
    strategy: Any,
    resolved: Any,
    seed: int,
) -> WorkloadCheck:
    """Build the session trials use, run one step and evaluate."""
    from study.strategies import check_batch_divisible
    from study.trainer.session import open_session

    check_batch_divisible(trial.batch_size, strategy.num_replicas_in_sync, strategy=trial.strategy)
    model_name = trial.model or workload.models[0]
    session, _, _ = open_session(
        trial, data, _builder(workload, model_name, data), strategy, resolved, task
    )
    session.start(seed)
    losses, _ = _stage("the training step", lambda: session.run(session.args(1)))
    step_loss = float(losses[-1])
    if not math.isfinite(step_loss):
        raise UsageError(
            f"the loss after one step is {step_loss}; check the labels against the task "
            f"({task.kind.value}) and that the model outputs logits (no softmax or sigmoid)"
        )
    metrics = _stage("evaluation", session.evaluate)
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    if bad:
        raise UsageError(
            f"{', '.join(bad)} is not finite after one step; check the validation data"
        )
    return WorkloadCheck(
        workload=workload.name or trial.workload,
        model=model_name,
        task=task.kind.value,
        strategy=str(resolved.requested),
        batch_size=trial.batch_size,
        train_rows=_rows(data, "train"),
        val_rows=_rows(data, "val"),
        input_shape=tuple(data.input_shape),
        input_dtype=str(getattr(data, "input_dtype", None) or data.x_train.dtype),
        outputs=data.outputs,
        parameters=int(session.model.count_params()),
        loss=step_loss,
        metrics=metrics,
    )


def _builder(workload: Workload, model: str, data: Dataset | Streams) -> Callable[[], Any]:
    def build() -> Any:
        try:
            return workload.build(model, data)
        except UsageError:
            raise
        except Exception as exc:  # the user's build_model() failed
            raise FieldError(
                "model",
                value=model,
                detail=f"building model {model!r} of workload {workload.name!r} failed "
                f"({_reason(exc)}); fix build_model(), it runs inside the strategy's scope",
            ) from exc

    return build


def _stage(what: str, run: Callable[[], Any]) -> Any:
    try:
        return run()
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(
            f"{what} failed ({_reason(exc)}); check that the model takes the data's input "
            "shape and its outputs suit the labels"
        ) from exc


def _rows(data: Dataset | Streams, part: str) -> int:
    if isinstance(data, Streams):
        return data.train_examples if part == "train" else data.val_examples
    return int((data.x_train if part == "train" else data.x_val).shape[0])


def _reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
