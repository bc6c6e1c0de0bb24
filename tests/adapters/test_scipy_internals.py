"""Contract test of SciPy's private L-BFGS-B routine (`study.adapters.scipy_internals`): the
loop around ``setulb`` is ``minimize(method="L-BFGS-B")``, bit for bit, at this SciPy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from study.adapters import scipy_internals


def rosenbrock(x: np.ndarray) -> tuple[float, np.ndarray]:
    return float(optimize.rosen(x)), optimize.rosen_der(x)


def test_setulb_is_the_routine_the_loop_drives() -> None:
    assert scipy_internals._setulb() is not None


@pytest.mark.parametrize("start", [[-1.2, 1.0, 0.5, 2.0], [1.9, -1.9, 0.0, 1.0], [3.0] * 4])
def test_the_loop_is_minimize_bit_for_bit(start: list[float]) -> None:
    bounds = [(-2.0, 2.0), (-2.0, 2.0), (-0.5, 1.5), (0.0, 0.0)]  # one held, one clipped start
    ours = scipy_internals.lbfgsb(rosenbrock, np.array(start), bounds)
    theirs = optimize.minimize(
        rosenbrock, np.clip(start, *zip(*bounds)), jac=True, method="L-BFGS-B", bounds=bounds
    )
    assert np.array_equal(ours.x, theirs.x) and ours.fun == theirs.fun
    assert ours.nit == theirs.nit and ours.success == theirs.success
    assert ours.nfev == theirs.nfev


def test_another_scipys_routine_or_open_bounds_take_minimize(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = optimize.minimize(rosenbrock, [0.5, 0.5], jac=True, method="L-BFGS-B")
    open_bounds = scipy_internals.lbfgsb(rosenbrock, np.array([0.5, 0.5]), [(-np.inf, np.inf)] * 2)
    assert np.array_equal(open_bounds.x, expected.x)
    monkeypatch.setattr(scipy_internals, "_setulb", lambda: None)
    bounds = [(-2.0, 2.0)] * 2
    fallback = scipy_internals.lbfgsb(rosenbrock, np.array([0.5, 0.5]), bounds)
    direct = optimize.minimize(rosenbrock, [0.5, 0.5], jac=True, method="L-BFGS-B", bounds=bounds)
    assert np.array_equal(fallback.x, direct.x) and fallback.fun == direct.fun


def _valley(x: np.ndarray) -> float:
    """A value only: a curved valley, its floor below zero in the second coordinate."""
    return float((x[0] - 0.7) ** 2 + 3 * (x[1] + 0.2 - x[0] ** 2) ** 2 + 0.1 * np.sin(5 * x[0]))


def _as_array(x: np.ndarray) -> np.ndarray:
    return np.array([_valley(x)])  # what KerasTuner's acquisition returns


@pytest.mark.parametrize(
    ("start", "bounds"),
    [
        ([0.1, 0.5], [(-1.0, 1.0), (-1.0, 1.0)]),  # inside
        ([1.0, -1.0], [(-1.0, 1.0), (-1.0, 1.0)]),  # on the bounds: the steps turned back
        ([0.0, -0.0], [(-1.0, 1.0), (-1.0, 1.0)]),  # zeros, either sign
        ([5e8, 0.3], [(-1e9, 1e9), (-1.0, 1.0)]),  # x + 1e-8 == x: the relative step
        ([0.5, 0.2], [(0.5, 0.5 + 5e-9), (0.2 - 4e-9, 0.2 + 3e-9)]),  # no room for a step
        ([3.0, 3.0], [(-1.0, 1.0), (-1.0, 1.0)]),  # outside: clipped
    ],
)
@pytest.mark.parametrize("fun", [_valley, _as_array])
def test_the_numeric_loop_is_minimize_without_a_gradient_bit_for_bit(
    start: list[float], bounds: list[tuple[float, float]], fun
) -> None:
    ours = scipy_internals.lbfgsb_numeric(fun, np.array(start), bounds)
    theirs = optimize.minimize(fun, np.array(start), method="L-BFGS-B", bounds=bounds)
    assert ours.x.tobytes() == theirs.x.tobytes() and ours.fun == theirs.fun
    assert ours.nit == theirs.nit and ours.success == theirs.success


def test_the_numeric_loop_without_its_routine_or_bounds_is_minimize(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    open_bounds = scipy_internals.lbfgsb_numeric(
        _valley, np.array([0.1, 0.1]), [(-np.inf, 1.0)] * 2
    )
    expected = optimize.minimize(
        _valley, [0.1, 0.1], method="L-BFGS-B", bounds=[(-np.inf, 1.0)] * 2
    )
    assert np.array_equal(open_bounds.x, expected.x) and open_bounds.nfev == expected.nfev
    monkeypatch.setattr(scipy_internals, "_setulb", lambda: None)
    fallback = scipy_internals.lbfgsb_numeric(_valley, np.array([0.1, 0.1]), [(-1.0, 1.0)] * 2)
    direct = optimize.minimize(_valley, [0.1, 0.1], method="L-BFGS-B", bounds=[(-1.0, 1.0)] * 2)
    assert np.array_equal(fallback.x, direct.x) and fallback.nfev == direct.nfev
