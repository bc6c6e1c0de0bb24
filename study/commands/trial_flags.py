"""The flags of one trial (``study train``, ``study check-workload``, ``study noise-scale``):
its workload, optimizer and schedule, target, budget and evaluation, distribution and tracking.
"""

from __future__ import annotations

import argparse
from typing import Any

from study.workloads import available as available_workloads

__all__ = ["add_noise_every", "add_schedule_flags", "add_trial_flags"]


def add_noise_every(group: Any, *, default: int | None, shown: int) -> None:
    group.add_argument(
        "--noise-every",
        type=int,
        default=default,
        metavar="N",
        help="measure the noise scale on one step in N: each measured step costs about one "
        f"more forward and backward pass at small batch (default: {shown})",
    )


def add_schedule_flags(p: argparse.ArgumentParser) -> None:
    """``study train``'s batch-size schedule: ``--batch-schedule``, ``--lr-alpha`` and
    ``--stage-warmup``."""
    g = p.add_argument_group("batch-size schedule")
    g.add_argument(
        "--batch-schedule",
        metavar="FILE|STAGES",
        help="grow the global batch by examples seen: a YAML file with a batch_schedule: "
        "section (a study file or `study branch`'s snippet; its learning_rate and warmup_steps "
        "replace --lr and --warmup), or inline stages B[@EXAMPLES],... such as 32,128@40960 "
        "(--lr is the rate at the first batch size; --batch-size is ignored)",
    )
    g.add_argument(
        "--lr-alpha",
        type=float,
        metavar="A",
        help="with inline --batch-schedule stages: lr(B) = --lr * (B / B0) ** A (default: 0.5)",
    )
    g.add_argument(
        "--stage-warmup",
        type=int,
        metavar="STEPS",
        help="with inline --batch-schedule stages: ramp the rate linearly from the previous "
        "stage's over a later stage's first STEPS steps (default: 0, a jump)",
    )


def add_trial_flags(p: argparse.ArgumentParser, *, experiment: str, defaults: bool = True) -> None:
    """The flags that define one trial and where it is logged (``study train``,
    ``study noise-scale``); ``defaults=False`` leaves a flag not given unset (so a study
    file's setting can be told from a flag's default)."""

    def keep(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    w = p.add_argument_group("workload")
    w.add_argument(
        "--workload",
        default=keep("mnist1d"),
        help=f"{', '.join(available_workloads())}, or module:callable (default: mnist1d)",
    )
    w.add_argument(
        "--model",
        help="model of the workload (default: the workload's first), or module:callable "
        "returning your own Keras model (compiled or not)",
    )
    w.add_argument(
        "--loss",
        help="replace the workload's loss: sparse_categorical_crossentropy, "
        "binary_crossentropy, mse, mae, huber, or module:callable (a per-example loss)",
    )
    w.add_argument("--samples", type=int, help="mnist1d: number of generated samples")
    w.add_argument("--csv", metavar="FILE", help="csv workload: the CSV file")
    w.add_argument("--label", metavar="COLUMN", help="csv workload: the label column")
    w.add_argument(
        "--text-column", metavar="COLUMN", help="csv workload: a text column to tokenise"
    )
    w.add_argument(
        "--workload-option",
        action="append",
        default=keep([]),
        metavar="KEY=VALUE",
        help="any other workload option (repeatable)",
    )
    o = p.add_argument_group("optimizer and schedule")
    o.add_argument(
        "--batch-size", type=int, default=keep(128), help="global batch size (default: 128)"
    )
    o.add_argument("--lr", type=float, default=keep(0.05), help="learning rate (default: 0.05)")
    o.add_argument(
        "--optimizer",
        default=keep("nesterov"),
        help="sgd, momentum, nesterov or adam (default: nesterov)",
    )
    o.add_argument(
        "--momentum",
        type=float,
        default=keep(0.9),
        help="momentum for momentum/nesterov (default: 0.9)",
    )
    o.add_argument("--beta1", type=float, default=keep(0.9), help="Adam beta1")
    o.add_argument("--beta2", type=float, default=keep(0.999), help="Adam beta2")
    o.add_argument("--epsilon", type=float, default=keep(1e-7), help="Adam epsilon")
    o.add_argument("--weight-decay", type=float, default=keep(0.0), help="decoupled weight decay")
    o.add_argument(
        "--schedule",
        default=keep("constant"),
        help="constant, linear or cosine (default: constant)",
    )
    o.add_argument(
        "--warmup", type=int, default=keep(0), metavar="STEPS", help="linear warmup steps"
    )
    o.add_argument("--decay-steps", type=int, help="decay horizon (default: until the step budget)")
    o.add_argument(
        "--end-factor",
        type=float,
        default=keep(0.0),
        help="final rate as a fraction of the base rate",
    )
    t = p.add_argument_group("target, budget and evaluation")
    t.add_argument(
        "--target", help="e.g. 'val_accuracy>=0.6' or 'val_loss<=0.3' (default: the workload's)"
    )
    t.add_argument("--max-steps", type=int, help="step budget (default: 10000 if no other budget)")
    t.add_argument("--max-examples", type=int, help="example budget")
    t.add_argument("--max-seconds", type=float, help="training-time budget in seconds")
    t.add_argument(
        "--eval-every",
        default=keep("geometric:1.05"),
        help="N steps, or geometric:RATIO (default: geometric:1.05)",
    )
    t.add_argument(
        "--target-hold",
        default=keep("5%,5"),
        metavar="PCT,N",
        help="steps to target is the first step from which the target holds through the next "
        "PCT%% of steps (at least N); 'off': the first evaluation that meets it (default: 5%%,5)",
    )
    t.add_argument("--seed", type=int, default=keep(0))
    r = p.add_argument_group("distribution and tracking")
    r.add_argument(
        "--strategy",
        default=keep("auto"),
        help="auto, default, one_device, mirrored:N, multi_worker_mirrored, tpu (default: auto)",
    )
    r.add_argument(
        "--precision",
        default=keep("auto"),
        choices=("auto", "float32", "mixed_float16", "mixed_bfloat16"),
        help="numeric precision (default: auto = float32 on CPU, mixed_float16 on GPU, "
        "mixed_bfloat16 on TPU)",
    )
    r.add_argument(
        "--jit-compile",
        default=keep("auto"),
        choices=("auto", "on", "off"),
        help="compile the training step with XLA (default: auto = off on CPU, on elsewhere)",
    )
    r.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db)",
    )
    r.add_argument(
        "--experiment", default=keep(experiment), help=f"MLflow experiment (default: {experiment})"
    )
    r.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
