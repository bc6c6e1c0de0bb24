from __future__ import annotations

import math

import matplotlib.pyplot as plt  # the Agg backend is set in conftest.py
import pandas as pd
import pytest

from study.analysis import (
    fit_lr_power_law,
    fit_noise_scale_from_trials,
    plot_best_lr,
    plot_examples_to_result,
    plot_feasible_region,
    plot_steps_to_result,
    plot_time_to_result,
    scaling_regimes,
    steps_to_result,
    throughput_by_strategy,
    trial_steps_to_target,
)
from study.config.target import Target

TARGET = Target.parse("val_accuracy>=0.6")


@pytest.fixture(scope="module")
def study(make_scaling_table):
    df = make_scaling_table(
        batch_sizes=(8, 32, 128, 512, 2048),
        learning_rates=(0.01, 0.1, 1.0),
        strategies=(("default", 1, 0.01), ("mirrored:2", 2, 0.01)),
    )
    # One trial diverges and one never gets there: both must show up in the feasible region.
    df.loc[df["trial"] == 4, ["val_accuracy", "state"]] = [math.nan, "diverged"]
    df.loc[df["trial"] == 5, "val_accuracy"] = 0.1
    trials = trial_steps_to_target(df, TARGET)
    steps = steps_to_result(df, TARGET)
    return {
        "trials": trials,
        "steps": steps,
        "fit": fit_noise_scale_from_trials(trials),
        "regimes": scaling_regimes(steps),
        "lr_fit": fit_lr_power_law(steps["batch_size"], steps["best_learning_rate"]),
        "throughput": throughput_by_strategy(df, TARGET),
    }


@pytest.fixture
def ax():
    figure, axes = plt.subplots()
    yield axes
    plt.close(figure)


def _drawn(ax) -> int:
    return len(ax.lines) + len(ax.collections) + len(ax.patches)


def _save(ax, tmp_path) -> None:
    path = tmp_path / "plot.png"
    ax.figure.savefig(path)
    assert path.stat().st_size > 1000


def test_steps_to_result_draws_points_fit_band_reference_and_regimes(study, ax, tmp_path):
    figures = plt.get_fignums()

    out = plot_steps_to_result(ax, study["steps"], fit=study["fit"], regimes=study["regimes"])

    assert out is ax
    assert plt.get_fignums() == figures  # drew into the given axes, made no figure
    labels = [line.get_label() for line in ax.lines]
    assert "measured" in labels and "perfect scaling" in labels
    assert any(label.startswith("fit: B_noise=") for label in labels)
    assert len(ax.collections) >= 1  # the bootstrap band
    assert len(ax.patches) >= 1  # the regimes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    _save(ax, tmp_path)


def test_perfect_scaling_reference_has_slope_minus_one(study, ax):
    plot_steps_to_result(ax, study["steps"])

    (reference,) = [line for line in ax.lines if line.get_label() == "perfect scaling"]
    x, y = reference.get_data()
    assert y[0] * x[0] == pytest.approx(y[-1] * x[-1])
    assert x[0] == 8 and y[0] == study["steps"]["steps_to_result"].iloc[0]


def test_unreached_batch_sizes_are_marked(ax):
    steps = pd.DataFrame({"batch_size": [8, 16, 32], "steps_to_result": [100.0, 50.0, math.inf]})

    plot_steps_to_result(ax, steps)

    (marker,) = [line for line in ax.lines if line.get_label() == "not reached"]
    assert list(marker.get_xdata()) == [32.0]


def test_examples_to_result(study, ax, tmp_path):
    assert plot_examples_to_result(ax, study["steps"], fit=study["fit"]) is ax
    assert _drawn(ax) >= 3
    _save(ax, tmp_path)


def test_best_lr_marks_edges_and_fit(study, ax, tmp_path):
    steps = study["steps"].copy()
    steps.loc[0, "lr_on_edge"] = True

    assert plot_best_lr(ax, steps, lr_fit=study["lr_fit"]) is ax

    labels = [line.get_label() for line in ax.lines]
    assert "on range edge" in labels
    assert any(label.startswith("fit: alpha=") for label in labels)
    _save(ax, tmp_path)


def test_feasible_region_marks_diverged_and_unreached(study, ax, tmp_path):
    figure = ax.figure

    assert plot_feasible_region(ax, study["trials"], colorbar=True) is ax

    by_label = {c.get_label(): c for c in ax.collections}
    assert set(by_label) == {"reached", "diverged", "not reached"}
    assert len(by_label["reached"].get_offsets()) == len(study["trials"]) - 2
    assert len(by_label["diverged"].get_offsets()) == 1
    assert len(figure.axes) == 2  # the colorbar
    _save(ax, tmp_path)


def test_time_to_result_bars_by_strategy(study, ax, tmp_path):
    assert plot_time_to_result(ax, study["throughput"]) is ax

    assert len(ax.patches) == len(study["throughput"])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["default", "mirrored:2"]
    _save(ax, tmp_path)
