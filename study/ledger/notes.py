"""The study's own notes, kept beside its trials, as typed records with their stored form.

A study keeps three notes that are not trials (they consume no budget and are no results):
`Pilot`, a pilot run's gradient noise scale (``study noise-scale --study NAME``, or the pilot
of an adaptive allocation); `ThroughputRow`, seconds per step of one (batch size, strategy)
from ``study probe``; and `AllocationState`, the budgets and `Decision`s of an allocation in
rounds (an extension's `study.runner.allocator.Allocator`; ``study status`` reads where it
ended). Each is a frozen dataclass with ``to_stored()`` (JSON-safe: NaN
and infinities as None, numpy numbers as Python ones) and ``from_stored()``, which also reads
what older ledgers stored (missing keys take their defaults; unknown ones are kept).
`study.ledger.study_notes` stores them. No Optuna import: analysis reads these records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from study.config.space import Stratum

#: The keys of a stored pilot, in order.
PILOT_KEYS: tuple[str, ...] = (
    "batch_size",
    "strategy",
    "learning_rate",
    "seed",
    "steps_run",
    "target",
    "at_step",
    "b_simple",
    "b_simple_low",
    "b_simple_high",
    "curve",
)


@dataclass(frozen=True)
class Pilot:
    """A pilot's noise scale: where it ran and B_simple over its steps.

    ``at_step`` is where its result is read: the step the target was met, else its last step;
    ``b_simple`` and its 95% interval ``b_simple_low``..``b_simple_high`` are the estimate there
    (NaN when there was none yet). ``curve`` holds ``(step, b_simple, low, high)`` at every
    evaluation that measured it.
    """

    batch_size: int
    strategy: str
    learning_rate: float
    seed: int
    steps_run: int
    target: str
    at_step: int
    b_simple: float
    b_simple_low: float = math.nan
    b_simple_high: float = math.nan
    curve: tuple[tuple[int, float, float, float], ...] = field(default_factory=tuple)

    @property
    def measured(self) -> bool:
        """Whether the pilot has an estimate (a finite, positive B_simple)."""
        return math.isfinite(self.b_simple) and self.b_simple > 0

    def to_stored(self) -> dict[str, Any]:
        """The stored form: JSON-safe (NaN becomes None), keys `PILOT_KEYS`."""
        out: dict[str, Any] = {k: getattr(self, k) for k in PILOT_KEYS if k != "curve"}
        for key in ("b_simple", "b_simple_low", "b_simple_high", "learning_rate"):
            out[key] = _finite(out[key])
        out["curve"] = [[step, *(_finite(v) for v in values)] for step, *values in self.curve]
        return out

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> Pilot:
        """The inverse of `to_stored` (None reads as NaN)."""
        values = {k: data[k] for k in PILOT_KEYS if k != "curve"}
        for key in ("b_simple", "b_simple_low", "b_simple_high", "learning_rate"):
            values[key] = math.nan if values[key] is None else float(values[key])
        curve = tuple(
            (int(row[0]), *(math.nan if v is None else float(v) for v in row[1:4]))
            for row in data.get("curve", ())
        )
        return cls(**values, curve=curve)


@dataclass(frozen=True)
class ThroughputRow:
    """Seconds per step of one (batch size, strategy), measured by ``study probe``.

    ``seconds_per_step`` is the median over the repeats that trained all their steps (None
    when none did: ``error`` says why), ``seconds_low``/``seconds_high`` their spread and
    ``samples`` every one. The rest says how it was measured; ``extras`` keeps stored keys of
    no field of their own.

    Example: ``ThroughputRow(128, "mirrored:2", 2, 0.0021)`` stores as ``{"batch_size": 128,
    "strategy": "mirrored:2", "replicas": 2, "seconds_per_step": 0.0021, "seconds_low": None,
    "seconds_high": None, "samples": []}``.
    """

    batch_size: int
    strategy: str
    replicas: int | None = None
    seconds_per_step: float | None = None
    seconds_low: float | None = None
    seconds_high: float | None = None
    samples: tuple[float, ...] = ()
    learning_rate: float | None = None
    devices: str | None = None
    tensorflow: str | None = None
    error: str | None = None
    measured_at: str | None = None
    hardware: str | None = None
    steps: int | None = None
    repeats: int | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[int, str]:
        """What a newer probe of the same row replaces it by: (batch size, strategy)."""
        return self.batch_size, self.strategy

    def to_stored(self) -> dict[str, Any]:
        """The stored form: the measurement always, how it was measured where known."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extras" or (value is None and f.name not in _ALWAYS):
                continue
            out[f.name] = list(value) if f.name == "samples" else value
        out.update(self.extras)
        return {k: _json_value(v) for k, v in out.items()}

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> ThroughputRow:
        """The row `to_stored` wrote (or an older probe wrote: missing keys read as None)."""
        known = {f.name for f in fields(cls)} - {"extras"}
        values: dict[str, Any] = {k: _json_value(v) for k, v in data.items() if k in known}
        values["batch_size"] = int(values["batch_size"])
        values["strategy"] = str(values["strategy"])
        values["samples"] = tuple(float(s) for s in values.get("samples") or () if s is not None)
        extras = {k: _json_value(v) for k, v in data.items() if k not in known}
        return cls(**values, extras=extras)


#: The fields of a `ThroughputRow` stored even when unknown (None).
_ALWAYS = frozenset(
    ("batch_size", "strategy", "replicas", "seconds_per_step", "seconds_low", "seconds_high")
)


@dataclass(frozen=True)
class Decision:
    """Trials given to a stratum in a round of an allocation, and why (negative: trials taken
    back from its budget, as when a study's training steps are spent)."""

    round: int
    stratum: str
    trials: int
    reason: str

    def line(self) -> str:
        return f"allocation round {self.round}: {self.stratum} {self.trials:+d}: {self.reason}"


@dataclass(frozen=True)
class AllocationState:
    """An allocation's state: its ``total`` trials, the rounds decided of ``rounds``, the
    budget of each stratum, every decision so far (round 0: the grid) and, once it ended before
    its total, why (``closed``)."""

    total: int
    round: int
    rounds: int
    budgets: Mapping[Stratum, int] = field(default_factory=dict)
    decisions: tuple[Decision, ...] = ()
    #: Why the allocation ended before its total ("" while it has not): an allocation by
    #: steps whose training steps are spent. The study is then complete at its budgets.
    closed: str = ""

    def to_stored(self) -> dict[str, Any]:
        """The stored form, e.g. ``{"total": 20, "round": 1, "rounds": 3, "budgets":
        {"b64/default": 5}, "decisions": [{"round": 0, "stratum": "b64/default", ...}]}``."""
        return {
            "total": self.total,
            "round": self.round,
            "rounds": self.rounds,
            "budgets": {str(s): n for s, n in self.budgets.items()},
            "decisions": [
                {"round": d.round, "stratum": d.stratum, "trials": d.trials, "reason": d.reason}
                for d in self.decisions
            ],
            **({"closed": self.closed} if self.closed else {}),
        }

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> AllocationState:
        """The inverse of `to_stored` (``total`` and ``rounds`` 0 where a state lacks them)."""
        return cls(
            total=int(data.get("total") or 0),
            round=int(data["round"]),
            rounds=int(data.get("rounds") or 0),
            budgets={Stratum.parse(k): int(v) for k, v in data["budgets"].items()},
            decisions=tuple(Decision(**d) for d in data.get("decisions") or ()),
            closed=str(data.get("closed") or ""),
        )


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _json_value(value: Any) -> Any:
    """A value as JSON takes it: numpy scalars as Python numbers, non-finite floats as None."""
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
