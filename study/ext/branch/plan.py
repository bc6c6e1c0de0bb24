"""A ``branch:`` section resolved into the plan of `study branch` (`plan_branches`), and the
branch trials it queues (`branch_tasks`).

``B0`` defaults to the grid's smallest batch size, the reference's rate to the study's best
there; on a finished study every other key the section leaves out comes from it too
(`study.ext.branch.defaults`: the reference's length, checkpoints, batch sizes, window,
rounds). The window is rounded up to a multiple of the largest batch; the rate rule is the
study's fitted exponent (``lr_rule: fit``) or a small search per branch (see
`study.ext.branch.branching`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from study.config.study import StudyConfig
from study.config.trial import Budget
from study.errors import UsageError
from study.ext.branch.defaults import PRIOR_ALPHA, StudyEvidence, derive_defaults
from study.ext.branch.section import BranchConfig, LrRule, branch_of

__all__ = ["BranchPlan", "branch_tasks", "plan_branches", "stored_plan"]


@dataclass(frozen=True)
class BranchPlan:
    """The resolved plan: ``B0``, the reference's rate and length, the checkpoints (examples),
    the batch sizes, the window (examples, a multiple of the largest batch), the rate rule and
    why, and the rate factors per branch."""

    b0: int
    strategy: str
    learning_rate: float
    examples: int
    checkpoints: tuple[int, ...]
    batch_sizes: tuple[int, ...]
    window: int
    alpha: float
    rule: str
    why: str
    factors: tuple[float, ...]
    replicates: int
    #: Evaluations each branch averages over its window's last quarter (1: its end only, as
    #: plans stored before the key read).
    evaluations: int = 1
    #: More replicates, round by round, where CBS's interval is wider than ``resolve``
    #: (`study.ext.branch.rounds`), up to this many per checkpoint, within ``max_examples``
    #: of branches (None: no cap).
    max_replicates: int = 0
    resolve: float = 4.0
    max_examples: int | None = None
    #: BatchNorm recalibrated before each branch evaluation (False in plans stored before it).
    recalibrate: bool = False
    #: One sentence per value taken from the finished study (`study.ext.branch.defaults`).
    derived: tuple[str, ...] = ()
    #: The examples at which B0's best trial reached the study's target (None: not derived).
    target_examples: int | None = None
    #: Where it first met the target: the unit the defaults planned the runs in.
    first_examples: int | None = None
    #: The reference trains on past its end until it meets the target, up to these examples
    #: (None: it stops at its end).
    until_examples: int | None = None

    def rate(self, batch_size: int, factor: float = 1.0) -> float:
        return self.learning_rate * (batch_size / self.b0) ** self.alpha * factor

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def plan_branches(
    config: StudyConfig,
    *,
    fitted_alpha: float | None = None,
    best_rate: float | None = None,
    evidence: StudyEvidence | None = None,
) -> BranchPlan:
    """The plan of the study file's ``branch:`` section, given what the study's fit says
    (``fitted_alpha``, the best rate at ``B0``) and, with ``evidence`` from the finished study,
    each key the section left out taken from it (`derive_defaults`).

    Raises:
        UsageError: no ``branch:`` section, no learning rate to start from, a batch size not
            divisible by the strategy's replicas.
    """
    branch = branch_of(config)
    if branch is None:
        raise UsageError(
            f"{config.source}: no branch section; add e.g. 'branch: {{batch_size: 16, "
            "examples: 40000, window: 4096}' (study.ext.branch.section lists its keys)"
        )
    b0 = branch.batch_size or min(config.space.batch_sizes)
    strategy = config.space.strategies[0]
    rate = branch.learning_rate or best_rate
    if rate is None:
        raise UsageError(
            f"{config.source}: branch.learning_rate is missing and the study has no trial at "
            f"batch {b0} that reached the target; give the reference's rate"
        )
    alpha, rule, why, factors = _rate_rule(branch, fitted_alpha)
    prior = _prior_rule(branch, evidence)
    if prior is not None:
        alpha, rule, why, factors = prior
    derived: tuple[str, ...] = ()
    length = target = first = until = None
    if evidence is not None:
        defaults = derive_defaults(branch, evidence, rates=len(factors))
        branch, length, derived = defaults.branch, defaults.examples, defaults.why
        target, first = defaults.target, defaults.first
        until = defaults.until
        if branch.learning_rate is None and rate is not None:
            derived = (f"reference rate {rate:.4g}: B0's best trial's", *derived)
    if branch.examples is None and isinstance(branch.checkpoints, tuple):
        examples = branch.checkpoints[-1]
    else:
        examples = branch.examples or _budget_examples(config.settings.budget, b0)
    sizes = branch.batch_sizes(b0)
    _check_replicas(config, sizes, strategy)
    window = branch.window or max(sizes[-1], examples // 8)
    window = math.ceil(window / sizes[-1]) * sizes[-1]
    checkpoints = tuple(math.ceil(e / b0) * b0 for e in branch.checkpoint_examples(examples))
    length = max(checkpoints[-1], math.ceil((length or 0) / b0) * b0)
    return BranchPlan(
        b0, strategy, float(rate), length, checkpoints, sizes, window, alpha, rule,
        why, factors, branch.replicates, branch.evaluations, branch.replicate_limit,
        branch.resolve, branch.max_examples, branch.recalibrate_batchnorm, derived, target,
        first, until,
    )  # fmt: skip


def _prior_rule(
    branch: BranchConfig, evidence: StudyEvidence | None
) -> tuple[float, str, str, tuple[float, ...]] | None:
    """A prior exponent (`PRIOR_ALPHA` for the study's optimizer, else ``branch.alpha``), one
    rate per branch, when the finished study's fitted exponent is undetermined and the section
    asks for neither a search nor its factors (None otherwise)."""
    if evidence is None or not evidence.alpha_undetermined():
        return None
    if branch.lr_rule is not LrRule.FIT or "search_factors" in branch.given:
        return None
    alpha, source = branch.alpha, "branch.alpha"
    if "alpha" not in branch.given and evidence.optimizer in PRIOR_ALPHA:
        alpha = PRIOR_ALPHA[evidence.optimizer]
        source = f"{evidence.optimizer}: lr / B, the gradient noise's temperature, kept"
    fit = "the study has no fitted alpha"
    if evidence.alpha is not None:
        est, low, high = evidence.alpha
        fit = f"the study's fitted alpha {est:.3g} is undetermined ({low:.3g} to {high:.3g})"
    why = (
        f"{fit}: each branch runs at lr0 (B/B0)^{alpha:g} ({source}; lr_rule: search tries "
        "several rates)"
    )
    return alpha, "prior", why, (1.0,)


def _rate_rule(
    branch: BranchConfig, fitted: float | None
) -> tuple[float, str, str, tuple[float, ...]]:
    if branch.lr_rule is LrRule.FIT and fitted is not None and math.isfinite(fitted):
        why = f"the study's fitted lr* ~ B^alpha (alpha {fitted:.3g}) scales the reference's rate"
        return float(fitted), "fit", why, (1.0,)
    reason = "lr_rule: search" if branch.lr_rule is LrRule.SEARCH else "the study has no fit"
    factors = branch.lr_factors(True)
    why = (
        f"{reason}: each branch runs at lr0 (B/B0)^{branch.alpha:g} times "
        f"{', '.join(f'{f:g}' for f in factors)} and the best counts"
    )
    return branch.alpha, "search", why, factors


def _budget_examples(budget: Budget, b0: int) -> int:
    limit = budget.step_limit(b0)
    if limit is None:
        raise UsageError("branch.examples is missing and the budget sets no step or example limit")
    return limit * b0


def _check_replicas(config: StudyConfig, sizes: tuple[int, ...], strategy: str) -> None:
    from study.strategies import StrategySpec

    replicas = StrategySpec.parse(strategy).logical_cpus or 1
    for size in sizes:
        if size % replicas:
            raise UsageError(
                f"{config.source}: branch batch size {size} is not divisible by the {replicas} "
                f"replicas of {strategy}; choose batch_size and multipliers whose products are"
            )


def branch_tasks(
    plan: BranchPlan,
    reference: dict[str, Any],
    seed: int,
    *,
    replicates: dict[int, range] | None = None,
) -> list[dict[str, Any]]:
    """Every branch of the plan, as the ledger queues them; with ``replicates`` (checkpoint
    index -> replicate numbers), those replicates of those checkpoints only."""
    tasks = []
    for ckpt in reference["checkpoints"]:
        index = int(ckpt["index"])
        numbers = range(plan.replicates) if replicates is None else replicates.get(index, ())
        for batch in plan.batch_sizes:
            for replicate in numbers:
                for factor in plan.factors:
                    tasks.append(
                        {
                            "checkpoint": index,
                            "examples": ckpt["examples"],
                            "artifact": ckpt["artifact"],
                            "batch_size": batch,
                            "replicate": replicate,
                            "lr_factor": factor,
                            "learning_rate": plan.rate(batch, factor),
                            "steps": plan.window // batch,
                            "evaluations": plan.evaluations,
                            "recalibrate": plan.recalibrate,
                            "seed": seed + 1000 * (index + 1) + replicate,
                        }
                    )
    return tasks


def stored_plan(data: dict[str, Any]) -> BranchPlan:
    """A `BranchPlan` from its stored JSON (lists back to tuples)."""
    tuples = ("checkpoints", "batch_sizes", "factors", "derived")
    return BranchPlan(**{k: tuple(v) if k in tuples else v for k, v in data.items()})
