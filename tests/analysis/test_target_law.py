"""The law across target levels and its extrapolation, on sweeps with answers set by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from study.analysis.answers import Answer, Answers
from study.analysis.target_law import MAX_DISTANCE, agrees, fit_law
from study.analysis.target_levels import Level, TargetSweep, axis_value
from study.analysis.target_prediction import power_of_two_batch, predict_target
from study.config.target import Target

TARGET = Target.parse("val_accuracy>=0.6")


def sweep_of(b_noise: dict[float, tuple[float, float, float]], target: Target = TARGET):
    """A sweep whose level at each threshold answers B_noise (estimate, low, high) and a
    critical batch size of a fifth of it."""
    levels = []
    for threshold, (mid, low, high) in b_noise.items():
        answers = Answers(
            ok=True,
            b_noise=Answer("B_noise", mid, low, high),
            critical_batch=Answer("critical", mid / 5, low / 5, high / 5),
        )
        levels.append(Level(Target(target.metric, target.op, threshold), answers, 10))
    return TargetSweep(target, tuple(levels), accelerators=8, confidence=0.95, overhead=0.2)


def power_law_sweep(exponent: float = -2.0, width: float = 1.2, jitter: float = 0.0):
    """B_noise = 100 (error / 0.4)^exponent at five levels, each interval width x either way."""
    rng = np.random.default_rng(0)
    out = {}
    for threshold in (0.4, 0.45, 0.5, 0.55, 0.6):
        mid = 100 * ((1 - threshold) / 0.4) ** exponent * math.exp(jitter * rng.normal())
        out[threshold] = (mid, mid / width, mid * width)
    return sweep_of(out)


def test_a_clean_power_law_is_chosen_and_its_exponent_recovered() -> None:
    law = fit_law(power_law_sweep(-2.0), "b_noise")
    assert law.ok and law.kind == "power"
    assert law.exponent is not None
    assert law.exponent.estimate == pytest.approx(-2.0, abs=1e-9)
    assert law.exponent.low < -2.0 < law.exponent.high
    assert law.scale == 1.0  # no more scatter than the intervals say
    assert law.p_value < 0.05


def test_a_flat_answer_is_a_constant_and_scatter_widens_the_law() -> None:
    flat = sweep_of({t: (200.0, 100.0, 400.0) for t in (0.4, 0.5, 0.6)})
    law = fit_law(flat, "b_noise")
    assert law.kind == "constant" and law.exponent is None
    assert math.exp(law.coefficients[0]) == pytest.approx(200.0)
    jagged = fit_law(power_law_sweep(-2.0, width=1.05, jitter=0.3), "b_noise")
    assert jagged.scale > 1.0  # the levels scatter more than their intervals


def test_the_critical_batch_law_can_take_b_noises_form() -> None:
    flat = sweep_of({t: (200.0, 100.0, 400.0) for t in (0.4, 0.5, 0.6)})
    assert fit_law(flat, "critical_batch", kind="power").kind == "power"


def test_fewer_than_three_levels_with_answers_give_no_law() -> None:
    two = sweep_of({0.5: (100.0, 80.0, 120.0), 0.6: (150.0, 120.0, 190.0)})
    law = fit_law(two, "b_noise")
    assert not law.ok and "at least 3 levels" in law.reason and "(got 2)" in law.reason
    prediction = predict_target(two, {"b_noise": law, "critical_batch": law}, 0.65)
    assert not prediction.ok and prediction.reason == law.reason


def test_the_prediction_interval_holds_the_law_and_widens_with_own_scatter() -> None:
    sweep = power_law_sweep(-2.0)
    laws = {q: fit_law(sweep, q) for q in ("b_noise", "critical_batch")}
    near, far = predict_target(sweep, laws, 0.62), predict_target(sweep, laws, 0.7)
    truth = 100 * (0.3 / 0.4) ** -2.0
    assert far.ok and far.b_noise is not None and far.b_noise.covers(truth)
    assert far.b_noise.estimate == pytest.approx(truth, rel=1e-9)
    assert near.b_noise is not None
    # on the law exactly, the levels' error is all shared: the nearest level's interval
    assert laws["b_noise"].own_share == pytest.approx(0.0, abs=1e-12)
    for answer in (near.b_noise, far.b_noise):
        assert answer.high / answer.estimate == pytest.approx(1.2)
    # levels scattering about the law have errors of their own, which grow with the distance
    jagged = power_law_sweep(-2.0, jitter=0.05)
    laws = {q: fit_law(jagged, q) for q in ("b_noise", "critical_batch")}
    assert 0 < laws["b_noise"].own_share < 1
    near, far = predict_target(jagged, laws, 0.62), predict_target(jagged, laws, 0.7)
    assert near.b_noise is not None and far.b_noise is not None
    assert far.b_noise.high / far.b_noise.low > near.b_noise.high / near.b_noise.low
    assert far.distance == pytest.approx(math.log(0.4 / 0.3) / math.log(0.6 / 0.4))
    assert far.assumption == "for val_accuracy >= 0.7, extrapolated from 0.4-0.6"
    # the critical batch size, a fifth of B_noise: 35.6; 8 x 2^k up to it: 32
    far = predict_target(sweep, {q: fit_law(sweep, q) for q in laws}, 0.7)
    assert far.critical_batch is not None
    assert far.critical_batch.estimate == pytest.approx(truth / 5)
    assert far.recommended_batch is not None and far.recommended_batch.estimate == 32
    assert far.recommended_batch.low <= 32 <= far.recommended_batch.high


def _by_hand(x: np.ndarray, y: np.ndarray, s: np.ndarray, x0: float) -> tuple[float, float]:
    """The module's interval at ``x0``, computed here: (log estimate, half-width)."""
    n, w = x.size, 1 / s**2
    design = np.column_stack([np.ones(n), np.log(x)])
    inverse = np.linalg.inv((design.T * w) @ design)
    coef = inverse @ (design.T * w) @ y
    phi = float(np.sum(w * (y - design @ coef) ** 2)) / (n - 2)
    row = np.array([1.0, math.log(x0)])
    h2, near = float(row @ inverse @ row), float(s[np.argmin(abs(np.log(x) - math.log(x0)))]) ** 2
    if phi < 1:
        var, estimated = (1 - phi) * near + phi * h2, phi * abs(h2 - near)
    else:
        var = estimated = phi * h2
    nu = (n - 2) * var**2 / estimated**2  # Welch-Satterthwaite
    return float(row @ coef), float(stats.t.ppf(0.975, nu)) * math.sqrt(var)


@pytest.mark.parametrize("jitter", [0.05, 0.6])  # own share below 1, and above it
def test_the_interval_follows_the_stated_formula(jitter: float) -> None:
    sweep = power_law_sweep(-1.5, width=1.3, jitter=jitter)
    law = fit_law(sweep, "b_noise", "power")
    x = np.array([1 - lv.threshold for lv in sweep.levels])
    y = np.log([lv.answers.b_noise.estimate for lv in sweep.levels])
    s = np.full(x.size, math.log(1.3) / stats.norm.ppf(0.975))
    assert (law.own_share < 1) == (jitter < 0.1)
    mean, half = _by_hand(x, y, s, 0.3)
    answer = law.predict(0.3)
    assert math.log(answer.estimate) == pytest.approx(mean)
    assert math.log(answer.high / answer.estimate) == pytest.approx(half, rel=1e-6)
    assert math.log(answer.estimate / answer.low) == pytest.approx(half, rel=1e-6)
    _, low, high = law.curve(np.array([0.3]))  # the drawn band is the same interval
    assert (low[0], high[0]) == pytest.approx((answer.low, answer.high))


def test_levels_sharing_their_error_are_covered_at_about_the_level() -> None:
    """Levels whose errors are part shared (one draw for all) and part their own, as levels
    refitted on the same trials are: the interval holds the law's value about 95% of the
    time, and the shared part is not counted twice (the old interval held it 99-100%)."""
    rng = np.random.default_rng(3)
    sigma, thresholds = 0.15, (0.4, 0.45, 0.5, 0.55, 0.6)
    hits = []
    for _ in range(400):
        shared = math.sqrt(0.8) * sigma * rng.standard_normal()
        own = math.sqrt(0.2) * sigma * rng.standard_normal(len(thresholds))
        half = math.exp(stats.norm.ppf(0.975) * sigma)
        levels = {}
        for t, e in zip(thresholds, shared + own):
            mid = 100 * ((1 - t) / 0.4) ** -2.0 * math.exp(e)
            levels[t] = (mid, mid / half, mid * half)
        law = fit_law(sweep_of(levels), "b_noise", "power")
        hits.append(law.predict(0.3).covers(100 * (0.3 / 0.4) ** -2.0))
    assert 0.92 <= np.mean(hits) <= 0.98


def test_a_measurement_agrees_with_a_prediction_by_both_intervals() -> None:
    predicted = Answer("B_noise", 100.0, 80.0, 125.0)
    # outside the predicted interval, yet within both intervals' noise combined
    assert agrees(predicted, Answer("B_noise", 130.0, 110.0, 154.0))
    assert not predicted.covers(130.0)
    assert not agrees(predicted, Answer("B_noise", 130.0, 125.0, 135.0))  # a precise one: no
    assert agrees(predicted, Answer("B_noise", 70.0, 50.0, 98.0))  # the facing sides count
    assert not agrees(predicted, Answer("B_noise", 0.0, 0.0, 1.0))


def test_a_prediction_past_the_laws_support_is_refused_with_the_reason() -> None:
    sweep = power_law_sweep(-2.0)
    laws = {q: fit_law(sweep, q) for q in ("b_noise", "critical_batch")}
    refused = predict_target(sweep, laws, 0.85)
    assert not refused.ok and refused.b_noise is None
    assert refused.distance > MAX_DISTANCE
    assert "fitted ranges" in refused.reason and "0.4-0.6" in refused.reason
    assert refused.line().startswith("no prediction for val_accuracy >= 0.85")
    done = predict_target(sweep, laws, 1.0)  # nothing left to go: no power law there
    assert not done.ok and "above 0" in done.reason


def test_the_axis_is_the_distance_still_to_go() -> None:
    assert float(axis_value(TARGET, 0.7)) == pytest.approx(0.3)
    assert float(axis_value(Target.parse("val_loss<=0.5"), 0.4)) == pytest.approx(0.4)


def test_a_falling_metric_fits_in_the_metric_itself() -> None:
    loss = Target.parse("val_loss<=0.5")
    sweep = sweep_of({t: (100 * (t / 0.5) ** -1.0, 0.0, 0.0) for t in (1.0, 0.8, 0.6, 0.5)}, loss)
    sweep = sweep_of({t: (a, a / 1.2, a * 1.2) for t, (a, _, _) in _answers(sweep).items()}, loss)
    law = fit_law(sweep, "b_noise")
    assert law.kind == "power" and law.exponent is not None
    assert law.exponent.estimate == pytest.approx(-1.0)
    assert [lv.threshold for lv in sweep.levels] == [1.0, 0.8, 0.6, 0.5]


def _answers(sweep: TargetSweep) -> dict[float, tuple[float, float, float]]:
    return {lv.threshold: (lv.answers.b_noise.estimate, 0, 0) for lv in sweep.levels}


@pytest.mark.parametrize(
    ("limit", "expected"), [(300, 256), (256, 256), (5, 8), (8, 8), (math.inf, math.inf)]
)
def test_the_batch_for_n_accelerators_is_the_largest_n_times_a_power_of_two(limit, expected):
    assert power_of_two_batch(limit, 8) == expected


def test_a_stated_constant_still_predicts_with_the_exponents_uncertainty() -> None:
    flat = sweep_of({t: (200.0, 100.0, 400.0) for t in (0.4, 0.5, 0.6)})
    laws = {q: fit_law(flat, q) for q in ("b_noise", "critical_batch")}
    assert laws["b_noise"].kind == "constant"
    prediction = predict_target(flat, laws, 0.7)
    assert prediction.ok and prediction.b_noise is not None
    assert prediction.b_noise.estimate == pytest.approx(200.0)
    constant_only = laws["b_noise"].predict(0.3)
    assert prediction.b_noise.high > constant_only.high  # the slope's uncertainty is in it
