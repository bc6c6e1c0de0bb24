"""`study ladder` and `study.fit_ladder` on small stored studies (no training): three finished
rungs whose B_noise grows as ``64 (D / 5000)^0.5``, one unfinished, one without a recorded
data size."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

import study
from study.cli import main as cli
from study.commands.ladder import parse_sizes
from study.config.space import Stratum
from study.config.target import Target
from study.errors import UsageError
from study.ledger import Ledger, StudyRecord
from study.results import DataDescription
from tests.fakes import (
    TINY_BATCH_SIZES,
    TINY_STUDY_YAML,
    finished_trial,
    rising_curve,
    write_ledger,
)

TARGET = Target.parse("val_accuracy>=0.6")
SIZES = {"d5k": 5000, "d10k": 10000, "d20k": 20000}


def write_rung(journal: Path, name: str, data_size: int | None, *, trials_total: int = 18) -> None:
    """A finished study on ``data_size`` training examples (recorded by every trial unless
    None): 6 batch sizes x 3 rates, ``S(B) = 100 (1 + B_noise / B)``, each trial's steps off
    by 10% of seed-to-seed noise."""
    rng = np.random.default_rng(data_size or 0)
    b_noise = 64 * ((data_size or 5000) / 5000) ** 0.5
    data = None
    if data_size is not None:
        data = DataDescription("mnist1d", "mnist1d()", "0" * 16, data_size, data_size // 4)
    trials = []
    for batch in TINY_BATCH_SIZES:
        best = 0.01 * (batch / 8) ** 0.5
        for number, factor in enumerate((1 / 3, 1.0, 3.0)):
            needed = 100 * (1 + b_noise / batch) * (1 + math.log(factor) ** 2)
            needed *= math.exp(0.1 * rng.standard_normal())
            curve = rising_curve(batch, needed, 0.001 * (1 + batch / 64))
            trial = finished_trial(Stratum(batch, "default"), number, best * factor, curve, TARGET)
            result = dataclasses.replace(trial.result, dataset=data)
            trials.append(dataclasses.replace(trial, result=result))
    record = StudyRecord(
        name,
        config_text=TINY_STUDY_YAML.replace("name: tiny", f"name: {name}"),
        config_source=f"{name}.yaml",
        trials_total=trials_total,
    )
    write_ledger(Ledger.open(str(journal), name), record, trials)


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ladder") / "j.journal"
    for name, size in SIZES.items():
        write_rung(path, name, size)
    write_rung(path, "running", 40000, trials_total=30)
    write_rung(path, "unsized", None)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    status = cli([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.slow
def test_the_rungs_the_laws_and_the_next_rung(journal: Path, capsys) -> None:
    status, out, err = run(capsys, "ladder", *SIZES, "--storage", journal, "--predict", "40000")
    assert status == 0, err
    assert "Ladder of 3 studies (val_accuracy >= 0.6; batch sizes for 8 accelerators" in out
    rows = [
        line.split() for line in out.splitlines() if line.strip().startswith(("5,0", "10,", "20,"))
    ]
    assert [(r[0], r[1]) for r in rows] == [
        ("5,000", "d5k"),
        ("10,000", "d10k"),
        ("20,000", "d20k"),
    ]
    assert "B_noise ~ D^" in out and "critical batch size ~ D^" in out and "best rate ~ D^" in out
    assert "for 40,000 training examples, extrapolated 2x past the largest rung" in out
    status, out, err = run(
        capsys, "ladder", *SIZES, "--storage", journal, "--predict", "40,000", "--json"
    )
    assert status == 0, err
    data = json.loads(out)
    assert data["studies"] == list(SIZES) and data["target"] == "val_accuracy >= 0.6"
    assert [r["data_size"] for r in data["rungs"]] == list(SIZES.values())
    exponent = data["laws"]["b_noise"]["exponent"]
    assert exponent["low"] <= 0.5 <= exponent["high"]  # the rungs' law: D^0.5
    # Three rungs of 18 trials: the exponent's interval spans about one unit (1.00 with answer
    # model 10, 0.98 with model 9).
    assert abs(exponent["estimate"] - 0.5) < 0.25 and exponent["high"] - exponent["low"] < 1.1
    prediction = data["predictions"][0]
    assert prediction["ok"] and prediction["data_size"] == 40000
    truth = 64 * 8**0.5
    assert prediction["b_noise"]["low"] <= truth <= prediction["b_noise"]["high"]


@pytest.mark.slow
def test_past_the_laws_support_one_line_and_exit_2(journal: Path, capsys) -> None:
    status, out, err = run(
        capsys, "ladder", "d5k", "d10k", "--storage", journal, "--predict", "1e6"
    )
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--predict: no prediction for 1,000,000 training examples: it lies 6.6 fitted " in err
    assert "trusted up to 1 (up to 20,000 examples)" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["d5k"], "STUDY: a ladder needs at least 2 finished studies"),
        (["d5k", "running"], "STUDY: study 'running' is incomplete (18 of 30 trials)"),
        (["d5k", "unsized"], "--data-size: study 'unsized' recorded no training-set size"),
        (["d5k", "d10k", "--data-size", "5000"], "--data-size: give one data size per study"),
        (
            ["d5k", "d10k", "--data-size", "5000", "5e3"],
            "STUDY: studies 'd5k' and 'd10k' both trained on 5,000 examples",
        ),
        (["d5k", "d5k"], "STUDY: each study may be a rung once"),
        (["d5k", "d10k", "--predict", "x"], "--predict must be a positive number"),
        (["d5k", "nothere"], "nothere"),
    ],
)
def test_bad_ladders_are_one_line_exit_2(journal: Path, capsys, args, message) -> None:
    status, out, err = run(capsys, "ladder", *args, "--storage", journal)
    assert status == 2, out
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_sizes_parse_with_separators() -> None:
    assert parse_sizes(None, "--predict") is None
    assert parse_sizes(["40,000", "4e4", "40_000"], "--predict") == [40000.0] * 3
    with pytest.raises(UsageError, match="--data-size must be a positive number"):
        parse_sizes(["0"], "--data-size")


@pytest.mark.slow
def test_the_api_a_frozen_ladder_with_sizes_given(journal: Path) -> None:
    ladder = study.fit_ladder(["unsized", "d10k"], [5000, 10000], storage=journal)
    assert list(ladder.rungs["study"]) == ["unsized", "d10k"]
    assert list(ladder.rungs["data_size"]) == [5000.0, 10000.0]
    assert set(ladder.laws) == {"b_noise", "critical_batch", "recommended_batch", "recommended_lr"}
    row = ladder.law_table.set_index("quantity").loc["b_noise"]
    assert row["exponent_low"] <= 0.5 <= row["exponent_high"] and row["rungs"] == 2
    prediction = ladder.predict(20000)
    assert prediction.ok and prediction.recommended_batch is not None
    assert not ladder.predict(80000).ok
    assert "B_noise ~ D^" in repr(ladder)
    with pytest.raises(AttributeError):
        ladder.laws = {}  # type: ignore[misc]  # frozen
    with pytest.raises(UsageError, match=r"^data_size must be a positive number"):
        ladder.predict(0)


def test_each_rung_says_what_it_cost(journal: Path, capsys) -> None:
    """Every trial's steps, pruned ones included, and steps times batch size, per rung and in all:
    in the table, the JSON and the API's frame."""
    expected = {}
    for name in SIZES:
        ledger = Ledger.open(str(journal), name, create=False)
        runs = [(s.batch_size, t.result.steps_run) for s in ledger.strata()
                for t in ledger.trials(s) if t.result is not None]  # fmt: skip
        assert len(runs) == 18 and all(n > 0 for _, n in runs)
        expected[name] = (sum(n for _, n in runs), sum(b * n for b, n in runs))
    ladder = study.fit_ladder(list(SIZES), storage=journal)
    frame = ladder.rungs.set_index("study")
    for name, (steps, examples) in expected.items():
        assert frame.loc[name, "training_steps"] == steps
        assert frame.loc[name, "training_examples"] == examples
    status, out, err = run(capsys, "ladder", *SIZES, "--storage", journal)
    assert status == 0, err
    assert "training steps" in out.splitlines()[1]
    row = next(line for line in out.splitlines() if line.strip().startswith("10,000"))
    assert row.split()[2] == f"{expected['d10k'][0]:,}"
    total = sum(v[0] for v in expected.values())
    assert f"The rungs trained {total:,} steps in all" in out
    status, out, err = run(capsys, "ladder", *SIZES, "--storage", journal, "--json")
    rungs = json.loads(out)["rungs"]
    assert [(r["training_steps"], r["training_examples"]) for r in rungs] == list(expected.values())


def test_the_api_names_its_arguments(journal: Path) -> None:
    with pytest.raises(UsageError, match=r"^studies: a ladder needs at least 2"):
        study.fit_ladder(["d5k"], storage=journal)
    with pytest.raises(UsageError, match=r"^studies: study 'running' is incomplete"):
        study.fit_ladder(["d5k", "running"], storage=journal)
    with pytest.raises(UsageError, match=r"^data_sizes must be a sequence of positive numbers"):
        study.fit_ladder(["d5k", "d10k"], [5000, -1], storage=journal)
    with pytest.raises(UsageError, match=r"^studies must be a sequence"):
        study.fit_ladder("d5k", storage=journal)  # type: ignore[arg-type]
