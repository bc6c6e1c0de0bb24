"""`Study.fit_targets`: the answers across target levels from Python (nothing written)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd
import pytest

import study
from study.api.targets import TargetFit
from study.errors import UsageError
from tests.fakes import TINY, write_tiny_ledger

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> TargetFit:
    path = tmp_path_factory.mktemp("tiny") / "j.journal"
    write_tiny_ledger(path)
    return study.load(TINY, storage=path).fit_targets([0.4, 0.5, 0.6], predict=0.65)


def test_a_frame_per_level_the_law_and_the_prediction(fitted: TargetFit) -> None:
    assert list(fitted.table["threshold"]) == [0.4, 0.5, 0.6]
    assert set(fitted.levels) == {0.4, 0.5, 0.6}
    level = fitted.levels[0.6].set_index("answer")
    assert isinstance(level, pd.DataFrame) and level.loc["b_noise", "estimate"] > 0
    assert fitted.table.loc[2, "b_noise"] == level.loc["b_noise", "estimate"]
    assert fitted.law.quantity == "critical_batch" and fitted.law.ok
    assert set(fitted.laws) == {"b_noise", "critical_batch"}
    assert fitted.prediction is not None and fitted.prediction.ok
    assert fitted.assumption == "for val_accuracy >= 0.65, extrapolated from 0.4-0.6"
    assert "extrapolated from 0.4-0.6" in repr(fitted)
    with pytest.raises(AttributeError):
        fitted.prediction = None  # type: ignore[misc]  # frozen
    ax = fitted.plot()
    assert ax.get_yscale() == "log"


def test_a_refusal_is_a_reason_and_bad_arguments_are_named(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    write_tiny_ledger(path)
    tiny = study.load(TINY, storage=path)
    far = tiny.fit_targets([0.4, 0.5, 0.6], predict=0.95)
    assert far.prediction is not None and not far.prediction.ok
    assert "fitted ranges" in far.prediction.reason
    with pytest.raises(UsageError, match=r"^levels must be 'auto' or a non-empty sequence"):
        tiny.fit_targets("0.5")
    with pytest.raises(UsageError, match=r"^predict must be a level"):
        tiny.fit_targets(predict="0.7")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^accelerators must be an integer >= 1"):
        tiny.fit_targets(accelerators=0)
