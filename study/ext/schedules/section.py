"""The study file's ``batch_schedule:`` section as schedule trials: the schedule, ``seeds`` trials
of it and the ``strategy`` they train on.

The section's keys and the schedule itself are the core's (`study.config.schedule`: `read_section`
reads them, as ``study train --batch-schedule FILE`` does); this module makes the study's
`ScheduleTrials` of them, with the strategy one of the study's and every stage's batch
divisible by its replicas (`read_batch_schedule`, the extension's `study.extension.Section`
reader). ``config.section("batch_schedule")`` holds them (`trials_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from study.config.rules import FieldError, check
from study.config.schedule import DEFAULT_SEEDS, SECTION, BatchSchedule, read_section
from study.config.yaml_reader import Reader
from study.strategies import StrategySpec

__all__ = [
    "ScheduleTrials",
    "read_batch_schedule",
    "read_schedule_trials",
    "schedule_strategy",
    "trials_of",
]


@dataclass(frozen=True)
class ScheduleTrials:
    """A study's schedule trials: ``seeds`` trials (the study's seed, +1, ...) with
    ``schedule`` on ``strategy`` (None: the study's first strategy)."""

    schedule: BatchSchedule
    seeds: int = DEFAULT_SEEDS
    strategy: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.seeds, bool) or not isinstance(self.seeds, int):
            raise FieldError("seeds", "must be an integer", self.seeds)
        check("seeds", self.seeds, ">= 1")

    def seed_values(self, base: int) -> tuple[int, ...]:
        """The training seeds: ``base``, ``base + 1``, ... (``seeds`` of them)."""
        return tuple(base + k for k in range(self.seeds))

    def to_mapping(self) -> dict[str, Any]:
        data = {**self.schedule.to_mapping(), "seeds": self.seeds}
        if self.strategy is not None:
            data["strategy"] = self.strategy
        return data


def read_schedule_trials(r: Reader, value: Any, path: str = SECTION) -> ScheduleTrials | None:
    """A ``batch_schedule`` section as written (null or left out: None)."""
    if value is None:
        return None
    return ScheduleTrials(*read_section(r, value, path))


def read_batch_schedule(r: Reader, value: Any, config: Any) -> ScheduleTrials:
    """The study file's ``batch_schedule``: its strategy one of the study's (default: the
    first), every stage's batch divisible by that strategy's replicas."""
    trials = read_schedule_trials(r, value)
    assert trials is not None
    strategies = config.space.strategies
    strategy = trials.strategy or strategies[0]
    if trials.strategy is not None:
        try:
            strategy = str(StrategySpec.parse(trials.strategy))
        except FieldError as err:
            r.fail("batch_schedule.strategy", err.rule, trials.strategy)
        if strategy not in strategies:
            r.fail(
                "batch_schedule.strategy",
                f"must be one of the study's strategies ({', '.join(strategies)})",
                trials.strategy,
            )
    replicas = StrategySpec.parse(strategy).static_replicas
    if replicas:
        with r.naming(lambda field: f"batch_schedule.{field}"):
            trials.schedule.check_replicas(replicas, strategy)
    return ScheduleTrials(trials.schedule, trials.seeds, strategy)


def trials_of(config: Any) -> ScheduleTrials | None:
    """The schedule trials of a `StudyConfig` (None: its file has no ``batch_schedule``)."""
    return config.section(SECTION)  # type: ignore[no-any-return]


def schedule_strategy(config: Any) -> str:
    """The strategy a study's schedule trials train on: the section's, else its first."""
    trials = trials_of(config)
    chosen = trials.strategy if trials is not None else None
    return chosen or config.space.strategies[0]
