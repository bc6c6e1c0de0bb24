"""A study, as data: what to train, the search space, the budget and how to search.

Built once from a study file by `study.config.studyfile` (the parser; this module knows no YAML);
frozen afterwards. `StudyConfig` turns a stratum and a tuner's proposal into the `TrialSpec` the
trainer runs; both hold the study's one `TrialSettings` (budget, cadence, seed, loss, ...).
"""

from __future__ import annotations

import copy
import enum
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from study.config.space import FLOAT_PARAMS, INT_PARAMS, SearchSpace, Stratum
from study.config.target import Target
from study.config.trial import (
    OPTIMIZER_RULES,
    SCHEDULE_RULES,
    OptimizerSpec,
    ScheduleSpec,
    TrialSettings,
    TrialSpec,
    default_of,
)
from study.errors import UsageError

#: The default ``tuner.prune_slack`` where a study's trials are counted (even allocation): on
#: simulated studies of the MNIST-1D MLP question's shape (7 batch sizes x 8 trials), stopping
#: at 1.5x the best instead of 1x cut the run-to-run spread of log B_noise by about a third for
#: about a fifth more training steps. Where the allocation spends a budget of training steps it
#: is 1 (`STEPS_PRUNE_SLACK`): that allocation buys the large batch sizes' information with more
#: trials there, and a slack spends the budget on the small batch sizes' long trials first.
PRUNE_SLACK = 1.5
#: The default ``tuner.prune_slack`` of an allocation that spends a budget of training steps.
STEPS_PRUNE_SLACK = 1.0

__all__ = [
    "Allocation",
    "AllocationMode",
    "Confirmation",
    "Heartbeat",
    "Oracle",
    "Sampler",
    "StudyConfig",
    "TunerSettings",
]


class Sampler(str, enum.Enum):
    """Optuna sampler used inside each stratum."""

    TPE = "tpe"
    RANDOM = "random"
    QMC = "qmc"
    GRID = "grid"


class Oracle(str, enum.Enum):
    """KerasTuner oracle used inside each stratum."""

    RANDOM = "random"
    BAYESIAN = "bayesian"
    HYPERBAND = "hyperband"


@dataclass(frozen=True)
class Confirmation:
    """Confirmation trials: once a stratum's search is spent, its ``top`` best points (learning
    rate and other metaparameters) run again under ``seeds`` other seeds each (the study's seed
    plus 1, 2, ...), so its steps to result is a median over seeds, not one lucky trial.

    Cost: ``top * seeds`` trials per stratum on top of ``trials_per_stratum``, each about the
    stratum's best steps to target (never pruned, capped at twice the slowest seed of their
    point so far). Off (``top == 0``) by default.

    Example: ``Confirmation(top=2, seeds=2)`` adds 4 trials per stratum, so 7 batch sizes x 8
    trials become 7 x 12 = 84; each of the two best points has 3 seeds.
    """

    top: int = 0
    seeds: int = 0

    def __post_init__(self) -> None:
        for name in ("top", "seeds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"tuner.confirm.{name} must be an integer >= 0 (got {value!r})")

    @property
    def enabled(self) -> bool:
        return self.top > 0 and self.seeds > 0

    @property
    def trials(self) -> int:
        """Confirmation trials per stratum."""
        return self.top * self.seeds if self.enabled else 0

    def seed_values(self, base: int) -> tuple[int, ...]:
        """The seeds confirmation trials run under: ``base + 1`` to ``base + seeds``."""
        return tuple(base + k for k in range(1, self.seeds + 1)) if self.enabled else ()


@dataclass(frozen=True)
class WarmStart:
    """Where a study's first trials come from (``tuner.warm_start``): each batch size's first
    trial takes the best learning rate that the finished study ``study`` found at that batch
    size (or, where it ran none, the rate its best rates predict there), read from ``storage``
    (None: this study's own storage). Useful where the earlier study asked the same question at
    another scale: a smaller training set (the rungs of a data ladder), an easier target.

    Example: ``WarmStart("mnist1d-d4000")``.
    """

    study: str
    storage: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.study, str) or not self.study.strip():
            raise UsageError(
                f"tuner.warm_start.study must name a finished study (got {self.study!r})"
            )


@dataclass(frozen=True)
class TunerSettings:
    """How each stratum is searched (Optuna sampler or KerasTuner oracle) and when to give up.

    ``seed`` seeds the samplers and oracles (None: the study's ``seed``, which also seeds the
    training); ``transfer`` centres each stratum's learning-rate search on what the other batch
    sizes found (off: every batch size is searched on its own, over the whole range);
    ``design`` lets the model of every trial propose two trials in four of a stratum from its
    third on, bracketing the stratum's best rate first, then at the learning rate whose outcome
    narrows the answer most (`study.tuners.design`); ``fit_ahead`` fits that model in the background while a trial
    trains, and decides from the trials finished before the latest one (`study.tuners.fit_ahead`);
    ``confirm`` adds confirmation trials (`Confirmation`); ``warm_start`` starts each batch
    size's search at another study's best rate there (`WarmStart`). With ``pruning`` a trial still short
    of the target after ``prune_slack`` times its stratum's best steps so far is stopped: 1 stops
    it at the best itself, which leaves the largest batch sizes (a few dozen steps, a jagged
    response to the rate) one or two exact crossings each and B_noise to them; 1.5 lets the
    trials near the best finish (`study.runner.pruning`). None: the allocation's default
    (`StudyConfig.prune_slack`).
    """

    sampler: Sampler = Sampler.TPE
    oracle: Oracle = Oracle.BAYESIAN
    pruning: bool = True
    prune_slack: float | None = None
    max_consecutive_failures: int = 5
    seed: int | None = None
    transfer: bool = True
    design: bool = True
    fit_ahead: bool = False
    confirm: Confirmation = field(default_factory=Confirmation)
    warm_start: WarmStart | None = None

    def __post_init__(self) -> None:
        slack = self.prune_slack
        if slack is None:
            return
        if isinstance(slack, bool) or not isinstance(slack, (int, float)) or not slack >= 1:
            raise UsageError(
                f"tuner.prune_slack must be a number >= 1: a trial stops after that many times "
                f"its batch size's best steps (got {slack!r})"
            )


@dataclass(frozen=True)
class Heartbeat:
    """How a process running trials shows it is alive, in seconds.

    Every ``interval`` it stamps the time on each trial it runs (one storage write per running
    trial); any other process that sees a stamp older than ``grace`` takes the owner for dead,
    closes the trial as ``interrupted`` (its MLflow run KILLED) and runs its slot again. Hosts'
    clocks must agree to well within ``grace`` (NTP). Processes on the same host also check the
    owner's process id, so a local crash is seen at once.

    Example: ``Heartbeat(10, 60)`` (the default): a host that died is noticed within a minute;
    a worker running 4 trials writes 0.4 stamps a second.
    """

    interval: float = 10.0
    grace: float = 60.0

    def __post_init__(self) -> None:
        for name in ("interval", "grace"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise UsageError(
                    f"heartbeat.{name} must be a number of seconds > 0 (got {value!r})"
                )
        if self.grace < 2 * self.interval:
            raise UsageError(
                f"heartbeat.grace must be at least twice heartbeat.interval, so one late stamp "
                f"is not taken for a death (got grace={self.grace}, interval={self.interval})"
            )


class AllocationMode(str, enum.Enum):
    """The core's way to spread a study's trial budget over its batch sizes. The other modes
    are names the loaded extensions add (`study.extension.allocation_modes`; the built-in
    ``allocation`` extension adds ``adaptive`` and ``steps``), each with an allocator that gives
    the trials in rounds."""

    #: Every stratum of the grid gets ``trials_per_stratum`` trials.
    EVEN = "even"


DEFAULT_OVERHEAD = 0.2
"""The critical batch size's default overhead over perfect scaling (Zhang et al. 2024: 20%)."""


@dataclass(frozen=True)
class Allocation:
    """How the study's trials are allocated: ``even`` by default (`AllocationMode.EVEN`), or
    in rounds by the allocator of a mode an extension adds (its name, checked against the
    loaded extensions where the file is read: `study.config.sections.read_allocation`), with
    the options ``rounds`` (the rounds of mode adaptive) and ``steps`` (the budget of training
    steps of a mode that spends one, as mode steps does).

    Example: ``Allocation()``; ``Allocation("adaptive", rounds=3)``; ``Allocation("steps",
    steps=20_000)``.
    """

    mode: AllocationMode | str = AllocationMode.EVEN
    rounds: int = 3
    steps: int | None = None

    def __post_init__(self) -> None:
        if self.mode == AllocationMode.EVEN:  # the name as the enum
            object.__setattr__(self, "mode", AllocationMode.EVEN)
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise UsageError(f"allocation.rounds must be an integer >= 1 (got {self.rounds!r})")
        if self.steps is None:
            return
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise UsageError(
                "allocation.steps must be the study's budget of training steps, an integer "
                f">= 1 (got {self.steps!r})"
            )
        if self.mode is AllocationMode.EVEN:
            raise UsageError(
                "allocation.steps is the budget of a mode that spends training steps, not of "
                "mode even (set such a mode, or remove steps)"
            )

    @property
    def rounds_of(self) -> bool:
        """Whether trials are given in rounds by an allocator (`study.runner.allocator`):
        every mode but even."""
        return self.mode is not AllocationMode.EVEN


class TrainingSeeds(str, enum.Enum):
    """Where each trial's training seed (initialisation and example order) comes from:
    ``per_trial`` (the default) draws one per trial from the study's ``seed`` and the trial's
    number, so seed-to-seed noise is sampled across the search instead of frozen into it and
    the study is still reproducible from its file; ``pinned`` trains every trial under the
    study's ``seed`` itself."""

    PER_TRIAL = "per_trial"
    PINNED = "pinned"

    def __str__(self) -> str:
        return self.value


def drawn_seed(base: int, stratum: Stratum, number: int) -> int:
    """The training seed of trial ``number`` of ``stratum`` in a study whose seed is ``base``:
    a hash of the three, in ``[0, 2**31)`` (the same on every host and in every run of the file).

    Example: ``drawn_seed(0, Stratum(32, "default"), 3)`` is the same number wherever it is
    computed, and another for trial 3 of ``Stratum(64, "default")``.
    """
    key = f"study-trial-seed:{base}:{stratum.batch_size}:{stratum.strategy}:{number}"
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2**31


@dataclass(frozen=True)
class StudyConfig:
    """A validated study file. Build with `load_study_file` or `parse_study`.

    ``text`` is the file as written and ``raw`` the parsed mapping, kept for archiving next to
    the results; ``source`` is the path (or label) used in error messages.
    """

    name: str
    workload: str
    target: Target
    trials_per_stratum: int
    space: SearchSpace
    #: How every trial trains and measures (budget, cadence, seed, loss, precision, ...).
    settings: TrialSettings = field(default_factory=TrialSettings)
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    #: The optimizer and schedule of every trial unless the search space samples them.
    optimizer: str = default_of(OptimizerSpec, "name")
    schedule: str = default_of(ScheduleSpec, "name")
    tuner: TunerSettings = field(default_factory=TunerSettings)
    heartbeat: Heartbeat = field(default_factory=Heartbeat)
    allocation: Allocation = field(default_factory=Allocation)
    training_seeds: TrainingSeeds = TrainingSeeds.PER_TRIAL
    #: Seconds a database storage that stops answering is waited for (None: the default,
    #: the ledger's `retry_window`).
    storage_retry: float | None = None
    #: The critical batch size's overhead over perfect scaling the answers use (0.2: 20%).
    overhead: float = DEFAULT_OVERHEAD
    #: The extensions' study-file sections by key, as each read its own
    #: (`study.extension.Section`; `section` reads one).
    sections: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<memory>"
    text: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)

    def section(self, key: str) -> Any:
        """The extension section ``key`` as its extension read it (None: the file has none)."""
        return self.sections.get(key)

    @property
    def total_trials(self) -> int:
        """Number of strata times the trials of each: ``trials_per_stratum`` plus its
        confirmation trials (`Confirmation.trials`)."""
        return len(self.strata) * (self.trials_per_stratum + self.tuner.confirm.trials)

    @property
    def prune_slack(self) -> float:
        """How many times its stratum's best steps a trial runs before pruning stops it:
        ``tuner.prune_slack``, else `PRUNE_SLACK` where trials are counted and
        `STEPS_PRUNE_SLACK` where the allocation spends a budget of training steps."""
        if self.tuner.prune_slack is not None:
            return float(self.tuner.prune_slack)
        return STEPS_PRUNE_SLACK if self.allocation.steps is not None else PRUNE_SLACK

    @property
    def prune_factor(self) -> float:
        """`prune_slack` with pruning on, ``inf`` without (a trial is never stopped)."""
        return self.prune_slack if self.tuner.pruning else math.inf

    @property
    def tuner_seed(self) -> int:
        """The seed of the samplers and oracles: ``tuner.seed``, else the study's ``seed``."""
        return self.settings.seed if self.tuner.seed is None else self.tuner.seed

    def trial_seed(self, stratum: Stratum, number: int) -> int:
        """The training seed of trial ``number`` of ``stratum`` (`TrainingSeeds`)."""
        if self.training_seeds is TrainingSeeds.PINNED:
            return self.settings.seed
        return drawn_seed(self.settings.seed, stratum, number)

    @property
    def strata(self) -> list[Stratum]:
        """Every stratum of the study, batch size major."""
        return self.space.strata()

    def trial_spec(
        self,
        stratum: Stratum,
        params: Mapping[str, Any],
        *,
        seed: int | None = None,
        number: int | None = None,
    ) -> TrialSpec:
        """The `TrialSpec` for one trial of ``stratum``: trial ``number``'s (its training seed
        is `trial_seed`), or, with ``seed``, one under that seed (a confirmation).

        ``params`` holds sampled values by name and must include ``learning_rate``; parameters
        not given keep the study's fixed settings (``optimizer``, ``schedule``) or the
        `OptimizerSpec` / `ScheduleSpec` defaults. ``batch_size`` and ``strategy`` may also appear
        in ``params`` (as backends report them) if they agree with the arguments.

        Raises:
            UsageError: the stratum is not in the space, a parameter is unknown or
                ``learning_rate`` is missing.
        """
        self._check_stratum(stratum, params)
        values = self._typed_params(params)
        optimizer = OptimizerSpec(
            name=values.get("optimizer", self.optimizer),
            learning_rate=values["learning_rate"],
            **{k: v for k, v in values.items() if k in OPTIMIZER_RULES and k != "learning_rate"},
        )
        schedule = ScheduleSpec(
            name=values.get("schedule", self.schedule),
            **{k: v for k, v in values.items() if k in SCHEDULE_RULES},
        )
        if seed is None and number is not None:
            seed = self.trial_seed(stratum, number)
        settings = self.settings if seed is None else replace(self.settings, seed=seed)
        return TrialSpec(
            workload=self.workload,
            batch_size=stratum.batch_size,
            optimizer=optimizer,
            target=self.target,
            model=self.model,
            workload_options=copy.deepcopy(dict(self.workload_options)),
            schedule=schedule,
            strategy=stratum.strategy,
            settings=settings,
        )

    def _check_stratum(self, stratum: Stratum, params: Mapping[str, Any]) -> None:
        if stratum not in self.space.strata():
            raise UsageError(
                f"{self.source}: stratum (batch_size={stratum.batch_size}, "
                f"strategy={stratum.strategy!r}) is not in the study (batch sizes "
                f"{list(self.space.batch_sizes)}, strategies {list(self.space.strategies)})"
            )
        for key, expected in (("batch_size", stratum.batch_size), ("strategy", stratum.strategy)):
            if key in params and params[key] != expected:
                raise UsageError(
                    f"{self.source}: params[{key!r}] is {params[key]!r} but the stratum has "
                    f"{key}={expected!r}"
                )

    def _typed_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        if "learning_rate" not in params:
            raise UsageError(f"{self.source}: trial params must include 'learning_rate'")
        values: dict[str, Any] = {}
        for name, value in params.items():
            if name in ("batch_size", "strategy"):
                continue
            if name not in self.space.param_names:
                raise UsageError(
                    f"{self.source}: unknown trial parameter {name!r}; the search space has "
                    f"{', '.join(self.space.param_names)}"
                )
            if name in FLOAT_PARAMS or name == "learning_rate":
                values[name] = float(value)
            elif name in INT_PARAMS:
                values[name] = int(value)
            else:
                values[name] = value
        return values
