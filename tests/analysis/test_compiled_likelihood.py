"""The compiled objective (`study.analysis.compiled_likelihood`): the same negative capped
log-likelihood and forward-difference gradient as numpy's, on trials of every kind, near the
optimum and far from it, and the fits it drives land where numpy's do."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, special

from study.analysis import compiled_likelihood, descents
from study.analysis.fitting import value_and_gradient
from study.analysis.likelihood import (
    BRACKET,
    CENSORED,
    LAST_STEP,
    OBSERVED,
    Trials,
    capped_log_likelihoods,
)
from study.analysis.parameters import Param
from study.analysis.surrogate import _bounds, _Options, _starts, fit_surrogate


def mixed_trials(seed: int = 0) -> pd.DataFrame:
    """Trials of ``S(B) = 100 (1 + 256 / B)`` near a best rate ``0.01 (B / 16) ** 0.5``: exact
    crossings, brackets between two evaluations and censored trials (far from the best rate)."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in (16, 64, 256, 1024):
        for i, lr in enumerate(0.01 * (b / 16) ** 0.5 * np.exp(rng.normal(0, 0.6, 6))):
            steps = 100 * (1 + 256 / b) * math.exp(rng.normal(0, 0.1) + 0.5 * math.log(lr) ** 2)
            row = {"batch_size": b, "learning_rate": lr, "state": "reached"}
            if i == 5:  # ran 60 steps without reaching the target
                row |= {"steps_to_target": math.nan, "state": "pruned", LAST_STEP: 60.0}
            else:
                row |= {"steps_to_target": round(steps), LAST_STEP: round(steps)}
                row["previous_step"] = round(steps * 0.9) if i % 2 else math.nan
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def data() -> Trials:
    trials = Trials.of(mixed_trials())
    assert {OBSERVED, BRACKET, CENSORED} <= set(trials.kind.tolist())
    return trials


def numpy_objective(data: Trials, x: np.ndarray, upper: np.ndarray) -> tuple[float, np.ndarray]:
    return value_and_gradient(lambda p: -capped_log_likelihoods(p, data), x, upper)


def test_the_kernel_is_numpys_objective_near_and_far(data: Trials) -> None:
    bounds = _bounds(data, _Options(bend=True, knee=True, heavy_tails=False))
    upper = np.array([hi for _, hi in bounds])
    arrays = compiled_likelihood.kernel_data(data)
    rng = np.random.default_rng(1)
    checked = 0
    for start in _starts(data):
        for spread in (0.0, 0.3, 3.0):  # at the start, near it, far out (tails, the cap)
            x = start + rng.normal(0.0, spread, start.size)
            x[Param.TAIL] = 0.0
            value, gradient = compiled_likelihood.objective(x, upper, arrays)
            expected, expected_gradient = numpy_objective(data, x, upper)
            if not math.isfinite(expected):
                assert value == expected
                continue
            assert value == pytest.approx(expected, rel=1e-12, abs=1e-9)
            # Forward differences over a step of 1.5e-8: a rounding of the value (1e-16 of
            # it) moves them by about 1e-8 of the value.
            tolerance = 2e-6 * max(1.0, abs(expected)) + 1e-9 * np.abs(expected_gradient)
            assert np.all(np.abs(gradient - expected_gradient) <= tolerance)
            checked += 1
    assert checked >= 12


@pytest.mark.parametrize("a", [-1e4, -300.0, -37.5, -20.0, -19.99, -5.0, -1.0, -0.5, 0.0, 3.0, 8.0])
def test_log_ndtr_is_scipys_in_both_tails(a: float) -> None:
    assert compiled_likelihood.log_ndtr(a) == pytest.approx(special.log_ndtr(a), rel=1e-13)


def test_log_ndtr_ends() -> None:
    assert compiled_likelihood.log_ndtr(math.inf) == 0.0
    assert compiled_likelihood.log_ndtr(-math.inf) == -math.inf
    assert math.isnan(compiled_likelihood.log_ndtr(math.nan))


def test_normal_descents_land_where_numpys_do(data: Trials) -> None:
    bounds = _bounds(data, _Options(bend=False, knee=True, heavy_tails=False))
    starts = _starts(data)
    compiled = descents.descend(data, bounds, starts)
    upper = np.array([hi for _, hi in bounds])
    best_numpy = min(optimize_numpy(data, bounds, start, upper).fun for start in starts)
    assert min(r.fun for r in compiled) == pytest.approx(best_numpy, abs=1e-4)


def optimize_numpy(
    data: Trials, bounds: descents.Bounds, start: np.ndarray, upper: np.ndarray
) -> optimize.OptimizeResult:
    lower = np.array([lo for lo, _ in bounds])
    return optimize.minimize(
        lambda t: numpy_objective(data, t, upper),
        np.clip(start, lower, upper),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
    )


def test_a_student_t_fit_still_reads_heavy_tails() -> None:
    """The tail is free only in numpy's likelihood: a Student-t fit runs it."""
    fit = fit_surrogate(mixed_trials(2), noise="student-t", misfit_test=False)
    normal = fit_surrogate(mixed_trials(2), misfit_test=False)
    assert fit.ok and normal.ok
    assert fit.log_likelihood >= normal.log_likelihood - 1e-6


def test_warm_soon_readies_the_kernel_in_a_thread() -> None:
    thread = descents.warm_soon()
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert compiled_likelihood._warmed.is_set()


def test_where_numba_fails_the_fits_run_numpys_likelihood(
    data: Trials, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("cannot cache function '_value_and_gradient': no locator available")

    bounds = _bounds(data, _Options(bend=False, knee=True, heavy_tails=False))
    starts = _starts(data)[:2]
    upper = np.array([hi for _, hi in bounds])
    monkeypatch.setattr(compiled_likelihood, "warm", broken)
    descents._kernel.cache_clear()
    try:
        results = descents.descend(data, bounds, starts)
        assert "numba could not compile" in caplog.text
    finally:
        descents._kernel.cache_clear()
    expected = [optimize_numpy(data, bounds, start, upper) for start in starts]
    assert [r.fun for r in results] == [r.fun for r in expected]
