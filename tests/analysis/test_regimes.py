"""scaling_efficiency and scaling_regimes: Shallue's perfect, diminishing and maximal regimes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from study.analysis import scaling_efficiency, scaling_regimes

POWERS = np.array([2**k for k in range(3, 13)])  # 8 ... 4096


@pytest.fixture
def ideal_curve(make_steps):
    """Perfect to 128, then a quarter fewer steps per doubling to 1024, then flat."""
    steps = []
    for b in POWERS:
        if b <= 128:
            steps.append(12800 / b)
        elif b <= 1024:
            steps.append(100 * 0.75 ** math.log2(b / 128))
        else:
            steps.append(100 * 0.75**3)
    return make_steps(POWERS, steps)


def test_regimes_on_an_ideal_curve(ideal_curve):
    regimes = scaling_regimes(ideal_curve, tolerance=0.2)

    assert regimes.ok
    assert regimes.perfect_end == 128
    assert regimes.max_parallel_start == 1024
    assert regimes.perfect == (8, 128)
    assert regimes.diminishing == (128, 1024)
    assert regimes.maximal == (1024, 4096)
    assert [regimes.regime(b) for b in (64, 256, 2048)] == ["perfect", "diminishing", "maximal"]
    table = regimes.table
    assert len(table) == POWERS.size - 1
    assert table["efficiency"].iloc[:4].tolist() == pytest.approx([1.0] * 4)
    assert table["speedup_per_doubling"].iloc[4] == pytest.approx(1 / 0.75)
    assert table["perfect"].tolist() == [True] * 4 + [False] * 5
    assert table["flat"].tolist() == [False] * 7 + [True] * 2


def test_regimes_edge_cases(make_steps):
    perfect = scaling_regimes(make_steps(POWERS, 1e5 / POWERS))
    assert perfect.perfect_end == 4096
    assert perfect.max_parallel_start is None and perfect.maximal is None
    assert perfect.diminishing is None

    flat = scaling_regimes(make_steps(POWERS, np.full(POWERS.size, 50.0)))
    assert flat.perfect_end == 8 and flat.max_parallel_start == 8

    # Ratio 4 between batch sizes: ideal is a quarter of the steps; 0.28 is within 20%.
    quads = scaling_regimes(make_steps([8, 32, 128, 512], [1000, 280, 78, 60]))
    assert quads.perfect_end == 128
    assert quads.table["batch_ratio"].tolist() == [4.0, 4.0, 4.0]

    # An unreached batch size is left out; one batch size is too few.
    gap = scaling_regimes(make_steps([8, 16, 32], [1000, math.inf, math.inf]))
    assert not gap.ok and gap.excluded == (16, 32) and "fewer than 2" in gap.reason
    assert gap.regime(8) == "" and gap.perfect is None


def test_efficiency_of_one_step(make_steps):
    (row,) = scaling_efficiency(make_steps([8, 16], [1000, 520])).to_dict("records")

    assert row["efficiency"] == pytest.approx(1000 / 520 / 2)
    assert row["speedup_per_doubling"] == pytest.approx(1000 / 520)
    assert row["perfect"] and not row["flat"]


def test_several_rows_per_batch_size_use_the_fewest_steps(make_steps):
    per_strategy = make_steps([8, 8, 16, 16, 32, 32], [1000, 900, 500, 450, 250, 240])

    regimes = scaling_regimes(per_strategy)

    assert regimes.batch_sizes == (8, 16, 32)
    assert regimes.table["steps"].tolist() == [900, 450]


def test_regime_bounds_is_the_rule_of_scaling_regimes_on_many_curves():
    import numpy as np
    import pandas as pd

    from study.analysis.regimes import regime_bounds

    rng = np.random.default_rng(0)
    b = np.array([8.0, 16, 32, 64, 128, 256, 512])
    curves = np.exp(np.cumsum(rng.uniform(-0.8, 0.1, size=(200, b.size)), axis=1)) * 1e4
    k, start = regime_bounds(b, curves)
    for row, kk, ss in zip(curves, k, start):
        regimes = scaling_regimes(pd.DataFrame({"batch_size": b, "steps_to_result": row}))
        assert regimes.perfect_end == b[kk]
        assert regimes.max_parallel_start == (None if ss < 0 else b[ss])
