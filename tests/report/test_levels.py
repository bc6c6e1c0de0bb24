"""The report's section on the answer across targets: sentences, table, figure, every format."""

from __future__ import annotations

import dataclasses
import json

import pytest

from study.analysis.target_prediction import target_scaling
from study.report import write_report
from study.report.figures import figure_names, make_figures
from study.report.levels import FIGURE, TITLE, levels_lines, levels_table
from study.report.prose import summary_lines
from study.report.record import ScalingReport

from .conftest import TARGET


@pytest.fixture(scope="module")
def with_targets(report: ScalingReport) -> ScalingReport:
    """The healthy report with its answer at three levels and a prediction at 0.65."""
    scaling = target_scaling(
        report.table, TARGET, [0.4, 0.5, 0.6], predict=0.65, accelerators=report.accelerators
    )
    return dataclasses.replace(report, targets=scaling)


def test_the_section_states_the_levels_the_law_and_what_the_prediction_assumed(
    with_targets: ScalingReport,
) -> None:
    lines = levels_lines(with_targets.targets)
    assert lines[0].startswith("The model of every trial refitted at 3 levels of val_accuracy")
    assert any("F test" in line for line in lines)
    assert "for val_accuracy >= 0.65, extrapolated from 0.4-0.6" in lines[-1]
    table = levels_table(with_targets.targets)
    assert [row[0] for row in table.rows] == ["0.4", "0.5", "0.6", "0.65 (predicted)"]
    assert len(table.headers) == len(table.rows[0])
    assert any(
        "prediction for val_accuracy >= 0.65" in line for line in summary_lines(with_targets)
    )


def test_every_format_shows_the_section_only_when_asked_for(
    with_targets: ScalingReport, report: ScalingReport, tmp_path
) -> None:
    assert FIGURE in figure_names(with_targets) and FIGURE not in figure_names(report)
    ax = make_figures(with_targets)[FIGURE].axes[0]
    assert ax.get_xscale() == "log" and ax.xaxis_inverted()
    paths = write_report(with_targets, tmp_path / "a", ["json", "md", "html"])
    data = json.loads(paths["report.json"].read_text())["targets"]
    assert [row["threshold"] for row in data["levels"]] == [0.4, 0.5, 0.6]
    assert data["axis"] == "1 - val_accuracy"
    assert data["laws"]["b_noise"]["kind"] in ("power", "constant")
    assert data["prediction"]["assumption"] == "for val_accuracy >= 0.65, extrapolated from 0.4-0.6"
    assert data["prediction"]["ok"] and data["prediction"]["critical_batch"]["estimate"] > 0
    assert f"## {TITLE}" in paths["report.md"].read_text()
    assert "(targets.png)" in paths["report.md"].read_text()
    assert 'id="targets"' in paths["report.html"].read_text()
    plain = write_report(report, tmp_path / "b", ["json", "md", "html"])
    assert json.loads(plain["report.json"].read_text())["targets"] is None
    assert TITLE not in plain["report.md"].read_text()
    assert 'id="targets"' not in plain["report.html"].read_text()


def test_an_open_interval_end_draws_no_error_bar_arm():
    import math

    from study.report.levels import _arm

    # An answer printed open ("at least 66") has an infinite arm: the figure draws none there.
    assert list(_arm([2.0, -1.0, math.inf, math.nan])) == [2.0, 0.0, 0.0, 0.0]
