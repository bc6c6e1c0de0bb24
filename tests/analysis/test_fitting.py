"""What the fits share: whole numbers and percentile intervals."""

from __future__ import annotations

import numpy as np
import pytest

from study.analysis.fitting import as_number, percentile_interval


def test_whole_numbers_become_ints():
    assert as_number(128.0) == 128 and isinstance(as_number(128.0), int)
    assert as_number(np.float64(0.5)) == 0.5 and isinstance(as_number(0.5), float)
    assert as_number("64") == 64


def test_percentile_interval_ignores_non_finite_samples():
    samples = np.concatenate([np.arange(1.0, 102.0), [np.inf, np.nan]])

    assert percentile_interval(samples, 0.9) == pytest.approx((6.0, 96.0))
    assert percentile_interval(np.array([np.inf, np.nan]), 0.95) is None
