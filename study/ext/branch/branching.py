"""``study branch FILE``: the reference run, its branches, and CBS(t) from them.

1. The first process to open the study's branches (`BranchLedger.begin`) trains the reference
   run at ``B0`` in a trainer worker (`study.ext.branch.trainer.run_reference`), stores each
   checkpoint as an artifact of the reference's MLflow run (the study's shared artifact store),
   writes the reference's record to the ledger and enqueues every branch: per checkpoint,
   batch size (``B0`` and ``k x B0``), replicate and rate factor. Other processes wait for the
   record.
2. Every process (``--workers N`` threads each, on any host sharing the storage and the
   tracking server) claims branches from the ledger, loads the checkpoint from the artifact
   store, trains the branch in a worker (`run_branch`), records it in the ledger and logs it
   to MLflow as a run nested under the reference run.
3. When no branch is left, CBS(t) is read off the ledger (`study.ext.branch.cbs`) and logged to
   the reference run.

The learning rate: the reference trains at ``branch.learning_rate`` (default: the best rate
the study found at ``B0``). A branch at batch ``B`` trains at ``lr0 (B / B0) ** alpha``, with
``alpha`` the study's fitted exponent (``lr_rule: fit``) or, when the study has no fit or
``lr_rule: search``, ``branch.alpha`` times each of ``search_factors`` (the best counts).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from study.config.space import Stratum
from study.config.study import StudyConfig
from study.config.trial import PILOT_NOISE_EVERY, Budget
from study.errors import UsageError
from study.ext.branch.defaults import StudyEvidence
from study.ext.branch.jobs import BranchJob, ReferenceJob
from study.ext.branch.ledger import BranchLedger
from study.ext.branch.plan import BranchPlan, branch_tasks, plan_branches, stored_plan
from study.ext.branch.rounds import more_replicates
from study.ext.branch.section import branch_of
from study.ext.branch.tracking import BranchTracker
from study.paths import tracking_uri
from study.runner.pool import WorkerPool

__all__ = ["BranchOptions", "BranchPlan", "plan_branches", "run_branches", "stored_plan"]

REFERENCE = "reference"
PLAN = "plan"
WAIT_POLL_S = 1.0


@dataclass(frozen=True)
class BranchOptions:
    """How to run branch trials (the flags of ``study branch``)."""

    storage: str | None = None
    tracking_uri: str | None = None
    workers: int = 1
    restart: bool = False
    #: Leave after this many branches of this process (None: until none is waiting; 0: train
    #: the reference, or wait for it, and leave the branches to other processes).
    max_branches: int | None = None
    #: How long a process that did not train the reference waits for it, in seconds.
    wait_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise UsageError(f"--workers must be >= 1 (got {self.workers})")
        if self.max_branches is not None and self.max_branches < 0:
            raise UsageError(f"--max-branches must be >= 0 (got {self.max_branches})")


def run_branches(
    config: StudyConfig,
    options: BranchOptions,
    *,
    fitted_alpha: float | None = None,
    best_rate: float | None = None,
    evidence: StudyEvidence | None = None,
    say: Callable[[str], None] = print,
) -> tuple[BranchPlan, dict[str, Any]]:
    """Run (or join, or finish) the study's branch trials; the plan and the reference's record.

    Raises:
        UsageError: bad section (`plan_branches`), a reference run that failed, a checkpoint
            missing from the artifact store.
    """
    plan = plan_branches(config, fitted_alpha=fitted_alpha, best_rate=best_rate, evidence=evidence)
    ledger = BranchLedger.open(options.storage, config.name, retry=config.storage_retry)
    if options.restart:
        ledger.delete()
    tracker = BranchTracker(tracking_uri(options.tracking_uri), config.name)
    with WorkerPool(options.workers) as pool:
        if ledger.begin():
            ledger.set_note(PLAN, plan.to_dict())
            for line in plan.derived:
                say(f"study branch: from the finished study: {line}")
            points = ", ".join(map(str, plan.checkpoints))
            on = " (on until it meets the target)" if plan.until_examples else ""
            say(
                f"study branch: reference run at batch {plan.b0}, lr {plan.learning_rate:.4g}, "
                f"{plan.examples:,} examples{on}, checkpoints at {points}"
            )
            reference = _reference(config, plan, pool, tracker)
            ledger.set_note(REFERENCE, reference)
            if reference.get("error"):
                raise UsageError(f"the reference run failed: {reference['error']}")
            ledger.enqueue(branch_tasks(plan, reference, config.settings.seed))
        reference = _wait_reference(ledger, options.wait_s)
        plan = stored_plan(ledger.note(PLAN))
        say(f"study branch: learning rates: {plan.why}")
        _work(config, ledger, tracker, pool, reference, options, say)
        while options.max_branches is None and not ledger.waiting() and not ledger.running():
            added = more_replicates(config, ledger, plan, reference)
            if not added:
                break
            say(f"study branch: {added} more branches where CBS's interval is wider than "
                f"x{plan.resolve:g}")  # fmt: skip
            _work(config, ledger, tracker, pool, reference, options, say)
    return plan, reference


def _reference(
    config: StudyConfig, plan: BranchPlan, pool: WorkerPool, tracker: BranchTracker
) -> dict[str, Any]:
    """Train the reference, store its checkpoints; its record (JSON) for the ledger. It trains
    one window past its last checkpoint (or to the plan's examples, when further), so that the window after every checkpoint lies on its
    curve (the progress the tolerance is a share of, `reference_progress`)."""
    end = max(plan.checkpoints[-1] + plan.window, plan.examples) // plan.b0
    settings = dataclasses.replace(
        config.settings,
        budget=Budget(max_steps=max(end, (plan.until_examples or 0) // plan.b0)),
        noise_scale=True,
        noise_every=PILOT_NOISE_EVERY,  # one run: measure B_simple(t) as tightly as a pilot
        exact_steps=False,
    )
    spec = config.trial_spec(Stratum(plan.b0, plan.strategy), {"learning_rate": plan.learning_rate})
    spec = dataclasses.replace(spec, settings=settings)
    run_id = tracker.start_reference(
        {
            "batch_size": plan.b0,
            "learning_rate": plan.learning_rate,
            "examples": plan.examples,
            "window": plan.window,
            "lr_rule": plan.rule,
            "alpha": plan.alpha,
        }
    )
    steps = tuple(e // plan.b0 for e in plan.checkpoints)
    until = plan.until_examples // plan.b0 if plan.until_examples else None
    outcome = pool.run_job(ReferenceJob(spec, steps, end, until, recalibrate=plan.recalibrate))
    end = max([end, *(int(row["step"]) for row in outcome.curve)])  # on to the target
    checkpoints = []
    for c in outcome.checkpoints:
        artifact = tracker.store_checkpoint(run_id, c.index, c.blob)
        checkpoints.append(
            {
                "index": c.index,
                "step": c.step,
                "examples": c.examples,
                "artifact": artifact,
                "train_loss": c.train_loss,
                **dict(c.metrics),
                **{k: v for k, v in c.noise.items() if k.startswith("b_simple")},
            }
        )
    to_target = outcome.steps_to_target
    tracker.log_reference(run_id, list(outcome.curve), "FAILED" if outcome.error else "FINISHED")
    return {
        "run_id": run_id,
        "batch_size": plan.b0,
        "learning_rate": plan.learning_rate,
        "steps": end,
        "examples": end * plan.b0,
        "steps_to_target": to_target,
        "examples_to_target": to_target * plan.b0 if to_target is not None else None,
        "train_seconds": outcome.train_seconds,
        "checkpoints": checkpoints,
        "curve": list(outcome.curve),
        "error": outcome.error,
    }


def _wait_reference(ledger: BranchLedger, wait_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    while True:
        reference = ledger.note(REFERENCE)
        if reference is not None:
            if reference.get("error"):
                raise UsageError(f"the reference run failed: {reference['error']}")
            return reference
        if time.monotonic() > deadline:
            raise UsageError(f"no reference run was stored within {wait_s:.0f} s")
        time.sleep(WAIT_POLL_S)


def _work(
    config: StudyConfig,
    ledger: BranchLedger,
    tracker: BranchTracker,
    pool: WorkerPool,
    reference: dict[str, Any],
    options: BranchOptions,
    say: Callable[[str], None],
) -> None:
    """Claim and run branches from ``options.workers`` threads until none is waiting (or
    ``options.max_branches`` of them ran)."""
    blobs: dict[str, bytes] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []
    left = [math.inf if options.max_branches is None else options.max_branches]

    def take() -> tuple[Any, dict[str, Any]] | None:
        with lock:
            if left[0] <= 0:
                return None
            left[0] -= 1
        return ledger.claim()

    def blob(artifact: str) -> bytes:
        with lock:
            if artifact not in blobs:
                blobs[artifact] = tracker.load_checkpoint(reference["run_id"], artifact)
            return blobs[artifact]

    def loop() -> None:
        try:
            while (claimed := take()) is not None:
                trial, task = claimed
                done = threading.Event()
                stamps = threading.Thread(target=_stamp, args=(ledger, trial, done), daemon=True)
                stamps.start()
                try:
                    outcome = _one(config, task, blob(task["artifact"]), pool)
                except BaseException as exc:
                    ledger.fail(trial, str(exc))
                    raise
                finally:
                    done.set()
                if outcome.get("error"):
                    ledger.fail(trial, outcome["error"])
                else:
                    ledger.finish(trial, outcome, outcome["val_loss"])
                tracker.log_branch(reference["run_id"], task, outcome)
                say(
                    f"study branch: checkpoint {task['checkpoint']} batch {task['batch_size']} "
                    f"replicate {task['replicate']}: val_loss {outcome.get('val_loss', math.nan):.4f}"
                )
        except BaseException as exc:  # one line for the command; the others stop at their next
            errors.append(exc)

    recovered = ledger.recover()
    if recovered:
        say(f"study branch: {recovered} branches of processes that died queued again")
    if ledger.waiting() and options.max_branches != 0:
        for checkpoint in reference["checkpoints"]:  # a missing one fails before any claim
            blob(checkpoint["artifact"])
    threads = [threading.Thread(target=loop, daemon=True) for _ in range(options.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _stamp(ledger: BranchLedger, trial: Any, done: threading.Event) -> None:
    """Renew a running branch's stamp until it is done (so no peer takes it for dead)."""
    from study.ext.branch.ledger import GRACE_S

    while not done.wait(GRACE_S / 4):
        ledger.beat(trial)


def _one(config: StudyConfig, task: dict[str, Any], blob: bytes, pool: WorkerPool) -> dict:
    strategy = config.space.strategies[0]
    spec = config.trial_spec(
        Stratum(branch_of(config).batch_size or min(config.space.batch_sizes), strategy),
        {"learning_rate": task["learning_rate"]},
        seed=int(task["seed"]),
    )
    optimizer = dataclasses.replace(spec.optimizer, learning_rate=float(task["learning_rate"]))
    settings = dataclasses.replace(
        spec.settings, noise_scale=False, budget=Budget(max_steps=task["steps"])
    )
    spec = dataclasses.replace(
        spec, batch_size=int(task["batch_size"]), optimizer=optimizer, settings=settings
    )
    job = BranchJob(
        spec,
        int(task["steps"]),
        blob,
        evaluations=int(task.get("evaluations", 1)),
        recalibrate=bool(task.get("recalibrate", False)),
    )
    outcome = pool.run_job(job)
    metric = config.target.metric
    return {
        "val_loss": float(outcome.metrics.get("val_loss", math.nan)),
        "metric": float(outcome.metrics.get(metric, math.nan)),
        "train_loss": outcome.train_loss,
        "steps": outcome.steps,
        "train_seconds": outcome.train_seconds,
        "error": outcome.error,
    }
