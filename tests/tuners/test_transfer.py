import math

import pytest

from study.tuners.transfer import WINDOW_FACTOR, centred_window, transfer_learning_rate


def test_transfer_interpolates_between_neighbours_in_log_log():
    lr = transfer_learning_rate([(32, 0.01), (128, 0.04)], 64, 1e-4, 10.0)
    assert lr == pytest.approx(0.02)


def test_transfer_extrapolates_with_slope_clipped_to_linear_rule():
    # slope 2 between the two nearest points is clipped to 1 (the linear scaling rule)
    lr = transfer_learning_rate([(32, 0.01), (64, 0.04)], 128, 1e-4, 10.0)
    assert lr == pytest.approx(0.08)
    # a falling learning rate is clipped to slope 0 (keep the rate)
    lr = transfer_learning_rate([(256, 0.5), (512, 0.2)], 1024, 1e-4, 10.0)
    assert lr == pytest.approx(0.2)


def test_transfer_with_one_neighbour_and_bounds():
    assert transfer_learning_rate([(64, 0.3)], 128, 1e-3, 1.0) == pytest.approx(0.3)
    assert transfer_learning_rate([(64, 0.3)], 128, 1e-3, 0.1) == pytest.approx(0.1)
    assert transfer_learning_rate([], 128, 1e-3, 1.0) is None


def test_centred_window_spans_a_factor_each_way_within_the_range():
    low, high = centred_window(0.01, 1e-4, 10.0)
    assert math.isclose(low * WINDOW_FACTOR, 0.01) and math.isclose(high / WINDOW_FACTOR, 0.01)
    assert centred_window(0.3, 1e-3, 3.0) == (pytest.approx(0.03), 3.0)
