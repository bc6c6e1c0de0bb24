"""The flags of one trial (``study train``, ``study check-workload``, ``study noise-scale``),
generated from `study.config.definition.TrialDefinition`: each field's flag is its entry in
`TRIAL_FLAGS` (flag, help, group), its type and default the field's, and its dest the field's
name, so ``TrialDefinition(**flags)`` reads them back (`definition_of`). A field without an
entry is an error when the parser is built; ``tests/config/test_trial_faces.py`` checks the
faces field by field.
"""

from __future__ import annotations

import argparse
import types
import typing
from dataclasses import dataclass, fields
from typing import Any

from study.config.definition import TrialDefinition
from study.config.schedule import DEFAULT_ALPHA, BatchSchedule
from study.config.trial import (
    JIT_COMPILE,
    NOISE_EVERY,
    OPTIMIZERS,
    PRECISIONS,
    SCHEDULES,
    Budget,
    default_of,
)

__all__ = [
    "TRIAL_FLAGS",
    "Flag",
    "add_measurement_flags",
    "add_schedule_flags",
    "add_trial_flags",
    "definition_of",
]

WORKLOAD = "workload"
OPTIMIZER = "optimizer and schedule"
TARGET = "target, budget and evaluation"
DISTRIBUTION = "distribution and tracking"
SCHEDULE = "batch-size schedule"
MEASUREMENT = "measurement"


@dataclass(frozen=True)
class Flag:
    """How the command line sets one field: ``flag`` in ``group``, with ``help`` (``{default}``
    is the field's default, ``{choices}`` the ``choices`` listed); ``choices`` are also
    argparse's where ``strict``."""

    flag: str
    help: str | None
    group: str
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    strict: bool = False


def _listed(choices: tuple[str, ...]) -> str:
    return f"{', '.join(choices[:-1])} or {choices[-1]}"


#: The flag of each field of `TrialDefinition`, in the order ``--help`` lists them.
TRIAL_FLAGS: dict[str, Flag] = {
    "workload": Flag(
        "--workload", "{workloads}, or module:callable (default: {default})", WORKLOAD
    ),
    "model": Flag(
        "--model",
        "model of the workload (default: the workload's first), or module:callable returning "
        "your own Keras model (compiled or not)",
        WORKLOAD,
    ),
    "loss": Flag(
        "--loss",
        "replace the workload's loss: sparse_categorical_crossentropy, binary_crossentropy, "
        "mse, mae, huber, or module:callable (a per-example loss)",
        WORKLOAD,
    ),
    "workload_options": Flag(
        "--workload-option", "any other workload option (repeatable)", WORKLOAD, "KEY=VALUE"
    ),
    "batch_size": Flag("--batch-size", "global batch size (default: {default})", OPTIMIZER),
    "learning_rate": Flag("--lr", "learning rate (default: {default})", OPTIMIZER),
    "optimizer": Flag("--optimizer", "{choices} (default: {default})", OPTIMIZER, None, OPTIMIZERS),
    "momentum": Flag(
        "--momentum", "momentum for momentum/nesterov (default: {default})", OPTIMIZER
    ),
    "beta1": Flag("--beta1", "Adam beta1", OPTIMIZER),
    "beta2": Flag("--beta2", "Adam beta2", OPTIMIZER),
    "epsilon": Flag("--epsilon", "Adam epsilon", OPTIMIZER),
    "weight_decay": Flag("--weight-decay", "decoupled weight decay", OPTIMIZER),
    "schedule": Flag("--schedule", "{choices} (default: {default})", OPTIMIZER, None, SCHEDULES),
    "warmup_steps": Flag("--warmup", "linear warmup steps", OPTIMIZER, "STEPS"),
    "decay_steps": Flag(
        "--decay-steps", "decay horizon (default: until the step budget)", OPTIMIZER
    ),
    "end_factor": Flag("--end-factor", "final rate as a fraction of the base rate", OPTIMIZER),
    "target": Flag(
        "--target", "e.g. 'val_accuracy>=0.6' or 'val_loss<=0.3' (default: the workload's)", TARGET
    ),
    "max_steps": Flag(
        "--max-steps", f"step budget (default: {Budget().max_steps} if no other budget)", TARGET
    ),
    "max_examples": Flag("--max-examples", "example budget", TARGET),
    "max_seconds": Flag("--max-seconds", "training-time budget in seconds", TARGET),
    "eval_every": Flag("--eval-every", "N steps, or geometric:RATIO (default: {default})", TARGET),
    "target_hold": Flag(
        "--target-hold",
        "steps to target is the first step from which the target holds through the next PCT% of "
        "steps (at least N); 'off': the first evaluation that meets it (default: {default})",
        TARGET,
        "PCT,N",
    ),
    "seed": Flag("--seed", None, TARGET),
    "strategy": Flag(
        "--strategy",
        "auto, default, one_device, mirrored:N, multi_worker_mirrored, tpu (default: {default})",
        DISTRIBUTION,
    ),
    "precision": Flag(
        "--precision",
        "numeric precision (default: {default} = float32 on CPU, mixed_float16 on GPU, "
        "mixed_bfloat16 on TPU)",
        DISTRIBUTION,
        choices=PRECISIONS,
        strict=True,
    ),
    "jit_compile": Flag(
        "--jit-compile",
        "compile the training step with XLA (default: {default} = off on CPU, on elsewhere)",
        DISTRIBUTION,
        choices=JIT_COMPILE,
        strict=True,
    ),
    "batch_schedule": Flag(
        "--batch-schedule",
        "grow the global batch by examples seen: a YAML file with a batch_schedule: section (a "
        "study file or `study branch`'s snippet; its learning_rate and warmup_steps replace --lr "
        "and --warmup), or inline stages B[@EXAMPLES],... such as 32,128@40960 (--lr is the rate "
        "at the first batch size; --batch-size is ignored)",
        SCHEDULE,
        "FILE|STAGES",
    ),
    "lr_alpha": Flag(
        "--lr-alpha",
        "with inline --batch-schedule stages: lr(B) = --lr * (B / B0) ** A (default: "
        f"{DEFAULT_ALPHA})",
        SCHEDULE,
        "A",
    ),
    "stage_warmup_steps": Flag(
        "--stage-warmup",
        "with inline --batch-schedule stages: ramp the rate linearly from the previous stage's "
        "over a later stage's first STEPS steps (default: "
        f"{default_of(BatchSchedule, 'stage_warmup_steps')}, a jump)",
        SCHEDULE,
        "STEPS",
    ),
    "noise_scale": Flag(
        "--noise-scale",
        "measure the gradient noise scale B_simple during training (printed at the end, logged "
        "as noise/* curves)",
        MEASUREMENT,
    ),
    "noise_every": Flag(
        "--noise-every",
        "measure the noise scale on one step in N: each measured step costs about one more "
        "forward and backward pass at small batch (default: {default})",
        MEASUREMENT,
        "N",
    ),
    "exact_steps": Flag(
        "--no-exact-steps",
        "report the first evaluation step that met the target instead of replaying the steps "
        "before it to find the exact one",
        MEASUREMENT,
    ),
}
#: Workload options with a flag of their own (their dest, type, metavar and help), listed
#: before ``--workload-option``; `study.commands.train.workload_options` reads them.
OPTION_SUGAR: tuple[tuple[str, type, str | None, str], ...] = (
    ("samples", int, None, "mnist1d: number of generated samples"),
    ("csv", str, "FILE", "csv workload: the CSV file"),
    ("label", str, "COLUMN", "csv workload: the label column"),
    ("text_column", str, "COLUMN", "csv workload: a text column to tokenise"),
)


def definition_of(args: argparse.Namespace, **changes: Any) -> TrialDefinition:
    """The `TrialDefinition` of the parsed flags (a field without a flag here keeps its
    default), with ``changes``."""
    given = {
        f.name: getattr(args, f.name) for f in fields(TrialDefinition) if hasattr(args, f.name)
    }
    return TrialDefinition(**{**given, **changes})


def add_trial_flags(p: argparse.ArgumentParser, *, experiment: str, defaults: bool = True) -> None:
    """The flags that define one trial and where it is logged (``study train``,
    ``study check-workload``, ``study noise-scale``); ``defaults=False`` leaves a flag not given
    unset (so a study file's setting can be told from a flag's default)."""
    for title in (WORKLOAD, OPTIMIZER, TARGET, DISTRIBUTION):
        group = p.add_argument_group(title)
        _add_group(group, title, defaults=defaults)
    group.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db)",
    )
    group.add_argument(
        "--experiment",
        default=experiment if defaults else argparse.SUPPRESS,
        help=f"MLflow experiment (default: {experiment})",
    )
    group.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    group.add_argument("--json", action="store_true", help="print the result as JSON")


def add_schedule_flags(p: argparse.ArgumentParser) -> None:
    """``study train``'s batch-size schedule: ``--batch-schedule``, ``--lr-alpha`` and
    ``--stage-warmup``."""
    _add_group(p.add_argument_group(SCHEDULE), SCHEDULE)


def add_measurement_flags(
    p: argparse.ArgumentParser,
    names: tuple[str, ...] = ("noise_scale", "noise_every", "exact_steps"),
    *,
    noise_every: int | None = None,
) -> None:
    """The measurement flags of ``names``: ``--noise-every`` defaults to ``noise_every`` (None:
    given only with ``--noise-scale``, `NOISE_EVERY` then)."""
    shown = {"noise_every": NOISE_EVERY if noise_every is None else noise_every}
    _add_group(p.add_argument_group(MEASUREMENT), MEASUREMENT, names, defaults=shown)
    if noise_every is not None:
        p.set_defaults(noise_every=noise_every)


def _add_group(
    group: Any,
    title: str,
    names: tuple[str, ...] | None = None,
    *,
    defaults: bool | dict[str, Any] = True,
) -> None:
    """The flags of the fields in ``title`` (or of ``names``), each its field's dest, type and
    default (a dict of ``defaults`` replaces a default shown; False: flags not given are unset)."""
    hints, standard = typing.get_type_hints(TrialDefinition), TrialDefinition()
    for item in fields(TrialDefinition):
        face = TRIAL_FLAGS[item.name]  # a field without a flag: KeyError, and the tests say so
        if face.group != title or (names is not None and item.name not in names):
            continue
        if item.name == "workload_options":
            for dest, kind, metavar, text in OPTION_SUGAR:
                group.add_argument(
                    "--" + dest.replace("_", "-"), type=kind, metavar=metavar, help=text
                )
        default = getattr(standard, item.name)
        shown = defaults.get(item.name, default) if isinstance(defaults, dict) else default
        options = _options(item.name, face, _kind(hints[item.name]), default, shown)
        if defaults is False and options.get("default") is not None:
            options["default"] = argparse.SUPPRESS
        group.add_argument(face.flag, **options)


def _options(name: str, face: Flag, kind: type, default: Any, shown: Any) -> dict[str, Any]:
    """argparse's options of the flag of field ``name`` (read as ``kind``)."""
    text = None
    if face.help is not None:
        text = face.help.format(
            default=shown,
            choices=_listed(face.choices) if face.choices else "",
            workloads=", ".join(_workloads()) if "{workloads}" in face.help else "",
        ).replace("%", "%%")
    options: dict[str, Any] = {"dest": name, "help": text}
    if kind is bool:  # a switch: --noise-scale sets true, --no-exact-steps false
        return {**options, "action": "store_false" if default else "store_true"}
    if name == "workload_options":  # KEY=VALUE, repeatable
        return {**options, "action": "append", "metavar": face.metavar, "default": []}
    if face.strict:
        options["choices"] = face.choices
    else:
        options["metavar"] = face.metavar or face.flag.lstrip("-").replace("-", "_").upper()
    return {**options, "type": None if kind is str else kind, "default": default}


def _kind(hint: Any) -> type:
    """The type a flag's text is read as: ``int | None`` is int; unions of several, text."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 and args[0] in (int, float, bool) else str
    return hint if hint in (int, float, bool) else str


def _workloads() -> list[str]:
    from study.workloads import available

    return available()
