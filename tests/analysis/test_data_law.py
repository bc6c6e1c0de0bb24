from __future__ import annotations

import pytest

from study.analysis.data_law import DataLaw


def law(sizes: tuple[float, ...], sigma: tuple[float, ...], tau: float = 0.0) -> DataLaw:
    return DataLaw("critical_batch", ok=True, sizes=sizes, log_sigma=sigma, tau=tau)


def test_two_rungs_share_the_variance_by_their_leverage_at_the_size_predicted() -> None:
    # ln(8000/6000) / ln(6000/4000) = 0.71: the prediction is 1.71 y(6000) - 0.71 y(4000)
    shares = law((4000.0, 6000.0), (0.3, 0.3)).shares(8000)
    assert shares == pytest.approx((0.147, 0.853), abs=1e-3)
    # halfway between them (in log size) each weighs a half
    assert law((4000.0, 16000.0), (0.3, 0.3)).shares(8000) == pytest.approx((0.5, 0.5))


def test_shares_sum_to_one_and_the_nearest_rung_carries_most() -> None:
    sizes = (1000.0, 2000.0, 4000.0)
    even = law(sizes, (0.1, 0.1, 0.1)).shares(8000)
    assert sum(even) == pytest.approx(1.0)
    assert max(range(3), key=lambda i: even[i]) == 2
    # a rung with a wide interval of its own is weighed down in the fit, so it carries less
    wide = law(sizes, (0.1, 0.1, 1.0)).shares(8000)
    assert sum(wide) == pytest.approx(1.0)
    assert wide[2] < even[2]
    assert DataLaw("critical_batch", ok=False).shares(8000) == ()
