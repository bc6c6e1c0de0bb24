"""One run of a study (``study run`` / ``study resume``): wire the collaborators, run, report.

`run_study` opens the ledger and checks the study file against what it holds, splits the
trial budget over the strata, builds the tuner lineup, opens (and repairs) the MLflow tracker,
marks trials of dead processes interrupted, and hands everything to the `StudyEngine`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from study.analysis import descents
from study.config.hold import DEFAULT_HOLD
from study.config.sections import SETTING_KEYS
from study.config.space import CategoricalParam, Stratum
from study.config.study import StudyConfig, TrainingSeeds
from study.config.trial import TrialSettings
from study.deps import require_tensorflow
from study.errors import ExitCode, UsageError
from study.extension import trial_sources
from study.host import environment_info
from study.ledger import Ledger, StudyRecord
from study.paths import masked, tracking_uri
from study.phases import PHASES, Phase
from study.runner import fit_helper, heap
from study.runner.allocator import allocator_class
from study.runner.engine import StudyEngine
from study.runner.failures import FailurePolicy
from study.runner.oracle_process import OracleProcess
from study.runner.pool import WorkerPool
from study.runner.progress import Progress, summarize
from study.tracking.descriptions import question_note
from study.tracking.jobs import CLOSE_WAIT_S, patiently
from study.tracking.mlflow_logger import study_timing_metrics
from study.tracking.mlflow_logger import warm_soon as warm_tracking_store
from study.tracking.server import browse_hint, check_answers
from study.tracking.study_tracker import StudyTracker, study_params
from study.tuners.registry import TUNERS, build_lineup, uses_keras_tuner
from study.version import code_version, require_same_code

LOG = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from study.analysis.answers import Answers

_FINGERPRINT_KEYS = (
    "workload", "workload_options", "model", "target", "budget", "eval_every",
    "optimizer", "schedule", "search_space", "seed",
)  # fmt: skip
#: The trial settings added later (every one `TrialSettings` gains joins them).
_LATER_KEYS = tuple(k for k in SETTING_KEYS if k not in _FINGERPRINT_KEYS)
#: Later settings whose default, written out, is the same study as leaving them out: each but
#: precision and jit_compile, which have counted when written since they came (their studies
#: keep their fingerprint).
_LATER_DEFAULTS = {
    k: getattr(TrialSettings(), k) for k in _LATER_KEYS if k not in ("precision", "jit_compile")
}


#: How long another process may take to store a new study's record, in seconds.
CREATING_SECONDS = 10.0


@dataclass(frozen=True)
class RunOptions:
    """How to run a study (the CLI flags of ``study run``)."""

    tuner: str = "both"
    trials: int | None = None
    workers: int = 1
    storage: str | None = None
    tracking_uri: str | None = None
    live: bool | None = None
    #: Leave after this many trials of this process (``study worker --max-trials``).
    max_trials: int | None = None
    #: Seconds to wait for a database storage that stops answering (``--storage-retry``; None:
    #: the study file's ``storage_retry``, else the ledger's `retry_window`).
    storage_retry: float | None = None

    def __post_init__(self) -> None:
        if self.tuner not in TUNERS:
            raise UsageError(
                f"--tuner: unknown tuner {self.tuner!r}; choose from {', '.join(TUNERS)}"
            )
        if self.trials is not None and self.trials < 1:
            raise UsageError(f"--trials must be >= 1 (got {self.trials})")
        if self.workers < 1:
            raise UsageError(f"--workers must be >= 1 (got {self.workers})")
        if self.max_trials is not None and self.max_trials < 1:
            raise UsageError(f"--max-trials must be >= 1 (got {self.max_trials})")


def fingerprint(config: StudyConfig) -> str:
    """A hash of what defines a study's trials (not its budget or tuner settings)."""
    raw = {k: config.raw.get(k) for k in _FINGERPRINT_KEYS}
    # Settings added later count only when given, so older studies keep their fingerprint (and
    # a default written out is the same study as one left out).
    raw.update(
        {
            k: config.raw[k]
            for k in _LATER_KEYS
            if config.raw.get(k) is not None and config.raw[k] != _LATER_DEFAULTS.get(k, ...)
        }
    )
    if config.training_seeds is not TrainingSeeds.PER_TRIAL:
        raw["training_seeds"] = config.training_seeds.value
    if config.target.hold != DEFAULT_HOLD:
        raw["target_hold"] = config.target.hold.to_param()
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _retry(config: StudyConfig, options: RunOptions) -> float | None:
    """The storage's retry window: ``--storage-retry``, else the study file's."""
    return options.storage_retry if options.storage_retry is not None else config.storage_retry


def visiting_order(config: StudyConfig) -> list[Stratum]:
    """Strata by strategy, then largest batch size first (so transfer can seed smaller ones)."""
    return [
        Stratum(b, s)
        for s in config.space.strategies
        for b in sorted(config.space.batch_sizes, reverse=True)
    ]


def budgets(strata: list[Stratum], total: int) -> dict[Stratum, int]:
    """Split ``total`` trials over strata as evenly as possible (earlier strata get the extra)."""
    base, extra = divmod(total, len(strata))
    return {s: base + (1 if i < extra else 0) for i, s in enumerate(strata)}


def open_study(config: StudyConfig, options: RunOptions) -> tuple[Ledger, StudyRecord]:
    """The study's ledger, created from ``config`` if new.

    Raises:
        UsageError: a study of that name with other trials (workload, target, ...) exists, or
            it was created by other code (`study.version.require_same_code`).
    """
    ledger = Ledger.open(options.storage, config.name, retry=_retry(config, options))
    record = ledger.create(
        StudyRecord(
            name=config.name,
            config_text=config.text,
            config_source=str(config.source),
            fingerprint=fingerprint(config),
            hold=config.target.hold.to_param(),
            prune_slack=config.prune_slack,
            tuner=options.tuner,
            trials_total=options.trials or config.total_trials,
            created=time.time(),
            code_version=code_version(),
        )
    )
    record = _written(ledger, record)
    require_same_code(config.name, record.code_version)
    if record.fingerprint != fingerprint(config):
        raise UsageError(
            f"study {config.name!r} already exists in this storage with a different "
            "workload, target, budget or search space; give the study a new name or use "
            "another --storage"
        )
    if options.trials and options.trials != record.trials_total:
        ledger.set_trials_total(options.trials)
    return ledger, record


def _written(ledger: Ledger, record: StudyRecord) -> StudyRecord:
    """The study's record once the process creating it (maybe another host, at the same
    moment) has stored every field: fields are stored one by one, so a record created less
    than `CREATING_SECONDS` ago without its fingerprint or code version is read again."""
    deadline = time.monotonic() + CREATING_SECONDS
    while (
        not record.imported
        and (record.fingerprint is None or record.code_version is None)
        and (record.created is None or time.time() - record.created < CREATING_SECONDS)
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
        record = ledger.record() or record
    return record


def preflight(config: StudyConfig, pool: WorkerPool) -> None:
    """Load the data and build the model of the study's first trial in a worker, untrained;
    then start the pool's other workers on it in the background (`WorkerPool.prestart`).

    What only the trainer can see fails here, before the ledger or MLflow record anything: a
    target the user's compiled model does not report, a file that does not parse, labels that
    do not suit the task, a model that fails to build.

    Raises:
        UsageError: ``FILE: target: unknown metric 'val_top5'; ...`` and the like.
    """
    stratum = visiting_order(config)[0]
    param = config.space.param("learning_rate")
    rate = param.choices[0] if isinstance(param, CategoricalParam) else param.low
    spec = config.trial_spec(stratum, {"learning_rate": rate})
    problem = pool.check(spec)
    for source in trial_sources(config):  # an extension's trials (schedule trials, ...)
        if problem is None and source.check is not None:
            problem = pool.check(source.check)
    if problem is not None:
        raise UsageError(f"{config.source}: {problem}")
    pool.prestart(spec)  # with --workers N, the others start while the run sets up


def run_study(config: StudyConfig, options: RunOptions) -> int:
    """Run (or continue) a study to completion or interruption; return the exit status."""
    require_tensorflow()
    uri = tracking_uri(options.tracking_uri)
    # Before the ledger records anything: a dead tracking server fails here in seconds.
    check_answers(uri, "--tracking-uri" if options.tracking_uri else "MLFLOW_TRACKING_URI")
    # Before the slow preflight: a study made by other code is refused at once.
    existing = Ledger.open(
        options.storage, config.name, create=False, retry=_retry(config, options)
    ).record()
    if existing is not None:
        require_same_code(config.name, existing.code_version)
    descents.warm_soon()  # the fits' compiled likelihood, while the trainer's server starts
    warm_tracking_store(uri)  # MLflow's SQL store, imported meanwhile
    # KerasTuner's oracle in a process of its own (the host never imports TensorFlow), started
    # now: its import of KerasTuner overlaps the preflight instead of the first trials.
    oracle = OracleProcess(config) if uses_keras_tuner(options.tuner) else None
    try:
        if oracle is not None:
            oracle.warm()
        with WorkerPool(options.workers) as pool:
            preflight(config, pool)
            heap.settle()  # the start's objects frozen, the collector on again
            with fit_helper.installed(options.workers):  # half of each fit on the idle core
                return _run(config, options, uri, pool, oracle)
    finally:
        if oracle is not None:
            oracle.close()


def _run(
    config: StudyConfig,
    options: RunOptions,
    uri: str,
    pool: WorkerPool,
    oracle: OracleProcess | None = None,
) -> int:
    rounds = allocator_class(config)  # before the ledger records anything
    ledger, record = open_study(config, options)
    order = visiting_order(config)
    total = options.trials or record.trials_total or config.total_trials
    warning = thin_budget_warning(config, total)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    plan = budgets(order, total)
    allocator = None
    if rounds is not None:  # a mode of an extension: the trials in rounds
        allocator = rounds(config, ledger, total, say=lambda line: print(line, flush=True))
        plan = allocator.start(pool)
        order = list(plan)
    with ledger.recent():  # the set-up reads each stratum once (the tuners, repair, progress)
        made = OracleProcess if oracle is None else lambda _config: oracle
        lineup = build_lineup(options.tuner, config, ledger, oracle=made)
        lineup.warm()  # an oracle not started yet starts while the set-up and first trials run
        try:
            # A tracking server that goes away while the run starts is waited for, like the storage.
            tracker = patiently(lambda: StudyTracker(uri, config.name), masked(uri), uri)
            patiently(
                lambda: tracker.ensure_parent(
                    study_params(
                        config, tuner=options.tuner, trials_total=total, strata=len(order)
                    ),
                    {
                        "study.yaml": config.text,
                        "environment.json": json.dumps(environment_info(), indent=2),
                    },
                    note=question_note(config, tuner=options.tuner, trials_total=total),
                ),
                masked(uri),
                uri,
            )
            if allocator is not None:
                allocator.follow(tracker)
            stale = ledger.liveness.recover_stale(order)
            patiently(lambda: tracker.repair(ledger, config, order), masked(uri), uri)
            progress = Progress.from_ledger(ledger, plan, config.name, options.live)
        except BaseException:
            # A set-up that fails (a damaged store, Ctrl-C) ends the oracle process the warm-up
            # may have started: left to the interpreter's exit, it could outlive the run.
            lineup.close()
            raise
    if stale:
        print(f"marked {len(stale)} interrupted trial(s) failed; their slots run again", flush=True)
    engine = StudyEngine(
        config,
        ledger,
        lineup,
        tracker,
        pool,
        plan,
        progress,
        FailurePolicy(config.tuner.max_consecutive_failures),
        max_trials=options.max_trials,
        allocator=allocator,
    )
    tracker.follow(ledger, config, lambda: engine.strata)  # catch up when a server is back
    finished = False  # the search is done (it stays done: nothing reopens a spent budget)
    try:
        status = engine.run(options.workers)
        finished = status == 0 and engine.complete()
        for source in trial_sources(config) if finished else ():  # schedule trials, ...
            status = source.run(ledger, tracker, pool, workers=options.workers, live=options.live)
            if status != 0:
                break
    finally:
        pool.close()
        lineup.close()
    if engine.failures.message:
        print(f"study {config.name}: stopped: {engine.failures.message}", file=sys.stderr)
    if status in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
        # Stopped by Ctrl-C or SIGTERM while other workers go on: the study's run stays open.
        run_status = None if engine.others_running() else "KILLED"
    else:
        run_status = ("FINISHED" if finished else None) if status == 0 else "FAILED"
    if run_status:
        summary = _summary_metrics(progress, config.space.strategies)
        with ledger.recent():  # the strata as `complete` just read them
            summary.update(study_timing_metrics(ledger.summary().timings))
            with PHASES.timing(Phase.ANSWER):
                answers = _answers(ledger, config)
        if answers is not None:
            summary.update(answers.to_metrics())
        tracker.describe_answer(_answer_text(answers, config.name))
        tracker.end_parent(run_status, summary)
    # A run that ends while the tracking server is away waits a little for it (not when stopped).
    with PHASES.timing(Phase.MLFLOW_CLOSE):
        tracker.close(CLOSE_WAIT_S if status == 0 else 0.0)
    if not progress.display.live:  # the live table already shows it
        print(summarize(progress.state.strata))
    seconds = sum(engine.trial_seconds)
    if seconds:  # an internal measure: the debug log, not the terminal
        LOG.debug(
            "MLflow logging (background thread): %.2f s wall, %.2f s CPU = %.1f%% of %.1f s of "
            "trials",
            tracker.busy_seconds,
            tracker.cpu_seconds,
            100 * tracker.cpu_seconds / seconds,
            seconds,
        )
    mlflow = {"busy": tracker.busy_seconds, "cpu": tracker.cpu_seconds}
    LOG.debug("wall breakdown: %s", json.dumps({**PHASES.snapshot(), "mlflow": mlflow}))
    hint = browse_hint(uri, tracker.experiment_id, uri_option=options.tracking_uri)
    print(f"MLflow runs of {config.name}: {hint}")
    return status


def thin_budget_warning(config: StudyConfig, total: int) -> str:
    """A warning when a study of ``total`` trials cannot give the model of every trial what it
    needs to answer ("" when it can)."""
    from study.analysis.fitting import MIN_BATCH_SIZES
    from study.analysis.likelihood import MIN_TRIALS

    sizes = len(config.space.batch_sizes)
    short = []
    if total < MIN_TRIALS:
        short.append(f"{total} trials planned, it needs at least {MIN_TRIALS}")
    if sizes < MIN_BATCH_SIZES:
        short.append(f"{sizes} batch size(s), it needs at least {MIN_BATCH_SIZES}")
    if not short:
        return ""
    return (
        f"study {config.name}: warning: the model of every trial will have no answer "
        f"({'; '.join(short)}); raise trials_per_stratum or add batch sizes in "
        f"{config.source}"
    )


def _answers(ledger: Ledger, config: StudyConfig) -> Answers | None:
    """The answers of the model of every trial (`stored_answers`, as ``study status`` reads
    them), printed in one line; None (and a warning) when they cannot be read: the study's
    records are never at stake here."""
    from study.report.stored import stored_answers

    try:
        answers = stored_answers(ledger)
    except Exception as exc:  # the analysis must not fail a finished study
        print(f"study {config.name}: could not read the answers: {exc}", file=sys.stderr)
        return None
    if answers is None:
        return None
    from study.report.answer_prose import answer_line

    print(f"answer: {answer_line(answers)}", flush=True)  # as `study status` and the report
    return answers


def _answer_text(answers: Answers | None, study: str) -> str:
    """The answer for the parent run's description: the terminal's answer line, and how to
    write the report."""
    from study.report.answer_prose import answer_line

    if answers is None:
        return f"No answer: no trial of the study has finished. Report: `study report {study}`."
    return f"{answer_line(answers)}. Report: `study report {study}` attaches it here."


def _summary_metrics(
    progress: Progress, strategies: tuple[str, ...]
) -> dict[str, float | dict[int, float]]:
    """The parent run's metrics: best steps to target and its learning rate by batch size (the
    step), one key per strategy when there are several, and the finished trials (the study's
    timing totals are added from the ledger: `study_timing_metrics`)."""
    out: dict[str, float | dict[int, float]] = {"trials_done": progress.state.done}
    for strategy in strategies:
        suffix = f"/{strategy.replace(':', '_')}" if len(strategies) > 1 else ""
        best = {
            s.batch_size: p
            for s, p in progress.state.strata.items()
            if s.strategy == strategy and math.isfinite(p.best_steps)
        }
        if best:
            out[f"best_steps{suffix}"] = {b: p.best_steps for b, p in best.items()}
            out[f"best_learning_rate{suffix}"] = {
                b: p.best_lr for b, p in best.items() if p.best_lr is not None
            }
    return out
