"""MLflow for a whole study: one experiment, a parent run, a nested run per trial.

All MLflow calls run on one background thread in submission order (`BackgroundJobs`), so
training never waits for the tracking store; `flush` waits for them. Each job runs
`LINGER_S` after its submission at the earliest: on a SQL store a trial that ends within it
after it starts is written whole, with the others ended by then, in one transaction
(`study.tracking.run_rows`; its run shows when it ends, not RUNNING from its start); a longer
trial's run is opened RUNNING and logged when it ends. MLflow is a mirror of the
ledger: `repair` mends it (runs of interrupted trials left RUNNING are closed as KILLED,
finished trials that never reached MLflow are logged from the ledger) when a run starts, after
a crash, and in the same run when a tracking server that stopped answering answers again
(`follow` names the ledger it catches up from). A trial's run is keyed by the tag
``study.trial`` (`trial_key`), its params and tags come from its `LedgerTrial`; a tracker logs
each trial once, and a run a repair creates gives way to an older one of the same trial that
another process created meanwhile, so a trial ends up with one run however the repairs race.

Each run says what it is (`study.tracking.descriptions`): the parent's description states the
question and, once a run of the study ends, the answer (`describe_answer`); a trial run's name
carries its learning rate, steps and status, and the experiment's saved view shows them as
sortable columns (`study.tracking.views`). The study's data (`DataDescription`) is a dataset
input of every trial run and, once, of the parent (`study.tracking.dataset_input`).

The parent run's metrics chart the study: ``best_steps`` (fewest steps to the target) and
``best_learning_rate`` (the learning rate that got there) are logged with ``step`` = batch size,
so each is one chart against batch size; with several strategies one chart each,
``best_steps/<strategy>``. ``trials_done`` counts the finished trials.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

from mlflow.entities import RunTag
from mlflow.tracking import MlflowClient

from study.config.space import Stratum
from study.config.study import StudyConfig
from study.config.trial import TrialSpec
from study.ledger import Ledger, LedgerTrial
from study.ledger.owners import owner_id
from study.ledger.records import SEED
from study.paths import masked
from study.results import TrialResult, TrialState
from study.tracking.dataset_input import dataset_input, log_dataset
from study.tracking.descriptions import NOTE, with_answer
from study.tracking.jobs import BackgroundJobs, Job
from study.tracking.mlflow_logger import RUN_STATUS, MlflowLogger, summary_points
from study.tracking.parents import ensure_parent_run, parent_runs, settled_parent
from study.tracking.trial_runs import (
    NAME_TAG,
    TRIAL_ROLE,
    Finish,
    Pending,
    now_ms,
    trial_key,
    trial_params,
    trial_tags,
    whole_run,
)
from study.tracking.views import view_tag, view_value

#: How long after its submission a background job runs at the earliest, in seconds: a trial
#: that ends within it after it starts is written whole, with the others ended by then.
LINGER_S = 1.0


def study_params(
    config: StudyConfig, *, tuner: str, trials_total: int, strata: int
) -> dict[str, Any]:
    """The parent run's params: what the study searches and how."""
    return {
        "study": config.name,
        "workload": config.workload,
        "model": config.model or "default",
        "target": str(config.target),
        "target_hold": config.target.hold.to_param(),
        "training_seeds": config.training_seeds.value,
        "seed": config.settings.seed,
        "trials_total": trials_total,
        "strata": strata,
        "batch_sizes": list(config.space.batch_sizes),
        "strategies": list(config.space.strategies),
        "tuner": tuner,
        "sampler": config.tuner.sampler.value,
        "oracle": config.tuner.oracle.value,
        "pruning": config.tuner.pruning,
        "prune_slack": config.prune_slack,
        **({"warm_start": warm.study} if (warm := config.tuner.warm_start) is not None else {}),
    }


class StudyTracker:
    """Asynchronous, batched MLflow logging for one study."""

    def __init__(self, uri: str, study: str) -> None:
        self.logger = MlflowLogger(uri)
        self.study = study
        self.experiment_id = self.logger.experiment_id(study)
        self.parent_run_id: str | None = None
        #: The parent run this process chose, and whether it created it, until
        #: `settled_parent` has confirmed it.
        self._unsettled: tuple[str, bool] | None = None
        self._runs: dict[str, str] = {}
        #: Keys of the trials this tracker logged (or found logged): each is logged once.
        self._logged: set[str] = set()
        #: The (name, digest) of each dataset the parent run has as an input.
        self._parent_data: set[tuple[str, str]] = set()
        #: Trials started and not logged yet, by key (what `start_trial` and `finish_trial`
        #: were given; read by the background thread).
        self._pending: dict[str, Pending] = {}
        self._lock = threading.Lock()
        self._jobs = BackgroundJobs(masked(uri), uri, linger=LINGER_S)

    @property
    def busy_seconds(self) -> float:
        """Wall time the background thread spent in MLflow calls."""
        return self._jobs.busy_seconds

    @property
    def cpu_seconds(self) -> float:
        """CPU time the background thread spent in MLflow calls."""
        return self._jobs.cpu_seconds

    @property
    def errors(self) -> list[str]:
        """The distinct warnings MLflow logging printed."""
        return self._jobs.errors

    @property
    def outages(self) -> int:
        """How many times the tracking server stopped answering during this run."""
        return self._jobs.outages

    def follow(
        self, ledger: Ledger, config: StudyConfig, strata: Callable[[], list[Stratum]]
    ) -> None:
        """Catch up from ``ledger`` (`repair` over the ``strata()`` of the moment) whenever the
        tracking server answers again after it stopped answering."""
        self._jobs.catch_up = lambda: self.repair(ledger, config, strata())

    def submit(self, job: Job, key: str | None = None) -> None:
        """Run ``job`` in the background, after settling the parent run this process chose
        (`settled_parent`); with a ``key``, only the newest queued job of that key runs."""

        def settled() -> None:
            chosen, self._unsettled = self._unsettled, None
            parent = chosen and settled_parent(self.logger.client, self.experiment_id, *chosen)
            if chosen and parent != chosen[0]:
                self.parent_run_id = parent
                self._ensure_view(parent)
            job()

        self._jobs.submit(settled, key)

    def flush(self) -> None:
        self._jobs.flush()

    def close(self, wait: float = 0.0) -> None:
        """Log what is queued and stop, waiting up to ``wait`` s for an away server."""
        self._jobs.close(wait)

    # -- the parent run -------------------------------------------------------------------
    def ensure_parent(
        self, params: Mapping[str, Any], artifacts: Mapping[str, str], note: str | None = None
    ) -> str:
        """Find or create the study's parent run (exactly one, even with racing processes:
        `study.tracking.parents.ensure_parent_run`) and set it RUNNING.

        ``note`` (a `question_note`) becomes its description; an existing run's description
        gets the new question and keeps its answer.
        """
        parent = ensure_parent_run(
            self.logger, self.experiment_id, self.study, params, artifacts, note
        )
        self._parent_data = set(parent.datasets)
        self._unsettled = (parent.run_id, parent.created)
        self.parent_run_id = parent.run_id
        self._ensure_view(parent.run_id)
        return parent.run_id

    def _ensure_view(self, run_id: str) -> None:
        """Give the experiment the study's saved view unfolding this parent run (`views`)."""
        client = self.logger.client
        current = client.get_experiment(self.experiment_id).tags.get(view_tag(), "")
        if run_id not in current:
            self.logger.set_experiment_tag(self.experiment_id, view_tag(), view_value(run_id))

    def describe_answer(self, answer: str | None, report: str | None = None) -> None:
        """Write ``answer`` (the terminal's answer line; None: no answer) and where the report
        is into the answer section of the parent run's description, in the background."""
        if self.parent_run_id:
            self.submit(lambda: set_answer(self.logger.client, self.parent_run_id, answer, report))

    def _parents(self) -> list[Any]:
        return parent_runs(self.logger.client, self.experiment_id)

    def end_parent(self, status: str, summary: Mapping[str, Any] | None = None) -> None:
        """Log the study's metrics and close the parent run with ``status``.

        ``summary`` maps a metric key to a number (logged at step 0) or to ``{step: number}``
        (e.g. ``{"best_steps": {32: 180.0, 128: 100.0}}``: a chart against batch size).
        """
        if not self.parent_run_id:
            return

        def job() -> None:
            run_id = str(self.parent_run_id)
            if summary:
                self.logger.log_metrics(run_id, summary_points(summary))
            self.logger.client.set_terminated(run_id, status=status)

        self.submit(job)

    # -- trial runs -----------------------------------------------------------------------
    def start_trial(self, trial: LedgerTrial) -> None:
        """Open a nested run for a running trial (status RUNNING) in the background; on a SQL
        store, a trial that has finished by the time the job runs (`LINGER_S`) is written whole
        by `finish_trial`'s job instead."""
        key, tags = trial_key(self.study, trial), trial_tags(trial)
        all_tags = {"study.role": TRIAL_ROLE, "study.trial": key, "status": "running", **tags}
        with self._lock:
            self._pending[key] = Pending(all_tags, now_ms())
        attempts = []

        def job() -> None:
            if key in self._logged or key in self._runs:
                return  # a catch-up logged it, or this job runs again after an outage
            if self.logger.whole_runs and self._finished(key):
                return  # `finish_trial`'s job writes the whole run
            attempts.append(1)
            if len(attempts) > 1:  # again after an outage: the first attempt may have landed
                runs = self._runs_of(key)
                if runs:
                    self._runs[key] = str(runs[0].info.run_id)
                    return
            self._runs[key] = self._open(key, all_tags)

        self.submit(job)

    def _open(self, key: str, tags: Mapping[str, str]) -> str:
        return self.logger.start_run(
            self.experiment_id, tags[NAME_TAG], parent_run_id=self.parent_run_id, tags=tags
        )

    def _finished(self, key: str) -> bool:
        with self._lock:
            pending = self._pending.get(key)
            return pending is not None and pending.finish is not None

    def finish_trial(
        self,
        trial: LedgerTrial,
        spec: TrialSpec,
        result: TrialResult | None = None,
        run_id: str | None = None,
    ) -> None:
        """Log a finished trial (params, curve, summary, status) and close its run.

        ``result`` defaults to the one recorded in the ledger; an interrupted trial is logged
        with status ``interrupted`` (run KILLED). The run is the one `start_trial` opened, else
        ``run_id`` (a run left open by a process that died), else a new one. A trial whose
        run `start_trial`'s job left unopened is written whole, with the others so finished by
        then, in one transaction (`MlflowLogger.create_trials`).
        """
        key, params = trial_key(self.study, trial), trial_params(trial)
        result = result or trial.result or TrialResult(state=TrialState.FAILED)
        if trial.status is TrialState.INTERRUPTED:
            result = dataclasses.replace(result, state=TrialState.INTERRUPTED)
        tags = trial_tags(trial, result)
        with self._lock:
            pending = self._pending.get(key)
            if pending is not None and run_id is None:
                finish = Finish(spec, result, params, tags, now_ms())
                self._pending[key] = dataclasses.replace(pending, finish=finish)

        def job() -> None:
            if key in self._logged:
                return  # logged already (by a catch-up, or before this job ran again)
            target = self._runs.pop(key, None) or run_id
            if target is None and self._write_whole(key):
                return
            if target is None and pending is not None:  # started here, its run never opened
                target = self._open(key, pending.tags)
            target = target or self._run_of(key, tags)
            if target is not None:
                self.logger.log_trial(target, spec, result, extra_params=params, tags=tags)
                if result.dataset is not None:
                    self._log_parent_dataset(result)
            self._done(key)

        self.submit(job)

    def _write_whole(self, key: str) -> bool:
        """Write trial ``key``'s whole run, with those of the other finished trials started
        here whose runs were never opened, in one transaction; whether it did (False: ``key``
        is none of them, or the store takes no such write)."""
        with self._lock:
            ready = [
                (k, p)
                for k, p in self._pending.items()
                if p.finish is not None and k not in self._runs and k not in self._logged
            ]
        if not self.logger.whole_runs or key not in dict(ready):
            return False
        runs = [(whole_run(p, self.parent_run_id), p.finish.result) for _, p in ready if p.finish]
        if self.logger.create_trials(self.experiment_id, runs) is None:
            return False
        for (k, _), (_, result) in zip(ready, runs, strict=True):
            if result.dataset is not None:
                self._log_parent_dataset(result)
            self._done(k)
        return True

    def _done(self, key: str) -> None:
        self._logged.add(key)
        with self._lock:
            self._pending.pop(key, None)

    def _run_of(self, key: str, tags: Mapping[str, str]) -> str | None:
        """The run to log trial ``key`` into when this tracker opened none: one left RUNNING,
        else a new one; None when a finished run of it exists, or when another process created
        one first (this one's is deleted): another process logs it, or did."""
        runs = self._runs_of(key)
        if any(r.info.status != "RUNNING" for r in runs):
            return None
        if runs:
            return str(runs[0].info.run_id)
        mine = self.logger.start_run(
            self.experiment_id,
            tags["mlflow.runName"],
            parent_run_id=self.parent_run_id,
            tags={"study.role": TRIAL_ROLE, "study.trial": key},
        )
        first = self._runs_of(key)
        if first and first[0].info.run_id != mine:
            self.logger.client.delete_run(mine)
            return None
        return mine

    def _runs_of(self, key: str) -> list[Any]:
        """The runs of trial ``key``, oldest first (normally at most one)."""
        runs = self.logger.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`study.trial` = '{key}'", max_results=50
        )
        return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))

    def _log_parent_dataset(self, result: TrialResult) -> None:
        """The trial's data (its run has them from `MlflowLogger.log_trial`) as an input of the
        parent run, unless it has them already (a resumed study asks the run at start)."""
        assert result.dataset is not None
        data = dataset_input(result.dataset)
        key = (data.dataset.name, data.dataset.digest)
        if self.parent_run_id and key not in self._parent_data:
            log_dataset(self.logger.client, self.parent_run_id, data)
            self._parent_data.add(key)

    def repair(self, ledger: Ledger, config: StudyConfig, strata: list[Stratum]) -> None:
        """Mend MLflow from the ledger: close the runs of interrupted trials left RUNNING, and
        log finished trials whose run is missing or still RUNNING (a process died between the
        ledger and MLflow, or the tracking server was away). A trial of another process that
        still lives is left to it: it writes the ledger first and MLflow next, in the
        background, so its run may simply not be done; this process's own are logged once
        (their jobs, queued or to come, find them logged)."""
        runs, mine = self.trial_runs(), owner_id()
        for stratum in strata:
            for t in ledger.trials(stratum):
                run = runs.get(trial_key(self.study, t))
                open_run = run is not None and run.info.status == "RUNNING"
                if t.status is TrialState.INTERRUPTED and open_run:
                    self.submit(lambda r=run.info.run_id: self.mark_interrupted(r))
                elif t.status.is_outcome() and (run is None or open_run):
                    if "learning_rate" not in t.params or trial_key(self.study, t) in self._logged:
                        continue
                    if t.owner != mine and ledger.liveness.owner_alive(t):
                        continue
                    spec = config.trial_spec(
                        stratum, t.params, seed=t.extras.get(SEED), number=t.number
                    )
                    self.finish_trial(t, spec, run_id=None if run is None else run.info.run_id)

    def trial_runs(self) -> dict[str, Any]:
        """Nested trial runs of this study by trial key (the newest per key)."""
        client = self.logger.client
        out: dict[str, Any] = {}
        token = None
        while True:
            page = client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`study.role` = '{TRIAL_ROLE}'",
                max_results=1000,
                page_token=token,
            )
            for run in page:
                key = run.data.tags.get("study.trial")
                if key and (key not in out or run.info.start_time > out[key].info.start_time):
                    out[key] = run
            token = page.token
            if not token:
                return out

    def close_interrupted(self, trials: list[LedgerTrial]) -> None:
        """Close the runs of trials another process left open and this one closed as
        interrupted (`Liveness.recover_stale`): tag ``status`` = interrupted, KILLED. A trial
        whose run never reached MLflow has nothing to close."""
        keys = [trial_key(self.study, t) for t in trials]

        def job() -> None:
            for key in keys:
                runs = self.logger.client.search_runs(
                    [self.experiment_id],
                    filter_string=f"tags.`study.trial` = '{key}' and attributes.status = 'RUNNING'",
                    max_results=10,
                )
                for run in runs:
                    self.mark_interrupted(run.info.run_id)

        self.submit(job)

    def mark_interrupted(self, run_id: str) -> None:
        """Close the run of a trial whose process died: tag ``status`` = interrupted, KILLED."""
        state = TrialState.INTERRUPTED
        self.logger.client.log_batch(run_id, tags=[RunTag("status", state.value)])
        self.logger.client.set_terminated(run_id, status=RUN_STATUS[state])


def set_answer(client: MlflowClient, run_id: str, answer: str | None, report: str | None) -> None:
    """Rewrite the answer section of run ``run_id``'s description (`with_answer`)."""
    note = client.get_run(run_id).data.tags.get(NOTE)
    client.set_tag(run_id, NOTE, with_answer(note, answer, report))
