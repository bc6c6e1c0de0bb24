"""`tuner.warm_start` through `study run`: a study asked again at another scale starts each
batch size at the best rate the finished study found there."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.config.space import Stratum
from tests.inprocess import study_here
from tests.runner.conftest import Store, tiny_study, write_study

pytestmark = pytest.mark.slow


def test_each_batch_size_starts_at_the_earlier_studys_best(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    small = tiny_study(name="rows1500")
    larger = tiny_study(
        name="rows2000", workload_options={"rows": 2000}, tuner={"warm_start": "rows1500"}
    )
    store = Store(tmp_path)

    first = study_here(monkeypatch, capsys, "run", write_study(tmp_path, small), cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    earlier = store.ledger("rows1500", fresh=True)
    best = {s.batch_size: earlier.best(s) for s in earlier.strata()}
    assert any(t is not None for t in best.values()), "the tiny study reaches its target"

    # a name that is not there: one line, exit 2, and the study can run once the file is fixed
    wrong = tiny_study(**{**larger, "tuner": {"warm_start": "rows1000"}})
    bad = study_here(monkeypatch, capsys, "run", write_study(tmp_path, wrong), cwd=tmp_path)
    assert bad.returncode == 2
    assert "tuner.warm_start: no study named 'rows1000'" in bad.stderr
    assert "Traceback" not in bad.stderr

    second = study_here(monkeypatch, capsys, "run", write_study(tmp_path, larger), cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    ledger = store.ledger("rows2000", fresh=True)
    for batch, trial in best.items():
        first_trial = ledger.trial(Stratum(batch, "default"), 0)
        assert first_trial.origin == "warm"
        assert first_trial.extras["warm_start"] == "rows1500"
        if trial is not None:  # else the rate the other batch size's best predicts there
            assert first_trial.learning_rate == pytest.approx(trial.learning_rate)
        assert first_trial.tuner in ("optuna", "keras-tuner")
        later = ledger.trial(Stratum(batch, "default"), 1)
        assert later.origin != "warm"  # the search goes on from there
