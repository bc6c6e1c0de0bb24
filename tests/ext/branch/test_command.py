"""`study branch FILE` as a user types it: a tiny branch study end to end (reference,
checkpoints in the MLflow artifact store, branches in the ledger and as nested runs, CBS(t),
the schedule snippet, the report's figure and JSON), and bad input as one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
import yaml

from study.config.schedule import BatchSchedule
from tests.inprocess import study_in


def study(*args: str, cwd: Path):
    """``study ARGS`` in ``cwd``, in this test's process (`study_in`): the branch command's
    behaviour is what these tests are about, not its process."""
    return study_in(*args, cwd=cwd)


TINY = {
    "name": "tiny-branch",
    "workload": "mnist1d",
    "workload_options": {"samples": 1200},
    "model": "mlp",
    "target": "val_accuracy>=0.3",
    "budget": {"max_steps": 300},
    "eval_every": 40,
    "trials_per_stratum": 1,
    "search_space": {
        "batch_size": [8, 16, 32],
        "learning_rate": {"low": 1.0e-2, "high": 1.0, "scale": "log"},
    },
    "branch": {
        "batch_size": 8,
        "learning_rate": 0.05,
        "examples": 960,
        "checkpoints": 3,
        "first_checkpoint": 0.25,
        "multipliers": [2, 4],
        "window": 256,
        "replicates": 2,
        "lr_rule": "search",
        "search_factors": [1.0],
    },
}


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """The tiny study's branches run once: its folder, the --json output and the snippet."""
    cwd = tmp_path_factory.mktemp("branch")
    file = write(cwd / "tiny.yaml", TINY)
    result = study("branch", str(file), "--json", "--schedule-out", "snippet.yaml", cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return cwd, json.loads(result.stdout), (cwd / "snippet.yaml").read_text(encoding="utf-8")


def test_cbs_over_every_checkpoint_with_b_simple_and_cost(ran: tuple[Path, dict, str]) -> None:
    _cwd, out, _snippet = ran
    curve = out["curve"]
    assert [row["examples"] for row in curve] == out["plan"]["checkpoints"] == [240, 480, 960]
    for row in curve:
        assert 8 <= row["cbs"] <= 32
        assert row["cbs_low"] <= row["cbs"] <= (row["cbs_high"] or float("inf"))
        assert row["b_simple"] > 0  # measured in the reference run
    # the progress the tolerance is a share of: read off the reference's evaluations
    assert any((row["reference_progress"] or 0) > 0 for row in curve)
    cost = out["cost"]
    # 3 checkpoints x 3 batch sizes x 2 replicates, 256 examples each, and the reference's 960
    # and one window past its last checkpoint
    assert cost["branch_examples"] == 3 * 3 * 2 * 256
    assert cost["examples"] == cost["branch_examples"] + 960 + 256
    assert cost["branch_steps"] == 3 * 2 * (32 + 16 + 8)
    assert out["plan"]["why"].startswith("lr_rule: search")


def test_the_schedule_snippet_reads_back_and_grows(ran: tuple[Path, dict, str]) -> None:
    _cwd, out, snippet = ran
    section = yaml.safe_load(snippet)["batch_schedule"]
    schedule = BatchSchedule.from_mapping(section)
    assert schedule.first_batch_size == 8 and schedule.learning_rate == pytest.approx(0.05)
    assert list(schedule.batch_sizes) == sorted(set(schedule.batch_sizes))
    assert out["schedule"] == schedule.to_mapping()


def test_reference_checkpoints_and_branches_are_in_mlflow(ran: tuple[Path, dict, str]) -> None:
    cwd, out, _snippet = ran
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{cwd / 'mlruns' / 'mlflow.db'}")
    reference = client.get_run(out["reference"]["run_id"])
    names = [a.path for a in client.list_artifacts(reference.info.run_id, "checkpoints")]
    assert names == [f"checkpoints/ckpt-{i}.npz" for i in range(3)]
    assert [m.step for m in client.get_metric_history(reference.info.run_id, "cbs/cbs")] == [
        240,
        480,
        960,
    ]
    experiment = reference.info.experiment_id
    children = client.search_runs(
        [experiment], f"tags.`mlflow.parentRunId` = '{reference.info.run_id}'"
    )
    assert len(children) == 18 and {r.info.status for r in children} == {"FINISHED"}


def test_the_report_has_the_figure_and_the_json(ran: tuple[Path, dict, str]) -> None:
    cwd, out, _snippet = ran
    # the study has no trials of its own: its report needs some; run one, then report
    result = study("run", "tiny.yaml", "--trials", "3", cwd=cwd)
    assert result.returncode == 0, result.stderr[-2000:]
    result = study(
        "report", "tiny-branch", "--format", "html", "--format", "json", "--no-mlflow", cwd=cwd
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((cwd / "reports" / "tiny-branch" / "report.json").read_text())
    assert [r["cbs"] for r in data["cbs"]["curve"]] == [r["cbs"] for r in out["curve"]]
    assert data["cbs"]["cost"]["study_examples"] > 0
    html = (cwd / "reports" / "tiny-branch" / "report.html").read_text()
    assert 'alt="cbs"' in html and "Critical batch size over training" in html

    # the same from Python: Study.cbs() and fit().plot.cbs(ax)
    from matplotlib.figure import Figure

    import study as api

    loaded = api.load("tiny-branch", storage=str(cwd / "mlruns" / "optuna.journal"))
    curve = loaded.cbs()
    assert curve["cbs"].round(6).tolist() == [round(r["cbs"], 6) for r in out["curve"]]
    ax = Figure().subplots()
    assert loaded.fit().plot.cbs(ax) is ax and ax.get_ylabel() == "batch size"


def test_rounds_add_replicates_where_cbs_is_unresolved_within_the_cap(tmp_path: Path) -> None:
    """A first round of 2 replicates, then more at checkpoints whose interval is wider than
    x1.01 (every one that is not surely at least the largest), up to 4 replicates, while the
    branches' examples stay within the first round's plus two replicates of one checkpoint."""
    from study.ext.branch.ledger import BranchLedger

    first_round = 3 * 3 * 2 * 256
    cap = first_round + 2 * 3 * 256
    rounds = {"evaluations": 4, "max_replicates": 4, "resolve": 1.01, "max_examples": cap}
    data = {**TINY, "name": "tiny-rounds", "branch": {**TINY["branch"], **rounds}}
    result = study("branch", str(write(tmp_path / "rounds.yaml", data)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "more branches where CBS's interval is wider than x1.01" in result.stdout
    tasks = BranchLedger.open(str(tmp_path / "mlruns" / "optuna.journal"), "tiny-rounds").tasks()
    finished = [t for t in tasks if t.state == "complete"]
    spent = sum(t.outcome["steps"] * t.task["batch_size"] for t in finished)  # type: ignore[index]
    assert first_round < spent <= cap
    replicates = {(t.task["checkpoint"], t.task["replicate"]) for t in finished}
    assert max(r for _, r in replicates) in (2, 3)  # one or two rounds more, never past 4
    for checkpoint, replicate in replicates:  # a round runs every batch size of its checkpoint
        sizes = {
            t.task["batch_size"]
            for t in finished
            if (t.task["checkpoint"], t.task["replicate"]) == (checkpoint, replicate)
        }
        assert sizes == {8, 16, 32}


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = {**TINY, "branch": {**TINY["branch"], "multipliers": [3, 2]}}
    result = study("branch", str(write(tmp_path / "bad.yaml", bad)), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "branch.multipliers must be increasing" in (
        result.stderr
    )
    space = {**TINY["search_space"], "batch_size": [6, 12], "strategy": ["mirrored:3"]}
    odd = {**TINY, "search_space": space, "branch": {**TINY["branch"], "batch_size": 4}}
    result = study("branch", str(write(tmp_path / "odd.yaml", odd)), cwd=tmp_path)
    assert result.returncode == 2 and "not divisible by the 3 replicas" in result.stderr
    assert not (tmp_path / "mlruns" / "optuna.journal").exists()  # nothing recorded
    none = {k: v for k, v in TINY.items() if k != "branch"}
    result = study("branch", str(write(tmp_path / "none.yaml", none)), cwd=tmp_path)
    assert result.returncode == 2 and "no branch section" in result.stderr


@pytest.mark.slow
def test_an_empty_section_on_a_finished_study_takes_its_values(tmp_path: Path) -> None:
    """A section that gives one key after the study ran: the plan's checkpoints, batch sizes
    and window come from the study (and say so), the last checkpoint at most where B0's best trial reached the target,
    the reference on until it meets the target itself, and the whole run within about 3 runs
    of it."""
    data = {
        **TINY,
        "name": "tiny-defaults",
        "search_space": {**TINY["search_space"], "learning_rate": {"low": 0.03, "high": 0.1}},
        "branch": {"search_factors": [1.0]},  # one rate per branch without a fit: given
    }
    file = write(tmp_path / "defaults.yaml", data)
    result = study("run", str(file), "--trials", "3", "--tuner", "optuna", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    result = study("branch", str(file), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    plan = out["plan"]
    if plan["target_examples"] is None:  # no trial at B0 reached the target: nothing derived
        assert "no trial at batch 8 reached" in plan["derived"][0]
        return
    derived = " ".join(plan["derived"])
    assert "checkpoints at" in derived and "window" in derived and "batch sizes" in derived
    assert plan["checkpoints"][-1] <= plan["target_examples"]
    assert plan["window"] % plan["batch_sizes"][-1] == 0
    assert len(plan["batch_sizes"]) == 3
    reference = out["reference"]
    assert reference["examples_to_target"] is not None  # it trained on until it met the target
    assert reference["examples"] >= reference["examples_to_target"]
    assert out["cost"]["reference_runs"] <= 3.3  # about 3 runs of its own, rounds included
    assert any(line.startswith("From the finished study: ") for line in out["notes"])
