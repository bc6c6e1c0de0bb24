"""What the ledger stores about a trial, as typed records, and how they are encoded.

`LedgerTrial` is the only shape in which trials leave the ledger. This module is the one place
that knows the storage keys: `encode_result` writes a `TrialResult` (summary numbers, the whole
measurement curve as JSON, the environment, the data it trained on, the error, where the wall
time went) and
`decode_trial` reads everything back, side by side so the two cannot drift apart.
`split_stored` / `merge_stored` say where each key lives: the curve is a system attribute (out
of what optuna-dashboard shows; the dashboard gets the distance to the target as the trial's
intermediate values instead, `study.ledger.optuna_view`), everything else a user attribute. No Optuna import: decoding
takes the few plain fields of a stored trial.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from study.config.hold import Hold
from study.config.space import Stratum
from study.results import (
    FINE,
    NOISE,
    TIMING_PARTS,
    WALL,
    DataDescription,
    Measurement,
    TrialResult,
    TrialState,
    error_kind_of,
)

# Keys of a trial's stored attributes (Optuna user attributes).
STATUS = "status"
TUNER = "tuner"
ORIGIN = "origin"
OWNER = "owner"
BATCH_SIZE = "batch_size"
STRATEGY = "strategy"
CURVE = "curve"
#: Where the curve is stored: a system attribute (older ledgers: the user attribute `CURVE`).
CURVE_SYSTEM = "study:curve"
#: User attribute saying what the trial's objective value means.
OBJECTIVE = "objective"
#: User attribute holding the objective the tuners were told (Optuna's value of a pruned trial
#: is the steps it ran instead: `study.ledger.optuna_view`).
SCORE = "score"
ERROR = "error"
#: What kind of error it is (`ErrorKind`); records written before it have none (see
#: `study.results.error_kind_of`).
ERROR_KIND = "error_kind"
FINISHED_AT = "finished_at"
ENVIRONMENT = "environment"
#: User attribute holding the data the trial trained on (`DataDescription.to_stored`); records
#: written before it have none.
DATASET = "dataset"
#: User attribute holding where the trial's wall time went (`TrialResult.timings`, seconds).
TIMINGS = "timings"
#: User attribute holding the crossings of the target that did not hold (`TrialResult.fell_back`).
FELL_BACK = "fell_back"
#: User attribute holding the seed of a trial run under another seed than the study's.
SEED = "seed"
STEPS_TO_TARGET = "steps_to_target"
_SUMMARY = (
    STEPS_TO_TARGET,
    "examples_to_target",
    "seconds_to_target",
    "steps_run",
    "examples_run",
    "train_seconds",
)
#: User attributes written for Optuna readers only (`study.ledger.optuna_view`).
VIEW_KEYS = ("steps_more_than", "intermediate_values", "target_curve")
#: Keys with a meaning of their own; any other stored key is kept in `LedgerTrial.extras`.
KNOWN_KEYS = frozenset(
    (STATUS, TUNER, ORIGIN, OWNER, BATCH_SIZE, STRATEGY, CURVE, ERROR, FINISHED_AT, ENVIRONMENT)
) | frozenset((*_SUMMARY, OBJECTIVE, SCORE, TIMINGS, DATASET, *VIEW_KEYS))
_FIXED_CURVE_KEYS = ("step", "examples", "train_seconds", "train_loss")
MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class LedgerTrial:
    """One trial as the ledger holds it.

    ``number`` counts the trials of its stratum from 0 (MLflow run names ``b128/default#3``).
    ``open``: the storage still holds it as running (claimed and not closed, whatever its
    owner's fate). ``result`` is None until the trial finished (and for interrupted ones). ``origin`` says how
    its metaparameters were chosen (``sampler``, ``transfer``, ``retry``); ``extras`` holds
    backend bookkeeping (e.g. KerasTuner's trial id) and imported provenance.
    """

    stratum: Stratum
    number: int
    status: TrialState
    open: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)
    result: TrialResult | None = None
    tuner: str | None = None
    origin: Origin | None = None
    owner: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    score: float | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)

    @property
    def learning_rate(self) -> float:
        return float(self.params.get("learning_rate", self.extras.get("learning_rate", math.nan)))

    @property
    def steps_to_target(self) -> int | None:
        """Steps to target of a reached trial, else None."""
        if self.status is TrialState.REACHED and self.result is not None:
            return self.result.steps_to_target
        return None

    def rank(self) -> tuple[float, float, int]:
        """Sort key of reached trials: fewest steps, then the smaller learning rate, then number."""
        steps = self.steps_to_target
        return (math.inf if steps is None else steps, self.learning_rate, self.number)


Origin = Literal["sampler", "transfer", "retry", "confirm", "design", "warm"]
"""Who proposed a trial (`study.tuners.base.Proposal`): the backend's search, the rate predicted
from other batch sizes, a re-run of an interrupted proposal, a best point under another seed,
the design tuner, or another study's best (``tuner.warm_start``)."""

#: The origin of a confirmation trial (see `study.tuners.confirm`).
CONFIRM: Origin = "confirm"


def best_of(trials: list[LedgerTrial] | tuple[LedgerTrial, ...]) -> LedgerTrial | None:
    """The best reached search trial (fewest steps to target; ties: smaller learning rate), or
    None. Confirmation trials (origin ``confirm``: a best point re-run under another seed) are
    left out: they measure the spread over seeds (`study.analysis.seeds`), and a lucky seed must
    not become the stratum's best for pruning, progress and status.

    Example: trials reaching the target in 120 steps at lr 0.3 and 0.1 and in 150 at lr 0.2
    give the one at lr 0.1.
    """
    reached = [t for t in trials if t.steps_to_target is not None and t.origin != CONFIRM]
    return min(reached, key=LedgerTrial.rank, default=None)


def encode_result(result: TrialResult) -> dict[str, Any]:
    """The stored attributes of a finished trial's result (JSON-friendly)."""
    return {
        STATUS: result.state.value,
        STEPS_TO_TARGET: result.steps_to_target,
        "examples_to_target": result.examples_to_target,
        "seconds_to_target": result.seconds_to_target,
        "steps_run": result.steps_run,
        "examples_run": result.examples_run,
        "train_seconds": result.train_seconds,
        CURVE: encode_curve([m.as_row() for m in result.curve]),
        ENVIRONMENT: dict(result.environment),
        **({} if result.dataset is None else {DATASET: result.dataset.to_stored()}),
        ERROR: truncate_error(result.error),
        **({} if result.error_kind is None else {ERROR_KIND: result.error_kind.value}),
        TIMINGS: encode_timings(result.timings),
        **({FELL_BACK: [list(pair) for pair in result.fell_back]} if result.fell_back else {}),
        FINISHED_AT: time.time(),
    }


def encode_timings(timings: Mapping[str, float]) -> dict[str, float]:
    """A result's timings as stored: finite numbers only, in seconds.

    Example: ``{"train": 0.5, "build": nan}`` is stored as ``{"train": 0.5}``.
    """
    return {str(k): float(v) for k, v in timings.items() if _is_number(v) and math.isfinite(v)}


def decode_timings(attrs: Mapping[str, Any]) -> dict[str, float]:
    """The stored timings (empty for records written before timings existed)."""
    raw = attrs.get(TIMINGS)
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): float(v) for k, v in raw.items() if _is_number(v)}


def split_stored(attrs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Encoded attributes as (user attributes, system attributes): the curve goes to the
    system attributes."""
    user = {k: v for k, v in attrs.items() if k != CURVE}
    return user, ({CURVE_SYSTEM: attrs[CURVE]} if CURVE in attrs else {})


def merge_stored(user: Mapping[str, Any], system: Mapping[str, Any]) -> dict[str, Any]:
    """A stored trial's attributes in one mapping (the inverse of `split_stored`)."""
    merged = dict(user)
    if CURVE_SYSTEM in system:
        merged[CURVE] = system[CURVE_SYSTEM]
    return merged


def truncate_error(error: str | None) -> str | None:
    """The tail of a traceback, as stored (None for no error)."""
    return (error or "")[-MAX_ERROR_CHARS:] or None


def encode_curve(rows: list[Mapping[str, Any]]) -> str:
    """Measurement rows as stored: JSON, non-finite numbers as null."""
    return json.dumps([{k: _finite(v) for k, v in row.items()} for row in rows])


def decode_curve(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stored measurement rows (null metrics stay None)."""
    raw = attrs.get(CURVE)
    return json.loads(raw) if raw else []


#: Stored curves decoded, kept by their stored text (`_decoded_curve`): a finished trial's curve
#: never changes, and a study's decisions read every trial's result many times.
CURVES_KEPT = 16_384


@functools.lru_cache(maxsize=CURVES_KEPT)
def _decoded_curve(raw: str, batch_size: int) -> tuple[Measurement, ...]:
    """The measurements of a stored curve (its JSON text): parsed once per text and batch
    size, shared by every later read (a `Measurement` is frozen)."""
    return tuple(_measurement(row, batch_size) for row in json.loads(raw))


def decode_result(attrs: Mapping[str, Any], batch_size: int = 1) -> TrialResult:
    """The `TrialResult` written by `encode_result` (missing numbers read as 0 / None; a curve
    row without ``examples`` has processed ``step * batch_size``)."""
    raw = attrs.get(CURVE)
    if isinstance(raw, str) and raw:
        curve = _decoded_curve(raw, batch_size)
    else:
        curve = tuple(_measurement(row, batch_size) for row in decode_curve(attrs))
    state = TrialState(attrs.get(STATUS, TrialState.FAILED.value))
    error_kind, error = error_kind_of(attrs.get(ERROR_KIND), attrs.get(ERROR), state)
    return TrialResult(
        state=state,
        steps_run=int(attrs.get("steps_run") or 0),
        examples_run=int(attrs.get("examples_run") or 0),
        train_seconds=float(attrs.get("train_seconds") or 0.0),
        steps_to_target=attrs.get(STEPS_TO_TARGET),
        examples_to_target=attrs.get("examples_to_target"),
        seconds_to_target=attrs.get("seconds_to_target"),
        curve=curve,
        environment=attrs.get(ENVIRONMENT) or {},
        dataset=DataDescription.from_stored(attrs.get(DATASET)),
        error=error,
        error_kind=error_kind,
        timings=decode_timings(attrs),
        fell_back=tuple((int(a), int(b)) for a, b in attrs.get(FELL_BACK) or ()),
    )


def decode_trial(
    stratum: Stratum,
    number: int,
    attrs: Mapping[str, Any],
    params: Mapping[str, Any],
    started_at: float | None,
    *,
    open: bool,
) -> LedgerTrial:
    """A stored trial as a `LedgerTrial` (``attrs``: its user attributes)."""
    status = TrialState(attrs.get(STATUS, TrialState.RUNNING.value))
    finished = status.is_outcome()
    return LedgerTrial(
        stratum=stratum,
        number=number,
        status=status,
        open=open,
        params=dict(params),
        result=decode_result(attrs, stratum.batch_size) if finished else None,
        tuner=attrs.get(TUNER),
        origin=attrs.get(ORIGIN),
        owner=attrs.get(OWNER),
        started_at=started_at,
        finished_at=attrs.get(FINISHED_AT),
        score=attrs.get(SCORE),
        extras={k: v for k, v in attrs.items() if k not in KNOWN_KEYS},
    )


def _measurement(row: Mapping[str, Any], batch_size: int) -> Measurement:
    values = {
        k: (math.nan if v is None else v)
        for k, v in row.items()
        if k not in _FIXED_CURVE_KEYS and k != FINE
    }
    step = int(row["step"])
    return Measurement(
        step=step,
        examples=int(row["examples"]) if row.get("examples") is not None else step * batch_size,
        train_seconds=_float(row.get("train_seconds")),
        train_loss=_float(row.get("train_loss")),
        metrics={k: v for k, v in values.items() if not k.startswith(NOISE)},
        noise={k.removeprefix(NOISE): v for k, v in values.items() if k.startswith(NOISE)},
        fine=bool(row.get(FINE)),
    )


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class StudyRecord:
    """The study itself: how it was defined (``kind`` ``study``) or where it came from
    (``imported``), its trial budget, and the code that created it (``code_version``,
    `study.version.code_version`; None for studies from before it was recorded)."""

    name: str
    kind: str = "study"
    config_text: str | None = None
    config_source: str | None = None
    fingerprint: str | None = None
    #: The target's hold rule (`Hold.to_param`); None: a study from before it (first crossing).
    hold: str | None = None
    #: ``tuner.prune_slack`` as the study ran; None: a study from before it (a trial was stopped
    #: at its batch size's best steps itself, a slack of 1).
    prune_slack: float | None = None
    tuner: str | None = None
    trials_total: int = 0
    created: float | None = None
    source: str | None = None
    dataset: str | None = None
    model: str | None = None
    optimizer: str | None = None
    code_version: str | None = None

    @property
    def imported(self) -> bool:
        return self.kind == "imported"

    @property
    def pruned_at(self) -> float:
        """The slack its pruning ran with (`prune_slack`; 1 for studies from before it)."""
        return 1.0 if self.prune_slack is None else float(self.prune_slack)

    @property
    def hold_rule(self) -> Hold:
        """The rule its steps to target follow (`Hold.OFF` for studies from before it)."""
        return Hold.from_param(self.hold)

    def to_attrs(self) -> dict[str, Any]:
        """The stored attributes (unset fields left out)."""
        return {
            k: v
            for k, v in self.__dict__.items()
            if k != "name" and v is not None and not (k == "trials_total" and not v)
        }

    @classmethod
    def from_attrs(cls, name: str, attrs: Mapping[str, Any]) -> StudyRecord:
        fields = {k: attrs[k] for k in cls.__dataclass_fields__ if k in attrs and k != "name"}
        fields["trials_total"] = int(fields.get("trials_total") or 0)
        return cls(name=name, **fields)


#: The keys a `TimingSummary` reports, in display order.
TIMING_KEYS: tuple[str, ...] = (*TIMING_PARTS, WALL)


@dataclass(frozen=True)
class TimingSummary:
    """Where the wall time of some trials went: per key of `TIMING_KEYS`, the seconds summed
    over the trials that measured it and how many did.

    A trial counts if it has a wall time. Its ``train`` part falls back on its training
    seconds (the same timed calls) when its trainer reported no parts. ``train_share`` is the
    training seconds over the wall time of those trials (None if no trial was timed).

    Example: two trials of wall 1.0 s and 3.0 s training 0.5 s and 1.5 s give mean wall 2.0 s,
    mean train 1.0 s and a train share of 0.5.
    """

    totals: Mapping[str, float] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Iterable[TrialResult]) -> TimingSummary:
        totals: dict[str, float] = {}
        counts: dict[str, int] = {}
        for result in results:
            timings = dict(result.timings)
            if WALL not in timings:
                continue
            timings.setdefault("train", result.train_seconds)
            for key in TIMING_KEYS:
                if key in timings:
                    totals[key] = totals.get(key, 0.0) + float(timings[key])
                    counts[key] = counts.get(key, 0) + 1
        return cls(totals, counts)

    @property
    def trials(self) -> int:
        """How many trials were timed."""
        return self.counts.get(WALL, 0)

    def mean(self, key: str) -> float | None:
        """Mean seconds per trial of ``key`` over the trials that measured it (None if none)."""
        count = self.counts.get(key, 0)
        return self.totals[key] / count if count else None

    @property
    def train_share(self) -> float | None:
        wall = self.totals.get(WALL, 0.0)
        return self.totals.get("train", 0.0) / wall if wall > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "mean_seconds": {k: self.mean(k) for k in TIMING_KEYS if k in self.counts},
            "total_seconds": {k: self.totals[k] for k in TIMING_KEYS if k in self.counts},
            "train_share": self.train_share,
        }
