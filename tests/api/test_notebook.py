"""`examples/notebook.ipynb` runs in a real Jupyter kernel (nbclient + ipykernel) and shows
what it says: one row per trial, the report's B_noise, two targets, a figure, the report."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import study
from study.cli import main as cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STORAGE = EXAMPLES / "quickstart" / "optuna.journal"


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """The notebook's outputs by cell tag, executed with the report written to a temporary
    folder; a last cell lists the heavy modules the kernel imported."""
    out = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    probe = nbformat.v4.new_code_cell(
        "import sys\nprint(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))"
    )
    probe.metadata["tags"] = ["probe"]
    notebook.cells.insert(0, nbformat.v4.new_code_cell(f"%env STUDY_NOTEBOOK_OUT={out}"))
    notebook.cells.append(probe)
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": EXAMPLES}}
    ).execute()
    outputs: dict[str, list[dict]] = {"out": [{"path": str(out)}]}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
        assert not [o for o in cell.outputs if o.get("name") == "stderr"], cell.outputs
        for tag in cell.metadata.get("tags", []):
            outputs[tag] = cell.outputs
    return outputs


def _text(outputs: list[dict]) -> str:
    parts = []
    for o in outputs:
        parts.append(o.get("text", ""))
        parts.append(o.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def _html(outputs: list[dict]) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in outputs)


def test_the_trials_are_a_dataframe_with_one_row_per_trial(executed) -> None:
    html = _html(executed["trials"])
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    shipped = study.load("quickstart", storage=STORAGE).trials()
    assert body.count("<tr>") == len(shipped) == 24
    assert "steps_to_target" in html and "learning_rate" in html
    assert f"{len(shipped)} trials" in _text(executed["best"])


def test_the_fitted_b_noise_is_the_reports(executed, tmp_path, capsys) -> None:
    printed = re.search(r"B_noise = ([0-9.e+-]+)", _text(executed["b_noise"]))
    assert printed is not None
    args = ["report", "quickstart", "--storage", str(STORAGE), "--out", str(tmp_path)]
    assert cli([*args, "--format", "json", "--no-mlflow"]) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "report.json").read_text())
    assert float(printed.group(1)) == pytest.approx(report["noise_scale"]["b_noise"], rel=1e-12)


def test_the_study_and_two_targets_are_shown(executed) -> None:
    assert "study quickstart: 24/24 trials, complete" in _html(executed["study"])
    assert "answer: B_noise" in _html(executed["fit"])
    targets = _html(executed["targets"])
    assert "val_accuracy&gt;=0.5" in targets and "val_accuracy&gt;=0.4" in targets


def test_the_figure_and_the_report_are_made(executed) -> None:
    (png,) = [o["data"]["image/png"] for o in executed["plot"] if "image/png" in o.get("data", {})]
    assert base64.b64decode(png)[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    out = Path(executed["out"][0]["path"])
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json"]
    assert "['report.html', 'report.json']" in _text(executed["report"])


def test_the_kernel_never_imports_tensorflow(executed) -> None:
    assert _text(executed["probe"]).strip() == "[]"
