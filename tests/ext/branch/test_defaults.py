"""The ``branch:`` defaults taken from a finished study (`study.ext.branch.defaults`), on
synthetic study records: within the runs of B0 they are given, batch sizes past the study's
B_noise interval, the last checkpoint at the target when B0 still progresses there and before
it when it does not, every explicit key kept, and a sentence per derived value."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest

from study.config.studyfile import parse_study
from study.ext.branch.defaults import (
    RUNS,
    StudyEvidence,
    derive_defaults,
    loss_trend,
)
from study.ext.branch.plan import plan_branches
from study.ext.branch.section import BranchConfig, branch_of
from tests.config.test_studyfile import BASE


def curve(fall: float, jitter: float, end: int = 30000, seed: int = 0) -> tuple:
    """A B0 validation curve: ``2 - fall x log(examples / 500)`` plus Gaussian jitter."""
    rng = np.random.default_rng(seed)
    x = np.geomspace(200, end, 160)
    y = 2.0 - fall * np.log(x / 500) + rng.normal(0, jitter, len(x))
    return tuple(zip(x.tolist(), y.tolist(), strict=True))


def evidence(**kw) -> StudyEvidence:
    base = {
        "b0": 16,
        "examples_to_target": 26480,
        "examples_to_first": 22640,
        "trial": "b16/default#3",
        "b_noise": (497.0, 432.0, 568.0),
        "critical": (459.0, 296.0, 539.0),
        "largest": 1024,
        "target": "val_accuracy>=0.6",
        "curve": curve(0.25, 0.045),
    }
    return StudyEvidence(**{**base, **kw})


def cost(branch: BranchConfig, reference: int, b0: int = 16, first: int = 22640) -> int:
    """Examples of the first round: the reference (on to ``first``, where B0's best trial
    first met the target) and every branch."""
    points = branch.checkpoint_examples(reference)
    sizes = 1 + len(branch.multipliers)
    window = branch.window or 0
    ref = max(first, reference, points[-1] + window)
    return ref + len(points) * branch.replicates * sizes * window


def test_loss_trend_reads_the_fall_and_the_jitter_of_a_known_curve() -> None:
    fall, jitter = loss_trend(curve(0.3, 0.02, seed=1), 8000)
    assert fall == pytest.approx(0.3, abs=0.05)
    assert jitter == pytest.approx(0.02, rel=0.3)
    assert loss_trend(curve(0.3, 0.02)[:5], 8000) is None


def test_the_mnist1d_study_gets_bounded_batch_sizes_within_three_runs() -> None:
    ev = evidence()
    out = derive_defaults(BranchConfig(), ev)
    branch = out.branch
    sizes = [16 * k for k in (1, *branch.multipliers)]
    assert sizes[-1] > 568 and sizes[-1] == 1024  # past the B_noise interval, a power of two
    assert len(sizes) == 3
    assert branch.window % sizes[-1] == 0 and branch.window >= sizes[-1]
    assert isinstance(branch.checkpoints, tuple) and 3 <= len(branch.checkpoints) <= 4
    assert all(p % 16 == 0 for p in branch.checkpoints)
    # 3 runs of B0's first crossing, the reference included
    spent = cost(branch, out.examples)
    assert spent <= RUNS * 22640
    assert out.planned_runs == pytest.approx(spent / 22640)
    assert out.examples == branch.checkpoints[-1] + branch.window  # one window past the last
    assert out.until == 39728  # and on until the reference meets the target (1.5 x 26,480)
    # B0 barely moves over the window at the target (jitter 0.045): the last comes before it
    assert branch.checkpoints[-1] < 26480
    text = " ".join(out.why)
    assert "1,024 reaches the study's largest batch size 1,024, past the study's B_noise" in text
    assert "interval (to 568)" in text
    assert "before the target (26,480" in text


def test_a_quiet_curve_puts_the_last_checkpoint_at_the_target() -> None:
    out = derive_defaults(BranchConfig(), evidence(curve=curve(0.25, 0.002)))
    assert out.branch.checkpoints[-1] == 26480
    assert any("the last at the target (26,480" in line for line in out.why)
    ratios = np.diff(np.log(out.branch.checkpoints))
    assert np.allclose(ratios, math.log(2), atol=0.01)  # a factor two apart


def test_an_open_b_noise_interval_reaches_past_four_times_its_estimate_within_budget() -> None:
    open_ = evidence(b_noise=(100.0, 60.0, math.inf), critical=None, largest=256)
    out = derive_defaults(BranchConfig(), open_)
    assert 16 * out.branch.multipliers[-1] == 512  # 4 x 100 -> the next power of two
    huge = evidence(b_noise=(2e5, 1e5, 4e5), critical=None)
    capped = derive_defaults(BranchConfig(), huge)
    assert any("the largest the runs allow" in line for line in capped.why)
    assert cost(capped.branch, capped.examples) <= RUNS * 22640


def test_explicit_keys_are_kept_and_the_rest_still_derived() -> None:
    given = BranchConfig(
        multipliers=(4, 16), window=512, given=frozenset({"multipliers", "window"})
    )
    out = derive_defaults(given, evidence())
    assert out.branch.multipliers == (4, 16)
    assert out.branch.window == 512
    assert isinstance(out.branch.checkpoints, tuple)  # still from the study
    assert not any(line.startswith("window") for line in out.why)
    points = BranchConfig(checkpoints=(1000, 4000), given=frozenset({"checkpoints"}))
    kept = derive_defaults(points, evidence())
    assert kept.branch.checkpoints == (1000, 4000)
    assert not any(line.startswith("checkpoints") for line in kept.why)


def test_no_trial_at_b0_reached_the_target_leaves_the_section_as_it_is() -> None:
    out = derive_defaults(BranchConfig(), evidence(examples_to_target=None))
    assert out.branch == BranchConfig() and out.examples is None
    assert "no trial at batch 16 reached" in out.why[0]


def test_the_plan_takes_the_derived_values_and_says_so() -> None:
    data = copy.deepcopy(BASE)
    data["branch"] = {"window": 1024}
    config = parse_study(data, "x.yaml")
    assert branch_of(config).given == frozenset({"window"})
    ev = evidence(b0=min(config.space.batch_sizes))
    plan = plan_branches(config, fitted_alpha=0.8, best_rate=0.03, evidence=ev)
    assert plan.window % plan.batch_sizes[-1] == 0
    assert plan.window == math.ceil(1024 / plan.batch_sizes[-1]) * plan.batch_sizes[-1]
    assert plan.examples >= plan.checkpoints[-1]
    assert plan.derived[0].startswith("reference rate 0.03")
    assert any(line.startswith("checkpoints at") for line in plan.derived)
    bare = plan_branches(config, fitted_alpha=0.8, best_rate=0.03)
    assert bare.derived == ()


def test_a_target_held_long_after_its_first_crossing_ends_the_checkpoints_within_the_runs() -> None:
    """The hold rule put the target at 2,400 examples, the first crossing at 680: the runs
    (of the first crossing) cannot train the reference to the target, so the last checkpoint
    is where they end."""
    ev = evidence(
        b0=8, examples_to_target=2400, examples_to_first=680, b_noise=(300.0, 100.0, math.inf),
        critical=None, largest=32, curve=curve(0.3, 0.001, end=2400),
    )  # fmt: skip
    out = derive_defaults(BranchConfig(), ev)
    assert out.branch.checkpoints[-1] < 2400
    assert cost(out.branch, out.examples, b0=8, first=680) <= RUNS * 680
    assert any("there the runs end it" in line for line in out.why)


def test_a_rate_search_per_branch_counts_in_the_runs() -> None:
    """Without a fitted exponent each branch runs at 3 rates: 3x the branches, the same runs."""
    out = derive_defaults(BranchConfig(), evidence(), rates=3)
    branch = out.branch
    sizes = 1 + len(branch.multipliers)
    spent = (
        max(out.examples, branch.checkpoints[-1] + branch.window)
        + len(branch.checkpoints) * 2 * 3 * sizes * branch.window
    )
    assert spent <= RUNS * 22640
    assert any("x 3 rates" in line for line in out.why)


def test_an_undetermined_fitted_alpha_gives_way_to_the_sections_prior() -> None:
    """A thin search fitted alpha 0.07 (-2.98 to 3.0): with SGD the branches run at (B/B0)^1,
    one rate each (else at branch.alpha); a determined fit is used; an explicit search keeps
    its factors."""
    config = parse_study({**copy.deepcopy(BASE), "branch": {}}, "x.yaml")
    ev = evidence(b0=min(config.space.batch_sizes), alpha=(0.07, -2.98, 3.0))
    plan = plan_branches(config, fitted_alpha=0.07, best_rate=0.03, evidence=ev)
    assert (plan.rule, plan.alpha, plan.factors) == ("prior", 1.0, (1.0,))  # SGD: lr / B kept
    assert "undetermined (-2.98 to 3)" in plan.why and "nesterov" in plan.why
    adam = plan_branches(
        config,
        fitted_alpha=0.07,
        best_rate=0.03,
        evidence=dataclasses.replace(ev, optimizer="adam"),
    )
    assert adam.alpha == 0.5  # branch.alpha for another optimizer
    given = parse_study({**copy.deepcopy(BASE), "branch": {"alpha": 0.7}}, "x.yaml")
    assert plan_branches(given, fitted_alpha=0.07, best_rate=0.03, evidence=ev).alpha == 0.7
    none = plan_branches(config, best_rate=0.03, evidence=dataclasses.replace(ev, alpha=None))
    assert none.rule == "prior" and "the study has no fitted alpha" in none.why
    sure = dataclasses.replace(ev, alpha=(0.85, 0.69, 1.0))
    fitted = plan_branches(config, fitted_alpha=0.85, best_rate=0.03, evidence=sure)
    assert (fitted.rule, fitted.alpha) == ("fit", 0.85)
    data = {**copy.deepcopy(BASE), "branch": {"lr_rule": "search"}}
    searched = plan_branches(
        parse_study(data, "x.yaml"), fitted_alpha=0.07, best_rate=0.03, evidence=ev
    )
    assert searched.rule == "search" and len(searched.factors) == 3
