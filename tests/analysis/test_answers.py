"""The answers a user acts on: each from the model by the report's rules, each with an interval."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.analysis.answers import (
    DRAWS,
    Answer,
    _continuous_quantiles,
    overhead_batch_size,
    scaling_answers,
)
from study.analysis.fitting import as_number
from study.analysis.regimes import scaling_regimes
from study.analysis.surrogate import PARAMS, fit_surrogate, log_best_lr


@pytest.fixture(scope="module")
def surrogate():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_surrogate import trials_of

    return fit_surrogate(trials_of(np.random.default_rng(0)))


def test_every_answer_has_an_interval_around_its_estimate(surrogate):
    answers = scaling_answers(surrogate, accelerators=8)

    assert answers.ok
    for answer in answers.items():
        assert answer.low <= answer.estimate <= answer.high, answer
    assert answers.b_noise.estimate == pytest.approx(surrogate.b_noise)
    assert answers.b_noise.covers(200.0)
    assert answers.critical_batch.estimate == pytest.approx(
        float(overhead_batch_size(surrogate.b_noise, surrogate.knee, 0.2))
    )
    assert answers.e_min.estimate == pytest.approx(surrogate.s_min * surrogate.b_noise)


def test_batch_answers_follow_the_reports_rules_on_the_model_curve(surrogate):
    answers = scaling_answers(surrogate, accelerators=8)
    sizes = np.asarray(surrogate.reached_batch_sizes)
    curve = pd.DataFrame({"batch_size": sizes, "steps_to_result": surrogate.steps(sizes)})
    regimes = scaling_regimes(curve)
    critical = float(overhead_batch_size(surrogate.b_noise, surrogate.knee, 0.2))
    limit = max(float(regimes.perfect_end), critical)  # at most 20% above perfect scaling
    divisible = [b for b in sizes if b % 8 == 0]

    assert answers.perfect_end.estimate == regimes.perfect_end
    start = regimes.max_parallel_start
    assert answers.max_parallel_start.estimate == (math.inf if start is None else start)
    assert answers.recommended_batch.estimate == max(b for b in divisible if b <= limit)
    for answer in (answers.perfect_end, answers.recommended_batch):
        assert answer.batch and {answer.low, answer.high} <= set(sizes) | {math.inf}
    pick = answers.recommended_batch.estimate
    # The rate with the fewest steps over the model's uncertainty: at or below the optimum
    # (steps rise faster above it), inside the optimum's interval.
    rate = answers.recommended_lr
    assert rate.low <= rate.estimate <= surrogate.best_lr(pick)[0] * 1.001
    assert rate.estimate == pytest.approx(surrogate.best_lr(pick)[0], rel=0.05)
    expected = surrogate.steps(16.0)[0] / surrogate.steps(pick)[0]
    assert answers.step_speedup.estimate == pytest.approx(expected)


def test_wider_confidence_gives_wider_intervals(surrogate):
    narrow = scaling_answers(surrogate, confidence=0.5)
    wide = scaling_answers(surrogate, confidence=0.99)
    assert wide.b_noise.low < narrow.b_noise.low < narrow.b_noise.high < wide.b_noise.high


def test_the_best_rates_interval_spans_the_middle_of_its_draws_as_every_answer(surrogate):
    answers = scaling_answers(surrogate, accelerators=8, draws=DRAWS, seed=3)
    pick = answers.recommended_batch.estimate
    draws = surrogate.draws(DRAWS, 3)
    rates = np.exp(log_best_lr(draws, [pick], surrogate.b_ref)[:, 0])
    b_noise = np.exp(draws[:, PARAMS.index("log_b_noise")])

    # No widening of its own: the model's bottom (smooth unless tested sharper) and its
    # variance on a cap make the middle 95% of the draws hold the truth (answer_coverage.py).
    assert answers.recommended_lr.low == pytest.approx(np.quantile(rates, 0.025))
    assert answers.recommended_lr.high == pytest.approx(np.quantile(rates, 0.975))
    assert answers.b_noise.low == pytest.approx(np.quantile(b_noise, 0.025))


def test_an_interval_end_among_overflowed_draws_is_infinite_not_nan():
    # Rates far in a tail overflow to inf; an end between two of them is inf.
    values = np.concatenate([np.linspace(1.0, 2.0, 95), np.full(5, np.inf)])
    low, high = _continuous_quantiles(values, 0.01)
    assert low == pytest.approx(1.0, abs=0.03) and high == math.inf


def test_no_divisible_batch_size_leaves_no_recommendation(surrogate):
    answers = scaling_answers(surrogate, accelerators=3)
    assert answers.ok and answers.recommended_batch is None and answers.b_noise is not None


def test_a_failed_model_gives_no_answers_and_its_reason():
    trials = pd.DataFrame(
        {"batch_size": [16, 32], "learning_rate": [0.1, 0.1], "steps_to_target": [100.0, 60.0]}
    )
    answers = scaling_answers(fit_surrogate(trials))
    assert not answers.ok and "batch sizes reached" in answers.reason and answers.items() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"accelerators": 0}, "accelerators"), ({"confidence": 1.0}, "confidence"),
     ({"overhead": 0.0}, "overhead")],
)  # fmt: skip
def test_bad_settings_are_refused(surrogate, kwargs, message):
    with pytest.raises(ValueError, match=message):
        scaling_answers(surrogate, **kwargs)


def test_answer_text():
    assert Answer("b", 512.0, 256.0, 512.0, batch=True).text() == "512 (256-512)"
    assert Answer("b", 512.0, 512.0, 512.0, batch=True).text() == "512"
    assert Answer("b", 512.0, 512.0, math.inf, batch=True).range_text() == (
        "512-beyond the measured sizes"
    )
    assert Answer("B_noise", 734.2, 454.0, 1339.0).text() == "734 (454-1.34e+03)"
    assert Answer("x", 1.0, 0.5, math.inf).to_dict() == {"estimate": 1.0, "low": 0.5, "high": None}
    assert as_number(256.0) == 256


# ------------------------------------------------------------ derived numbers under the knee


@pytest.mark.parametrize("overhead", [0.1, 0.2, 0.5])
def test_the_overhead_batch_size_is_overhead_times_b_noise_for_mccandlish_curve(overhead):
    from study.analysis.answers import overhead_batch_size

    assert float(overhead_batch_size(400.0, 1.0, overhead)) == pytest.approx(overhead * 400.0)


@pytest.mark.parametrize("knee", [1.0, 2.0, 3.8, 8.0])
@pytest.mark.parametrize("overhead", [0.1, 0.2, 0.5])
def test_the_overhead_batch_size_is_where_the_knee_curve_exceeds_perfect_scaling(knee, overhead):
    from study.analysis.answers import overhead_at, overhead_batch_size
    from study.analysis.likelihood import log_steps_curve

    b_noise, s_min = 390.0, 60.0
    batch = float(overhead_batch_size(b_noise, knee, overhead))
    theta = np.zeros(len(PARAMS))
    theta[PARAMS.index("log_s_min")] = math.log(s_min)
    theta[PARAMS.index("log_b_noise")] = math.log(b_noise)
    theta[PARAMS.index("log_knee")] = math.log(knee)
    steps = math.exp(log_steps_curve(theta[None, :], [batch])[0, 0])
    perfect = s_min * b_noise / batch  # E_min / B
    assert steps / perfect == pytest.approx(1.0 + overhead)
    assert batch == pytest.approx(b_noise * ((1 + overhead) ** knee - 1) ** (1 / knee))
    assert float(overhead_at(batch, b_noise, knee)) == pytest.approx(overhead)


def test_at_a_sharp_knee_the_20_percent_point_is_about_b_noise_not_a_fifth_of_it():
    from study.analysis.answers import overhead_batch_size

    assert float(overhead_batch_size(390.0, 3.8, 0.2)) == pytest.approx(390.0, rel=0.02)


def test_the_critical_batch_answer_follows_the_fitted_knee(surrogate):
    from study.analysis.answers import overhead_batch_size

    for overhead in (0.2, 0.5):
        answers = scaling_answers(surrogate, accelerators=8, overhead=overhead)
        expected = overhead_batch_size(surrogate.b_noise, surrogate.knee, overhead)
        assert answers.critical_batch.estimate == pytest.approx(float(expected))
        assert answers.overhead == overhead
        assert answers.critical_batch.low <= answers.critical_batch.estimate
        assert answers.critical_batch.low > 0.01 * answers.critical_batch.estimate


def test_parameter_draws_keep_the_knee_within_the_fit_bounds(surrogate):
    knee = surrogate.draws(2000, 1)[:, PARAMS.index("log_knee")]
    assert knee.min() >= 0.0
    assert knee.max() <= math.log(8.0) + 1e-12


# ------------------------------------------------------------------- ends the trials do not set


@pytest.fixture(scope="module")
def unpinned():
    """A study that scales perfectly over every measured batch size: B_noise far above them."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_surrogate import trials_of

    return fit_surrogate(trials_of(np.random.default_rng(1), b_noise=1e6, per_batch=6))


def test_an_end_set_by_the_search_range_is_printed_open(unpinned):
    answers = scaling_answers(unpinned, accelerators=8)
    b_noise = answers.b_noise
    _low, high = unpinned.bounds[PARAMS.index("log_b_noise")]
    draws = unpinned.draws(DRAWS, 0)[:, PARAMS.index("log_b_noise")]
    # Over 2.5% of the draws sit on the range's upper end: the 97.5% quantile would be that end.
    assert np.mean(draws >= high) > 0.025
    assert b_noise.open_high and not b_noise.open_low and not b_noise.bounded
    assert 0 < b_noise.low < max(unpinned.batch_sizes)
    # The number stays (every surface states the same one); the words say it is no bound.
    assert b_noise.high == pytest.approx(math.exp(high))
    assert b_noise.text().endswith(f"(at least {b_noise.low:.3g})")
    assert b_noise.to_dict()["open"] == "high" and b_noise.to_dict()["high"] == b_noise.high
    assert answers.to_metrics()["answer/b_noise_high"] == b_noise.high
    # The learning rate's answers are not read from S(B): their ends stay numbers.
    for answer in (answers.alpha, answers.sigma, answers.recommended_lr):
        assert answer.bounded, answer


def test_a_pinned_study_prints_every_interval_two_sided(surrogate):
    answers = scaling_answers(surrogate, accelerators=8)
    assert all(a.bounded for a in answers.items())
    assert all("open" not in a.to_dict() for a in answers.items())


def test_open_ends_need_the_draws_beyond_them_to_be_mostly_on_the_range_end():
    from study.analysis.answers import _open_ends

    values = np.arange(1000.0)
    edge = values >= 980  # 20 of the 25 draws above the 97.5% quantile sit on the range's end
    low, high = _continuous_quantiles(values, 0.025)
    assert _open_ends(values, edge, low, high) == (False, True)
    # 10 of them: the end is still one the other draws set.
    assert _open_ends(values, values >= 990, low, high) == (False, False)
    # Edge draws spread evenly (a parameter that does not follow B_noise): no end opens.
    spread = np.zeros(1000, dtype=bool)
    spread[::3] = True
    assert _open_ends(values, spread, low, high) == (False, False)
    assert _open_ends(values, np.zeros(1000, dtype=bool), low, high) == (False, False)
    both = (values < 30) | (values >= 970)
    assert _open_ends(values, both, low, high) == (True, True)


def test_open_ends_in_words():
    assert Answer("B_noise", 589.0, 66.0, 5e5, open_high=True).text() == "589 (at least 66)"
    assert Answer("B_noise", 12.0, 0.008, 300.0, open_low=True).text() == "12 (at most 300)"
    both = Answer("B_noise", 8585.0, 0.008, 5e5, open_low=True, open_high=True)
    assert both.range_text() == "not bounded by the trials"
    assert both.to_dict() == {"estimate": 8585.0, "low": 0.008, "high": 5e5, "open": "both"}
    # A batch answer's infinite end keeps its own words.
    assert Answer("b", 512.0, 512.0, math.inf, batch=True).text() == (
        "512 (512-beyond the measured sizes)"
    )
