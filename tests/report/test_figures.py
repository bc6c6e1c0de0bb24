"""make_figures: the report's figures, drawn without pyplot state, with captions and PNGs."""

from __future__ import annotations

import matplotlib.pyplot as plt

from study.report import make_figures
from study.report.figures import FIGURE_CAPTIONS, caption, extension_figures, figure_png

PNG = b"\x89PNG\r\n\x1a\n"
NAMES = {
    "steps_to_result", "examples_to_result", "best_lr", "feasible_region", "time_to_result",
    "cross_check",
}  # fmt: skip


def test_figures_use_no_pyplot_state(evil_report) -> None:
    plt.close("all")
    figures = make_figures(evil_report)
    assert set(figures) == NAMES
    assert plt.get_fignums() == []
    steps = figures["steps_to_result"].axes[0]
    assert steps.get_xlabel() == "global batch size" and steps.get_ylabel() == "steps to result"
    assert steps.get_xscale() == "log" and steps.get_yscale() == "log"
    assert steps.get_title() == "Steps to reach val_accuracy>=0.6"
    assert "B_noise" in [line.get_label() for line in steps.lines]
    assert figures["best_lr"].axes[0].get_ylabel() == "best learning rate"
    assert len(figures["feasible_region"].axes) == 2  # with its colorbar


def test_every_figure_has_a_caption_and_a_png(evil_report) -> None:
    figures = make_figures(evil_report)

    # targets: only a report asked for them (--targets); an extension's figures (cbs: only a
    # study with branch trials) have their own captions
    assert set(FIGURE_CAPTIONS) == NAMES | {"targets"}
    assert all(caption(name) != name for name in extension_figures())
    assert figure_png(figures["best_lr"]).startswith(PNG)


def test_only_figures_with_something_to_show(make_report, table) -> None:
    assert make_figures(make_report(table.iloc[:0])) == {}
    untimed = table.assign(train_seconds=0.0)
    assert "time_to_result" not in make_figures(make_report(untimed))
