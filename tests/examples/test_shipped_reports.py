"""The shipped example reports: made by `examples/make_reports.py` with this code's answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def _avx512() -> bool:
    try:
        return " avx512f " in Path("/proc/cpuinfo").read_text(encoding="utf-8").replace("\n", " ")
    except OSError:
        return False


@pytest.mark.skipif(not _avx512(), reason="OpenBLAS's AVX-512 kernels need a CPU that has them")
def test_the_quickstart_answers_hold_under_another_cpus_kernels() -> None:
    """OpenBLAS's AVX-512 kernels sum in another order than the AVX2 ones the shipped reports
    were made with; the held fits settle and each mixture component draws from its own stream,
    so every answer and interval end moves by a rounding's few parts in 10,000 (before answer
    model 11, interval ends moved by up to 2.2%)."""
    script = (
        "import json, sys\n"
        "from study.ledger import Ledger\n"
        "from study.report.json import report_dict\n"
        "from study.report.stored import stored_report\n"
        "ledger = Ledger.open(sys.argv[1], 'quickstart', create=False)\n"
        "print(json.dumps(report_dict(stored_report(ledger))['answers']))\n"
    )
    journal = EXAMPLES / "quickstart" / "optuna.journal"
    env = {**os.environ, "OPENBLAS_CORETYPE": "SkylakeX"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(journal)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    fresh = json.loads(done.stdout.strip().splitlines()[-1])
    shipped = json.loads((EXAMPLES / "quickstart" / "report.json").read_text(encoding="utf-8"))
    for name, shipped_answer in shipped["answers"].items():
        if isinstance(shipped_answer, dict) and "estimate" in shipped_answer:
            for part, value in shipped_answer.items():
                if isinstance(value, float):
                    assert fresh[name][part] == pytest.approx(value, rel=2e-3), (name, part)
