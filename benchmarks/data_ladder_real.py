"""The data ladder checked by the expensive study, on real studies: does the answer `study
ladder` predicts at a larger training set hold what a study trained on that set finds?

The question is `benchmarks/mnist1d_compute.yaml` (the MNIST-1D MLP, Nesterov, 7 batch sizes
16-1024) with ``allocation: {mode: even}``, its target replaced by ``--target`` for every study
(default ``val_accuracy>=0.55``: at 2,000 training examples the MLP's validation accuracy
tops out near 0.6, so the question's own 0.6 is reached by too few trials there). For each
seed ``k`` (the study's ``seed`` and ``tuner.seed``), three studies of that file, one after
another with ``--workers 1``, each a user's ``study run`` in a process of its own
(`study_bench.run_study`), all in one ledger under ``--workdir`` (named
``ladder-s<k>-n<samples>-t<trials>``, the target's digits after it when not the default):

- **the rungs** at ``workload_options.samples`` of ``--rungs`` (default 2,500 and 5,000:
  2,000 and 4,000 training examples, the 80/20 split), ``--rung-trials`` trials per batch
  size (default 8, the question's; ``--rung-trials 4`` halves the rungs' trials), the batch
  sizes from ``--rung-min-batch`` up (default all: the small ones take most of the steps) and
  a trial budget of ``--rung-max-steps`` (default the file's); with ``--rung-steps N`` each
  rung is allocated by training steps instead (``allocation: {mode: steps, steps: N}``: the
  model of every trial places the trials, and the rung stops once it has trained N steps), so
  its cost is set in advance rather than by how many of its trials miss the target; with
  ``--rung-warm`` each rung after the first starts each batch size at the best rate the rung
  before it found there (``tuner.warm_start``);
- **the verifying study** at ``--verify`` samples (default 10,000: 8,000 training examples),
  with the question's 8 trials per batch size.

Then, per seed: ``study.fit_ladder(rungs)`` (sizes as the trials recorded them,
``dataset.train_rows``) predicts the answers at the verifying study's training-set size, and
the verifying study's own answers (``Study.fit``, 8 accelerators) are checked against the
prediction: is its B_noise, its critical batch size inside the 95% prediction interval; is the
predicted batch size for 8 accelerators its own, or is its own inside the predicted interval.
The compute: the rungs' training steps (every trial's ``steps_run``, pruned and unreached
trials too) against the verifying study's, and the same in training examples (steps times
batch size).

Every finished study's wall time and steps are written to ``results/data_ladder_real.json``
(``studies``) as it finishes (a rerun skips the finished ones), each seed's reading after its
three studies, under ``variants`` (one entry per design: rungs, trials, verifying size and
target; the verifying study is shared by designs that differ only in the rungs), with the
acceptance's counts (``totals``). One study takes about 1-1.5 minutes on a shared 2-core
machine.

``--question cnn`` runs the same design on `benchmarks/mnist1d_cnn_adam.yaml` (studies named
``ladder-cnn-...``, its variants keyed ``cnn: ...``).

Usage: python benchmarks/data_ladder_real.py [--question mlp|cnn] [--seeds 0 1 2] [--rungs 2500 5000]
    [--verify 10000] [--rung-trials 8] [--verify-trials 8] [--target val_accuracy>=0.55]
    [--rung-min-batch 64] [--rung-max-steps 1000] [--rung-steps 3500] [--rung-warm]
    [--workdir /tmp/data-ladder-real] [--only report]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import yaml  # noqa: E402
from study_bench import EVEN, run_study  # noqa: E402

HERE = Path(__file__).resolve().parent
QUESTIONS = {"mlp": HERE / "mnist1d_compute.yaml", "cnn": HERE / "mnist1d_cnn_adam.yaml"}
"""``--question``: the MNIST-1D MLP (Nesterov, to the ``--target``) or the CNN with Adam (its
file's 80% is reached at 4,000 training examples; at 2,000 batch 512 never reached it)."""
OUT = HERE / "results" / "data_ladder_real.json"
ACCELERATORS = 8
TARGET = "val_accuracy>=0.55"
"""The default target of every study (see the module)."""
CHECKED = ("b_noise", "critical_batch", "recommended_batch")
"""The answers checked against the verifying study's."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """One study of a ladder: the question's file at ``samples`` for ``seed``, ``trials`` per
    batch size, ``target``, its batch sizes from ``min_batch`` up (all at 0), its trials'
    budget ``max_steps`` (the file's at 0), and even allocation, or allocation by a budget of
    ``steps`` training steps where that is set; ``warm``: the study its first trials start
    from (``tuner.warm_start``), if any."""

    seed: int
    samples: int
    trials: int
    target: str = TARGET
    question: str = "mlp"
    min_batch: int = 0
    max_steps: int = 0
    steps: int = 0
    warm: str = ""

    @property
    def name(self) -> str:
        """``ladder-s0-n2500-t8``, with the target's digits after it when it is not `TARGET`
        (``ladder-s0-n5000-t8-06`` for ``val_accuracy>=0.6``), ``ladder-cnn-...`` for the CNN,
        ``-b64`` when the batch sizes below 64 were left out, ``-m1000`` with a trial budget of
        1,000 steps instead of the file's, ``-a3500`` when allocated by 3,500 training steps,
        ``-w`` when warm-started from the rung before."""
        tag = "" if self.target == TARGET else "-" + re.sub(r"[^0-9]", "", self.target)
        prefix = "ladder" if self.question == "mlp" else f"ladder-{self.question}"
        floor = f"-b{self.min_batch}" if self.min_batch else ""
        cap = f"-m{self.max_steps}" if self.max_steps else ""
        budget = f"-a{self.steps}" if self.steps else ""
        warm = "-w" if self.warm else ""
        sizes = f"-s{self.seed}-n{self.samples}-t{self.trials}"
        return f"{prefix}{sizes}{tag}{floor}{cap}{budget}{warm}"

    def write(self, workdir: Path) -> Path:
        """The study file, written into ``workdir``."""
        config = yaml.safe_load(QUESTIONS[self.question].read_text())
        config.pop("allocation", None)
        space = config["search_space"]
        space["batch_size"] = [b for b in space["batch_size"] if b >= self.min_batch]
        if self.max_steps:
            config["budget"] = {**config.get("budget", {}), "max_steps": self.max_steps}
        config.update(
            name=self.name,
            workload_options={**config.get("workload_options", {}), "samples": self.samples},
            target=self.target,
            seed=self.seed,
            trials_per_stratum=self.trials,
            tuner={
                **config["tuner"],
                "seed": self.seed,
                **({"warm_start": self.warm} if self.warm else {}),
            },
            allocation={"mode": "steps", "steps": self.steps} if self.steps else EVEN,
        )
        path = workdir / f"{self.name}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path


def plan(args: argparse.Namespace, seed: int) -> tuple[list[Spec], Spec]:
    """One seed's rungs and its verifying study."""
    common = {"seed": seed, "target": args.target, "question": args.question}
    rungs: list[Spec] = []
    for n in args.rungs:
        warm = rungs[-1].name if rungs and args.rung_warm else ""
        rungs.append(
            Spec(samples=n, trials=args.rung_trials, min_batch=args.rung_min_batch,
                 max_steps=args.rung_max_steps, steps=args.rung_steps, warm=warm, **common)
        )  # fmt: skip
    return rungs, Spec(samples=args.verify, trials=args.verify_trials, **common)


def journal(workdir: Path) -> str:
    return str(workdir / "mlruns" / "optuna.journal")


def is_complete(workdir: Path, name: str) -> bool:
    from study.errors import StudyNotFound
    from study.ledger import Ledger

    if not (workdir / "mlruns" / "optuna.journal").exists():
        return False
    try:
        return Ledger.open(journal(workdir), name, create=False).summary().state == "complete"
    except StudyNotFound:
        return False


def study_cost(workdir: Path, name: str) -> dict[str, Any]:
    """The study's trials, training steps (every trial's ``steps_run``), training examples
    (steps times batch size) and trials that reached the target."""
    from study.ledger import Ledger

    ledger = Ledger.open(journal(workdir), name, create=False)
    done = [
        (s.batch_size, t) for s in ledger.strata() for t in ledger.trials(s) if t.result is not None
    ]
    return {
        "trials": len(done),
        "steps": int(sum(t.result.steps_run for _, t in done)),
        "examples": int(sum(b * t.result.steps_run for b, t in done)),
        "reached": sum(1 for _, t in done if t.result.steps_to_target),
    }


def run_all(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """Every seed's rungs and verifying study, one after another; each seed read when its
    studies are done."""
    args.workdir.mkdir(parents=True, exist_ok=True)
    runs = results.setdefault("studies", {})
    for seed in args.seeds:
        rungs, verify = plan(args, seed)
        for spec in [*rungs, verify]:
            name = spec.name
            if is_complete(args.workdir, name):  # run before (its wall time kept if recorded)
                runs.setdefault(name, {"seed": seed, "wall_seconds": None})
                runs[name].update(study_cost(args.workdir, name))
                continue
            file = spec.write(args.workdir)
            started = time.perf_counter()
            run_study(file, args.workdir, "--workers", "1")
            wall = time.perf_counter() - started
            runs[name] = {
                "seed": seed,
                "samples": spec.samples,
                "trials_per_stratum": spec.trials,
                "min_batch": spec.min_batch,
                "max_steps": spec.max_steps or None,
                "allocation_steps": spec.steps or None,
                "target": args.target,
                "wall_seconds": round(wall, 1),
                **study_cost(args.workdir, name),
            }
            print(f"{name}: {json.dumps(runs[name])}", flush=True)
            save(results)
        variant(results, args)["ladders"][str(seed)] = read_seed(args, seed)
        save(results)


def read_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """One seed's ladder: the prediction at the verifying study's size against its answers."""
    import study

    storage = journal(args.workdir)
    specs, verifying = plan(args, seed)
    rungs, verify = [spec.name for spec in specs], verifying.name
    ladder = study.fit_ladder(rungs, storage=storage, accelerators=ACCELERATORS)
    size = float(study.fit_ladder([*rungs, verify], storage=storage).rungs["data_size"].iloc[-1])
    predicted = ladder.predict(size)
    measured = study.Study(verify, storage=storage).fit(accelerators=ACCELERATORS).answers
    costs = {name: study_cost(args.workdir, name) for name in [*rungs, verify]}
    cheap = sum(costs[name]["steps"] for name in rungs)
    out: dict[str, Any] = {
        "rungs": ladder.rungs.to_dict(orient="records"),
        "laws": {q: law.text() for q, law in ladder.laws.items()},
        "predicted": predicted.to_dict(),
        "verifying": {
            "study": verify,
            "data_size": size,
            "ok": measured.ok,
            "reason": measured.reason,
            **{
                q: getattr(measured, q).to_dict()
                for q in CHECKED
                if getattr(measured, q) is not None
            },
        },
        "steps": {name: cost["steps"] for name, cost in costs.items()},
        "cheap_steps": cheap,
        "verifying_steps": costs[verify]["steps"],
        "cheap_over_verifying": cheap / costs[verify]["steps"],
        "cheap_examples_over_verifying": sum(costs[n]["examples"] for n in rungs)
        / costs[verify]["examples"],
    }
    if predicted.ok and measured.ok:
        for q in CHECKED:
            guess, actual = getattr(predicted, q), getattr(measured, q)
            if guess is None or actual is None:
                continue
            out[f"{q}_covered"] = guess.covers(actual.estimate)
            out[f"{q}_ratio"] = guess.estimate / actual.estimate
        if predicted.recommended_batch is not None and measured.recommended_batch is not None:
            out["recommended_batch_equal"] = (
                predicted.recommended_batch.estimate == measured.recommended_batch.estimate
            )
    print(f"seed {seed}: {predicted.line()}", flush=True)
    print(f"seed {seed}: verifying {summary_line(out)}", flush=True)
    return clean(out)


def summary_line(row: dict[str, Any]) -> str:
    v = row["verifying"]
    shown = ", ".join(
        f"{q} {v[q]['estimate']:.3g} ({v[q]['low']:.3g}-{v[q]['high']:.3g}) "
        f"covered {row.get(q + '_covered')}"
        for q in CHECKED
        if q in v
    )
    return (
        f"{shown}; cheap/verifying steps {row['cheap_over_verifying']:.2f}, "
        f"examples {row['cheap_examples_over_verifying']:.2f}"
    )


def clean(value: Any) -> Any:
    """JSON without NaN or infinities (None instead)."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return clean(value.item())
    return value


def variant(results: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The readings of this design (its rungs' sizes and trials, the verifying study's)."""
    key = ("" if args.question == "mlp" else f"{args.question}: ") + (
        f"rungs {'+'.join(map(str, args.rungs))} x{args.rung_trials}"
        + (f" from batch {args.rung_min_batch}" if args.rung_min_batch else "")
        + (f" budget {args.rung_max_steps}" if args.rung_max_steps else "")
        + (f" by {args.rung_steps} steps" if args.rung_steps else "")
        + (" warm-started" if args.rung_warm else "")
        + ", "
        f"verify {args.verify} x{args.verify_trials}, {args.target}"
    )
    out = results.setdefault("variants", {}).setdefault(key, {"ladders": {}})
    out["setup"] = {
        "question": QUESTIONS[args.question].name,
        "target": args.target,
        "rungs_samples": args.rungs,
        "verify_samples": args.verify,
        "rung_trials_per_stratum": args.rung_trials,
        "rung_min_batch": args.rung_min_batch,
        "rung_max_steps": args.rung_max_steps or None,
        "rung_allocation_steps": args.rung_steps or None,
        "rung_warm_start": bool(args.rung_warm),
        "verify_trials_per_stratum": args.verify_trials,
    }
    return out


def totals(ladders: list[dict[str, Any]]) -> dict[str, Any]:
    """The acceptance's counts over the seeds read."""
    return {
        "seeds": len(ladders),
        "b_noise_covered": sum(bool(r.get("b_noise_covered")) for r in ladders),
        "critical_batch_covered": sum(bool(r.get("critical_batch_covered")) for r in ladders),
        "batch_equal": sum(bool(r.get("recommended_batch_equal")) for r in ladders),
        "batch_equal_or_inside": sum(
            bool(r.get("recommended_batch_equal") or r.get("recommended_batch_covered"))
            for r in ladders
        ),
        "cheap_over_verifying": [round(r["cheap_over_verifying"], 3) for r in ladders],
        "cheap_examples_over_verifying": [
            round(r["cheap_examples_over_verifying"], 3)
            for r in ladders
            if "cheap_examples_over_verifying" in r
        ],
    }


def save(results: dict[str, Any]) -> None:
    for entry in results.get("variants", {}).values():
        entry["totals"] = totals(list(entry["ladders"].values()))
    results["wall_seconds"] = round(
        sum(s["wall_seconds"] or 0 for s in results.get("studies", {}).values()), 1
    )
    OUT.write_text(json.dumps(clean(results), indent=1, allow_nan=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--question", choices=sorted(QUESTIONS), default="mlp")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rungs", type=int, nargs="+", default=[2500, 5000])
    parser.add_argument("--verify", type=int, default=10_000)
    parser.add_argument("--rung-trials", type=int, default=8)
    parser.add_argument("--verify-trials", type=int, default=8)
    parser.add_argument(
        "--rung-min-batch",
        type=int,
        default=0,
        help="leave the rungs' batch sizes below this out (the dearest in steps)",
    )
    parser.add_argument(
        "--rung-max-steps",
        type=int,
        default=0,
        help="the rungs' trial budget in steps (default: the file's `budget.max_steps`)",
    )
    parser.add_argument(
        "--rung-steps",
        type=int,
        default=0,
        help="allocate each rung by this many training steps (default: even allocation)",
    )
    parser.add_argument(
        "--rung-warm",
        action="store_true",
        help="start each rung after the first at the rung before's best rates (tuner.warm_start)",
    )
    parser.add_argument("--target", default=TARGET)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/data-ladder-real"))
    parser.add_argument("--only", choices=("report",), help="read the stored studies only")
    args = parser.parse_args()
    results: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    results["setup"] = {
        "questions": {name: path.name for name, path in QUESTIONS.items()},
        "allocation": "even (rungs: by steps where a variant says so)",
        "workers": 1,
        "accelerators": ACCELERATORS,
    }
    if args.only != "report":
        run_all(args, results)
    else:
        entry = variant(results, args)
        entry["ladders"] = {str(s): read_seed(args, s) for s in args.seeds}
    save(results)
    print(json.dumps({k: v["totals"] for k, v in results["variants"].items()}))


if __name__ == "__main__":
    main()
