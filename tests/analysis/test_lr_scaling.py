"""fit_lr_power_law: lr* = c B^alpha, its interval, the linear and square-root rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from study.analysis import fit_lr_power_law

POWERS = np.array([2**k for k in range(3, 13)])  # 8 ... 4096


def test_lr_power_law_recovers_alpha():
    rng = np.random.default_rng(0)
    lrs = 0.002 * POWERS**0.7 * rng.lognormal(0, 0.05, POWERS.size)

    fit = fit_lr_power_law(POWERS, lrs)

    assert fit.ok and fit.method == "t"
    assert fit.alpha == pytest.approx(0.7, abs=0.05)
    assert fit.alpha_ci[0] < 0.7 < fit.alpha_ci[1]
    assert fit.c == pytest.approx(0.002, rel=0.3)
    assert not fit.linear_in_ci and not fit.sqrt_in_ci and fit.rule == "neither"
    assert fit.predict(512) == pytest.approx(fit.c * 512**fit.alpha)


def test_a_lower_confidence_gives_a_narrower_interval():
    rng = np.random.default_rng(0)
    lrs = 0.002 * POWERS**0.7 * rng.lognormal(0, 0.05, POWERS.size)

    wide = fit_lr_power_law(POWERS, lrs)
    narrow = fit_lr_power_law(POWERS, lrs, confidence=0.9)

    assert narrow.confidence == 0.9
    assert wide.alpha_ci[0] < narrow.alpha_ci[0] < narrow.alpha_ci[1] < wide.alpha_ci[1]


def test_lr_power_law_rules_and_thin_data():
    sqrt = fit_lr_power_law(POWERS, 0.001 * np.sqrt(POWERS))
    assert sqrt.alpha == pytest.approx(0.5) and sqrt.rule == "square-root"
    linear = fit_lr_power_law(POWERS, 0.001 * POWERS)
    assert linear.rule == "linear" and linear.linear_in_ci and not linear.sqrt_in_ci

    thin = fit_lr_power_law([8, 16, 32], [0.01, 0.02, math.nan])
    assert not thin.ok
    assert thin.reason == "fewer than 3 batch sizes with a best learning rate (2)"
    assert thin.excluded == (32,)
