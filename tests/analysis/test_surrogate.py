"""The one model of every trial: it recovers a known truth, reads censored trials, lets the data
choose the learning-rate shape and says when S(B) misfits."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import sim.simulate as sim_simulate
from scipy import stats
from sim.simulate import StudyDesign, draw_truth, log_best_lr, simulate_trials

from study.analysis.answers import scaling_answers
from study.analysis.covariance import DOF_FLOOR, SHARP_PENALTY, SOFT_PENALTY
from study.analysis.likelihood import Trials, capped_log_likelihoods
from study.analysis.surrogate import (
    LAST_STEP,
    PARAMS,
    SMOOTH_C_LOW,
    censored_trials,
    fit_surrogate,
)
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STATE, STEP, TRIAL

SIZES = (16, 32, 64, 128, 256, 512, 1024)


def trials_of(
    rng: np.random.Generator,
    *,
    b_noise: float = 200.0,
    s_min: float = 150.0,
    alpha: float = 0.6,
    bend: float = 0.0,
    sigma: float = 0.12,
    per_batch: int = 10,
    budget: float = 6.0,
    kink: float = 0.0,
    knee: float = 1.0,
    outlier: float = 0.0,
    lr_spread: float = 0.0,
    scatter: str = "normal",
    v_slope: float = 0.0,
) -> pd.DataFrame:
    """Trials drawn from the model itself (S(B) with the knee sharpness ``knee``); ``kink``
    multiplies the steps of batch 128 by ``exp(kink)`` (a curve S(B) cannot follow);
    ``outlier`` multiplies the steps of the best-placed trial at the largest batch size by
    ``exp(-outlier)`` (one lucky trial); ``lr_spread`` moves each batch size's best rate off the
    curve by a normal offset of that standard deviation (in log lr); ``scatter`` is the trial
    noise's distribution, of standard deviation ``sigma``: ``normal``, ``uniform`` (light
    tails) or ``laplace`` (heavy tails); ``v_slope`` makes the response below the best rate a V
    of that slope in log-log (a sharp bottom) instead of ``0.4 u**2``."""
    ref = math.exp(np.mean(np.log(SIZES)))
    rows = []
    for b in SIZES:
        x = math.log(b / ref)
        log_best = math.log(0.01) + alpha * x + bend * x * x
        if lr_spread:
            log_best += rng.normal(0.0, lr_spread)
        log_lr = log_best + rng.uniform(-1.5, 1.5, per_batch)
        u = log_lr - log_best
        below = v_slope * -u if v_slope else 0.4 * u * u
        penalty = np.where(u < 0, below, 0.9 * u * u)
        curve = s_min * (1 + (b_noise / b) ** knee) ** (1 / knee)
        s_b = curve * (math.exp(kink) if b == 128 else 1.0)
        noise = {
            "normal": lambda: rng.normal(size=per_batch),
            "uniform": lambda: rng.uniform(-math.sqrt(3.0), math.sqrt(3.0), per_batch),
            "laplace": lambda: rng.laplace(0.0, math.sqrt(0.5), per_batch),
        }[scatter]()
        steps = np.exp(math.log(s_b) + penalty + sigma * noise)
        if outlier and b == SIZES[-1]:
            steps[np.argmin(np.abs(u))] *= math.exp(-outlier)
        cap = budget * curve
        for lr, t in zip(np.exp(log_lr), steps):
            reached = t <= cap
            rows.append(
                {
                    BATCH_SIZE: b,
                    LEARNING_RATE: float(lr),
                    STATE: "reached" if reached else "not_reached",
                    "steps_to_target": float(math.ceil(t)) if reached else math.inf,
                    LAST_STEP: float(math.ceil(t)) if reached else float(math.ceil(cap)),
                }
            )
    return pd.DataFrame(rows)


def test_recovers_the_generating_curve_and_rate_rule():
    fit = fit_surrogate(trials_of(np.random.default_rng(0)))

    assert fit.ok and fit.shape == "power law"
    assert fit.b_noise == pytest.approx(200.0, rel=0.25)
    assert fit.s_min == pytest.approx(150.0, rel=0.15)
    assert fit.value("alpha") == pytest.approx(0.6, abs=0.08)
    assert fit.sigma == pytest.approx(0.12, rel=0.3)
    assert fit.best_lr(fit.b_ref)[0] == pytest.approx(0.01, rel=0.15)
    sd = np.sqrt(np.diag(fit.covariance))
    assert sd[PARAMS.index("log_b_noise")] > 0 and sd[PARAMS.index("beta")] == 0.0
    assert fit.predict(64, fit.best_lr(64)[0])[()] == pytest.approx(fit.steps(64)[0])


def test_sigmas_interval_follows_the_tails_of_the_scatter():
    """The variance of log sigma is (kurtosis - 1) / 4n: lighter tails than normal's
    (a jagged response to the learning rate) give a narrower interval, heavier ones a wider."""

    def sd_of_log_sigma(scatter: str) -> float:
        sds = []
        for seed in range(4):
            trials = trials_of(np.random.default_rng(seed), per_batch=20, scatter=scatter)
            fit = fit_surrogate(trials, misfit_test=False)
            i = PARAMS.index("log_sigma")
            sds.append(math.sqrt(fit.covariance[i, i]))
        return float(np.mean(sds))

    light, normal, heavy = (sd_of_log_sigma(s) for s in ("uniform", "normal", "laplace"))
    assert light < 0.92 * normal
    assert heavy > 1.15 * normal


def test_censored_trials_count_as_more_than_their_steps():
    trials = trials_of(np.random.default_rng(1), budget=1.1, sigma=0.25, per_batch=20)
    with_censoring = fit_surrogate(trials)
    without = fit_surrogate(trials[np.isfinite(trials["steps_to_target"])])

    assert with_censoring.censored > 40 and without.censored == 0
    # Only the lucky trials reach a tight budget: ignoring the others reads the curve too low.
    assert without.s_min < 0.85 * with_censoring.s_min
    assert with_censoring.s_min == pytest.approx(150.0, rel=0.15)


def test_diverged_trials_are_censored_at_their_batch_sizes_budget():
    trials = trials_of(np.random.default_rng(2))
    high = trials[LEARNING_RATE] > trials.groupby(BATCH_SIZE)[LEARNING_RATE].transform("max") * 0.99
    trials.loc[high, [STATE, "steps_to_target", LAST_STEP]] = ["diverged", math.inf, 3.0]

    fit = fit_surrogate(trials)

    assert fit.ok and fit.censored >= len(SIZES)


def test_the_data_decide_whether_the_best_rate_bends():
    bends = fit_surrogate(trials_of(np.random.default_rng(3), bend=-0.25, per_batch=14))
    straight = fit_surrogate(trials_of(np.random.default_rng(3), per_batch=14))

    assert bends.shape == "bends" and bends.bend_p_value < 0.05
    assert bends.value("beta") == pytest.approx(-0.25, abs=0.1)
    assert straight.shape == "power law" and straight.value("beta") == 0.0
    forced = fit_surrogate(trials_of(np.random.default_rng(3)), shape="power law")
    assert forced.shape == "power law" and math.isnan(forced.bend_p_value)


def test_the_bottom_is_smooth_unless_the_data_say_sharper():
    smooth = fit_surrogate(trials_of(np.random.default_rng(3), per_batch=14))
    v = fit_surrogate(trials_of(np.random.default_rng(3), per_batch=14, v_slope=3.0, sigma=0.05))

    assert smooth.bottom == "smooth"
    assert math.exp(smooth.value("log_c_low")) <= SMOOTH_C_LOW + 1e-9
    assert v.bottom == "sharp" and v.sharp_p_value < 0.05
    assert math.exp(v.value("log_c_low")) > 5.0


def test_a_curve_that_s_of_b_cannot_follow_is_a_misfit():
    assert not fit_surrogate(trials_of(np.random.default_rng(4))).misfits
    assert fit_surrogate(trials_of(np.random.default_rng(4), kink=0.8)).misfits


def test_thin_data_is_refused_with_a_reason():
    trials = trials_of(np.random.default_rng(5))
    fit = fit_surrogate(trials[trials[BATCH_SIZE] <= 32])
    assert not fit.ok and "fewer than 3 batch sizes reached" in fit.reason
    with pytest.raises(ValueError, match="shape must be one of"):
        fit_surrogate(trials, shape="wiggly")


def test_censored_trials_reads_each_trials_last_step_from_its_table():
    table = pd.DataFrame(
        {
            BATCH_SIZE: [16, 16, 16, 32, 32],
            TRIAL: [0, 0, 0, 1, 1],
            STEP: [0, 10, 25, 0, 40],
        }
    )
    trials = pd.DataFrame({BATCH_SIZE: [16, 32], TRIAL: [0, 1], "steps_to_target": [25, math.inf]})

    out = censored_trials(trials, table)

    assert out[LAST_STEP].tolist() == [25, 40]


def test_a_knee_on_its_cap_keeps_a_variance_a_held_one_has_none():
    corner = fit_surrogate(trials_of(np.random.default_rng(6), knee=40.0, per_batch=14))
    held = fit_surrogate(trials_of(np.random.default_rng(6), knee=40.0, per_batch=14), knee=False)

    knee = PARAMS.index("log_knee")
    assert corner.knee == pytest.approx(8.0)  # the cap: as sharp as the fit may read
    # "At least this sharp": the data say how much softer the knee may be, so S(B) and every
    # answer read from it keep that uncertainty.
    assert corner.covariance[knee, knee] > 0.01
    assert held.knee == 1.0 and held.covariance[knee, knee] == 0.0


def test_a_bottom_on_its_smooth_cap_keeps_a_variance():
    # Condition C of benchmarks/answer_coverage.py, a study whose data lean sharper than the
    # smooth cap without the test preferring it: "at least this sharp", so the curvature keeps
    # the variance the likelihood gives it there, and the best rate's draws spread with it.
    design = StudyDesign(batch_sizes=SIZES, trials_per_batch=8, noise=0.10, jagged=0.15, bend=-0.15)
    rng = np.random.default_rng(23)
    truth = draw_truth(design, rng)
    surrogate = fit_surrogate(simulate_trials(truth, design, rng), misfit_test=False)

    c = PARAMS.index("log_c_low")
    assert surrogate.bottom == "smooth" and surrogate.sharp_p_value >= 0.05
    assert math.exp(surrogate.theta[c]) == pytest.approx(SMOOTH_C_LOW)
    assert surrogate.covariance[c, c] > 0.1


@pytest.mark.parametrize("seed", [11, 23, 38, 39])
def test_a_best_rate_is_not_pinned_by_a_v_the_scatter_draws(seed):
    # Condition C of benchmarks/answer_coverage.py: a smooth response (0.7 u**2 either side), a
    # jagged one on top, a bending best rate. With the curvature below the optimum free up to
    # 1e4, these studies' fits read a V there, and the best rate's interval missed the truth.
    design = StudyDesign(batch_sizes=SIZES, trials_per_batch=8, noise=0.10, jagged=0.15, bend=-0.15)
    rng = np.random.default_rng(seed)
    truth = draw_truth(design, rng)
    surrogate = fit_surrogate(simulate_trials(truth, design, rng), misfit_test=False)
    answers = scaling_answers(surrogate, accelerators=8)

    # Smooth (the test did not prefer a sharper bottom), not a V against the cap.
    assert surrogate.bottom == "smooth"
    assert math.exp(surrogate.value("log_c_low")) <= SMOOTH_C_LOW + 1e-9
    pick = answers.recommended_batch.estimate
    assert answers.recommended_lr.covers(math.exp(log_best_lr(truth, design, pick)))


#: The quickstart's size (search_spaces/quickstart.yaml), the knee held at McCandlish's q = 1,
#: pruned at each batch size's best itself (slack 1: the seeds below were picked for the cases
#: they make there).
QUICKSTART = dataclasses.replace(sim_simulate.QUICKSTART, knee_range=None, prune_slack=1.0)


def quickstart_trials(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return simulate_trials(draw_truth(QUICKSTART, rng), QUICKSTART, rng)


@pytest.mark.parametrize("seed", [9, 14, 19, 22])
def test_a_small_study_reads_its_likelihood_ratios_on_the_degrees_of_freedom_left(seed):
    # 24 trials, about half pruned, 8-9 free parameters: 1 to 4 degrees of freedom are left to
    # measure the noise, too few for a chi-square reading of the bend's likelihood ratio (it kept
    # a bend in 27% of such fits to a power law; these among them).
    trials = quickstart_trials(seed)
    fit = fit_surrogate(trials, misfit_test=False)
    power = fit_surrogate(trials, shape="power law", misfit_test=False)
    bend = fit_surrogate(trials, shape="bends", misfit_test=False)
    ratio = 2.0 * (bend.log_likelihood - power.log_likelihood)

    assert fit.dof < 5.0 and fit.effective_trials < 12.0
    assert ratio > 3.84  # chi-square's 5%
    assert fit.shape == "power law" and fit.bend_p_value > 0.3


def test_the_draws_mix_the_knee_held_at_both_ends_by_their_likelihoods():
    trials = quickstart_trials(9)
    fit = fit_surrogate(trials, misfit_test=False)
    soft = fit_surrogate(trials, knee=False, misfit_test=False)
    knee = PARAMS.index("log_knee")
    q_max = math.log(8.0)

    assert 1.2 < fit.knee < 8.0 and fit.knee_held is not None and fit.knee_sharp is not None
    assert fit.knee_held.theta[knee] == 0.0 and fit.knee_sharp.theta[knee] == q_max
    assert fit.knee_held.theta == pytest.approx(soft.theta, abs=0.05)
    # Each reading's weight is its likelihood relative to the fit's, the soft one's times
    # exp(-SOFT_PENALTY), shared with the fit (weight 1 before sharing).
    sharp_ll = float(capped_log_likelihoods(fit.knee_sharp.theta[None, :], Trials.of(trials))[0])
    raw = [
        1.0,
        math.exp(soft.log_likelihood - fit.log_likelihood - SOFT_PENALTY),
        math.exp(sharp_ll - fit.log_likelihood - SHARP_PENALTY),
    ]
    expected = np.array(raw) / sum(raw)
    assert [fit.knee_held.weight, fit.knee_sharp.weight] == pytest.approx(expected[1:], rel=1e-6)
    assert fit.log_likelihood >= max(soft.log_likelihood, sharp_ll) - 1e-6
    draws = fit.draws(20_000, 1)
    # The held curves' shares of the draws sit on their ends, and so do the fit's beyond them.
    assert np.mean(draws[:, knee] == 0.0) > fit.knee_held.weight
    assert np.mean(draws[:, knee] == q_max) > fit.knee_sharp.weight
    low, high = np.array(fit.bounds).T
    assert np.all((draws >= low) & (draws <= high))
    held = fit_surrogate(trials, knee=False)
    assert held.knee_held is None and held.knee_sharp is None  # nothing to mix with


def test_a_knee_on_mccandlishs_bound_keeps_a_variance_and_its_draws_stay_above_it():
    fit = fit_surrogate(quickstart_trials(0), misfit_test=False)
    knee = PARAMS.index("log_knee")

    assert fit.knee == 1.0 and fit.knee_held is None and fit.knee_sharp is None
    # "No softer than McCandlish's curve": how much sharper the data allow stays in the draws.
    assert fit.covariance[knee, knee] > 0.01
    draws = fit.draws(4000, 2)[:, knee]
    assert draws.min() == 0.0 and np.mean(draws > 0.1) > 0.2


def test_few_degrees_of_freedom_widen_the_draws_tails():
    fit = fit_surrogate(quickstart_trials(3), misfit_test=False)
    b_noise = PARAMS.index("log_b_noise")
    many = dataclasses.replace(fit, dof=math.inf, knee_held=None, knee_sharp=None, bounds=())
    few = dataclasses.replace(many, dof=1.0)  # read as DOF_FLOOR

    spread = [np.subtract(*np.quantile(s.draws(40_000, 4)[:, b_noise], [0.975, 0.025]))
              for s in (many, few)]  # fmt: skip
    t_quantile = stats.t.ppf(0.975, DOF_FLOOR)
    assert spread[1] / spread[0] == pytest.approx(t_quantile / 1.960, rel=0.08)  # t over normal


def test_the_best_rate_stays_near_the_rates_tried_where_they_stop_below_it():
    """Trials at the two largest batch sizes only below half the best rate: steps there
    still fall towards the highest rate tried, and a free power law read a best rate far past
    it (and S(B) far below every measurement); the cap keeps it within RATE_CAP of it."""
    from study.analysis.likelihood import RATE_CAP

    rng = np.random.default_rng(3)
    trials = trials_of(rng, per_batch=16, alpha=1.0)
    ref = math.exp(np.mean(np.log(SIZES)))
    best = 0.01 * (trials[BATCH_SIZE] / ref) ** 1.0
    low_only = trials[BATCH_SIZE].isin([512, 1024]) & (trials[LEARNING_RATE] > best / 2.0)
    kept = trials[~low_only]
    fit = fit_surrogate(kept)
    assert fit.ok
    for b in (512, 1024):
        tried = kept.loc[kept[BATCH_SIZE] == b, LEARNING_RATE].max()
        assert fit.best_lr(b)[0] <= RATE_CAP * tried * 1.1
    # S(B) at the largest size no lower than the truth's at the capped rate could give.
    measured = kept.loc[kept[BATCH_SIZE] == 1024, "steps_to_target"].min()
    assert fit.steps(1024)[0] > measured / 3.0


def test_a_fit_without_readings_has_the_same_estimate_and_covariance():
    trials = quickstart_trials(9)
    fit = fit_surrogate(trials, misfit_test=False)
    bare = fit_surrogate(trials, misfit_test=False, readings=False)

    assert fit.knee_held is not None and fit.knee_sharp is not None
    assert bare.knee_held is None and bare.knee_sharp is None
    np.testing.assert_array_equal(bare.theta, fit.theta)
    np.testing.assert_array_equal(bare.covariance, fit.covariance)


def test_a_held_fit_is_descended_again_while_that_gains(monkeypatch):
    """`surrogate._settled`: a descent that stopped short (as one did on a flat likelihood
    under another CPU's kernels) is restarted from where it stopped until a restart gains
    nothing, at most three times."""
    from scipy import optimize

    from study.analysis import surrogate as module

    values = iter([-4.5737, -4.57371, -4.57371 - 1e-12, -9.0])  # the last one is never asked
    starts = []

    def descent(data, options, *, start=None, extra=None):
        starts.append(start.copy())
        return optimize.OptimizeResult(x=start + 1.0, fun=next(values))

    monkeypatch.setattr(module, "_fit", descent)
    first = optimize.OptimizeResult(x=np.zeros(2), fun=-4.5626)
    settled = module._settled(None, None, first)
    assert settled.fun == -4.57371 and settled.x.tolist() == [2.0, 2.0]
    assert [s.tolist() for s in starts] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]

    values = iter([-5.0, -6.0, -7.0, -8.0])
    starts.clear()
    assert module._settled(None, None, first).fun == -7.0 and len(starts) == 3
