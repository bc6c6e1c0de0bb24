"""CBS(t) on the MNIST-1D MLP question (issue 21): branch trials from a reference run at B0.

``--question shapes`` asks the same of the residual CNN on drawn shapes (to 80% validation
accuracy, `search_spaces/shapes_resnet.yaml`'s question), against `examples/shapes_resnet/`.

The question is `benchmarks/mnist1d_compute.yaml`'s (MNIST-1D, 10,000 samples, MLP, Nesterov,
validation accuracy 0.6). The reference trains at batch 16 at the best rate the MNIST-1D MLP
study found there (`examples/mnist1d_mlp/report.json`), branches scale it by that study's fitted
exponent alpha (one rate per branch), and CBS(t)'s end is compared with that study's fitted
B_noise. Runs `study branch` in a fresh store under `nice -n 10`; writes
`benchmarks/results/cbs.json` and prints the curve, the trend, the cost and the comparison.

    python benchmarks/cbs.py [--window 512] [--replicates 2] [--out benchmarks/results/cbs.json]

``--defaults`` (issue 52) asks what ``branch: {}`` gives on a finished study: it runs the
question's study first (``--grid``, ``--trials``, ``--study-steps`` shrink it to fit a small
machine; a second run with the same ``--home`` reuses it; ``--study FILE``: that file's study,
found in ``--home``), then ``study branch --restart`` with an empty section, so that every
branch setting comes from that study (`study.ext.branch.defaults`), and reports the cost in
runs of B0 to the target (the reference's own first crossing, and the best trial's) and which
checkpoints are censored at the largest batch size tried:

    python benchmarks/cbs.py --defaults --question shapes --seed 0 --home /tmp/s0 \
        --out benchmarks/results/cbs_defaults/shapes_seed0.json
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

ROOT = Path(__file__).resolve().parents[1]

#: The question of each workload: the study file's head and the example study it compares with.
QUESTIONS = {
    "mnist1d": (
        """\
name: bench-cbs-mnist1d
workload: mnist1d
workload_options: {{samples: 10000}}
model: mlp
target: "val_accuracy>=0.6"
budget: {{max_steps: 5000}}
eval_every: "geometric:1.05"
optimizer: nesterov
seed: 0
trials_per_stratum: 8
search_space:
  batch_size: [16, 32, 64, 128, 256, 512, 1024]
  learning_rate: {{low: 1.0e-3, high: 3.0, scale: log}}
  strategy: [default]
""",
        ROOT / "examples" / "mnist1d_mlp" / "report.json",
    ),
    "shapes": (
        """\
name: bench-cbs-shapes
workload: shapes
workload_options: {{samples: 12500, noise: 0.15}}
model: resnet
target: "val_accuracy>=0.8"
budget: {{max_steps: 8000}}
eval_every: "geometric:1.1"
optimizer: nesterov
seed: 0
trials_per_stratum: 8
search_space:
  batch_size: {{low: 8, high: 2048}}
  learning_rate: {{low: 3.0e-3, high: 3.0, scale: log}}
  strategy: [default]
  momentum: {{choices: [0.9]}}
""",
        ROOT / "examples" / "shapes_resnet" / "report.json",
    ),
}

BRANCH = """\
branch:
  batch_size: 16
  learning_rate: {lr}
  examples: {examples}
  checkpoints: 6
  first_checkpoint: {first}
  multipliers: {multipliers}
  window: {window}
  replicates: {replicates}
  evaluations: {evaluations}
  max_replicates: {max_replicates}
  max_examples: {max_examples}
  lr_rule: search
  alpha: {alpha}
  search_factors: [1.0]
  tolerance: {{loss: {tolerance}}}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--question", choices=sorted(QUESTIONS), default="mnist1d")
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument(
        "--evaluations", type=int, default=4, help="per branch, over its window's last quarter"
    )
    parser.add_argument(
        "--max-replicates", type=int, help="more replicates where CBS is unresolved (rounds)"
    )
    parser.add_argument(
        "--budget-runs",
        type=float,
        help="cap the branches' examples so that CBS(t) costs at most this many runs of batch "
        "16 to the target (the example study's), the reference included",
    )
    parser.add_argument("--examples", type=int, default=20480)
    parser.add_argument("--multipliers", default="4,16,32")
    parser.add_argument("--tolerance", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0, help="the study's seed (its orders)")
    parser.add_argument(
        "--first-checkpoint", type=float, default=0.04, help="as a share of --examples"
    )
    parser.add_argument("--timeout", type=float, default=570.0, help="seconds per run")
    parser.add_argument(
        "--home",
        help="keep the store here (a run again continues its branches; default: a temporary one)",
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cbs.json"))
    parser.add_argument(
        "--defaults", action="store_true", help="run the study, then branch: {} on it"
    )
    parser.add_argument("--grid", default="16,32,64,128,256,512,1024", help="with --defaults")
    parser.add_argument("--trials", type=int, default=4, help="per batch size, with --defaults")
    parser.add_argument(
        "--study-steps", type=int, default=21000, help="the study's steps, with --defaults"
    )
    parser.add_argument(
        "--study", help="with --defaults: this study file (its branch: section as it stands)"
    )
    args = parser.parse_args()
    if args.defaults:
        return defaults(args)
    head, example_path = QUESTIONS[args.question]
    example = json.loads(example_path.read_text(encoding="utf-8"))
    rows = {int(r["batch_size"]): r for r in example["batch_sizes"]}
    lr = float(rows[16]["best_learning_rate"])
    alpha = float(example["lr_power_law"]["alpha"])
    b_noise = example["noise_scale"]["b_noise"], *example["noise_scale"]["b_noise_ci"]
    steps_16 = int(rows[16]["steps_to_result"])  # the reference batch size in both questions
    cap = None
    if args.budget_runs is not None:
        # the reference trains its examples and one window more (rounded up to the largest
        # batch, as the plan rounds it)
        largest = 16 * max(int(k) for k in args.multipliers.split(","))
        window = -(-args.window // largest) * largest
        cap = int(args.budget_runs * steps_16 * 16) - args.examples - window
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.home or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        study = Path(tmp) / "cbs.yaml"
        study.write_text(
            (head.replace("seed: 0\n", f"seed: {args.seed}\n") + BRANCH).format(
                lr=lr,
                examples=args.examples,
                multipliers=f"[{args.multipliers}]",
                window=args.window,
                replicates=args.replicates,
                evaluations=args.evaluations,
                first=args.first_checkpoint,
                max_replicates=args.max_replicates or args.replicates,
                max_examples="null" if cap is None else cap,
                alpha=alpha,
                tolerance=args.tolerance,
            ),
            encoding="utf-8",
        )
        env = {**os.environ, "STUDY_HOME": str(Path(tmp) / "mlruns")}
        start = time.monotonic()
        try:
            done = subprocess.run(
                ["nice", "-n", "10", sys.executable, "-m", "study", "branch", str(study), "--json"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=args.timeout,
            )
        except subprocess.TimeoutExpired:
            print(f"stopped after {args.timeout:.0f} s; run again with --home {tmp} to go on")
            return 3
        wall = time.monotonic() - start
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        return done.returncode
    result = json.loads(done.stdout)
    result["benchmark"] = {
        "wall_seconds": wall,
        "b_noise_example": list(b_noise),
        "alpha_example": alpha,
        "steps_to_result_b16_example": steps_16,
        "examples_to_result_b16_example": steps_16 * 16,
        "args": vars(args),
    }
    cost = result["cost"]
    cost["reference_runs_of_example"] = cost["examples"] / (steps_16 * 16)
    Path(args.out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wall {wall:.0f} s")
    for row in result["curve"]:
        cbs, low, high = (_number(row[k]) for k in ("cbs", "cbs_low", "cbs_high"))
        high = high if row["cbs"] is None or row["cbs_high"] is not None else float("inf")
        print(
            f"examples {row['examples']:>6}  CBS {cbs:6.1f} ({low:.1f} to {high:.1f})  "
            f"B_simple {_number(row.get('b_simple')):7.1f}"
        )
    for line in result["notes"]:
        print(line)
    last = _number(result["curve"][-1]["cbs"])
    print(f"B_noise (example study) {b_noise[0]:.0f} ({b_noise[1]:.0f} to {b_noise[2]:.0f}): "
          f"{b_noise[0] / last:.2g} x the last CBS")  # fmt: skip
    print(f"cost: {cost['examples']:,} examples = {cost['reference_runs_of_example']:.2f} runs of "
          f"batch 16 to the target at its best rate ({steps_16 * 16:,} examples each)")  # fmt: skip
    return 0


def defaults(args: argparse.Namespace) -> int:
    """The study of ``args.question`` (shrunk), then ``study branch`` with ``branch: {}``."""
    head, _ = QUESTIONS[args.question]
    text = head.replace("{{", "{").replace("}}", "}")
    text = text.replace("seed: 0\n", f"seed: {args.seed}\n")
    text = text.replace("trials_per_stratum: 8\n", f"trials_per_stratum: {args.trials}\n")
    lines = [
        f"  batch_size: [{args.grid}]" if line.startswith("  batch_size:") else line
        for line in text.splitlines()
    ]
    text = "\n".join(lines) + (
        f"\nallocation: {{mode: steps, steps: {args.study_steps}}}\nbranch: {{}}\n"
    )
    home = Path(args.home or tempfile.mkdtemp(prefix="cbs-defaults-"))
    home.mkdir(parents=True, exist_ok=True)
    study = Path(args.study) if args.study else home / "study.yaml"
    if not args.study:
        study.write_text(text, encoding="utf-8")
    env = {**os.environ, "STUDY_HOME": str(home / "mlruns")}
    nice = ["nice", "-n", "10", sys.executable, "-m", "study"]
    start = time.monotonic()
    if not (home / "mlruns" / "optuna.journal").exists():  # else: the study of an earlier run
        ran = subprocess.run(
            [*nice, "run", str(study), "--tuner", "optuna"], env=env, capture_output=True, text=True
        )
        if ran.returncode:
            print(ran.stderr[-3000:], file=sys.stderr)
            return ran.returncode
    study_wall = time.monotonic() - start
    start = time.monotonic()
    done = subprocess.run(
        [*nice, "branch", str(study), "--json", "--restart"],  # the study kept, branches anew
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        return done.returncode
    result = json.loads(done.stdout)
    result["benchmark"] = _defaults_summary(result, args, study_wall, time.monotonic() - start)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    summary = result["benchmark"]
    for line in result["notes"]:
        print(line)
    print(
        f"cost {summary['examples']:,} examples: {summary['runs_of_reference']:.2f} runs of the "
        f"reference to the target, {summary['runs_of_best_trial']:.2f} of B0's best trial's; "
        f"checkpoints censored at the largest batch size {summary['censored']} of "
        f"{summary['checkpoints']}, open above {summary['open_above']}, bounded on both sides "
        f"{summary['bounded']}"
    )
    return 0


def _defaults_summary(result: dict, args: argparse.Namespace, study_s: float, branch_s: float):
    """What the acceptance reads: runs of B0 to the target and censored checkpoints."""
    cost, plan = result["cost"], result["plan"]
    first = plan.get("first_examples")  # B0's best trial's first crossing: the plan's unit
    curve = result["curve"]
    b0 = int(plan["b0"])
    return {
        "args": vars(args),
        "study_seconds": study_s,
        "branch_seconds": branch_s,
        "examples": cost["examples"],
        "runs_of_reference": cost["reference_runs"],
        "best_trial_first_crossing": first,
        "runs_of_best_trial": cost["examples"] / first if first else None,
        "checkpoints": len(curve),
        "censored": sum(bool(r["censored"]) for r in curve),  # at the largest batch size
        "open_above": sum(r["cbs_high"] is None for r in curve),
        "bounded": sum(r["cbs_high"] is not None and (r["cbs_low"] or 0) > b0 for r in curve),
    }


def _number(value: float | None) -> float:
    return float("nan") if value is None else float(value)


if __name__ == "__main__":
    raise SystemExit(main())
