"""What a trial produces: its state, its measurement curve, its summary numbers and a
description of the data it trained on."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class TrialState(str, enum.Enum):
    """Every status a trial can have, in the trainer and in the ledger.

    Outcomes of training: ``reached`` (the target held at some evaluation), ``not_reached``
    (the budget ran out first), ``diverged`` (the loss became NaN/inf), ``pruned`` (stopped early
    because it could no longer win its stratum), ``failed`` (an exception), ``infeasible`` (the
    host cannot run it). Ledger bookkeeping: ``running`` (claimed, not finished),
    ``interrupted`` (its process died or was stopped; its slot runs again) and ``discarded``
    (a claim beyond the stratum's budget; it never ran). The last two consume no budget.
    """

    RUNNING = "running"
    REACHED = "reached"
    NOT_REACHED = "not_reached"
    DIVERGED = "diverged"
    PRUNED = "pruned"
    FAILED = "failed"
    INFEASIBLE = "infeasible"
    INTERRUPTED = "interrupted"
    DISCARDED = "discarded"

    def is_finished(self) -> bool:
        """Whether the trial is over (whatever the reason)."""
        return self is not TrialState.RUNNING

    def is_outcome(self) -> bool:
        """Whether this is how a trial's training ended (not running, interrupted or discarded)."""
        return self not in (TrialState.RUNNING, TrialState.INTERRUPTED, TrialState.DISCARDED)

    def counts(self) -> bool:
        """Whether a trial in this state consumes its stratum's budget."""
        return self not in (TrialState.INTERRUPTED, TrialState.DISCARDED)

    def __str__(self) -> str:
        return self.value


class ErrorKind(str, enum.Enum):
    """Why a trial ended with an error: ``usage`` (bad input: a file, a column, a model or a
    loss; the CLI says it in one line and exits 2), ``infeasible`` (the host cannot provide the
    strategy) or ``crash`` (an unexpected exception; its traceback is the error text)."""

    USAGE = "usage"
    INFEASIBLE = "infeasible"
    CRASH = "crash"

    def __str__(self) -> str:
        return self.value


#: How records written before `ErrorKind` marked a usage error: a prefix of the error text.
LEGACY_USAGE_PREFIX = "UsageError: "


def error_kind_of(
    kind: str | None, error: str | None, state: TrialState
) -> tuple[ErrorKind | None, str | None]:
    """The kind and text of a stored error; an older record (no kind) is read from its text:
    ``UsageError: ...`` is a usage error (the prefix dropped), an infeasible trial's error is
    infeasible, any other error a crash."""
    if kind is not None:
        return ErrorKind(kind), error
    if not error:
        return None, error
    if error.startswith(LEGACY_USAGE_PREFIX):
        return ErrorKind.USAGE, error.removeprefix(LEGACY_USAGE_PREFIX)
    return (ErrorKind.INFEASIBLE if state is TrialState.INFEASIBLE else ErrorKind.CRASH), error


#: The prefix of gradient-noise columns in a measurement row (``noise/b_simple``, ...).
NOISE = "noise/"
#: The column marking a fine evaluation (one made while replaying to the exact target step).
FINE = "fine"


@dataclass(frozen=True)
class Measurement:
    """One evaluation: training progress so far and every validation metric.

    ``noise`` holds the gradient noise scale estimate at this step (``b_simple``, ``grad_sq``,
    ``trace_sigma``) when the trial measures it; ``fine`` marks an evaluation made while
    replaying the steps around a crossing of the target one at a time (exact steps to target),
    as opposed to one on the trial's evaluation cadence.
    """

    step: int
    examples: int
    train_seconds: float
    train_loss: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    noise: Mapping[str, float] = field(default_factory=dict)
    fine: bool = False

    def as_row(self) -> dict[str, float]:
        """The flat row: progress, metrics, ``noise/<key>`` columns and ``fine`` (if set)."""
        row = {
            "step": self.step,
            "examples": self.examples,
            "train_seconds": self.train_seconds,
            "train_loss": self.train_loss,
        }
        row.update(self.metrics)
        row.update({NOISE + k: v for k, v in self.noise.items()})
        if self.fine:
            row[FINE] = 1
        return row


#: The parts of a trial's wall time: building the model and optimizer (or re-initialising a
#: reused one), tracing and warming up compiled functions, training (the timed compiled calls),
#: evaluating, replaying the steps before the target was met to find the exact step (training
#: again from a saved state, evaluating every step), and bookkeeping (everything else:
#: messages, ledger and tracking writes).
TIMING_PARTS: tuple[str, ...] = ("build", "trace", "train", "evaluate", "replay", "bookkeeping")
#: The key of the whole wall time in `TrialResult.timings`: from handing the trial to a worker
#: to the end of recording it; the parts add up to it (bookkeeping is the remainder).
WALL = "wall"


@dataclass(frozen=True)
class DataDescription:
    """What a trial trained on, as the worker that loaded the data saw it.

    ``name`` says what the data are (``mnist1d`` with the options that differ from the
    workload's defaults, or a data file's name), ``source`` where they come from (the generator
    call with every option, or the data path) and ``source_type`` which kind of source that is
    (``code`` or ``local``, MLflow's words). ``digest`` is a stable hash of the data (16 hex
    digits; `study.workloads.describe` says of what), ``train_rows`` and ``val_rows`` count the
    examples of each split and ``schema`` holds ``(column, type)`` pairs, e.g.
    ``(("features", "float32[40]"), ("label", "int32[]"), ("outputs", "10"))``.
    """

    name: str
    source: str
    digest: str
    train_rows: int
    val_rows: int
    source_type: str = "code"
    schema: tuple[tuple[str, str], ...] = ()

    def to_stored(self) -> dict[str, Any]:
        """The JSON-friendly form the ledger stores."""
        return {**self.__dict__, "schema": [list(pair) for pair in self.schema]}

    @classmethod
    def from_stored(cls, stored: Any) -> DataDescription | None:
        """The description `to_stored` wrote; None for a record without one (or unreadable)."""
        if not isinstance(stored, Mapping):
            return None
        try:
            return cls(
                name=str(stored["name"]),
                source=str(stored["source"]),
                digest=str(stored["digest"]),
                train_rows=int(stored["train_rows"]),
                val_rows=int(stored["val_rows"]),
                source_type=str(stored.get("source_type") or "code"),
                schema=tuple((str(k), str(v)) for k, v in stored.get("schema") or ()),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class TrialResult:
    """The outcome of one training run.

    ``steps_to_target`` is the first step from which the target held through its hold window
    (Shallue et al.'s steps to result, with `study.config.hold`'s rule), ``None`` unless the
    state is ``reached``; ``fell_back`` lists each earlier crossing that did not hold, as
    ``(step it met the target, step it failed again)``. Its ``repr`` leaves out the curve,
    the environment, the error text and the timings (see `frame` for the curve).
    """

    state: TrialState
    steps_run: int = 0
    examples_run: int = 0
    train_seconds: float = 0.0
    steps_to_target: int | None = None
    examples_to_target: int | None = None
    seconds_to_target: float | None = None
    curve: tuple[Measurement, ...] = field(default=(), repr=False)
    fell_back: tuple[tuple[int, int], ...] = ()
    environment: Mapping[str, Any] = field(default_factory=dict, repr=False)
    error: str | None = field(default=None, repr=False)
    #: What kind of error ``error`` is (None without one).
    error_kind: ErrorKind | None = None
    #: The data it trained on (None when they were never loaded, and in older records).
    dataset: DataDescription | None = None
    #: Where the trial's wall time went, in seconds: `TIMING_PARTS` (those measured) and `WALL`.
    timings: Mapping[str, float] = field(default_factory=dict, repr=False)

    def frame(self) -> Any:
        """The measurement curve as a pandas DataFrame, one row per evaluation
        (`Measurement.as_row`: step, examples, train_seconds, train_loss, the validation
        metrics, ``noise/*``, ``fine``)."""
        import pandas as pd

        return pd.DataFrame([m.as_row() for m in self.curve])

    @property
    def usage_error(self) -> str | None:
        """The one-line message of a usage error (bad input found while the trial ran), else
        None."""
        if self.error_kind is not ErrorKind.USAGE or not self.error:
            return None
        return self.error.strip().splitlines()[0]

    @property
    def steps_per_second(self) -> float:
        return self.steps_run / self.train_seconds if self.train_seconds > 0 else math.nan

    @property
    def examples_per_second(self) -> float:
        return self.examples_run / self.train_seconds if self.train_seconds > 0 else math.nan

    def summary_metrics(self) -> dict[str, float]:
        """Summary numbers (finite values only), for logging."""
        values = {
            "steps_to_target": self.steps_to_target,
            "examples_to_target": self.examples_to_target,
            "seconds_to_target": self.seconds_to_target,
            "steps_run": self.steps_run,
            "examples_run": self.examples_run,
            "train_seconds": self.train_seconds,
            "steps_per_second": self.steps_per_second,
            "examples_per_second": self.examples_per_second,
            "crossings_fell_back": len(self.fell_back),
        }
        return {k: float(v) for k, v in values.items() if v is not None and math.isfinite(v)}
