"""The study engine: the loop that claims ledger slots, asks a tuner, trains and records.

Design (Shallue et al.): each (batch size, strategy) is a stratum with its own budget of trials;
inside a stratum the tuners search the learning rate and other metaparameters to minimise steps
to the target. Strata are visited in the order given (largest batch first), so their best
learning rates can centre the next batch size's search (`study.tuners.history.read_history`
reads what a proposal is made from before every trial). With transfer on, strata are visited
twice: half their search budget each, then the rest (`first_pass`), so the second half of every
stratum, the first-visited ones too, is centred on what all the others found. With ``tuner.confirm`` a stratum's last
slots re-run its best points under other seeds: those trials are never pruned.

The engine only sequences; its collaborators do the work and are injected (`launch` wires
them): the `Ledger` (claims and records), the tuner `Lineup` (who proposes), the trainer
`WorkerPool`, the MLflow tracker, `Pruning`, the `FailurePolicy` and the `Progress`.
Crash safety: the ledger is written before MLflow; a trial stopped by Ctrl-C or SIGTERM is
closed as ``interrupted`` and its slot runs again.

Many processes, many hosts: every process running this loop on one storage is a worker of the
study. While a trial runs, a heartbeat thread stamps it every ``heartbeat.interval`` seconds
(`Liveness.beat`). A worker that finds nothing left to claim while other trials are still open
waits for them rather than leaving (`fleet.wait_for_others`: looks 2, 4, 8 ... s apart, up to a
quarter of the grace): it closes those whose owner died (on another host: no stamp for
``heartbeat.grace`` seconds) as ``interrupted`` with their MLflow runs
(`Liveness.recover_stale`), and claims the slots that frees. It leaves when every stratum's
budget is spent and no trial is open anywhere, or after ``max_trials`` trials of its own.

Allocation in rounds (a mode other than even, from an extension: `study.runner.allocator`):
when every stratum's budget is spent and no trial is open, the `Allocator` opens its next round
(more trials for some strata, maybe a new one) and the loop goes on; it leaves once the
allocator has no round left. An allocator that `decides_in_flight` is asked while this
process's trials run, and one that is `exhausted` (its own budget, such as training steps, is
spent) stops the claims and takes the untaken slots back.

Timing: a trial's wall time runs from handing it to the tuner backend (which hands the spec to
a worker) to the end of recording it (ledger, tuner, tracker). `account` adds it to the
trainer's parts as ``wall``, with ``bookkeeping`` the remainder. The ledger's copy is taken just
before the ledger write (a record cannot hold its own writing time); MLflow's copy is taken
after everything and so also counts the ledger write and the tuner's report.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import traceback
from collections.abc import Mapping, Sequence

from study.analysis.threads import one_blas_thread_everywhere
from study.config.space import Stratum
from study.config.study import StudyConfig
from study.config.trial import Budget, TrialSpec, default_of
from study.errors import StorageUnavailable, StoreDamaged
from study.ledger import Ledger, LedgerTrial, Slot
from study.ledger.records import SEED
from study.phases import PHASES, Mark, Phase
from study.results import WALL, TrialResult, TrialState
from study.runner import fleet
from study.runner.allocator import Allocator
from study.runner.claim_order import bound_anywhere, first_pass, running_in
from study.runner.failures import FailurePolicy
from study.runner.pool import WorkerPool
from study.runner.progress import Progress, StratumProgress
from study.runner.pruning import Pruning, trial_hook, unbounded_cap
from study.runner.stopping import exit_status
from study.runner.timings import timed
from study.tracking.study_tracker import StudyTracker
from study.tuners import fit_ahead
from study.tuners.base import Outcome, Proposal
from study.tuners.history import read_history
from study.tuners.objective import explain, score
from study.tuners.registry import Lineup

#: The step limit assumed for scoring when a budget has no step or example limit (`Budget`'s).
DEFAULT_STEP_LIMIT: int = default_of(Budget, "max_steps")


class StudyEngine:
    """Runs a study's trials until every stratum's budget is spent, or the study stops."""

    def __init__(
        self,
        config: StudyConfig,
        ledger: Ledger,
        lineup: Lineup,
        tracker: StudyTracker,
        pool: WorkerPool,
        budgets: Mapping[Stratum, int],
        progress: Progress,
        failures: FailurePolicy,
        *,
        max_trials: int | None = None,
        allocator: Allocator | None = None,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.lineup = lineup
        self.tracker = tracker
        self.pool = pool
        self.budgets = dict(budgets)
        self.progress = progress
        self.failures = failures
        self.pruning = Pruning(ledger, slack=config.prune_slack) if config.tuner.pruning else None
        self.unbounded_cap = unbounded_cap(config)
        self.max_trials = max_trials
        self.heartbeat = config.heartbeat
        self.trial_seconds: list[float] = []
        #: Trials of other processes this one closed as interrupted (their owner died).
        self.recovered: list[LedgerTrial] = []
        self._stop = threading.Event()
        self._claim_lock = threading.Lock()
        self._full: set[Stratum] = set()
        self._bounded = False  # a trial of the study reached the target (`_claim`)
        self._claimed = 0
        self._active: dict[tuple[Stratum, int], Slot] = {}
        self._active_lock = threading.Condition()
        #: How many of this process's trials ended (`_in_flight_round` waits for the next).
        self._ended = 0
        #: Allocation in rounds: when every budget is spent, it opens the next round.
        self.allocator = allocator
        #: The storage stayed away past its retry window (`study.ledger.retry`): `run` raises it.
        self.storage_lost: StorageUnavailable | StoreDamaged | None = None
        self._round_lock = threading.Lock()
        #: Per worker thread: its seconds inside trials (the rest of its time is decisions).
        self._local = threading.local()

    @property
    def strata(self) -> list[Stratum]:
        """The strata in visiting order."""
        return list(self.budgets)

    # -- the run ------------------------------------------------------------------------------
    def run(self, workers: int = 1) -> int:
        """Run ``workers`` trials at a time until done; 0, 1 (stopped by the failure policy),
        130 (Ctrl-C) or 143 (SIGTERM, see `study.runner.stopping`).

        Raises:
            StorageUnavailable: the storage stayed away past its retry window; the trials
                that were running stay open in it and run again on resume."""
        # Each thread sets its own event as it ends: after a Ctrl-C has interrupted a
        # `Thread.join`, Python 3.11 reports the thread ended while it still records its trial.
        ended = [threading.Event() for _ in range(workers)]
        loop, name = self._guarded_loop, "study-worker-{}"
        threads = [
            threading.Thread(target=loop, args=(e,), name=name.format(i), daemon=True)
            for i, e in enumerate(ended)
        ]
        beating = threading.Event()
        beat = (self.ledger, self._running, self.heartbeat, beating)
        threading.Thread(
            target=fleet.beat_loop, args=beat, name="study-heartbeat", daemon=True
        ).start()
        status = 0
        try:  # the fits of worker and background threads on one BLAS thread (see threads)
            with one_blas_thread_everywhere(), self.progress.display:
                for t in threads:
                    t.start()
                while not all(e.wait(timeout=0.5) for e in ended):
                    self.progress.display.refresh()
        except KeyboardInterrupt as interrupt:
            self._stop.set()
            self.pool.close()
            for e in ended:  # each records its stopped trial, in the ledger and for MLflow
                e.wait(timeout=30)
            status = exit_status(interrupt)
        finally:
            beating.set()
            PHASES.mark(Mark.ENGINE_END)
        if self.storage_lost is not None:
            raise self.storage_lost
        return 1 if status == 0 and self.failures.message else status

    def others_running(self) -> bool:
        """Whether a live process other than this one still runs a trial of the study."""
        return fleet.others_running(self.ledger, self.strata)

    def complete(self) -> bool:
        """Whether every stratum's budget is spent and no live process still runs a trial."""
        return fleet.complete(self.ledger, self.budgets)

    def _guarded_loop(self, ended: threading.Event) -> None:
        started, self._local.trials = time.perf_counter(), 0.0
        try:
            self._loop()
        finally:  # this thread's time outside trials: claims, rounds, proposals, recording
            spent = time.perf_counter() - started - self._local.trials
            PHASES.add(Phase.DECISIONS, spent, count=0)
            ended.set()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                seen = self._ended
                slot = self._claim()
                if slot is None:
                    if self._limit_reached():
                        return
                    if self._in_flight_round(seen) or self._wait_for_others() or self._next_round():
                        continue
                    return
                try:
                    with self.ledger.recent():  # its set-up reads each stratum about once
                        self._run_slot(slot)
                except (StorageUnavailable, StoreDamaged):
                    raise  # nothing can be recorded: the slot runs again on resume
                except Exception:
                    self._fail_slot(slot, traceback.format_exc())
                finally:
                    with self._active_lock:
                        self._active.pop((slot.stratum, slot.number), None)
                        self._ended += 1
                        self._active_lock.notify_all()
        except (StorageUnavailable, StoreDamaged) as lost:  # one line at the end of the run
            self.storage_lost = lost
            self._stop.set()
        except Exception as exc:
            self.failures.stop(f"internal error: {type(exc).__name__}: {exc}")
            traceback.print_exc()
            self._stop.set()

    def _claim(self) -> Slot | None:
        """The next slot, in `study.runner.claim_order`'s order (registered as running), after
        waiting for this process's running trial while nothing bounds a new one. None once
        this process ran ``max_trials``, and once the allocator is exhausted (by steps: the
        study's steps are spent; its untaken slots are then taken back: `Allocator.close`)."""
        if self.allocator is not None and self.allocator.exhausted():
            with self._round_lock:
                self._grow(self.allocator.close())
            return None
        while True:
            seen = self._ended
            with self._claim_lock, self.ledger.recent():  # each stratum read about once
                if self._bounded or not self.pruning or not self._running():
                    return self._claim_next()
                self._bounded = bound_anywhere(self.ledger, self.strata)
                if self._bounded:
                    return self._claim_next()
            self._wait_for_end(seen)
            if self._stop.is_set():
                return None

    def _claim_next(self) -> Slot | None:
        pending = []  # strata with a trial running: after the others
        for first in (True, False, None):
            for stratum in self.strata if first is not None else pending:
                if stratum in self._full or self._stop.is_set() or self._limit_reached():
                    continue
                budget = self.budgets[stratum]
                counted = self.ledger.taken(stratum, budget)
                if first and counted >= first_pass(self.config, budget):
                    continue
                if first is not None and running_in(self.ledger, stratum):
                    pending.append(stratum)
                    continue
                slot = None
                if counted < budget:
                    slot = self.ledger.claim(stratum, budget, grace=self.heartbeat.grace)
                if slot is None:
                    self._full.add(stratum)
                    continue
                self._claimed += 1
                with self._active_lock:
                    self._active[(slot.stratum, slot.number)] = slot
                return slot
        return None

    def _wait_for_end(self, seen: int) -> None:
        """Wait until another of this process's trials ends (``seen``: how many had ended), none
        runs, or the run stops (at most a heartbeat's interval)."""
        with self._active_lock:
            self._active_lock.wait_for(
                lambda: self._ended != seen or not self._active or self._stop.is_set(),
                timeout=self.heartbeat.interval,
            )

    def _limit_reached(self) -> bool:
        return self.max_trials is not None and self._claimed >= self.max_trials

    def _wait_for_others(self) -> bool:
        """With every budget taken: wait while trials are still open anywhere, close those
        whose owner died (`recover`) and say whether to look for a slot again (False: nothing
        is open, the study's budget is spent). See `fleet.wait_for_others`."""
        if not fleet.wait_for_others(
            self.ledger, self.strata, self.heartbeat, self._stop, self.recover
        ):
            return False
        with self._claim_lock:
            self._full.clear()
        return True

    def _running(self) -> list[Slot]:
        """This process's running trials."""
        with self._active_lock:
            return list(self._active.values())

    def _in_flight_round(self, seen: int) -> bool:
        """An allocator that decides in flight (by steps), while this process's other trials
        run: the next round now, from the trials finished so far, so every worker trains while
        the model decides; with nothing to give yet, wait until another of this process's
        trials ends (``seen``: how many had ended). False when none runs."""
        if self.allocator is None or not self.allocator.decides_in_flight or not self._running():
            return False
        if self._next_round(in_flight=True):
            return True
        self._wait_for_end(seen)
        return True

    def _next_round(self, *, in_flight: bool = False) -> bool:
        """With every budget spent and nothing open (or, ``in_flight``, only this process's
        trials): the allocator's next round; whether there is one (or, a trial of this process
        claimed since the caller looked, to look again). Another thread may have opened it."""
        if self.allocator is None or self._stop.is_set():
            return False
        with self._round_lock:
            if not any(len(self.ledger.counted(s)) < budget for s, budget in self.budgets.items()):
                with self._claim_lock:  # a trial claimed since the caller looked is in flight
                    running = self.allocator.decides_in_flight and bool(self._running())
                    budgets = self.allocator.next_round(in_flight=in_flight or running)
                if budgets is None:
                    return running and not in_flight
                self._grow(budgets)
            with self._claim_lock:
                self._full.clear()
        return True

    def _grow(self, budgets: Mapping[Stratum, int]) -> None:
        """Take the allocator's new budgets (new strata visited after the others; smaller ones
        when an exhausted allocation took untaken slots back)."""
        state = self.progress.state
        for stratum, budget in budgets.items():
            self.budgets[stratum] = budget
            state.strata.setdefault(stratum, StratumProgress()).budget = budget
        state.total = sum(self.budgets.values())

    def recover(self, strata: Sequence[Stratum] | None = None) -> list[LedgerTrial]:
        """Close the open trials (of ``strata``, default all) whose owner died as
        ``interrupted`` and their MLflow runs as KILLED; return them (their slots can be
        claimed again)."""
        stale = self.ledger.liveness.recover_stale(self.strata if strata is None else strata)
        if stale:
            self.recovered += stale
            self.tracker.close_interrupted(stale)
            for t in stale:
                self.progress.display.trial_finished(
                    f"{t.stratum}#{t.number}: its owner {t.owner} stopped answering; closed as "
                    "interrupted, its slot runs again"
                )
        return stale

    # -- one trial ----------------------------------------------------------------------------
    def _run_slot(self, slot: Slot) -> None:
        history = read_history(self.ledger, self.config, slot.stratum, self.budgets[slot.stratum])
        backend, proposal = self.lineup.propose(slot, history)
        for other in self.lineup.backends:
            if other is not backend:
                other.adopt(slot, proposal)
        extras = dict(proposal.extras)
        if proposal.seed is not None:
            extras[SEED] = proposal.seed
        trial = self.ledger.start(slot, tuner=proposal.tuner, origin=proposal.origin, extras=extras)
        spec = self._spec(slot, proposal)
        self.tracker.start_trial(trial)
        self.progress.running(slot.stratum, +1)
        hook = trial_hook(self.pruning, slot.stratum, proposal, history, self.unbounded_cap)
        limit = spec.settings.budget.step_limit(spec.batch_size) or DEFAULT_STEP_LIMIT

        def run() -> Outcome:
            PHASES.mark(Mark.FIRST_TRIAL)
            fit_ahead.release()  # the fit the next decision needs, made while this one trains
            begun = time.perf_counter()
            try:
                result = self.pool.run(spec, hook)
            finally:
                took = time.perf_counter() - begun
                self._local.trials = getattr(self._local, "trials", 0.0) + took
                PHASES.add(Phase.TRIALS, took)
            return Outcome(result, score(result, limit, self.config.target))

        started = time.perf_counter()
        try:
            outcome = backend.execute(proposal, run)
        finally:
            self.progress.running(slot.stratum, -1)
        if self._stop.is_set() and outcome.result.state is TrialState.FAILED:
            # Killed by an interrupt, not by its own fault: its slot will be run again.
            self.ledger.interrupt(slot)
            trial = dataclasses.replace(trial, status=TrialState.INTERRUPTED)
            self._track(trial, spec, timed(outcome.result, started))
            return
        trial = self.ledger.finish(
            slot,
            timed(outcome.result, started),
            outcome.objective,
            target=self.config.target,
            meaning=explain(outcome.result, limit, self.config.target),
        )
        backend.report(proposal, outcome)
        result = self._track(trial, spec, timed(outcome.result, started))
        self._after(trial, proposal, result)

    def _track(self, trial: LedgerTrial, spec: TrialSpec, result: TrialResult) -> TrialResult:
        """Hand a finished trial to the tracker and note its wall time."""
        self.tracker.finish_trial(trial, spec, result)
        self.trial_seconds.append(result.timings[WALL])
        return result

    def _spec(self, slot: Slot, proposal: Proposal) -> TrialSpec:
        """Trial `slot`'s spec: its training seed drawn for its number (or the proposal's)."""
        spec = self.config.trial_spec(
            slot.stratum, proposal.params, seed=proposal.seed, number=slot.number
        )
        if proposal.budget_fraction < 1.0:
            budget = spec.settings.budget
            limit = budget.step_limit(spec.batch_size) or DEFAULT_STEP_LIMIT
            steps = max(1, math.ceil(limit * proposal.budget_fraction))
            spec = spec.with_settings(budget=dataclasses.replace(budget, max_steps=steps))
        return spec

    def _fail_slot(self, slot: Slot, error: str) -> None:
        """Record a slot whose proposal or bookkeeping raised as a failed trial; a trial that
        another process closed as interrupted meanwhile (it took this one for dead) stays so."""
        trial = self.ledger.fail(slot, error)
        if trial.status is TrialState.INTERRUPTED:
            self.progress.display.trial_finished(
                f"{trial.stratum}#{trial.number}: closed as interrupted by another worker "
                "(this one's heartbeat was late); its slot runs again"
            )
            return
        self._after(trial, None, TrialResult(state=TrialState.FAILED, error=error))

    def _after(self, trial: LedgerTrial, proposal: Proposal | None, result: TrialResult) -> None:
        confirming = proposal is not None and proposal.seed is not None
        if self.pruning and result.steps_to_target is not None and not confirming:
            self.pruning.note(trial.stratum, result.steps_to_target)
        self.progress.finished(trial, result)
        if self.failures.record(result):
            self._stop.set()
        what = result.state.value
        if result.state is TrialState.REACHED:
            what = f"reached at step {result.steps_to_target}"
        elif result.state is TrialState.PRUNED:
            what = f"pruned at step {result.steps_run}"
        elif result.error:
            what += f": {result.error.strip().splitlines()[-1][:160]}"
        tuner = proposal.tuner if proposal else str(trial.tuner or "unknown")
        origin = f"/{proposal.origin}" if proposal and proposal.origin != "sampler" else ""
        self.progress.display.trial_finished(
            f"{trial.stratum}#{trial.number} lr={trial.learning_rate:.3g} ({tuner}{origin}): {what}"
        )
