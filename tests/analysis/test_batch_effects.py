"""The spread of the best learning rate between batch sizes: read from each batch size's own
trials, and added to the intervals only when the batch sizes disagree with the curve."""

from __future__ import annotations

import math

import numpy as np

from study.analysis.answers import scaling_answers
from study.analysis.batch_effects import batch_offsets, between_batch_covariance
from study.analysis.likelihood import PARAMS, Trials
from study.analysis.surrogate import fit_surrogate
from tests.analysis.test_surrogate import SIZES, trials_of


def _free(fit) -> list[int]:
    return [i for i in range(len(PARAMS)) if fit.covariance[i, i] > 0]


def test_each_batch_size_reads_its_own_best_rate_offset():
    trials = trials_of(np.random.default_rng(5), per_batch=12)
    shifted = trials.assign(
        learning_rate=np.where(
            trials["batch_size"] == 128,
            trials["learning_rate"] * math.e**0.6,
            trials["learning_rate"],
        )
    )
    fit = fit_surrogate(shifted, shape="power law", misfit_test=False)
    sizes, eta, se = batch_offsets(Trials.of(shifted), fit.theta, "best_lr")

    assert list(sizes) == list(SIZES)
    at = list(sizes).index(128)
    others = np.delete(eta, at)
    # The curve through all of them moves up a little toward the shifted one.
    assert eta[at] - np.median(others) > 0.4
    assert eta[at] > np.max(np.abs(others)) + 0.1
    assert np.all(np.isfinite(se)) and np.all(se < 0.3)


def test_no_spread_is_added_when_the_batch_sizes_agree_with_the_curve():
    trials = trials_of(np.random.default_rng(2), per_batch=12)
    fit = fit_surrogate(trials, misfit_test=False)
    extra, tau = between_batch_covariance(Trials.of(trials), fit.theta, _free(fit), "best_lr")

    assert tau < 0.1
    alpha = PARAMS.index("alpha")
    assert (
        extra[_free(fit).index(alpha), _free(fit).index(alpha)]
        <= 0.25 * fit.covariance[alpha, alpha]
    )


def test_best_rates_that_scatter_between_batch_sizes_widen_alpha_by_their_spread():
    taus, widths = [], {0.0: [], 0.4: []}
    for seed in range(6):
        for spread in widths:
            trials = trials_of(np.random.default_rng(seed), per_batch=8, lr_spread=spread)
            fit = fit_surrogate(trials, misfit_test=False)
            alpha = scaling_answers(fit, draws=1000).alpha
            widths[spread].append(alpha.high - alpha.low)
            if spread:
                _, tau = between_batch_covariance(
                    Trials.of(trials), fit.theta, _free(fit), "best_lr"
                )
                taus.append(tau)

    assert 0.2 < float(np.median(taus)) < 0.6  # the spread drawn: 0.4
    assert np.median(np.array(widths[0.4]) / np.array(widths[0.0])) > 2.0
