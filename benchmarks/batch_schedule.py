"""A batch-size schedule against the best fixed batch size (issue 21 item 4), on the MNIST-1D MLP.

The question is `benchmarks/mnist1d_compute.yaml`'s (MNIST-1D, 10,000 samples, MLP, Nesterov,
validation accuracy 0.6, batch sizes 16 to 1024, 8 trials each, ``--tuner both``), with each
batch size's best point confirmed under two more seeds (``tuner.confirm: {top: 1, seeds: 2}``),
so every fixed batch size's steps are a median over 3 seeds. In one fresh store:

1. ``study run`` the search (no schedule yet);
2. the study's own report gives the learning-rate rule: the fitted power law
   ``lr(B) = c B^alpha``; the hand-written schedule (``--stages``, default 128 then 512 from
   4,096 examples: a small batch while the critical batch size is small, then one past the
   study's perfect-scaling end) takes ``learning_rate = c B0^alpha`` and that ``alpha``;
3. ``study run`` again with the ``batch_schedule:`` section: only its 3 seeds run (the
   search is spent);
4. with ``--cbs FILE`` (a `study branch` result, e.g. ``benchmarks/results/cbs.json``, or a
   YAML snippet), the CBS(t)-derived schedule the same way, under its own cell;
5. ``study report`` compares each schedule with the best fixed batch size
   (`study.analysis.schedule_compare`): steps, examples and training seconds to the target.

Everything runs under ``nice -n 10`` on a snapshot of the package copied into the store
(``--store DIR``, default a temporary one), so sources edited meanwhile change nothing and a
later invocation on the same store (e.g. ``--cbs`` once a CBS(t) export exists) reuses the
finished search. Writes ``benchmarks/results/batch_schedule.json`` and prints one line per
schedule and fixed batch size.

    python benchmarks/batch_schedule.py [--stages 128,512@4096] [--store DIR]
        [--cbs benchmarks/results/cbs.json] [--no-hand-written]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
NAME = "bench-batch-schedule"


def study_file(base: dict[str, Any], schedule: dict[str, Any] | None) -> str:
    data = {
        **base,
        "name": NAME,
        "tuner": {**base.get("tuner", {}), "confirm": {"top": 1, "seeds": 2}},
    }
    if schedule is not None:
        data["batch_schedule"] = schedule
    return yaml.safe_dump(data, sort_keys=False)


def study(*args: str, env: dict[str, str], cwd: Path) -> tuple[float, str]:
    start = time.monotonic()
    done = subprocess.run(
        ["nice", "-n", "10", sys.executable, "-m", "study", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        sys.exit(f"study {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.monotonic() - start, done.stdout


def snapshot(store: Path) -> dict[str, str]:
    """The package copied into ``store/code`` once (later invocations reuse it), and the
    environment that runs it under its own code version."""
    from study.version import __version__, source_hash

    code = store / "code"
    if not (code / "study").is_dir():  # the committed package (HEAD), not edits under way
        code.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", "HEAD", "study"], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True)
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        )
        (code / "HEAD").write_text(head.stdout.strip() + "\n", encoding="utf-8")
    version = f"{__version__}+{source_hash(code / 'study')}"
    path = os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "STUDY_CODE_VERSION": version}


def report(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    out = cwd / "report"
    study("report", NAME, "--format", "json", "--out", str(out), "--no-mlflow", env=env, cwd=cwd)
    return json.loads((out / "report.json").read_text(encoding="utf-8"))


def hand_written(stages: str, lr_fit: dict[str, Any]) -> dict[str, Any]:
    """The section of inline ``stages``, rated by the study's fitted power law."""
    from study.config.schedule import BatchSchedule, parse_stages

    parsed = parse_stages(stages)
    alpha, c = float(lr_fit["alpha"]), float(lr_fit["c"])
    rate = c * parsed[0].batch_size ** alpha
    return {**BatchSchedule(parsed, rate, alpha).to_mapping(), "seeds": 3}


def cbs_schedule(path: Path) -> dict[str, Any] | None:
    """The derived schedule's section in a `study branch` result (JSON) or a snippet (YAML)."""
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    found = _find_section(data)
    if found is None:
        return None
    keep = ("learning_rate", "lr_scaling", "warmup_steps", "stages")
    return {**{k: v for k, v in found.items() if k in keep}, "seeds": 3}


def _find_section(data: Any) -> dict[str, Any] | None:
    if isinstance(data, dict):
        if "batch_schedule" in data and isinstance(data["batch_schedule"], dict):
            return data["batch_schedule"]
        if "stages" in data and "learning_rate" in data:
            return data
        for key in ("snippet", "schedule_snippet"):
            if isinstance(data.get(key), str):
                return _find_section(yaml.safe_load(data[key]))
        for value in data.values():
            found = _find_section(value)
            if found is not None:
                return found
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default="128,512@4096", help="the hand-written schedule")
    parser.add_argument("--cbs", help="a study branch result (JSON) or schedule snippet (YAML)")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "batch_schedule.json")
    )
    parser.add_argument("--store", help="the store (kept; default: a temporary one)")
    parser.add_argument("--no-hand-written", action="store_true", help="only --cbs's schedule")
    args = parser.parse_args()
    base = yaml.safe_load((ROOT / "benchmarks" / "mnist1d_compute.yaml").read_text("utf-8"))
    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(args.store or tmp)
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **snapshot(cwd), "STUDY_HOME": str(cwd / "mlruns")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        file = cwd / "study.yaml"
        file.write_text(study_file(base, None), encoding="utf-8")
        walls["search"], _ = study("run", str(file), "--tuner", "both", env=env, cwd=cwd)
        lr_fit = report(env, cwd)["lr_power_law"]
        sections = {}
        if not args.no_hand_written:
            sections["hand-written"] = hand_written(args.stages, lr_fit)
        if args.cbs:
            derived = cbs_schedule(Path(args.cbs))
            if derived is None:
                print(f"no schedule found in {args.cbs}", file=sys.stderr)
            else:
                sections["CBS(t)"] = derived
        known = cwd / "labels.json"  # the schedules earlier invocations ran, by stages
        labels = json.loads(known.read_text("utf-8")) if known.exists() else {}
        for label, section in sections.items():
            file.write_text(study_file(base, section), encoding="utf-8")
            walls[label], _ = study("run", str(file), "--tuner", "both", env=env, cwd=cwd)
            labels[
                ",".join(f"{s['batch_size']}@{s['from_examples']}" for s in section["stages"])
            ] = label
            known.write_text(json.dumps(labels), encoding="utf-8")
        final = report(env, cwd)
        commit = (cwd / "code" / "HEAD").read_text("utf-8").strip()
    comparisons = final["batch_schedules"]
    for c in comparisons:
        c["label"] = labels.get(c["schedule"], c["schedule"])
    result = {
        "question": "benchmarks/mnist1d_compute.yaml + tuner.confirm {top: 1, seeds: 2}",
        "code": env["STUDY_CODE_VERSION"],
        "commit": commit,
        "lr_power_law": {k: lr_fit[k] for k in ("alpha", "alpha_ci", "c")},
        "sections": sections,
        "comparisons": comparisons,
        "wall_seconds": walls,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"lr rule from the study: lr(B) = {lr_fit['c']:.4g} B^{lr_fit['alpha']:.3f}")
    for c in comparisons:
        _print(c)
    print(f"wall seconds: {json.dumps({k: round(v, 1) for k, v in walls.items()})}")
    print(f"wrote {args.out}")
    return 0


def _print(c: dict[str, Any]) -> None:
    print(f"\n{c['label']} schedule {c['schedule']}: {c['verdict'] or c['reason']}")
    for run in c["runs"]:
        print(
            f"  seed {run['seed']}: {run['steps']} steps, {run['examples']} examples, {run['seconds']} s"
        )
    if c.get("steps"):
        s, e, t = c["steps"], c["examples"], c["seconds"]
        print(
            f"  median {s['median']} steps ({s['low']} to {s['high']}), {e['median']} examples "
            f"({e['low']} to {e['high']}), {t['median']} s ({t['low']} to {t['high']})"
        )
    for f in c["fixed"]:
        mark = (
            " <- best fixed" if c.get("best") and f["batch_size"] == c["best"]["batch_size"] else ""
        )
        print(
            f"  fixed {f['batch_size']}: {f['steps']} steps ({f['steps_low']} to {f['steps_high']}, "
            f"{f['seeds']} seeds), {f['examples']} examples, {f['seconds']} s{mark}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
