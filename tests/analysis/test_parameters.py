"""The model's parameters are declared once: order, starts and bounds agree everywhere."""

from __future__ import annotations

import math

import numpy as np
import pytest

from study.analysis.likelihood import Trials
from study.analysis.parameters import DECLARED, PARAMS, Param, declared, start_vector, vector
from study.analysis.surrogate import _bounds, _Options, _starts
from tests.analysis.test_surrogate import trials_of


def test_every_parameter_is_declared_once_in_vector_order() -> None:
    assert [d.param for d in DECLARED] == list(Param)
    assert tuple(p.name.lower() for p in Param) == PARAMS
    assert len(set(PARAMS)) == len(PARAMS)
    for d in DECLARED:
        if d.bounds is not None:
            low, high = d.bounds
            assert low <= high
            assert d.start is None or low <= d.start <= high, d.param.key


def test_names_and_indices_name_the_same_parameter() -> None:
    assert Param.of("log_b_noise") is Param.LOG_B_NOISE
    assert Param.of(Param.ALPHA) is Param.ALPHA
    assert declared("log_knee").bounds == (0.0, math.log(8.0))
    with pytest.raises(KeyError, match=r"unknown model parameter 'b_noise'.*log_b_noise"):
        Param.of("b_noise")


def test_start_vector_needs_what_only_the_data_give() -> None:
    with pytest.raises(ValueError, match="log_s_min, log_b_noise, lr_level"):
        start_vector()
    start = start_vector(log_s_min=5.0, log_b_noise=6.0, lr_level=-2.0)
    assert start[Param.LOG_B_NOISE] == 6.0 and start[Param.ALPHA] == 0.5
    assert vector(alpha=0.3)[Param.ALPHA] == 0.3 and vector().sum() == 0.0


def test_the_fit_starts_inside_its_bounds_and_holds_what_its_options_hold() -> None:
    data = Trials.of(trials_of(np.random.default_rng(0)))
    options = _Options(bend=False, knee=False, heavy_tails=False)
    bounds = np.array(_bounds(data, options))
    assert bounds.shape == (len(Param), 2)
    for held in (Param.BETA, Param.LOG_KNEE, Param.TAIL):
        assert tuple(bounds[held]) == (0.0, 0.0)
    free = _bounds(data, _Options(bend=True, knee=True, heavy_tails=True))
    assert free[Param.LOG_KNEE] == declared(Param.LOG_KNEE).bounds
    for start in _starts(data):
        inside = (bounds[:, 0] - 1e-9 <= start) & (start <= bounds[:, 1] + 1e-9)
        held = (bounds[:, 0] == bounds[:, 1]) & (start != bounds[:, 0])
        assert np.all(inside | held)
