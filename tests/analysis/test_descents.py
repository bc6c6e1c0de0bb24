"""The fit's descents (`study.analysis.descents`): each starting point's descent is the same
computation alone or among others, so a fit whose descents run elsewhere (an installed helper)
is the same fit, bit for bit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from study.analysis import descents
from study.analysis.likelihood import Trials
from study.analysis.surrogate import _bounds, _Options, _starts, fit_surrogate


def trials_frame(seed: int = 0) -> pd.DataFrame:
    """Trials whose steps follow ``100 (1 + 256 / B)`` near a best rate ``0.01 (B / 16) ** 0.5``."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "batch_size": b,
            "learning_rate": lr,
            "steps_to_target": 100 * (1 + 256 / b) * f,
            "state": "reached",
        }
        for b in (16, 64, 256, 1024)
        for lr, f in zip(
            0.01 * (b / 16) ** 0.5 * np.exp(rng.normal(0, 0.4, 5)),
            np.exp(rng.normal(0, 0.1, 5)),
            strict=True,
        )
    ]
    return pd.DataFrame(rows)


@pytest.fixture
def restored() -> Iterator[None]:
    before = descents.install(None)
    yield
    descents.install(before)


def same(a: Sequence[optimize.OptimizeResult], b: Sequence[optimize.OptimizeResult]) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.x, y.x) and x.fun == y.fun for x, y in zip(a, b, strict=True)
    )


def test_a_descent_is_the_same_alone_or_among_others() -> None:
    data = Trials.of(trials_frame())
    bounds = _bounds(data, _Options(bend=False, knee=True, heavy_tails=False))
    starts = _starts(data)
    together = descents.descend(data, bounds, starts)
    assert len(together) == len(starts) == 6
    apart = descents.descend(data, bounds, starts[:3]) + descents.descend(data, bounds, starts[3:])
    assert same(together, apart)


def test_an_installed_helper_runs_the_descents_and_the_fit_is_unchanged(restored: None) -> None:
    frame = trials_frame(1)
    plain = fit_surrogate(frame)
    asked: list[int] = []

    def helper(
        data: Trials, bounds: descents.Bounds, starts: Sequence[np.ndarray]
    ) -> list[optimize.OptimizeResult]:
        asked.append(len(starts))
        half = len(starts) // 2
        return descents.descend(data, bounds, starts[:half]) + descents.descend(
            data, bounds, starts[half:]
        )

    assert descents.install(helper) is None
    helped = fit_surrogate(frame)
    assert asked and max(asked) == 6  # the cold starts; a single start stays here
    assert np.array_equal(helped.theta, plain.theta)
    assert np.array_equal(helped.covariance, plain.covariance)
    assert helped.log_likelihood == plain.log_likelihood and helped.b_noise == plain.b_noise
    assert descents.install(None) is helper
