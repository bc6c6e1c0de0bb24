"""The shipped example reports: made by `examples/make_reports.py` with this code's answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from study.analysis.answers import ANSWER_MODEL

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ("quickstart", "mnist1d_mlp", "shapes_resnet")


@pytest.mark.parametrize("name", NAMES)
def test_every_example_report_was_made_by_this_answer_model(name: str) -> None:
    data = json.loads((EXAMPLES / name / "report.json").read_text(encoding="utf-8"))

    made_by = data["about"].get("answer_model")
    assert made_by == ANSWER_MODEL, (
        f"examples/{name}/report.json was made by answer model {made_by!r}, the code's is "
        f"{ANSWER_MODEL!r}: run `python examples/make_reports.py {name}`"
    )
    # One answer: the top level states the model's numbers.
    answers = data["answers"]
    assert data["noise_scale"]["b_noise"] == answers["b_noise"]["estimate"]
    assert data["recommendation"]["batch_size"] == answers["recommended_batch"]["estimate"]
    markdown = (EXAMPLES / name / "report.md").read_text(encoding="utf-8")
    assert "## Cross-check: the best trial of each batch size" in markdown


def test_the_quickstart_example_is_its_ledgers_report_now(tmp_path: Path) -> None:
    """Re-made from the shipped ledger, the quickstart's answers are the shipped ones."""
    from study.ledger import Ledger
    from study.report.json import report_dict
    from study.report.stored import stored_report

    journal = EXAMPLES / "quickstart" / "optuna.journal"
    fresh = report_dict(stored_report(Ledger.open(str(journal), "quickstart", create=False)))
    shipped = json.loads((EXAMPLES / "quickstart" / "report.json").read_text(encoding="utf-8"))

    for name, shipped_answer in shipped["answers"].items():
        if isinstance(shipped_answer, dict) and "estimate" in shipped_answer:
            for part, value in shipped_answer.items():
                expected = value if value is None else pytest.approx(value, rel=1e-6)
                assert fresh["answers"][name][part] == expected, name
