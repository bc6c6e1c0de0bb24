"""CBS(t) of a study as the report, ``study branch``, MLflow and the API show it.

`stored_cbs` reads the branch trials from the ledger (`study.ext.branch.ledger`) into the table
`study.ext.branch.cbs` works on, and returns a `CbsReport`: the curve over training next to
B_simple(t), its trend, the schedule derived from it, what it cost against the study's own
trials, and how its end compares with the study's fitted B_noise. `draw_cbs` draws it into an
``Axes``. `SECTION` is the report's section of it (`study.extension.ReportSection`: report.json's
``cbs``, the HTML section "Critical batch size over training" and the figure ``cbs``), `study_cbs`
the method ``Study.cbs``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from study.config.schedule import BatchSchedule
from study.ext.branch.agreement import agreement, answer_triple
from study.ext.branch.cbs import (
    BRANCH_COLUMNS,
    CbsCost,
    CbsTrend,
    cbs_cost,
    cbs_curve,
    cbs_trend,
    reference_progress,
)
from study.ext.branch.cbs import cbs_schedule as derive_schedule
from study.ext.branch.section import branch_of
from study.extension import Block, Place, ReportFigure, ReportSection
from study.report.formatting import fmt

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from study.config.study import StudyConfig
    from study.ext.branch.ledger import BranchLedger
    from study.ledger import Ledger
    from study.report.record import ScalingReport

__all__ = [
    "SECTION",
    "CbsReport",
    "branch_frames",
    "cbs_report",
    "draw_cbs",
    "report_cbs",
    "stored_cbs",
    "study_cbs",
]

CAPTION = (
    "CBS(t): at each checkpoint of the reference run, the largest batch size whose branch ends "
    "within the tolerance of the reference batch size's branch after the same examples (bars: "
    "the interval from the branch-to-branch spread; an open marker: every batch size tried "
    "was within it), next to the gradient noise scale B_simple(t) measured in the reference "
    "run, the study's fitted B_noise and its critical batch size at its target."
)


@dataclass(frozen=True)
class CbsReport:
    """CBS(t) and what goes with it (see the module docstring)."""

    plan: Mapping[str, Any]
    reference: Mapping[str, Any]
    curve: pd.DataFrame = field(repr=False)
    branches: pd.DataFrame = field(repr=False)
    trend: CbsTrend | None
    cost: CbsCost
    schedule: BatchSchedule | None
    b_noise: tuple[float, float, float] | None = None
    #: The study's critical batch size at its target (estimate, low, high; None: no fit).
    critical: tuple[float, float, float] | None = None
    #: The branches' loss tolerance and its basis (``progress`` or ``loss``).
    tolerance: tuple[float, str] = (0.5, "progress")

    def lines(self) -> list[str]:
        """The findings in sentences."""
        out = [f"Learning rates of the branches: {self.plan.get('why', '')}."]
        out += [f"From the finished study: {line}." for line in self.plan.get("derived", ())]
        if self.trend is not None:
            last = self.curve.iloc[-1]
            rise = "rises" if self.trend.rises else "does not rise beyond its intervals"
            drop = "" if self.trend.no_drop else "; a later checkpoint falls below an earlier one"
            out.append(
                f"CBS(t) over {len(self.curve)} checkpoints {rise} ({fmt(self.curve['cbs'].iloc[0])}"
                f" to {fmt(last['cbs'])}, x{self.trend.factor:.2g}){drop}."
            )
        if not self.curve.empty and (self.b_noise is not None or self.critical is not None):
            out += agreement(self.curve.iloc[-1], self.plan, self.b_noise, self.critical,
                             self.tolerance)  # fmt: skip
        c = self.cost
        runs = f"{c.reference_runs:.2f}" if c.reference_runs is not None else "n/a"
        of_study = f", {c.of_study:.0%} of the study's {c.study_examples:,}" if c.of_study else ""
        out.append(
            f"Cost: {c.steps:,} training steps and {c.examples:,} examples (reference "
            f"{c.reference_examples:,}, branches {c.branch_examples:,}){of_study}; "
            f"{runs} runs of batch {self.plan.get('b0')} to the target."
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        curve = self.curve.replace({math.inf: None}).astype(object)
        curve = curve.where(pd.notna(curve), None)
        return {
            "plan": dict(self.plan),
            "reference": {k: v for k, v in self.reference.items() if k not in ("curve",)},
            "curve": curve.to_dict(orient="records"),
            "trend": None if self.trend is None else vars(self.trend),
            "cost": self.cost.to_dict(),
            "schedule": None if self.schedule is None else self.schedule.to_mapping(),
            "b_noise": _finite(self.b_noise),
            "critical_batch": _finite(self.critical),
            "notes": self.lines(),
        }


def branch_frames(ledger: BranchLedger) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """The branches (`BRANCH_COLUMNS`, finished ones), the reference's checkpoints (rows with
    ``b_simple``), the plan and the reference's record; empty frames before any."""
    plan = ledger.note("plan") or {}
    reference = ledger.note("reference") or {}
    rows = []
    for t in ledger.tasks():
        if t.outcome is None:
            continue
        rows.append({**t.task, **t.outcome})
    branches = pd.DataFrame(
        rows, columns=list(dict.fromkeys([*BRANCH_COLUMNS, *(rows[0] if rows else {})]))
    )
    from study.ext.branch.ledger import TASK_KEY

    keys = [k for k in TASK_KEY if k in branches.columns]
    if keys and not branches.empty:  # a branch two processes queued at once counts once
        branches = branches.drop_duplicates(keys).reset_index(drop=True)
    checkpoints = pd.DataFrame(reference.get("checkpoints", []))
    if not checkpoints.empty:
        checkpoints = checkpoints.rename(columns={"index": "checkpoint"})
    return branches, checkpoints, plan, reference


def cbs_report(
    branches: pd.DataFrame,
    checkpoints: pd.DataFrame,
    plan: Mapping[str, Any],
    reference: Mapping[str, Any],
    config: StudyConfig,
    *,
    study_trials: pd.DataFrame | None = None,
    b_noise: tuple[float, float, float] | None = None,
    critical: tuple[float, float, float] | None = None,
) -> CbsReport:
    """CBS(t) of finished branches under the study file's tolerance, next to the study's
    B_noise and critical batch size (when given)."""
    branch = branch_of(config)
    assert branch is not None
    b0 = int(plan["b0"])
    curve = pd.DataFrame()
    ref_curve = pd.DataFrame(reference.get("curve") or [])
    basis = branch.tolerance.basis
    if basis == "progress" and not checkpoints.empty and "val_loss" in ref_curve.columns:
        checkpoints = checkpoints.assign(
            progress=reference_progress(
                ref_curve, checkpoints["examples"].tolist(), int(plan["window"])
            )
        )
    if not branches.empty:
        curve = cbs_curve(
            branches,
            checkpoints,
            b0=b0,
            tolerance=branch.tolerance.loss,
            metric_tolerance=branch.tolerance.metric,
            higher_is_better=config.target.maximize,
            confidence=branch.confidence,
            basis=basis,
        )
    trend = cbs_trend(curve) if len(curve) >= 2 else None
    schedule = None
    if not curve.empty:
        grid = sorted({*config.space.batch_sizes, *plan["batch_sizes"]})
        schedule = derive_schedule(
            curve, b0=b0, grid=grid, learning_rate=float(plan["learning_rate"]),
            alpha=float(plan["alpha"]),
        )  # fmt: skip
    empty = pd.DataFrame({"steps": [], "batch_size": []})
    cost = cbs_cost(branches if not branches.empty else empty, reference, study_trials)
    tolerance = (branch.tolerance.loss, basis)
    return CbsReport(
        plan, reference, curve, branches, trend, cost, schedule, b_noise, critical, tolerance
    )


def stored_cbs(
    config: StudyConfig,
    storage: str | None = None,
    *,
    study_trials: pd.DataFrame | None = None,
    b_noise: tuple[float, float, float] | None = None,
    critical: tuple[float, float, float] | None = None,
) -> CbsReport | None:
    """The study's CBS(t) from its ledger, or None when it has no branch trials."""
    from study.ext.branch.ledger import BranchLedger

    if branch_of(config) is None:
        return None
    ledger = BranchLedger.open(storage, config.name, retry=config.storage_retry)
    if not ledger.exists():
        return None
    branches, checkpoints, plan, reference = branch_frames(ledger)
    if not plan or not reference:
        return None
    return cbs_report(
        branches, checkpoints, plan, reference, config, study_trials=study_trials,
        b_noise=b_noise, critical=critical,
    )  # fmt: skip


def draw_cbs(ax: Axes, cbs: CbsReport) -> Axes:
    """CBS(t) with its interval and B_simple(t) against examples seen (log-log), the study's
    fitted B_noise as a dashed line and its critical batch size (a marker with its interval
    at the target's examples, when the plan knows them)."""
    curve = cbs.curve
    x = curve["examples"].to_numpy(float)
    mid = curve["cbs"].to_numpy(float)
    top = curve["cbs_high"].to_numpy(float)
    cap = float(max(cbs.plan.get("batch_sizes", [mid.max()]))) * 2
    high = [min(t, cap) for t in top]
    yerr = [mid - curve["cbs_low"].to_numpy(float), [h - m for h, m in zip(high, mid, strict=True)]]
    ax.errorbar(x, mid, yerr=yerr, fmt="o-", color="C0", capsize=3, label="CBS(t)")
    censored = curve["censored"].to_numpy(bool)
    if censored.any():
        ax.plot(
            x[censored],
            mid[censored],
            "o",
            mfc="white",
            color="C0",
            ms=9,
            zorder=4,
            label="every batch within",
        )
    if "b_simple" in curve:
        ax.plot(x, curve["b_simple"].to_numpy(float), "s--", color="C1", label="B_simple(t)")
    if cbs.b_noise is not None and math.isfinite(cbs.b_noise[0]):
        ax.axhline(cbs.b_noise[0], color="C2", ls=":", label=f"B_noise {fmt(cbs.b_noise[0])}")
    if cbs.critical is not None and math.isfinite(cbs.critical[0]):
        target = cbs.plan.get("target_examples")
        label = f"critical batch size {fmt(cbs.critical[0])}"
        if target:  # the study's answer where it holds: at its target
            low, high = cbs.critical[1], min(cbs.critical[2], cap)
            ax.errorbar([target], [cbs.critical[0]], yerr=[[cbs.critical[0] - low],
                        [high - cbs.critical[0]]], fmt="D", color="C3", capsize=3,
                        label=label)  # fmt: skip
        else:
            ax.axhline(cbs.critical[0], color="C3", ls="-.", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("examples seen by the reference run")
    ax.set_ylabel("batch size")
    ax.set_title(f"Critical batch size over training (B0 = {cbs.plan.get('b0')})")
    ax.legend(fontsize="small")
    return ax


def report_cbs(ledger: Ledger, config: StudyConfig | None, report: ScalingReport) -> Any:
    """The study's CBS(t) for its report, when its study file has a branch section and its
    storage holds branch trials, with the study's trials' cost and fitted B_noise (None:
    none)."""
    if config is None or branch_of(config) is None:
        return None
    from study.ext.branch.ledger import BranchLedger

    branches = BranchLedger.of(ledger)
    if not branches.exists():
        return None
    frames = branch_frames(branches)
    if not frames[2] or not frames[3]:
        return None
    trials = pd.DataFrame(
        [
            {"steps_run": t.result.steps_run, "examples_run": t.result.examples_run}
            for s in ledger.strata()
            for t in ledger.trials(s)
            if t.result is not None
        ],
        columns=["steps_run", "examples_run"],
    )
    answers = report.answers if report.answers is not None and report.answers.ok else None
    return cbs_report(
        *frames,
        config,
        study_trials=trials,
        b_noise=None if answers is None else answer_triple(answers.b_noise),
        critical=None if answers is None else answer_triple(answers.critical_batch),
    )


def _blocks(cbs: CbsReport) -> list[Block]:
    if cbs.curve.empty:
        return []
    snippet = cbs.schedule.snippet() if cbs.schedule is not None else ""
    return [Block(lines=tuple(cbs.lines()), code=snippet)]


SECTION = ReportSection(
    key="cbs",
    title="Critical batch size over training",
    anchor="cbs",
    build=report_cbs,
    to_json=lambda cbs: cbs.to_dict() if cbs is not None else None,
    blocks=_blocks,
    place=Place.AFTER_CROSS_CHECK,
    figures=(ReportFigure("cbs", CAPTION, draw_cbs, lambda cbs: not cbs.curve.empty),),
    markdown=False,  # report.md shows the figure alone
)
"""CBS(t) in the scaling report."""


def study_cbs(study: Any) -> pd.DataFrame:
    """CBS(t) from the study's branch trials (``study branch``): one row per checkpoint,
    ``examples``, ``cbs``, ``cbs_low``, ``cbs_high``, ``censored``, ``b_simple``, ...; empty
    when the study has none. ``fit().plot.cbs(ax)`` draws it (``Study.cbs``)."""
    from study.report.stored import stored_report

    cbs = stored_report(study.ledger).section("cbs")
    return cbs.curve.copy() if cbs is not None else pd.DataFrame()


def _finite(triple: tuple[float, float, float] | None) -> list[float | None] | None:
    """An (estimate, low, high) for JSON: an open end (infinite) is None."""
    if triple is None:
        return None
    return [float(v) if math.isfinite(v) else None for v in triple]
