"""What a stage change does to training (issue 21): the MNIST-1D MLP of
`benchmarks/mnist1d_compute.yaml` at batch 256, then 512 from 16,384 examples, the rate
``c B^alpha`` of the study's fit (README "Batch-size schedules", 0.003072 B^0.846: 0.335 at
256, 0.60 at 512), evaluated every step, with the rate jumping at the change and ramped over
the new stage's first N steps (``stage_warmup_steps``), against fixed 256 and 512 at the same
rule. Prints steps and examples to 60% and the validation accuracy and loss around the change;
writes ``benchmarks/results/batch_schedule_transient.json``.

    nice -n 10 python benchmarks/schedule_transient.py [--seed 0] [--ramps 0,10,30]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
C, ALPHA = 0.003072, 0.846
WINDOW = range(56, 112, 4)  # the steps shown around the change (step 64 at 256 = 16,384)


def section(stages: list[tuple[int, int]], ramp: int) -> dict:
    return {
        "learning_rate": C * stages[0][1] ** ALPHA,
        "lr_scaling": {"alpha": ALPHA},
        "stage_warmup_steps": ramp,
        "stages": [{"from_examples": e, "batch_size": b} for e, b in stages],
    }


def main() -> int:
    import study

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ramps", default="0,10,30")
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "batch_schedule_transient.json")
    )
    args = parser.parse_args()
    runs = {"fixed 256": section([(0, 256)], 0), "fixed 512": section([(0, 512)], 0)}
    for ramp in (int(r) for r in args.ramps.split(",")):
        runs[f"256, 512 from 16,384, ramp {ramp}"] = section([(0, 256), (16384, 512)], ramp)
    out = {"seed": args.seed, "rate": f"{C} B^{ALPHA}", "runs": {}}
    for label, plan in runs.items():
        r = study.train(
            "mnist1d",
            workload_options={"samples": 10000},
            model="mlp",
            target="val_accuracy>=0.6",
            max_steps=400,
            eval_every=1,
            seed=args.seed,
            batch_schedule=plan,
            track=False,
        )
        f = r.frame().set_index("step")
        around = {
            s: [round(float(f.val_accuracy[s]), 3), round(float(f.val_loss[s]), 3)]
            for s in WINDOW
            if s in f.index
        }
        out["runs"][label] = {
            "steps": r.steps_to_target,
            "examples": r.examples_to_target,
            "val_accuracy_loss_at_step": around,
        }
        shown = " ".join(f"{s}:{a:.2f}/{v:.2f}" for s, (a, v) in around.items())
        print(f"{label}: {r.steps_to_target} steps, {r.examples_to_target} examples | {shown}")
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
