"""The `study` command line.

Light commands (``--help``, ``ls``, ``status``) import neither TensorFlow nor MLflow; each
handler imports what it needs. Bad input raises `UsageError`: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from study.commands.flags import add_storage as _add_storage
from study.commands.flags import storage_access, storage_retry
from study.commands.ladder import add_ladder
from study.commands.target_flags import add_target_flags
from study.commands.trial_flags import add_measurement_flags, add_schedule_flags, add_trial_flags
from study.config.trial import PILOT_NOISE_EVERY
from study.errors import ExitCode, StorageUnavailable, UsageError, one_line
from study.extension import loaded
from study.paths import study_name
from study.version import __version__

EXIT_USAGE = ExitCode.USAGE


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``study train: error: ...``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(
            EXIT_USAGE, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n"
        )


def _add_train(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="train one trial until a validation target is met, and log it to MLflow",
        description="Train one workload at one (batch size, learning rate, strategy) until the "
        "target holds or the budget runs out; print steps/examples/seconds to target and log "
        "the run to MLflow.",
    )
    add_trial_flags(p, experiment="study-train")
    add_schedule_flags(p)
    add_measurement_flags(p)
    p.set_defaults(handler=_lazy("study.commands.train", "main"))
    p = sub.add_parser("check-workload", help="load, build, train one step and evaluate a workload")
    p.add_argument("spec", metavar="WORKLOAD", nargs="?", help="built-in or module:callable")
    add_trial_flags(p, experiment="study-check-workload")  # WORKLOAD or --workload names it
    p.set_defaults(handler=_lazy("study.commands.check_workload", "main"))


def _add_noise_scale(sub: Any) -> None:
    p = sub.add_parser(
        "noise-scale",
        help="a short pilot run: the gradient noise scale B_simple and a suggested study grid",
        description="Train one pilot trial at a small batch size measuring the gradient noise "
        "scale B_simple (McCandlish et al. 2018), print it over the evaluation steps with its "
        "95% interval, and suggest a study: batch sizes from about B_simple/16 to 16 x "
        "B_simple (powers of two) and a learning-rate range per batch size, the pilot's rate "
        "scaled by (B/B_pilot)^alpha for alpha from 0.5 to 1. With a study file, its workload, "
        "model, target and optimizer are used, --batch-size defaults to its smallest batch "
        "size and --lr to the geometric middle of its learning-rate range; without one, the "
        "flags are study train's.",
    )
    p.add_argument(
        "file", nargs="?", help="a study file, e.g. search_spaces/quickstart.yaml (optional)"
    )
    add_trial_flags(p, experiment="study-noise-scale", defaults=False)
    add_measurement_flags(p, ("noise_every",), noise_every=PILOT_NOISE_EVERY)
    s = p.add_argument_group("suggestion")
    s.add_argument(
        "--write", metavar="FILE", help="write the suggested study file (a new file) to FILE"
    )
    s.add_argument(
        "--study",
        metavar="NAME",
        help="store the pilot in study NAME's ledger, for its report (a study not yet stored "
        "is created from the --write file, named NAME)",
    )
    _add_storage(s)
    probe = argparse.ArgumentParser(add_help=False)
    add_trial_flags(probe, experiment="study-noise-scale")
    defaults = vars(probe.parse_args([]))
    p.set_defaults(trial_defaults=defaults, handler=_lazy("study.commands.noise_scale", "main"))


def _lazy(module: str, attr: str) -> Callable[[argparse.Namespace], int]:
    """The handler that imports ``module`` and calls its ``attr``."""

    def handler(args: argparse.Namespace) -> int:
        import importlib

        return getattr(importlib.import_module(module), attr)(args)

    return handler


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="study",
        description="Experiment-tracked hyperparameter scaling studies for TensorFlow models: "
        "how batch size, learning rate and distribution strategy trade off.",
    )
    parser.add_argument("--version", action="version", version=f"study {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add in _COMMANDS:
        add(sub)
    for extension in loaded():  # the features outside the core (`study.extension`)
        extension.add_commands(sub, _lazy)
    return parser


def _add_run_options(p: argparse.ArgumentParser, default_tuner: str | None) -> None:
    p.add_argument(
        "--tuner",
        choices=("optuna", "keras-tuner", "both"),
        default=default_tuner,
        help="search backend(s) (default: both; resume: as first run)",
    )
    p.add_argument(
        "--trials", type=int, help="total trial budget (default: trials_per_stratum x strata)"
    )
    _add_worker_options(p)


def _add_worker_options(p: argparse.ArgumentParser) -> None:
    """What every process that runs a study's trials takes: how many at once, when to leave,
    and the stores."""
    p.add_argument("--workers", type=int, default=1, help="trials run at once (default: 1)")
    p.add_argument(
        "--max-trials",
        type=int,
        metavar="N",
        help="leave after N trials of this process (default: until the study's budget is spent)",
    )
    _add_storage(p, tracking=True)


def _add_run(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run (or continue) a scaling study from a study file",
        description="Run a study file: every (batch size, strategy) stratum gets its trials; Optuna and KerasTuner search the learning rate and other metaparameters; every trial is logged to MLflow. Running it again continues where it stopped.",
    )
    p.add_argument("file", nargs="?", help="a study file, e.g. my_study.yaml (or --example)")
    p.add_argument("--example", metavar="NAME", help="a shipped study file, e.g. quickstart")
    _add_run_options(p, "both")
    p.set_defaults(handler=_lazy("study.commands.run", "main"))
    p = sub.add_parser("init", help="write a study to start from: NAME.yaml, NAME_model.py")
    p.add_argument("name", help="the new study's name")
    p.set_defaults(handler=_lazy("study.commands.init", "main"))
    p = sub.add_parser(
        "resume",
        help="continue an interrupted study by name",
        description="Continue a study from its ledger (the study file is stored there).",
    )
    p.add_argument("name")
    _add_run_options(p, None)
    p.set_defaults(handler=_lazy("study.commands.run", "resume"))
    p = sub.add_parser(
        "worker",
        help="join a study another host started and run its trials",
        description="Join an existing study as a worker (like `wandb agent`): the study file, "
        "search space and budget come from the ledger, so another host needs only the name, "
        "--storage and --tracking-uri. Runs trials until the study's budget is spent and no "
        "trial is open anywhere (a trial whose host stopped its heartbeat is closed as "
        "interrupted and run again), then exits 0. Ctrl-C / SIGTERM close the running trials "
        "as interrupted and exit 130 / 143.",
    )
    p.add_argument("name", help="the study's name (see `study ls --storage URL`)")
    _add_worker_options(p)
    p.set_defaults(handler=_lazy("study.commands.worker", "main"))


def _add_inspect(sub: Any) -> None:
    p = sub.add_parser("ls", help="list studies with trial counts and state")
    _add_storage(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_lazy("study.commands.studies", "ls"))
    p = sub.add_parser(
        "status", help="per-stratum table: trials, best steps to target, its learning rate"
    )
    p.add_argument("name")
    _add_storage(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_lazy("study.commands.studies", "status"))
    p = sub.add_parser(
        "ui",
        help="start the MLflow UI on the study store (127.0.0.1)",
        description="Start the MLflow UI on the study store, bound to 127.0.0.1, and print the "
        "link that opens each study on its runs; Ctrl-C or SIGTERM stops it. On a tracking "
        "server (--tracking-uri http://...) print the links only.",
    )
    p.add_argument("--port", type=int, default=5000, help="port to serve on (default: 5000)")
    p.add_argument(
        "--tracking-uri", metavar="URL", help="MLflow tracking URI (default: the study store)"
    )
    p.set_defaults(handler=_lazy("study.commands.ui", "main"))


def _add_report(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="fit batch-size-vs-steps curves and export a scaling report",
        description="Analyse a study: steps to result per batch size, McCandlish et al.'s S(B) = S_min (1 + B_noise/B) fit with profile-likelihood intervals, Shallue et al.'s scaling regimes, the best learning rate against batch size, time to result per strategy, and a recommendation for N accelerators. The report is also attached to the study's MLflow parent run.",
    )
    p.add_argument("name", help="a study name (see `study ls`)")
    p.add_argument(
        "--format",
        choices=("html", "md", "csv", "json"),
        action="append",
        help="output format(s) (repeatable; default: all four)",
    )
    p.add_argument("--out", metavar="DIR", help="output directory (default: reports/NAME)")
    p.add_argument(
        "--target",
        help="recompute everything for another target, e.g. 'val_accuracy>=0.7' or 'val/classification_error<0.1'",
    )
    p.add_argument(
        "--accelerators",
        type=int,
        help="recommend a batch size and learning rate for N accelerators (default: the study's largest replica count, at least 8)",
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        metavar="LEVEL",
        help="confidence level of every interval, in (0, 1) (default: 0.95)",
    )
    p.add_argument(
        "--overhead",
        type=float,
        metavar="SHARE",
        help="the critical batch size is where steps run this share above perfect scaling, e.g. 0.1 (default: the study file's overhead, else 0.2)",
    )
    add_target_flags(p)
    p.add_argument(
        "--no-mlflow", action="store_true", help="do not attach the report to the MLflow parent run"
    )
    _add_storage(p, tracking=True)
    p.set_defaults(handler=_lazy("study.commands.report", "main"))
    p = sub.add_parser("export", help="export a study's measurement table as CSV or Parquet")
    p.add_argument("name")
    p.add_argument("--out", required=True, metavar="FILE", help="a .csv or .parquet file")
    _add_storage(p)
    p.set_defaults(handler=_lazy("study.commands.report", "export"))


def _add_probe(sub: Any) -> None:
    p = sub.add_parser(
        "probe",
        help="measure seconds per step per batch size and strategy, for time to result",
        description="Time short runs of a study's workload (no MLflow, not trials) for every "
        "batch size and strategy of the study, several times each; store the median seconds "
        "per step with the study, so `study report` predicts the time to result of each and "
        "says which batch size and strategy minimise wall time.",
    )
    p.add_argument("name", help="a study name (see `study ls`)")
    p.add_argument(
        "--batch-sizes", type=int, nargs="+", metavar="B", help="default: the study's grid"
    )
    p.add_argument("--strategies", nargs="+", metavar="S", help="default: the study's strategies")
    p.add_argument("--steps", type=int, default=100, help="steps per run (default: 100)")
    p.add_argument(
        "--repeats", type=int, default=3, help="runs per batch size and strategy (default: 3)"
    )
    p.add_argument("--json", action="store_true", help="print the measurements as JSON")
    _add_storage(p)
    p.set_defaults(handler=_lazy("study.commands.probe", "main"))


_COMMANDS = (_add_train, _add_noise_scale, _add_run, _add_inspect, _add_report, _add_probe,
             add_ladder)  # fmt: skip


LOG_ENV = "STUDY_LOG"
"""The environment variable that turns on the ``study`` loggers at its level (``debug``)."""


def entry() -> NoReturn:
    """The ``study`` command: `main`, then exit with its status.

    The heap is frozen (`gc.freeze`) as the last thing before the interpreter tears it down:
    with MLflow, Optuna, pandas and SciPy imported, the collector's passes over it at exit take
    about half a second (docs/benchmarks/speed.md). Every other exit handler (MLflow's,
    logging's) has run by then; what is frozen is left to the operating system instead of
    being collected.
    """
    atexit.register(gc.freeze)  # registered first, so run last
    raise SystemExit(main())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status."""
    try:
        parser = build_parser()
    except UsageError as exc:  # STUDY_EXTENSIONS names no extension
        print(f"study: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    if os.environ.get(LOG_ENV):  # e.g. STUDY_LOG=debug: internal measures on stderr
        import logging

        level = os.environ[LOG_ENV].upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            print(f"study: error: {LOG_ENV}={level.lower()}: use debug, info, warning or error",
                  file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
        logging.basicConfig(format="study: %(name)s: %(message)s")
        logging.getLogger("study").setLevel(level)
    if not getattr(args, "handler", None):
        parser.print_help()  # and one line on stderr, exit status 2
        parser.error("give a COMMAND, e.g. `study run --example quickstart`")
    try:
        study_name(getattr(args, "name", None))  # a study name names folders: not "..", "."
        with storage_retry(getattr(args, "storage_retry", None)), storage_access(args):
            return int(args.handler(args) or ExitCode.OK)
    except StorageUnavailable as exc:
        message = str(exc).replace("(storage_retry)", "(--storage-retry SECONDS)")
        print(f"study {args.command}: error: {message}", file=sys.stderr)
        return ExitCode.TEMPFAIL
    except UsageError as exc:
        from study.commands.flags import in_flags  # a field named by its flag

        named = in_flags(exc, workload=getattr(args, "workload", None))
        print(f"study {args.command}: error: {one_line(str(named))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM (`study.runner.stopping`)
        from study.runner.stopping import exit_status

        print(f"study {args.command}: interrupted", file=sys.stderr)
        return exit_status(interrupt)
