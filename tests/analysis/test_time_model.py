"""Time to result per (batch size, strategy): steps to result x the probe's seconds per step."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.analysis.noise_scale import NoiseScaleFit, fit_noise_scale
from study.analysis.time_model import (
    FIT,
    FIT_EXTRAPOLATED,
    MEASURED,
    NOT_REACHED,
    UNKNOWN,
    extrapolate_replicas,
    probe_frame,
    steps_at,
    time_to_result,
)

BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512)


def steps_table(s_min: float = 100.0, b_noise: float = 64.0) -> pd.DataFrame:
    """Measured steps to result following ``S(B) = s_min (1 + b_noise / B)`` exactly."""
    steps = [s_min * (1 + b_noise / b) for b in BATCH_SIZES]
    return pd.DataFrame({"batch_size": list(BATCH_SIZES), "steps_to_result": steps})


def probe(rows: list[tuple[int, str, int, float]], **extra: object) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"batch_size": b, "strategy": s, "replicas": r, "seconds_per_step": t, **extra}
            for b, s, r, t in rows
        ]
    )


@pytest.fixture(scope="module")
def fit() -> NoiseScaleFit:
    table = steps_table()
    return fit_noise_scale(table["batch_size"], table["steps_to_result"])


def test_time_is_steps_times_seconds_and_the_fastest_need_not_take_fewest_steps(fit) -> None:
    rows = probe([(128, "default", 1, 0.010), (512, "default", 1, 0.030)])

    model = time_to_result(rows, steps_table(), fit)

    times = model.table.set_index("batch_size")["time_to_result"]
    assert times[128] == pytest.approx(150 * 0.010) and times[512] == pytest.approx(112.5 * 0.030)
    assert model.ok and model.best["batch_size"] == 128
    assert model.fewest_steps["batch_size"] == 512
    assert model.slowdown_of_fewest_steps == pytest.approx(112.5 * 0.030 / (150 * 0.010))
    assert list(model.table["fastest"]) == [True, False]


def test_the_strategy_with_the_cheaper_step_wins_at_the_same_batch_size(fit) -> None:
    rows = probe([(256, "default", 1, 0.020), (256, "mirrored:2", 2, 0.012)])

    model = time_to_result(rows, steps_table(), fit)

    assert model.best["strategy"] == "mirrored:2" and model.best["replicas"] == 2
    assert model.best["time_to_result"] == pytest.approx(125 * 0.012)


def test_batch_sizes_the_study_did_not_measure_take_the_fit(fit) -> None:
    frame = steps_at([48, 1024, 64], steps_table(), fit)

    by_batch = frame.set_index("batch_size")
    assert by_batch.loc[64, "steps_source"] == MEASURED
    assert by_batch.loc[48, "steps_source"] == FIT
    assert by_batch.loc[48, "steps_to_result"] == pytest.approx(100 * (1 + 64 / 48), rel=1e-6)
    assert by_batch.loc[1024, "steps_source"] == FIT_EXTRAPOLATED
    assert by_batch.loc[48, "steps_low"] <= by_batch.loc[48, "steps_to_result"]
    assert by_batch.loc[48, "steps_high"] >= by_batch.loc[48, "steps_to_result"]


def test_a_batch_size_never_reached_takes_forever_and_one_without_a_fit_is_unknown() -> None:
    steps = steps_table()
    steps.loc[steps["batch_size"] == 512, "steps_to_result"] = math.inf
    none = NoiseScaleFit(ok=False, reason="thin")
    rows = probe([(512, "default", 1, 0.01), (2048, "default", 1, 0.02), (8, "default", 1, 1.0)])

    model = time_to_result(rows, steps, none)

    table = model.table.set_index("batch_size")
    assert (
        table.loc[512, "steps_source"] == NOT_REACHED
        and table.loc[512, "time_to_result"] == math.inf
    )
    assert table.loc[2048, "steps_source"] == UNKNOWN and np.isnan(
        table.loc[2048, "time_to_result"]
    )
    assert model.best["batch_size"] == 8  # the only finite time, however slow


def test_the_spread_over_repeats_and_seeds_bounds_the_time(fit) -> None:
    steps = steps_table().assign(steps_low=lambda d: d["steps_to_result"] * 0.9)
    steps["steps_high"] = steps["steps_to_result"] * 1.2
    rows = probe([(64, "default", 1, 0.010)], seconds_low=0.008, seconds_high=0.011)

    row = time_to_result(rows, steps, fit).table.iloc[0]

    assert row["time_low"] == pytest.approx(200 * 0.9 * 0.008)
    assert row["time_high"] == pytest.approx(200 * 1.2 * 0.011)


def test_failed_probe_rows_are_left_out_and_no_probe_is_no_model(fit) -> None:
    rows = probe([(64, "default", 1, math.nan), (128, "default", 1, 0.0)])

    assert probe_frame(rows).empty
    model = time_to_result(rows, steps_table(), fit)
    assert not model.ok and "no throughput probe" in model.reason
    assert not time_to_result(probe_frame(None), steps_table(), fit).ok
    with pytest.raises(ValueError, match="seconds_per_step"):
        probe_frame([{"batch_size": 8, "strategy": "default", "replicas": 1}])


def test_probe_facts_are_collected(fit) -> None:
    rows = probe(
        [(64, "default", 1, 0.01), (128, "default", 1, 0.02)],
        repeats=3,
        steps=50,
        measured_at="2026-11-30 09:40 UTC",
        hardware="2 x CPU",
    )

    model = time_to_result(rows, steps_table(), fit)

    assert (model.repeats, model.probe_steps) == ("3", "50")
    assert model.measured_at == "2026-11-30 09:40 UTC" and model.hardware == "2 x CPU"


def test_more_replicas_than_probed_are_extrapolated_only_when_asked_and_flagged(fit) -> None:
    rows = probe(
        [
            (512, "default", 1, 0.080),
            (512, "mirrored:2", 2, 0.044),
            (64, "mirrored:2", 2, 0.010),
            (12, "mirrored:2", 2, 0.009),  # 12 is not divisible by 8
        ]
    )

    extra = extrapolate_replicas(rows, 8)
    model = time_to_result(rows, steps_table(), fit, extrapolated=extra)

    assert sorted(extra["batch_size"]) == [64, 512]
    by_batch = extra.set_index("batch_size")
    assert by_batch.loc[512, "seconds_per_step"] == pytest.approx(0.044 * 2 / 8)
    assert by_batch.loc[512, "basis"] == "mirrored:2"
    assert by_batch.loc[512, "strategy"] == "8 replicas (from mirrored:2)"
    flagged = model.table[model.table["extrapolated"]]
    assert len(flagged) == 2 and not flagged["fastest"].any()
    assert not model.best["extrapolated"]  # never chosen, though faster
    assert extrapolate_replicas(rows, 2).empty  # measured: nothing to extrapolate
    assert time_to_result(rows, steps_table(), fit).table["extrapolated"].sum() == 0
