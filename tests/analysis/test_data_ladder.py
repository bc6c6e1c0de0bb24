"""The laws along a data ladder and the answer at the next rung, on rungs whose answers follow a
known law (drawn with a known scatter, or set by hand)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from study.analysis.answers import Answer, Answers
from study.analysis.data_ladder import WIDE, fit_ladder
from study.analysis.data_law import GRID_SIGMA, QUANTITIES, Rung, fit_data_law
from study.analysis.target_law import MAX_DISTANCE, agrees

Z95 = float(stats.norm.ppf(0.975))


def answers_of(b_noise: float, sigma: float, *, rate: float = 0.01, ok: bool = True) -> Answers:
    """A rung's answers: B_noise with a 95% interval of ``sigma`` (log units), a critical
    batch size of a fifth of it, the batch for 8 accelerators on powers of two and a best rate
    with the same relative interval."""
    if not ok:
        return Answers(ok=False, reason="no batch size reached the target", accelerators=8)
    half = math.exp(Z95 * sigma)

    def answer(name: str, mid: float, *, batch: bool = False) -> Answer:
        return Answer(name, mid, mid / half, mid * half, batch)

    batch = 8 * 2 ** max(0, round(math.log2(b_noise / 5 / 8)))
    return Answers(
        ok=True,
        accelerators=8,
        b_noise=answer("B_noise", b_noise),
        critical_batch=answer("critical", b_noise / 5),
        perfect_end=Answer("perfect", batch / 2, batch / 2, batch / 2, batch=True),
        recommended_batch=Answer("batch", batch, batch, batch, batch=True),
        recommended_lr=answer("rate", rate),
    )


def law_ladder(
    sizes: list[float],
    exponent: float,
    sigma: float,
    rng: np.random.Generator,
    *,
    rate_exponent: float = -0.3,
) -> list[Rung]:
    """Rungs on ``B_noise = 100 (D / 1000)^exponent``, each estimate off by ``sigma`` log
    units of normal scatter, its interval saying so."""
    rungs = []
    for d in sizes:
        b = 100 * (d / 1000) ** exponent * math.exp(sigma * rng.standard_normal())
        rate = 0.01 * (d / 1000) ** rate_exponent * math.exp(sigma * rng.standard_normal())
        rungs.append(Rung(f"d{d:g}", d, answers_of(b, sigma, rate=rate)))
    return rungs


def test_the_exponent_is_recovered_and_its_interval_covers_it() -> None:
    rng = np.random.default_rng(0)
    sizes = [1000.0, 2000.0, 4000.0, 8000.0]
    estimates, covered, rate_covered = [], [], []
    for _ in range(400):
        ladder = fit_ladder(law_ladder(sizes, 0.5, 0.1, rng))
        e = ladder.laws["b_noise"].exponent
        assert e is not None
        estimates.append(e.estimate)
        covered.append(e.covers(0.5))
        rate_covered.append(ladder.laws["recommended_lr"].exponent.covers(-0.3))
    assert abs(np.mean(estimates) - 0.5) < 0.01
    assert 0.92 <= np.mean(covered) <= 0.99
    assert 0.92 <= np.mean(rate_covered) <= 0.99


def test_two_rungs_fit_exactly_with_the_rungs_own_intervals() -> None:
    rungs = [Rung("a", 1000, answers_of(100, 0.1)), Rung("b", 4000, answers_of(200, 0.2))]
    law = fit_data_law(rungs, "b_noise")
    assert law.ok and law.dof == 0 and law.scale == 1
    assert law.exponent is not None
    assert law.exponent.estimate == pytest.approx(0.5)
    half = Z95 * math.hypot(0.1, 0.2) / math.log(4)
    assert law.exponent.high - law.exponent.estimate == pytest.approx(half, rel=1e-6)
    assert law.text() == "B_noise ~ D^0.5 (0.18 to 0.82)"
    assert law.words() == "rises with the data"


def test_rungs_that_scatter_more_than_their_intervals_widen_the_law() -> None:
    sizes = [1000.0, 2000.0, 4000.0, 8000.0, 16000.0]
    zigzag = [100 * (d / 1000) ** 0.5 * (1.5 if k % 2 else 1 / 1.5) for k, d in enumerate(sizes)]
    tight = fit_data_law([Rung(f"{d}", d, answers_of(b, 0.05)) for d, b in zip(sizes, zigzag)],
                         "b_noise")  # fmt: skip
    assert tight.scale > 3
    # equal intervals s: the method of moments gives tau^2 = s^2 (RSS_w / (n - 2) - 1)
    assert tight.tau == pytest.approx(0.05 * math.sqrt(tight.scale**2 - 1), rel=1e-9)
    assert tight.exponent is not None and tight.exponent.high - tight.exponent.low > 0.3
    prediction = tight.predict(32000)
    x0 = np.array([1.0, math.log(32000)])
    var = float(x0 @ np.array(tight.covariance) @ x0) + tight.tau**2  # the rungs' own scatter
    assert math.log(prediction.high / prediction.estimate) == pytest.approx(Z95 * math.sqrt(var))
    wide = fit_data_law(
        [Rung(f"{d}", d, answers_of(b, 0.6)) for d, b in zip(sizes, zigzag)], "b_noise"
    )
    assert wide.scale == 1 and wide.tau == 0


def test_the_interval_has_no_jump_where_the_rungs_start_to_scatter() -> None:
    """Three rungs just inside and just past their intervals' scatter: the normal quantile
    throughout and ``tau`` from 0, so the interval barely moves (a t quantile on one degree of
    freedom once the scatter showed made it 6 times wider)."""

    def width(offset: float) -> float:
        rungs = [
            Rung(f"{d}", d, answers_of(100 * (d / 1000) ** 0.5 * math.exp(e), 0.1))
            for d, e in zip((1000.0, 2000.0, 4000.0), (0.0, offset, 0.0))
        ]
        answer = fit_data_law(rungs, "b_noise").predict(8000)
        return math.log(answer.high / answer.low)

    # RSS_w = (2/3) (offset / 0.1)^2: 1 (one degree of freedom) at offset 0.1225
    inside, past = width(0.12), width(0.125)
    assert past >= inside
    assert past == pytest.approx(inside, rel=0.05)


def test_the_prediction_holds_the_answer_there_at_about_its_level() -> None:
    rng = np.random.default_rng(1)
    sizes = [1000.0, 2000.0, 4000.0]
    truth, agree, inside = [], [], []
    for _ in range(400):
        ladder = fit_ladder(law_ladder(sizes, 0.4, 0.15, rng))
        prediction = ladder.predict(8000)
        law = 100 * 8**0.4
        next_rung = answers_of(law * math.exp(0.15 * rng.standard_normal()), 0.15).b_noise
        assert prediction.ok and prediction.b_noise is not None and next_rung is not None
        truth.append(prediction.b_noise.covers(law))
        agree.append(agrees(prediction.b_noise, next_rung))
        inside.append(prediction.b_noise.covers(next_rung.estimate))
    assert 0.92 <= np.mean(truth) <= 0.98
    assert 0.92 <= np.mean(agree) <= 0.98
    # the next study's own noise is not in the interval for the answer: it falls outside more
    assert np.mean(inside) < np.mean(truth)


def test_the_batch_follows_the_predicted_critical_batch_on_powers_of_two() -> None:
    rungs = [Rung(f"{d}", d, answers_of(100 * (d / 1000), 0.1)) for d in (1000, 2000, 4000)]
    prediction = fit_ladder(rungs).predict(8000)
    batch = prediction.recommended_batch
    assert prediction.ok and batch is not None and batch.batch
    assert batch.low <= batch.estimate <= batch.high
    assert all(v % 8 == 0 and math.log2(v / 8).is_integer() for v in (batch.low, batch.high))
    assert batch.estimate == 128  # critical 160 -> the largest 8 * 2^k up to it
    assert prediction.recommended_lr is not None
    assert "extrapolated 2x past the largest rung (rungs 1,000-4,000)" in prediction.line()


def test_a_batch_answer_carries_the_grids_rounding() -> None:
    rungs = [Rung(f"{d}", d, answers_of(100 * d / 1000, 0.1)) for d in (1000, 4000)]
    law = fit_data_law(rungs, "recommended_batch")
    assert law.log_sigma == pytest.approx((GRID_SIGMA, GRID_SIGMA))


def test_past_the_laws_support_the_prediction_is_refused_with_the_reason() -> None:
    rungs = [Rung("a", 1000, answers_of(100, 0.1)), Rung("b", 2000, answers_of(140, 0.1))]
    ladder = fit_ladder(rungs)
    assert MAX_DISTANCE == 1
    assert ladder.predict(4000).ok  # exactly one fitted range beyond: kept
    assert ladder.predict(1500).distance == 0
    assert "interpolated" in ladder.predict(1500).assumption
    refused = ladder.predict(5000)
    assert not refused.ok and refused.b_noise is None
    assert "1.3 fitted ranges (in log data size) beyond the rungs 1,000-2,000" in refused.reason
    assert "up to 4,000 examples" in refused.reason
    assert refused.line().startswith("no prediction for 5,000 training examples: it lies")
    assert not ladder.predict(-1).ok


@pytest.mark.parametrize(
    ("rungs", "message"),
    [
        ([Rung("a", 1000, answers_of(100, 0.1))], "at least 2 studies (got 1)"),
        (
            [Rung("a", 1000, answers_of(100, 0.1)), Rung("b", 1000, answers_of(120, 0.1))],
            "'a' and 'b' both trained on 1,000 examples",
        ),
        (
            [Rung("a", 0, answers_of(100, 0.1)), Rung("b", 1000, answers_of(120, 0.1))],
            "must be a positive number of training examples (got 0)",
        ),
    ],
)
def test_a_ladder_refuses_too_few_rungs_and_repeated_or_bad_sizes(rungs, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        fit_ladder(rungs)


def test_a_rung_without_answers_is_left_out_and_a_lone_answer_gives_no_law() -> None:
    rungs = [Rung("a", 1000, answers_of(100, 0.1)), Rung("b", 2000, answers_of(0, 0, ok=False))]
    ladder = fit_ladder(rungs)
    assert not ladder.laws["b_noise"].ok
    assert "at least 2 rungs of different sizes" in ladder.laws["b_noise"].reason
    refused = ladder.predict(3000)
    assert not refused.ok and "at least 2 rungs" in refused.reason
    frame = ladder.frame()
    assert list(frame["ok"]) == [True, False]
    assert math.isnan(frame.loc[1, "b_noise"])
    assert {f"{q}{s}" for q in QUANTITIES for s in ("", "_low", "_high")} <= set(frame.columns)


def test_the_law_band_narrows_inside_the_rungs() -> None:
    rng = np.random.default_rng(2)
    law = fit_ladder(law_ladder([1000.0, 2000.0, 4000.0], 0.5, 0.1, rng)).laws["b_noise"]
    mid, low, high = law.curve(np.array([2000.0, 16000.0]))
    assert np.all(low < mid) and np.all(mid < high)
    assert (high[0] / low[0]) < (high[1] / low[1])


def test_a_prediction_too_wide_to_act_on_says_so_and_names_the_rung_to_improve() -> None:
    sharp = [
        Rung("d4000", 4000.0, answers_of(300, 0.1)),
        Rung("d6000", 6000.0, answers_of(350, 0.1)),
    ]
    prediction = fit_ladder(sharp).predict(8000)
    assert prediction.caution == ""
    assert "Too wide" not in prediction.line()

    # the larger rung's interval spans a factor of 50: extrapolated past it, it carries nearly all
    wide = [
        Rung("d4000", 4000.0, answers_of(300, 0.1)),
        Rung("d6000", 6000.0, answers_of(350, 1.0)),
    ]
    prediction = fit_ladder(wide).predict(8000)
    critical = prediction.critical_batch
    assert critical.high / critical.low > WIDE
    assert "rung 'd6000' (6,000 examples, its own 9.86-497)" in prediction.caution
    assert re.search(r"spans a factor of 818; 100% of its variance", prediction.caution)
    assert prediction.line().endswith(f". Too wide to act on: {prediction.caution}")
    assert prediction.to_dict()["caution"] == prediction.caution
