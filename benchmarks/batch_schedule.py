"""A batch-size schedule against the best fixed batch size (issue 21 item 4).

The question (``--question``) is `benchmarks/mnist1d_compute.yaml`'s (MNIST-1D, 10,000 samples,
MLP, Nesterov, validation accuracy 0.6, batch sizes 16 to 1024, 8 trials each, ``--tuner
both``; the default) or, with ``--question shapes``, `benchmarks/shapes_resnet_schedule.yaml`'s
(the residual CNN on drawn shapes to 80%, batch sizes 16 to 512), with each
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
   (`study.ext.schedules.compare`): steps, examples and training seconds to the target.

With ``--rules``, two schedules derived from the finished search by stated rules instead of
hand-written ones, both starting at the study's best fixed batch size B* at its best rate
(the study's best point there), later stages rated by the power law through the study's best
rates at the schedule's batch sizes (least squares in log-log; ``--lr-alpha fit``: the
study's whole-grid fitted alpha instead, which at 0.65 overshot 1,024's best rate 2x;
``--lr-alpha keep``: alpha 0, B*'s rate throughout, the larger batch only cutting the
gradient noise as a rate decay would, Smith et al. 2017):

- ``CBS(t) floored at B*``: the `study branch` schedule of ``--cbs`` with every batch raised
  to at least B* (a schedule never trains below the batch the study found best);
- ``double at half``: B*, then 2 B* from half the examples B* needed to the target (CBS(t)
  grows over training: by then it is past 2 B* on the branch measurement).

``--stage-warmup N`` ramps the rate over each later stage's first N steps (the section's
``stage_warmup_steps``); ``--target`` replaces the question's target (a longer training).

Everything runs under ``nice -n 10`` on a snapshot of the package copied into the store
(``--store DIR``, default a temporary one), so sources edited meanwhile change nothing and a
later invocation on the same store (e.g. ``--cbs`` once a CBS(t) export exists) reuses the
finished search. Writes ``benchmarks/results/batch_schedule.json`` and prints one line per
schedule and fixed batch size.

    python benchmarks/batch_schedule.py [--stages 128,512@4096] [--store DIR]
        [--cbs benchmarks/results/cbs.json] [--no-hand-written] [--rules]
        [--target val_accuracy>=0.65] [--stage-warmup 30]
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
#: The questions (``--question``): the MNIST-1D MLP's and the residual CNN on ``shapes``.
QUESTIONS = {
    "mnist1d": ROOT / "benchmarks" / "mnist1d_compute.yaml",
    "shapes": ROOT / "benchmarks" / "shapes_resnet_schedule.yaml",
}


def study_file(base: dict[str, Any], schedule: dict[str, Any] | None) -> str:
    data = {
        **base,
        "name": NAME,
        "allocation": {"mode": "even"},  # 8 trials per batch size (the file states a budget)
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


def hand_written(stages: str, lr_fit: dict[str, Any], ramp: int = 0) -> dict[str, Any]:
    """The section of inline ``stages``, rated by the study's fitted power law."""
    from study.config.schedule import BatchSchedule, parse_stages

    parsed = parse_stages(stages)
    alpha, c = float(lr_fit["alpha"]), float(lr_fit["c"])
    rate = c * parsed[0].batch_size ** alpha
    return {**BatchSchedule(parsed, rate, alpha, 0, ramp).to_mapping(), "seeds": 3}


def best_fixed_point(report_data: dict[str, Any]) -> tuple[int, float, float]:
    """B* (the report's definition: fewest steps within 1.1x the fewest examples), its best
    learning rate and its examples to the target."""
    import pandas as pd

    from study.ext.schedules.compare import best_fixed, fixed_batches

    table = pd.DataFrame(report_data["batch_sizes"])
    best = best_fixed(fixed_batches(table))
    if best is None:
        sys.exit("no fixed batch size reached the target: no B* to derive a schedule from")
    row = table[table["batch_size"] == best.batch_size].iloc[0]
    return best.batch_size, float(row["best_learning_rate"]), best.examples


def local_alpha(report_data: dict[str, Any], sizes: list[int]) -> float:
    """The slope of log(best rate) on log(B) over the study's best rates at ``sizes``."""
    import numpy as np

    best = {int(r["batch_size"]): r.get("best_learning_rate") for r in report_data["batch_sizes"]}
    known = [(b, best[b]) for b in sizes if best.get(b)]
    if len(known) < 2:
        return float(report_data["lr_power_law"]["alpha"])
    x, y = np.log([b for b, _ in known]), np.log([r for _, r in known])
    return float(np.polyfit(x, y, 1)[0])


def ruled(
    report_data: dict[str, Any], cbs: dict[str, Any] | None, ramp: int, rule: str = "local"
) -> dict[str, dict[str, Any]]:
    """The ``--rules`` schedules (see the module's docstring), by label."""
    from study.config.schedule import BatchSchedule, Stage

    b_star, rate, examples = best_fixed_point(report_data)

    def section(stages: list[Stage]) -> dict[str, Any]:
        merged = [
            s for i, s in enumerate(stages) if not i or s.batch_size > stages[i - 1].batch_size
        ]
        if rule == "keep":  # the rate stays B*'s: the larger batch only cuts the noise
            alpha = 0.0
        elif rule == "fit":
            alpha = float(report_data["lr_power_law"]["alpha"])
        else:
            alpha = local_alpha(report_data, [s.batch_size for s in merged])
        return {**BatchSchedule(tuple(merged), rate, alpha, 0, ramp).to_mapping(), "seeds": 3}

    out = {"double at half": section([Stage(0, b_star), Stage(int(examples // 2), 2 * b_star)])}
    if cbs is not None:
        floored = [Stage(s["from_examples"], max(b_star, s["batch_size"])) for s in cbs["stages"]]
        out["CBS(t) floored at B*"] = section(floored)
    return out


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
    parser.add_argument("--rules", action="store_true", help="the schedules derived by rule")
    parser.add_argument("--question", choices=sorted(QUESTIONS), default="mnist1d")
    parser.add_argument("--target", help="replaces the question's target")
    parser.add_argument("--stage-warmup", type=int, default=0, help="stage_warmup_steps")
    parser.add_argument("--lr-alpha", choices=("local", "fit", "keep"), default="local")
    parser.add_argument("--cbs-label", default="CBS(t)", help="the label of --cbs's schedule")
    args = parser.parse_args()
    question = QUESTIONS[args.question]
    base = yaml.safe_load(question.read_text("utf-8"))
    if args.target:
        base["target"] = args.target
    walls: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(args.store or tmp)
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **snapshot(cwd), "STUDY_HOME": str(cwd / "mlruns")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        file = cwd / "study.yaml"
        file.write_text(study_file(base, None), encoding="utf-8")
        walls["search"], _ = study("run", str(file), "--tuner", "both", env=env, cwd=cwd)
        searched = report(env, cwd)
        lr_fit = searched["lr_power_law"]
        sections = {}
        if not args.no_hand_written:
            sections["hand-written"] = hand_written(args.stages, lr_fit, args.stage_warmup)
        derived = cbs_schedule(Path(args.cbs)) if args.cbs else None
        if args.cbs and derived is None:
            print(f"no schedule found in {args.cbs}", file=sys.stderr)
        if args.rules:
            sections.update(ruled(searched, derived, args.stage_warmup, args.lr_alpha))
        elif derived is not None:
            sections[args.cbs_label] = {**derived, "stage_warmup_steps": args.stage_warmup}
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
        "question": f"{question.relative_to(ROOT)} + tuner.confirm {{top: 1, seeds: 2}}",
        "target": base["target"],
        "stage_warmup_steps": args.stage_warmup,
        "lr_alpha_rule": args.lr_alpha if args.rules else "fit",
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
