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
