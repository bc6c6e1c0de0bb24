"""Learning-rate transfer: interpolation, and the window each stratum's search is centred on."""

import math

import pytest

from study.analysis.lr_scaling import fit_lr_power_law
from study.tuners.transfer import (
    MARGIN,
    WINDOW_FACTOR,
    BestRate,
    Window,
    centred_window,
    search_window,
    transfer_learning_rate,
)


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


# -- the search window ---------------------------------------------------------------------


def best(batch: int, lr: float, low: float | None = None, high: float | None = None, trials=3):
    """A best rate ``lr`` at ``batch`` from ``trials`` rates between ``low`` and ``high``
    (default: a factor 3 either side, so the best is inside)."""
    low = lr / 3 if low is None else low
    high = lr * 3 if high is None else high
    return BestRate(batch, lr, trials, low, high)


def interior(points):
    return [best(b, lr) for b, lr in points]


def test_without_other_batch_sizes_the_window_is_the_whole_range():
    window = search_window([], 128, 1e-3, 3.0)
    assert window == Window(1e-3, 3.0, None, "range")


def test_one_neighbour_spans_every_slope_from_keep_to_linear_with_a_margin():
    window = search_window([best(256, 0.4)], 128, 1e-3, 3.0)
    assert window.source == "neighbour"
    assert window.centre == pytest.approx(0.4 * 0.5**0.5)  # slope 0.5 between the two rules
    assert window.bounds == pytest.approx((0.2 / MARGIN, 0.4 * MARGIN))


def test_the_window_follows_the_fitted_power_law():
    """Best rates on lr = 0.001 B^0.8 at 256..2048: the centre at 128 is the law's prediction,
    and the window holds the law's prediction interval."""

    def law(b):
        return 1e-3 * b**0.8

    near = [(b, law(b)) for b in (256, 512, 1024, 2048)]
    window = search_window(interior(near), 128, 1e-5, 10.0)
    assert window.source == "power law"
    assert window.centre == pytest.approx(law(128))
    assert window.low < law(128) < window.high
    # nothing scatters about the law, so the slope's range (0 to 1) and the margin set the width
    assert window.bounds == pytest.approx((law(256) / 2 / MARGIN, law(256) * MARGIN))

    # a scattered set of best rates widens the window by the law's prediction interval
    noisy = [(b, lr * f) for (b, lr), f in zip(near, (1.2, 0.85, 1.15, 0.9))]
    wide = search_window(interior(noisy), 128, 1e-5, 10.0)
    fit = fit_lr_power_law([b for b, _ in noisy], [lr for _, lr in noisy])
    low, high = fit.prediction_interval(128)
    assert wide.low <= low and wide.high >= high
    assert wide.high / wide.low > window.high / window.low


def test_batch_sizes_on_both_sides_interpolate():
    window = search_window(interior([(32, 0.01), (128, 0.04)]), 64, 1e-4, 10.0)
    assert window.source == "interpolated"
    assert window.centre == pytest.approx(0.02)
    assert window.bounds == pytest.approx((0.02 / MARGIN, 0.02 * MARGIN))


def test_the_stratums_own_best_near_an_edge_moves_the_window_after_it():
    window = search_window([best(256, 0.4)], 128, 1e-3, 3.0, best(128, 0.11))
    assert window.low == pytest.approx(0.11 / MARGIN)
    assert window.high == pytest.approx(0.8)
    inside = search_window([best(256, 0.4)], 128, 1e-3, 3.0, best(128, 0.3))
    assert inside.bounds == pytest.approx((0.1, 0.8))


def test_the_window_stays_in_the_range_and_never_collapses():
    high_up = search_window([best(64, 2.5)], 128, 1e-3, 3.0)
    assert high_up.high == 3.0 and high_up.low <= 3.0 / MARGIN**2
    low_down = search_window([best(256, 1.5e-3)], 8, 1e-3, 3.0)
    assert low_down.low == 1e-3 and low_down.high >= 1e-3 * MARGIN**2


# -- a best rate is an estimate only between other rates tried -------------------------------


def test_a_neighbour_with_a_single_trial_says_nothing():
    lone = BestRate(256, 0.0028, 1, 0.0028, 0.0028)
    assert not lone.informative and lone.open_low and lone.open_high
    assert search_window([lone], 128, 1e-3, 3.0) == Window(1e-3, 3.0, None, "range")
    # beside an informative neighbour it is left out: the window is that neighbour's alone
    with_lone = search_window([best(64, 0.1), lone], 128, 1e-3, 3.0)
    assert with_lone == search_window([best(64, 0.1)], 128, 1e-3, 3.0)
    assert with_lone.source == "neighbour"


def test_an_interior_best_keeps_the_window_unchanged():
    inside = best(256, 0.4, 0.1, 1.0)
    assert inside.informative and not inside.open_low and not inside.open_high
    window = search_window([inside], 128, 1e-3, 3.0)
    assert window.bounds == pytest.approx((0.2 / MARGIN, 0.4 * MARGIN))


def test_a_neighbour_best_at_the_top_of_its_rates_opens_the_window_upward():
    """Batch 256's best 0.0028 is the highest of its rates tried: its optimum may lie higher,
    so batch 128's window reaches `WINDOW_FACTOR` above the highest rate extrapolated from it
    (slope 0: the rate itself); the low side is as before."""
    top = best(256, 0.0028, low=0.001, high=0.0028)
    assert top.open_high and not top.open_low
    window = search_window([top], 128, 1e-3, 3.0)
    closed = search_window([best(256, 0.0028)], 128, 1e-3, 3.0)
    assert window.centre == pytest.approx(closed.centre)
    assert window.high == pytest.approx(0.0028 * WINDOW_FACTOR)
    assert window.high > closed.high * 4
    assert window.low == pytest.approx(closed.low)


def test_a_neighbour_best_at_the_bottom_of_its_rates_opens_the_window_downward():
    bottom = best(256, 0.4, low=0.4, high=2.0)
    assert bottom.open_low and not bottom.open_high
    window = search_window([bottom], 128, 1e-3, 3.0)
    closed = search_window([best(256, 0.4)], 128, 1e-3, 3.0)
    assert window.low == pytest.approx(0.4 / 2 / WINDOW_FACTOR)  # slope 1 from 0.4 at 256
    assert window.low < closed.low / 4
    assert window.high == pytest.approx(closed.high)


def test_only_the_neighbours_the_centre_rests_on_open_it():
    """Between 64 and 256 the centre rests on those two: a far neighbour at an edge (batch 16,
    best at its top) does not open the window, a near one does."""
    near = [best(64, 0.1), best(256, 0.4)]
    far_closed = search_window([best(16, 0.03), *near], 128, 1e-4, 3.0)
    far_open = search_window([best(16, 0.03, high=0.03), *near], 128, 1e-4, 3.0)
    assert far_open.bounds == pytest.approx(far_closed.bounds)
    near_open = search_window([best(64, 0.1), best(256, 0.4, high=0.4)], 128, 1e-4, 3.0)
    assert near_open.high == pytest.approx(near_open.centre * WINDOW_FACTOR)


def test_the_stratums_own_best_at_the_edge_of_its_rates_pulls_the_window_that_way():
    """A chain started at a poor rate: the neighbour centres batch 128 near 0.003; the stratum's
    own best 0.006 is the highest it tried, so its window reaches a factor 10 above it."""
    neighbour = best(256, 0.003)
    plain = search_window([neighbour], 128, 1e-3, 3.0)
    own_top = BestRate(128, 0.006, 2, 0.002, 0.006)
    window = search_window([neighbour], 128, 1e-3, 3.0, own_top)
    assert window.high == pytest.approx(0.006 * WINDOW_FACTOR)
    assert window.low == pytest.approx(plain.low)
    own_bottom = BestRate(128, 0.002, 2, 0.002, 0.006)
    window = search_window([neighbour], 128, 1e-4, 3.0, own_bottom)
    assert window.low == pytest.approx(0.002 / WINDOW_FACTOR)
    # a single trial of its own only keeps `MARGIN` around it, as an interior best does
    lone = BestRate(128, 0.006, 1, 0.006, 0.006)
    assert search_window([neighbour], 128, 1e-3, 3.0, lone).high == pytest.approx(
        max(plain.high, 0.006 * MARGIN)
    )
