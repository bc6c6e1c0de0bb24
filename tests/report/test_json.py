"""render_json and report_dict: every fitted number as plain JSON; inf and NaN become null."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from study.report import report_dict
from study.report.json import plain, render_json


def test_json_holds_finite_numbers_or_null_and_round_trips(written, evil_report) -> None:
    text = (written["out"] / "report.json").read_text(encoding="utf-8")

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-JSON constant {constant} in report.json")

    data = json.loads(text, parse_constant=refuse)
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    for value in _leaves(data):
        assert value is None or isinstance(value, (str, bool, int)) or math.isfinite(value)
    fit = data["noise_scale"]
    assert fit["ok"] and fit["b_noise"] == pytest.approx(evil_report.noise_scale.b_noise)
    assert fit["s_min"] > 0 and fit["e_min"] > 0 and len(fit["b_noise_ci"]) == 2
    assert "boot_b_noise" not in fit and fit["method"] == "model of every trial"
    answers = data["answers"]
    assert fit["b_noise"] == answers["b_noise"]["estimate"]
    assert fit["b_noise_ci"] == [answers["b_noise"]["low"], answers["b_noise"]["high"]]
    assert fit["critical_batch"] == answers["critical_batch"]["estimate"]
    assert data["regimes"]["perfect_end"] == evil_report.regimes.perfect_end
    assert data["regimes"]["perfect_end"] == answers["perfect_end"]["estimate"]
    assert data["lr_scaling"]["alpha"] == answers["alpha"]["estimate"]
    assert data["lr_scaling"]["alpha"] == pytest.approx(0.5, abs=0.1)
    assert len(data["lr_scaling"]["alpha_ci"]) == 2
    check = data["cross_check"]
    assert check["noise_scale"]["method"] == "profile likelihood"
    assert check["lr_power_law"]["alpha"] == pytest.approx(0.5, abs=0.05)
    assert check["model_free"]["ok"] and isinstance(check["agrees"], bool)
    rec = data["recommendation"]
    assert rec["ok"] and rec["accelerators"] == 8 and rec["batch_size"] > 0
    assert rec["batch_size"] == answers["recommended_batch"]["estimate"]
    assert {"step_speedup", "time_speedup", "learning_rate"} <= set(rec)
    assert [row["batch_size"] for row in data["batch_sizes"]] == list(
        evil_report.steps["batch_size"]
    )
    model = data["answers"]["model"]
    assert model["lr_bottom"] == evil_report.answers.surrogate.bottom in ("smooth", "sharp")
    assert "sharp_p_value" in model
    assert data["target"] == {
        "text": "val_accuracy>=0.6",
        "metric": "val_accuracy",
        "op": ">=",
        "threshold": 0.6,
    }


def test_the_confidence_is_in_the_fits(make_report, table) -> None:
    data = json.loads(render_json(make_report(table, confidence=0.9)))

    assert data["noise_scale"]["confidence"] == 0.9
    assert data["answers"]["confidence"] == 0.9
    assert data["cross_check"]["lr_power_law"]["confidence"] == 0.9
    assert "90% intervals" in data["summary"]


def test_report_dict_of_thin_data(make_report, table) -> None:
    data = report_dict(make_report(table.iloc[:0]))

    assert data["batch_sizes"] == [] and not data["noise_scale"]["ok"]
    assert data["noise_scale"]["b_noise"] is None  # NaN
    assert data["regimes"]["perfect"] is None


def test_plain_turns_numpy_and_pandas_into_json_values() -> None:
    value = {
        "b": np.int64(8),
        "s": (math.inf, 1.5),
        "ok": np.bool_(True),
        "na": pd.NA,
        1: np.array([np.nan, 2.0]),
        "df": pd.DataFrame({"x": [1, 2]}),
    }

    assert plain(value) == {
        "b": 8,
        "s": [None, 1.5],
        "ok": True,
        "na": None,
        "1": [None, 2.0],
        "df": [{"x": 1}, {"x": 2}],
    }


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]
