"""A batch-size schedule: the global batch per examples seen, the learning rate scaled with it.

A `BatchSchedule` is an ordered list of `Stage` s, each ``(from_examples, batch_size)``: the
first starts at 0 examples, later ones at more examples and a larger batch. A step takes the
batch of the stage the examples seen before it fall in, so a stage begins at the first step at
which at least ``from_examples`` examples have been seen (steps are optimizer steps; examples
are the sum of the steps' batch sizes). The learning rate follows the batch by a power law,
``lr(B) = learning_rate * (B / B0) ** alpha`` with ``B0`` the first stage's batch size
(``alpha`` 0.5 is the square-root rule, 1 the linear one, 0 keeps the rate), with the
study's linear warmup over the first ``warmup_steps`` optimizer steps on top. With
``stage_warmup_steps: N`` a later stage's first N steps ramp the rate linearly from the previous
stage's to its own (step k of the stage at ``prev + (new - prev) (k + 1) / (N + 1)``), so a
larger rate does not hit weights and momentum tuned to the smaller one all at once.

The study-file section (`from_mapping` reads it, `to_mapping` / `snippet` write it)::

    batch_schedule:
      learning_rate: 0.01        # at the first stage's batch size
      lr_scaling: {alpha: 0.5}   # lr(B) = learning_rate * (B / B0) ** alpha
      warmup_steps: 0            # optional; linear warmup over the first N optimizer steps
      stage_warmup_steps: 0      # optional; ramp the rate over a later stage's first N steps
      stages:
        - {from_examples: 0, batch_size: 32}
        - {from_examples: 40960, batch_size: 128}
      seeds: 3                   # optional (a study's schedule trials; default 3)
      strategy: default          # optional (default: the study's first strategy)

``seeds`` and ``strategy`` say how a study runs the schedule (its schedule trials, the extension
`study.ext.schedules`); the schedule itself is the rest (`read_section` reads both; ``study
train --batch-schedule FILE`` takes the schedule). Example::

    s = BatchSchedule((Stage(0, 32), Stage(40960, 128)), learning_rate=0.01, alpha=0.5)
    s.batch_size_at(40959), s.batch_size_at(40960)   # 32, 128
    s.learning_rate_for(128)                          # 0.02
    s.stage_starts()                                  # ((0, 0), (1280, 40960)): (step, examples)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from study.config.flow_yaml import Flow, FlowDumper
from study.config.rules import FieldError, check
from study.config.yaml_reader import Reader, load_yaml_file
from study.errors import UsageError
from study.paths import is_file

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_SEEDS",
    "SCHEDULE_KEYS",
    "SECTION",
    "BatchSchedule",
    "Stage",
    "format_stages",
    "load_schedule",
    "parse_stages",
    "read_section",
    "schedule_under",
]

#: The study-file key of the section.
SECTION = "batch_schedule"
#: The square-root rule unless the section says otherwise.
DEFAULT_ALPHA = 0.5
#: Schedule trials a study runs unless ``seeds`` says otherwise (`study.ext.schedules`).
DEFAULT_SEEDS = 3
SCHEDULE_KEYS = ("learning_rate", "lr_scaling", "warmup_steps", "stage_warmup_steps", "stages")
TRIAL_KEYS = ("seeds", "strategy")
STAGE_KEYS = ("from_examples", "batch_size")


@dataclass(frozen=True)
class Stage:
    """From ``from_examples`` examples seen on, train at global batch ``batch_size``."""

    from_examples: int
    batch_size: int


@dataclass(frozen=True)
class BatchSchedule:
    """Stages of global batch size over examples seen, and the learning rate per batch size.

    Rules (each broken one a `FieldError` naming ``stages[i].KEY``, ``learning_rate``,
    ``lr_scaling.alpha``, ``warmup_steps`` or ``stage_warmup_steps``): at least one stage; the
    first from 0 examples; ``from_examples`` and ``batch_size`` strictly increasing from stage
    to stage (a ramp-up); batch sizes integers >= 1; ``learning_rate`` > 0; ``alpha`` finite;
    ``warmup_steps`` and ``stage_warmup_steps`` integers >= 0.
    """

    stages: tuple[Stage, ...]
    learning_rate: float
    alpha: float = DEFAULT_ALPHA
    warmup_steps: int = 0
    stage_warmup_steps: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        if not self.stages:
            raise FieldError("stages", "must list at least one {from_examples, batch_size}", [])
        for i, stage in enumerate(self.stages):
            for key in STAGE_KEYS:
                value = getattr(stage, key)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise FieldError(f"stages[{i}].{key}", "must be an integer", value)
            check(f"stages[{i}].batch_size", stage.batch_size, ">= 1")
        if self.stages[0].from_examples != 0:
            raise FieldError(
                "stages[0].from_examples",
                "must be 0 (the first stage starts training)",
                self.stages[0].from_examples,
            )
        for i, (before, stage) in enumerate(zip(self.stages, self.stages[1:]), start=1):
            for key in STAGE_KEYS:
                if getattr(stage, key) <= getattr(before, key):
                    raise FieldError(
                        f"stages[{i}].{key}",
                        f"must be greater than stages[{i - 1}].{key} ({getattr(before, key)}): "
                        "a schedule increases",
                        getattr(stage, key),
                    )
        check("learning_rate", self.learning_rate, "> 0")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)):
            raise FieldError("lr_scaling.alpha", "must be a number", self.alpha)
        if not math.isfinite(self.alpha):
            raise FieldError("lr_scaling.alpha", "must be finite", self.alpha)
        for key in ("warmup_steps", "stage_warmup_steps"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise FieldError(key, "must be an integer", value)
            check(key, value, ">= 0", unit="steps")

    # ----------------------------------------------------------------------------------------
    # Reading the schedule

    @property
    def first_batch_size(self) -> int:
        """``B0``, the batch size the learning rate is given at."""
        return self.stages[0].batch_size

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(stage.batch_size for stage in self.stages)

    def stage_index(self, examples: int) -> int:
        """The stage a step starts in after ``examples`` examples seen."""
        return max(i for i, stage in enumerate(self.stages) if examples >= stage.from_examples)

    def batch_size_at(self, examples: int) -> int:
        """The global batch of the step that starts after ``examples`` examples seen."""
        return self.stages[self.stage_index(examples)].batch_size

    def learning_rate_for(self, batch_size: int) -> float:
        """``learning_rate * (batch_size / B0) ** alpha`` (before warmup)."""
        return float(self.learning_rate * (batch_size / self.first_batch_size) ** self.alpha)

    def stage_starts(self) -> tuple[tuple[int, int], ...]:
        """``(step, examples)`` at which each stage's first step starts: stage i+1 starts at
        the first step of stage i after which ``stages[i+1].from_examples`` have been seen (a
        stage passed over within one step starts and ends at the same point: no steps).

        Example: stages (0, 32), (100, 64) -> ((0, 0), (4, 128)): 4 steps of 32 reach 128 >= 100.
        """
        starts = [(0, 0)]
        for before, stage in zip(self.stages, self.stages[1:]):
            step, seen = starts[-1]
            steps = max(0, math.ceil((stage.from_examples - seen) / before.batch_size))
            starts.append((step + steps, seen + steps * before.batch_size))
        return tuple(starts)

    def examples_after(self, steps: int) -> int:
        """The examples seen after ``steps`` optimizer steps."""
        seen = step = 0
        for (start, start_seen), stage in zip(self.stage_starts(), self.stages):
            if steps < start:
                break
            step, seen, batch = start, start_seen, stage.batch_size
        return seen + (steps - step) * batch

    def step_limit(self, budget_steps: int | None, budget_examples: int | None) -> int | None:
        """The steps the budget allows: at most ``budget_steps`` optimizer steps and the most
        steps whose examples stay within ``budget_examples`` (at least 1); None: unbounded.

        Example: stages (0, 32), (320, 64), 1,000 examples -> 10 steps of 32 then 10 of 64 (the
        11th step of 64 would pass 1,000): 20.
        """
        limits = [budget_steps] if budget_steps is not None else []
        if budget_examples is not None:
            limits.append(max(1, self.steps_within(budget_examples)))
        return min(limits) if limits else None

    def steps_within(self, examples: int) -> int:
        """The most steps whose examples seen stay within ``examples``."""
        steps = 0
        starts = self.stage_starts()
        for i, ((start, seen), stage) in enumerate(zip(starts, self.stages)):
            end = starts[i + 1][0] if i + 1 < len(starts) else None
            if seen > examples:
                break
            room = (examples - seen) // stage.batch_size
            steps = start + (room if end is None else min(room, end - start))
        return steps

    def next_start(self, step: int) -> int | None:
        """The step the next stage after ``step``'s begins at (None: in the last stage)."""
        later = [start for start, _ in self.stage_starts() if start > step]
        return min(later) if later else None

    def stage_of_step(self, step: int) -> int:
        """The stage whose batch step ``step`` (0-based) takes."""
        return self.stage_index(self.examples_after(step))

    def check_replicas(self, replicas: int, strategy: str = "") -> None:
        """Raise `FieldError` (``stages[i].batch_size``) unless every batch divides by
        ``replicas`` (the per-replica batch is the global batch / replicas)."""
        for i, stage in enumerate(self.stages):
            if stage.batch_size % replicas:
                on = f" on {strategy}" if strategy else ""
                raise FieldError(
                    f"stages[{i}].batch_size",
                    f"must be divisible by the {replicas} replicas{on}",
                    stage.batch_size,
                )

    # ----------------------------------------------------------------------------------------
    # As data

    def digest(self) -> str:
        """8 hex digits naming this schedule (stages, rate rule, warmup): its trials' cell."""
        text = json.dumps(self.to_mapping(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def to_params(self) -> dict[str, Any]:
        """Flat params for MLflow: ``batch_schedule`` (the stages as ``B@EXAMPLES,...``), the
        rate rule and warmup."""
        return {
            "batch_schedule": format_stages(self.stages),
            "batch_schedule.learning_rate": self.learning_rate,
            "batch_schedule.alpha": self.alpha,
            "batch_schedule.warmup_steps": self.warmup_steps,
            "batch_schedule.stage_warmup_steps": self.stage_warmup_steps,
        }

    def to_mapping(self) -> dict[str, Any]:
        """The section's mapping (`from_mapping` reads it back to an equal schedule)."""
        data: dict[str, Any] = {
            "learning_rate": float(self.learning_rate),
            "lr_scaling": {"alpha": float(self.alpha)},
        }
        if self.warmup_steps:
            data["warmup_steps"] = self.warmup_steps
        if self.stage_warmup_steps:  # only when set: schedules without it keep their digest
            data["stage_warmup_steps"] = self.stage_warmup_steps
        data["stages"] = [
            {"from_examples": s.from_examples, "batch_size": s.batch_size} for s in self.stages
        ]
        return data

    @classmethod
    def from_mapping(
        cls, value: Any, source: str = "<memory>", path: str = SECTION
    ) -> BatchSchedule:
        """Read the section's schedule keys (`SCHEDULE_KEYS`; no others).

        Raises:
            UsageError: one line, ``SOURCE: batch_schedule.KEY RULE (got VALUE)``.
        """
        r = Reader(source)
        data = r.keys(value, path, SCHEDULE_KEYS, ("learning_rate", "stages"))
        return _read(r, data, path)

    def snippet(self, *, seeds: int | None = None, strategy: str | None = None) -> str:
        """The study-file section as YAML text (``batch_schedule:`` and its keys), with the
        trial keys ``seeds`` / ``strategy`` when given; paste it into a study file."""
        section = self.to_mapping()
        section["stages"] = Flow(section["stages"])
        if seeds is not None:
            section["seeds"] = seeds
        if strategy is not None:
            section["strategy"] = strategy
        lines = yaml.dump({SECTION: section}, Dumper=FlowDumper, sort_keys=False).splitlines()
        b0 = self.first_batch_size
        note = f"  # lr(B) = learning_rate * (B / {b0}) ** alpha; learning_rate at B0 = {b0}"
        return "\n".join([lines[0] + note, *lines[1:]]) + "\n"


def read_section(
    r: Reader, value: Any, path: str = SECTION
) -> tuple[BatchSchedule, int, str | None]:
    """A ``batch_schedule`` section (a study file's, or a snippet `BatchSchedule.snippet`
    wrote): its schedule, and the keys that say how a study runs it, ``seeds`` (default
    `DEFAULT_SEEDS`) and ``strategy`` (None: the study's first).

    Raises:
        UsageError: one line, ``SOURCE: batch_schedule.KEY RULE (got VALUE)``.
    """
    data = r.keys(value, path, (*SCHEDULE_KEYS, *TRIAL_KEYS), ("learning_rate", "stages"))
    schedule = _read(r, {k: v for k, v in data.items() if k in SCHEDULE_KEYS}, path)
    seeds = r.integer(data.get("seeds", DEFAULT_SEEDS), f"{path}.seeds", rule=">= 1")
    strategy = data.get("strategy")
    if strategy is not None:
        strategy = r.string(strategy, f"{path}.strategy")
    return schedule, seeds, strategy


def load_schedule(
    value: BatchSchedule | Mapping[str, Any] | str | Path,
    *,
    learning_rate: float,
    alpha: float | None = None,
    warmup_steps: int = 0,
    stage_warmup_steps: int = 0,
    source: str = "batch_schedule",
) -> BatchSchedule:
    """A schedule from what a user gives: a `BatchSchedule`; a mapping (the section's keys, or
    a study file's mapping holding a ``batch_schedule`` section); the path of a YAML file
    holding either (a study file, or the snippet `BatchSchedule.snippet` writes); or inline
    stages (`parse_stages`) trained at ``learning_rate`` at the first batch size, scaled by
    ``alpha`` (default 0.5), with ``warmup_steps`` and ``stage_warmup_steps``. A mapping or
    file brings its own rate and warmups (the keyword arguments are then unused).

    Raises:
        UsageError: a file that is missing or not YAML, or a section that breaks a rule
            (``FILE: batch_schedule.KEY ...``).
        FieldError: inline stages or values that break a rule (``stages``, ``learning_rate``,
            ``lr_scaling.alpha``, ``warmup_steps``, ...), for the front end to name.
    """
    if isinstance(value, BatchSchedule):
        return value
    if isinstance(value, Mapping):
        return _section_of(value, source)
    text = str(value)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or is_file(path):
        if not is_file(path):
            raise UsageError(f"batch schedule file {text!r} not found")
        data, _ = load_yaml_file(path, text)
        return _section_of(data, text)
    return BatchSchedule(
        parse_stages(text),
        learning_rate,
        DEFAULT_ALPHA if alpha is None else alpha,
        warmup_steps,
        stage_warmup_steps,
    )


def _section_of(data: Any, source: str) -> BatchSchedule:
    r = Reader(source)
    if isinstance(data, Mapping) and SECTION in data:
        schedule, _seeds, _strategy = read_section(r, data[SECTION])
        return schedule
    if not isinstance(data, Mapping):
        r.fail("", f"must be a mapping with a {SECTION}: section or its keys", data)
    return BatchSchedule.from_mapping(
        {k: v for k, v in data.items() if k not in TRIAL_KEYS}, source, SECTION
    )


def parse_stages(text: str) -> tuple[Stage, ...]:
    """Inline stages ``B[@EXAMPLES],...``: ``"32,128@40960,512@200000"`` is batch 32 from 0
    examples, 128 from 40,960 and 512 from 200,000 (the first may omit ``@0``).

    Raises:
        FieldError: ``stages`` (the text does not parse); the schedule checks the rest.
    """
    stages = []
    for i, part in enumerate(p.strip() for p in str(text).split(",")):
        batch, _, start = part.partition("@")
        try:
            stage = Stage(int(start.replace("_", "")) if start else 0, int(batch))
        except ValueError:
            raise FieldError(
                "stages",
                "must be BATCH[@EXAMPLES],... (e.g. 32,128@40960)",
                text,
            ) from None
        if not start and i:
            raise FieldError("stages", f"stage {i + 1} needs @EXAMPLES (e.g. 128@40960)", text)
        stages.append(stage)
    return tuple(stages)


def schedule_under(
    limits: Iterable[tuple[float, float]],
    *,
    b0: int,
    grid: Sequence[int],
    learning_rate: float,
    alpha: float,
) -> BatchSchedule:
    """A schedule under a curve of batch-size limits over training (``(examples, limit)``
    pairs, in order; CBS(t) of ``study branch`` is one): from each point's examples on, the
    largest batch size of ``grid`` not above its limit, never below ``b0`` and never falling (a
    running maximum); ``b0`` before the first point; the rate ``learning_rate x (B / b0) **
    alpha``.

    Example: limits (1000, 70), (5000, 300) over grid 16, 64, 256 from b0 16 -> stages
    (0, 16), (1000, 64), (5000, 256).
    """
    sizes = sorted({int(b) for b in grid if b >= b0} | {b0})
    stages = [Stage(0, b0)]
    for examples, value in limits:
        fits = [b for b in sizes if b <= value] or [b0]
        batch = max(fits[-1], stages[-1].batch_size)
        if batch > stages[-1].batch_size:
            start = max(int(examples), stages[-1].from_examples + 1)
            stages.append(Stage(start, batch))
    return BatchSchedule(tuple(stages), learning_rate=learning_rate, alpha=alpha)


def format_stages(stages: Sequence[Stage]) -> str:
    """The inline form `parse_stages` reads: ``32@0,128@40960``."""
    return ",".join(f"{s.batch_size}@{s.from_examples}" for s in stages)


def _read(r: Reader, data: Mapping[str, Any], path: str) -> BatchSchedule:
    rate = r.number(data["learning_rate"], f"{path}.learning_rate")
    alpha: Any = DEFAULT_ALPHA
    if data.get("lr_scaling") is not None:
        scaling = r.keys(data["lr_scaling"], f"{path}.lr_scaling", ("alpha",), ("alpha",))
        alpha = r.number(scaling["alpha"], f"{path}.lr_scaling.alpha")
    warmup = r.integer(data.get("warmup_steps", 0) or 0, f"{path}.warmup_steps", rule=">= 0")
    ramp = data.get("stage_warmup_steps", 0) or 0
    ramp = r.integer(ramp, f"{path}.stage_warmup_steps", rule=">= 0")
    raw_stages = data["stages"]
    if not isinstance(raw_stages, list) or not raw_stages:
        r.fail(f"{path}.stages", "must be a list of {from_examples: N, batch_size: B}", raw_stages)
    stages = []
    for i, item in enumerate(raw_stages):
        where = f"{path}.stages[{i}]"
        stage = r.keys(item, where, STAGE_KEYS, STAGE_KEYS)
        stages.append(
            Stage(
                r.integer(stage["from_examples"], f"{where}.from_examples", rule=">= 0"),
                r.integer(stage["batch_size"], f"{where}.batch_size", rule=">= 1"),
            )
        )
    with r.naming(lambda field: f"{path}.{field}"):
        return BatchSchedule(tuple(stages), rate, alpha, warmup, ramp)
