"""Branch trials: the critical batch size over training, measured from checkpoints of one run.

A *reference run* trains at a small batch size ``B0`` and stores its whole state (weights and
optimizer slots) at checkpoints spread over training, geometric in examples seen by default.
From each checkpoint, *branches* continue at ``k x B0`` for a fixed window of examples; the
critical batch size at that checkpoint is the largest batch whose branch ends within a
tolerance of the ``B0`` branch's loss (and metric) after the same examples (Merrill et al.
2025, "Critical Batch Size Revisited"). `study.ext.branch.cbs` reads it off the branches.

The study-file section (`read_branch` reads it). On a finished study, every key it leaves
out of ``examples``, ``checkpoints``, ``multipliers``, ``window``, ``max_replicates`` and
``max_examples`` comes from that study (`study.ext.branch.defaults`: a reference just past
the target, batch sizes past its B_noise interval, within 3 runs of ``B0`` to the target); the
defaults below hold before the study has trials::

    branch:
      batch_size: 16               # B0 (default: the search space's smallest batch size)
      learning_rate: 0.02          # the reference's rate at B0 (default: the study's fit)
      examples: 40000              # the reference run's length in examples (default: budget)
      checkpoints: 6               # a count (geometric from first_checkpoint to examples) or a
                                   #   list of examples seen, increasing
      first_checkpoint: 0.03125    # with a count: the first as a fraction of examples
      multipliers: [2, 4, 8, 16]   # branch batch sizes k x B0 (k = 1 is always run)
      window: 4096                 # examples each branch trains from its checkpoint
      replicates: 2                # branches per (checkpoint, k), each its own example order
      max_replicates: 6            # more, round by round, where CBS's interval is wider than
      resolve: 4.0                 #   this factor (high / low), while branch examples stay
      max_examples: 30000          #   within this (default: no more replicates, no cap)
      evaluations: 4               # per branch, evenly over its window's last quarter, averaged
      recalibrate_batchnorm: true  # BatchNorm takes fixed examples' statistics before each
      lr_rule: fit                 # fit: lr(B) = lr0 (B / B0) ** alpha with the study's fitted
                                   #   alpha (search when the study has no fit); search: each
                                   #   branch at lr(B) x every factor of search_factors
      alpha: 0.5                   # the exponent when there is no fit to read it from
      search_factors: [0.5, 1.0, 2.0]
      tolerance: {loss: 0.5, basis: progress, metric: 0.01}   # a branch is "as good" when
                                   #   its loss exceeds the B0 branch's by at most loss x the
                                   #   B0 branch's progress over the window (basis progress)
                                   #   or x its loss (basis loss), and its target metric is no
                                   #   more than metric worse (absolute); metric null: loss only
      confidence: 0.9              # of CBS(t)'s interval (from the branch-to-branch spread)
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from study.config.rules import FieldError, check
from study.config.yaml_reader import Reader

__all__ = ["SECTION", "BranchConfig", "LrRule", "Tolerance", "branch_of", "read_branch"]

SECTION = "branch"
KEYS = (
    "batch_size", "learning_rate", "examples", "checkpoints", "first_checkpoint",
    "multipliers", "window", "replicates", "max_replicates", "resolve", "max_examples",
    "evaluations", "recalibrate_batchnorm", "lr_rule", "alpha", "search_factors",
    "tolerance", "confidence",
)  # fmt: skip
DEFAULT_CHECKPOINTS = 6
DEFAULT_FIRST = 1 / 32
DEFAULT_MULTIPLIERS = (2, 4, 8, 16)
DEFAULT_FACTORS = (0.5, 1.0, 2.0)
#: Evaluations a branch averages over its window's last quarter: a small batch's last iterate
#: jitters with its gradient noise (measured on the MNIST-1D MLP: the B0 branches' losses
#: spread 4x more than batch 128's after the same window).
DEFAULT_EVALUATIONS = 4
#: The widest CBS interval (high / low) a checkpoint is left at while replicates may be added.
DEFAULT_RESOLVE = 4.0


class LrRule(str, enum.Enum):
    """How a branch's learning rate is set: ``fit`` scales the reference's rate by the study's
    fitted power law (falling back to ``search`` when the study has no fit), ``search`` runs each
    branch at several rates around the scaled one and keeps the best."""

    FIT = "fit"
    SEARCH = "search"


Basis = Literal["progress", "loss"]
"""What a branch's loss tolerance is a share of (`Tolerance.basis`)."""
BASES: tuple[Basis, ...] = get_args(Basis)


@dataclass(frozen=True)
class Tolerance:
    """When a branch counts as good as the ``B0`` branch after the same examples: its loss
    exceeds the ``B0`` branch's by at most ``loss`` times the ``B0`` branch's progress over
    the window (``basis: progress``, the default: 0.5 puts CBS near B_noise, where a batch
    needs twice the examples) or times the ``B0`` branch's loss itself (``basis: loss``, as
    Merrill et al.; then CBS depends on the window's length), and (``metric`` not None) the
    target's metric is at most ``metric`` worse (absolute)."""

    loss: float = 0.5
    metric: float | None = None
    basis: Basis = "progress"

    def __post_init__(self) -> None:
        check("tolerance.loss", self.loss, ">= 0")
        if self.basis not in BASES:
            raise FieldError("tolerance.basis", f"must be one of {', '.join(BASES)}", self.basis)
        if self.metric is not None:
            check("tolerance.metric", self.metric, ">= 0")


@dataclass(frozen=True)
class BranchConfig:
    """A validated ``branch:`` section; ``None`` fields take the study's values
    (`resolved_*`)."""

    batch_size: int | None = None
    learning_rate: float | None = None
    examples: int | None = None
    checkpoints: int | tuple[int, ...] = DEFAULT_CHECKPOINTS
    first_checkpoint: float = DEFAULT_FIRST
    multipliers: tuple[int, ...] = DEFAULT_MULTIPLIERS
    window: int | None = None
    replicates: int = 2
    lr_rule: LrRule = LrRule.FIT
    alpha: float = 0.5
    search_factors: tuple[float, ...] = DEFAULT_FACTORS
    tolerance: Tolerance = Tolerance()
    confidence: float = 0.9
    evaluations: int = DEFAULT_EVALUATIONS
    max_replicates: int | None = None
    resolve: float = DEFAULT_RESOLVE
    max_examples: int | None = None
    #: Before each evaluation a branch's BatchNorm layers take the statistics of the same
    #: training examples (`study.ext.branch.trainer.recalibrate_batchnorm`), so that batch sizes
    #: that took fewer steps in the window are not read with staler moving averages.
    recalibrate_batchnorm: bool = True
    #: The keys the section named (`read_branch`); the others may take the finished study's
    #: values (`study.ext.branch.defaults`).
    given: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        for name in ("batch_size", "examples", "window"):
            value = getattr(self, name)
            if value is not None:
                check(name, value, ">= 1")
        if self.learning_rate is not None:
            check("learning_rate", self.learning_rate, "> 0")
        if isinstance(self.checkpoints, int):
            if self.checkpoints < 2:
                raise FieldError("checkpoints", "must be >= 2", self.checkpoints)
        else:
            points = tuple(self.checkpoints)
            if len(points) < 2 or any(p < 1 for p in points):
                raise FieldError("checkpoints", "must list >= 2 example counts >= 1", points)
            if any(b <= a for a, b in itertools.pairwise(points)):
                raise FieldError("checkpoints", "must be increasing", list(points))
        if not 0 < self.first_checkpoint < 1:
            raise FieldError("first_checkpoint", "must be in (0, 1)", self.first_checkpoint)
        if not self.multipliers or any(k < 2 for k in self.multipliers):
            raise FieldError("multipliers", "must list integers >= 2", list(self.multipliers))
        if any(b <= a for a, b in zip(self.multipliers, self.multipliers[1:])):
            raise FieldError("multipliers", "must be increasing", list(self.multipliers))
        check("replicates", self.replicates, ">= 1")
        check("evaluations", self.evaluations, ">= 1")
        if self.max_replicates is not None and self.max_replicates < self.replicates:
            raise FieldError(
                "max_replicates", f"must be >= replicates ({self.replicates})", self.max_replicates
            )
        if self.max_examples is not None:
            check("max_examples", self.max_examples, ">= 1")
        if not self.resolve > 1 or not math.isfinite(self.resolve):
            raise FieldError("resolve", "must be a finite factor > 1", self.resolve)
        if not self.search_factors or any(f <= 0 for f in self.search_factors):
            raise FieldError("search_factors", "must list numbers > 0", list(self.search_factors))
        if not math.isfinite(self.alpha):
            raise FieldError("alpha", "must be finite", self.alpha)
        if not 0 < self.confidence < 1:
            raise FieldError("confidence", "must be in (0, 1)", self.confidence)

    def checkpoint_examples(self, examples: int) -> tuple[int, ...]:
        """The examples seen at each checkpoint of a reference run of ``examples``: the list
        given, or ``checkpoints`` points geometric from ``first_checkpoint x examples`` to
        ``examples`` (distinct, increasing)."""
        if not isinstance(self.checkpoints, int):
            return tuple(self.checkpoints)
        first = max(1.0, self.first_checkpoint * examples)
        n = self.checkpoints
        points = [round(first * (examples / first) ** (i / (n - 1))) for i in range(n)]
        out: list[int] = []
        for p in points:
            out.append(max(p, out[-1] + 1) if out else p)
        return tuple(out)

    @property
    def replicate_limit(self) -> int:
        """The most replicates a checkpoint gets (``max_replicates``, else ``replicates``)."""
        return self.replicates if self.max_replicates is None else self.max_replicates

    def batch_sizes(self, b0: int) -> tuple[int, ...]:
        """Every branch batch size: ``B0`` and ``k x B0``."""
        return (b0, *(k * b0 for k in self.multipliers))

    def lr_factors(self, searched: bool) -> tuple[float, ...]:
        """The factors on the scaled rate each branch runs at (one, unless searched)."""
        return tuple(self.search_factors) if searched else (1.0,)


def branch_of(config: Any) -> BranchConfig | None:
    """The ``branch:`` section of a `StudyConfig` (None: the file has none)."""
    return config.section(SECTION)  # type: ignore[no-any-return]


def read_branch(r: Reader, value: Any, path: str = SECTION) -> BranchConfig | None:
    """The study file's ``branch:`` section (null or left out: None).

    Raises:
        UsageError: one line, ``SOURCE: branch.KEY RULE (got VALUE)``.
    """
    if value is None:
        return None
    data = r.keys(value, path, KEYS, ())
    args: dict[str, Any] = {}
    for key in (
        "batch_size", "examples", "window", "replicates", "max_replicates", "max_examples",
        "evaluations",
    ):  # fmt: skip
        if data.get(key) is not None:
            args[key] = r.integer(data[key], f"{path}.{key}", rule=">= 1")
    for key in ("learning_rate", "first_checkpoint", "alpha", "confidence", "resolve"):
        if data.get(key) is not None:
            args[key] = float(r.number(data[key], f"{path}.{key}"))
    if data.get("recalibrate_batchnorm") is not None:
        flag = data["recalibrate_batchnorm"]
        if not isinstance(flag, bool):
            r.fail(f"{path}.recalibrate_batchnorm", "must be true or false", flag)
        args["recalibrate_batchnorm"] = flag
    if data.get("checkpoints") is not None:
        raw = data["checkpoints"]
        if isinstance(raw, list):
            args["checkpoints"] = tuple(
                r.integer(v, f"{path}.checkpoints[{i}]", rule=">= 1") for i, v in enumerate(raw)
            )
        else:
            args["checkpoints"] = r.integer(raw, f"{path}.checkpoints")
    if data.get("multipliers") is not None:
        args["multipliers"] = tuple(_list(r, data["multipliers"], f"{path}.multipliers", int))
    if data.get("search_factors") is not None:
        factors = _list(r, data["search_factors"], f"{path}.search_factors", float)
        args["search_factors"] = tuple(float(f) for f in factors)
    if data.get("lr_rule") is not None:
        rule = r.choice(data["lr_rule"], f"{path}.lr_rule", tuple(m.value for m in LrRule))
        args["lr_rule"] = LrRule(rule)
    if data.get("tolerance") is not None:
        tol = r.keys(data["tolerance"], f"{path}.tolerance", ("loss", "metric", "basis"), ())
        loss = tol.get("loss")
        metric = tol.get("metric")
        basis = tol.get("basis", Tolerance.basis)
        with r.naming(lambda field: f"{path}.{field}"):
            args["tolerance"] = Tolerance(
                Tolerance.loss if loss is None else float(r.number(loss, f"{path}.tolerance.loss")),
                None if metric is None else float(r.number(metric, f"{path}.tolerance.metric")),
                r.choice(basis, f"{path}.tolerance.basis", BASES),
            )
    args["given"] = frozenset(k for k, v in data.items() if v is not None)
    with r.naming(lambda field: f"{path}.{field}"):
        return BranchConfig(**args)


def _list(r: Reader, value: Any, path: str, kind: type) -> Sequence[Any]:
    if not isinstance(value, list) or not value:
        r.fail(path, "must be a non-empty list", value)
    if kind is int:
        return [r.integer(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return [r.number(v, f"{path}[{i}]") for i, v in enumerate(value)]
