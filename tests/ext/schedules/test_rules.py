"""Schedules derived from a finished study by rule: they start at B* at its best rate, never
train below it, and rate their later stages as the rule says."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from study.config.schedule import Stage
from study.ext.schedules.rules import derive_schedule, local_alpha
from tests.ext.schedules.test_compare import fixed_table

#: Perfect scaling to 128 (25,600 examples), then diminishing returns (test_schedule_compare's
#: curve); the best rate grows as B^0.5 to 128 and flattens above it.
CURVE = {32: 800, 64: 400, 128: 200, 256: 130, 512: 100}
RATES = {32: 0.01, 64: 0.01 * 2**0.5, 128: 0.02, 256: 0.022, 512: 0.023}


def table(curve: dict[int, float] = CURVE, strategy: str = "default") -> pd.DataFrame:
    """`fixed_table`'s steps-to-result table with each batch size's best rate."""
    rows = fixed_table(curve, strategy)
    rates = [RATES[b] if math.isfinite(s) else math.nan for b, s in curve.items()]
    return rows.assign(best_learning_rate=rates)


def test_double_at_half_starts_at_b_star_and_doubles_at_half_its_examples() -> None:
    derived = derive_schedule(table(), rule="double-at-half", rate="keep")
    assert derived.best_batch == 128 and derived.best_examples == 25_600
    assert derived.schedule.stages == (Stage(0, 128), Stage(12_800, 256))
    assert derived.schedule.learning_rate == pytest.approx(0.02)
    assert derived.schedule.alpha == 0.0  # keep: 256 trains at 128's rate
    assert derived.schedule.learning_rate_for(256) == pytest.approx(0.02)
    assert any("B* = 128" in line for line in derived.why)


def test_local_rate_follows_the_best_rates_at_the_schedules_batch_sizes() -> None:
    derived = derive_schedule(table(), rule="double-at-half", rate="local")
    expected = math.log(0.022 / 0.02) / math.log(2)
    assert derived.schedule.alpha == pytest.approx(expected)
    assert local_alpha(table(), [32, 64, 128]) == pytest.approx(0.5)
    assert local_alpha(table(), [128]) is None


def test_fit_rate_takes_the_studys_exponent_and_needs_one() -> None:
    derived = derive_schedule(table(), rate="fit", fitted_alpha=0.8)
    assert derived.schedule.alpha == 0.8
    with pytest.raises(ValueError, match="fitted alpha"):
        derive_schedule(table(), rate="fit", fitted_alpha=None)


def test_cbs_schedule_is_floored_at_b_star_and_never_falls() -> None:
    curve = pd.DataFrame(
        {"examples": [500, 2_000, 8_000, 16_000], "cbs": [40.0, 300.0, 200.0, 600.0]}
    )
    derived = derive_schedule(table(), rule="cbs", rate="keep", cbs_curve=curve)
    # 40 and 200 lie below B* = 128 / the running maximum; 300 -> 256, 600 -> 512
    assert derived.schedule.stages == (Stage(0, 128), Stage(2_000, 256), Stage(16_000, 512))
    with pytest.raises(ValueError, match="study branch"):
        derive_schedule(table(), rule="cbs")


def test_the_strategy_chooses_its_rows_and_nothing_reached_is_an_error() -> None:
    both = pd.concat([table(), table({b: 2 * s for b, s in CURVE.items()}, "mirrored:2")])
    assert derive_schedule(both, strategy="mirrored:2").best_examples == 51_200
    never = table(dict.fromkeys(CURVE, math.inf))
    with pytest.raises(ValueError, match="no fixed batch size reached"):
        derive_schedule(never)
    with pytest.raises(ValueError):
        derive_schedule(table(), rule="triple")
