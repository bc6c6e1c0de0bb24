"""KerasTuner backend: an Oracle (random, Bayesian optimisation, Hyperband) per stratum, driving
a `keras_tuner.Tuner` subclass whose ``run_trial`` calls the study's shared runner.

Every oracle learns from every finished trial of its stratum: before it proposes, the trials it
did not propose itself (Optuna's, confirmations) are fed to it through its public trial API
(``create_trial`` with the trial's values, ``update_trial`` with its objective, ``end_trial``);
a small oracle subclass (`_LedgerFed`) returns the given values instead of sampling. The
ledger trials fed so far are listed in ``ledger_trials.json`` next to the oracle's state. Its
learning-rate range is the stratum's current window (`History.window`), set before each
proposal.

State lives under ``mlruns/keras_tuner/<study>/<stratum>/`` (KerasTuner's own files,
`study.paths.keras_tuner_dir`). Every read-modify-write of it holds a file lock and reloads what
other processes saved, so several ``study run`` processes share one search; a trial left
running by a dead process is retried (KerasTuner's reload sends it to the retry queue).
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import socket
import threading
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import keras_tuner

from study.config.space import Stratum
from study.config.study import Oracle, StudyConfig
from study.ledger import Ledger, LedgerTrial, Slot
from study.paths import keras_tuner_dir
from study.results import TrialState
from study.tuners.base import History, Outcome, Proposal, TunerBackend, clean_params
from study.tuners.keras_tuner_space import to_hyperparameters
from study.tuners.points import Point, lr_range, settle

OBJECTIVE = keras_tuner.Objective("score", direction="min")
#: The ledger extra that links a trial to its KerasTuner trial.
KT_TRIAL = "keras_tuner_trial"
#: The ledger extra holding the learning-rate window a trial was drawn in.
LR_WINDOW = "lr_window"
#: The tuner id under which other backends' trials are fed to an oracle.
FEEDER = "ledger"
#: The file (in the stratum's KerasTuner folder) listing ledger trials fed to the oracle.
FED_FILE = "ledger_trials.json"
_HYPERBAND_MAX_EPOCHS = 9
_RUNNING = keras_tuner.engine.trial.TrialStatus.RUNNING


class _LedgerFed:
    """Mixin for KerasTuner oracles: while ``given`` is set, ``populate_space`` returns those
    values (a trial another backend ran, fed to the oracle) instead of sampling."""

    given: dict[str, Any] | None = None

    def populate_space(self, trial_id: str) -> dict[str, Any]:
        if self.given is not None:
            return {"status": _RUNNING, "values": dict(self.given)}
        return super().populate_space(trial_id)  # type: ignore[misc]


class RandomOracle(_LedgerFed, keras_tuner.oracles.RandomSearchOracle):
    """Random search that can be fed other backends' trials."""


class BayesianOracle(_LedgerFed, keras_tuner.oracles.BayesianOptimizationOracle):
    """Gaussian-process Bayesian optimisation that can be fed other backends' trials."""


class HyperbandOracle(_LedgerFed, keras_tuner.oracles.HyperbandOracle):
    """Hyperband that can be fed other backends' trials (they join no bracket)."""


class StudyTuner(keras_tuner.Tuner):
    """A `keras_tuner.Tuner` whose ``run_trial`` runs the shared trainer through the study runner."""

    def __init__(self, oracle: keras_tuner.Oracle, directory: str, project_name: str) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            super().__init__(
                oracle=oracle, directory=directory, project_name=project_name, overwrite=False
            )
        self.oracle.verbose = 0
        self.pending: dict[str, Callable[[], Outcome]] = {}

    def run_trial(self, trial: keras_tuner.engine.trial.Trial, *args: Any, **kwargs: Any) -> dict:
        outcome = self.pending.pop(trial.trial_id)()
        return {OBJECTIVE.name: outcome.objective}


class KerasTunerBackend(TunerBackend):
    """Proposes with a KerasTuner Oracle per stratum; reports back through ``Tuner.on_trial_end``."""

    name = "keras-tuner"

    def __init__(self, config: StudyConfig, ledger: Ledger, root: Path | None = None) -> None:
        super().__init__(config, ledger)
        self.directory = keras_tuner_dir(config.name, root)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._tuners: dict[Stratum, StudyTuner] = {}
        self._seen: dict[Stratum, float] = {}
        #: tuner_id -> this process's running KerasTuner trial, per stratum
        self._ours: dict[Stratum, dict[str, keras_tuner.engine.trial.Trial]] = {}
        self._lock = threading.RLock()

    # -- state shared with other processes ------------------------------------------------
    @contextlib.contextmanager
    def _locked(
        self, stratum: Stratum, window: tuple[float, float] | None = None
    ) -> Iterator[StudyTuner]:
        project = self._project(stratum)
        (self.directory / project).mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.directory / project / ".lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield self._synced(stratum, window)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _project(self, stratum: Stratum) -> str:
        """The stratum's KerasTuner project folder, e.g. ``b64-mirrored_2``."""
        return str(stratum).replace("/", "-").replace(":", "_")

    def _oracle(self, stratum: Stratum, window: tuple[float, float] | None) -> keras_tuner.Oracle:
        """The configured oracle; its learning-rate range is the stratum's window, if set."""
        hp = to_hyperparameters(self.config.space, window)
        seed = (self.config.tuner_seed * 7919 + zlib.crc32(str(stratum).encode())) % (2**31)
        common = {
            "objective": OBJECTIVE,
            "hyperparameters": hp,
            "seed": seed,
            "max_consecutive_failed_trials": 1_000_000,
        }
        kind = self.config.tuner.oracle
        if kind is Oracle.RANDOM:
            return RandomOracle(max_trials=100_000, **common)
        if kind is Oracle.HYPERBAND:
            return HyperbandOracle(
                max_epochs=_HYPERBAND_MAX_EPOCHS, factor=3, hyperband_iterations=1000, **common
            )
        initial = max(2, min(4, self.config.trials_per_stratum // 4))
        return BayesianOracle(max_trials=100_000, num_initial_points=initial, **common)

    def _state_mtime(self, stratum: Stratum) -> float:
        path = self.directory / self._project(stratum) / "oracle.json"
        return path.stat().st_mtime_ns if path.exists() else 0.0

    def _synced(self, stratum: Stratum, window: tuple[float, float] | None) -> StudyTuner:
        """This process's tuner for a stratum, reloaded if another process saved since; its
        learning-rate range set to ``window`` when one is given."""
        tuner = self._tuners.get(stratum)
        if tuner is None:
            oracle = self._oracle(stratum, window)
            tuner = StudyTuner(oracle, str(self.directory), self._project(stratum))
            self._tuners[stratum] = tuner
            self._fix_ongoing(stratum, tuner)
        elif self._state_mtime(stratum) != self._seen.get(stratum):
            with contextlib.redirect_stdout(io.StringIO()):
                tuner.reload()
            self._fix_ongoing(stratum, tuner)
        if window is not None:
            tuner.oracle.hyperparameters = to_hyperparameters(self.config.space, window)
        self._seen[stratum] = self._state_mtime(stratum)
        return tuner

    def _fix_ongoing(self, stratum: Stratum, tuner: StudyTuner) -> None:
        """After a reload: keep trials of live processes out of the retry queue, ours ongoing
        (with the values this process settled on)."""
        oracle = tuner.oracle
        live = {
            str(t.extras[KT_TRIAL])
            for t in self.ledger.trials(stratum)
            if KT_TRIAL in t.extras and self.ledger.alive(t)
        }
        _drop_from_retry_queue(oracle, live)
        oracle.ongoing_trials.pop(FEEDER, None)
        for tuner_id, trial in self._ours.get(stratum, {}).items():
            oracle.trials[trial.trial_id] = trial
            oracle.ongoing_trials[tuner_id] = trial

    def _save(self, stratum: Stratum, tuner: StudyTuner) -> None:
        tuner.save()
        self._seen[stratum] = self._state_mtime(stratum)

    # -- learning from the other backends ------------------------------------------------------
    def _fed(self, stratum: Stratum) -> dict[str, str]:
        """Ledger trial number -> KerasTuner trial id of the trials fed to the oracle so far."""
        path = self.directory / self._project(stratum) / FED_FILE
        return json.loads(path.read_text()) if path.exists() else {}

    def _feed(self, stratum: Stratum, tuner: StudyTuner, trials: Sequence[LedgerTrial]) -> int:
        """Feed the oracle every finished trial of the stratum it has not proposed or been fed
        (under the lock); return how many were fed."""
        fed = self._fed(stratum)
        oracle = tuner.oracle
        names = {p.name for p in oracle.hyperparameters.space}
        count = 0
        for t in trials:
            if str(t.number) in fed or KT_TRIAL in t.extras or t.result is None:
                continue
            if not t.status.counts() or t.score is None or "learning_rate" not in t.params:
                continue
            oracle.ongoing_trials.pop(FEEDER, None)
            oracle.given = {k: v for k, v in t.params.items() if k in names}
            try:
                with _retries_held(oracle):
                    kt_trial = oracle.create_trial(FEEDER)
            finally:
                oracle.given = None
            if t.result.state in (TrialState.FAILED, TrialState.INFEASIBLE):
                kt_trial.status = keras_tuner.engine.trial.TrialStatus.FAILED
            else:
                oracle.update_trial(kt_trial.trial_id, {OBJECTIVE.name: float(t.score)})
                kt_trial.status = keras_tuner.engine.trial.TrialStatus.COMPLETED
            with contextlib.redirect_stdout(io.StringIO()):
                oracle.end_trial(kt_trial)
            fed[str(t.number)] = kt_trial.trial_id
            count += 1
        if count:
            path = self.directory / self._project(stratum) / FED_FILE
            path.write_text(json.dumps(fed, indent=1))
        return count

    # -- the backend contract -------------------------------------------------------------
    def propose(self, slot: Slot, history: History) -> Proposal | None:
        stratum = slot.stratum
        tuner_id = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        with self._locked(stratum, history.window) as tuner, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the GP's convergence chatter on a few points
            self._feed(stratum, tuner, self.ledger.trials(stratum))
            known = set(tuner.oracle.trials)
            kt_trial = tuner.oracle.create_trial(tuner_id)
            if kt_trial.status != _RUNNING:
                return None
            self._ours.setdefault(stratum, {})[tuner_id] = kt_trial
            self._save(stratum, tuner)
        values = dict(kt_trial.hyperparameters.values)
        retry = kt_trial.trial_id in known
        params = settle(
            self.ledger,
            slot,
            clean_params(values),
            None if self.config.tuner.oracle is Oracle.HYPERBAND else self._redraw(stratum),
            lr_range(self.config),
            redraws=1,
        )
        kt_trial.hyperparameters.values.update(params)
        fraction = 1.0
        if "tuner/epochs" in values:
            fraction = float(values["tuner/epochs"]) / _HYPERBAND_MAX_EPOCHS
        extras: dict[str, Any] = {KT_TRIAL: kt_trial.trial_id}
        if history.window is not None:
            extras[LR_WINDOW] = list(history.window)
        return Proposal(
            tuner=self.name,
            params=params,
            origin="retry" if retry else "sampler",
            budget_fraction=fraction,
            extras=extras,
            handle=(stratum, tuner_id, kt_trial),
        )

    def _redraw(self, stratum: Stratum) -> Callable[[int, Sequence[Point]], Mapping[str, Any]]:
        """Another draw of the stratum's oracle (random search, Bayesian optimisation)."""

        def redraw(attempt: int, taken: Sequence[Point]) -> Mapping[str, Any]:
            with self._locked(stratum) as tuner, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                response = tuner.oracle.populate_space(f"redraw-{attempt}")
            return clean_params(response.get("values") or {})

        return redraw

    def execute(self, proposal: Proposal, run: Callable[[], Outcome]) -> Outcome:
        stratum, _, kt_trial = proposal.handle
        tuner = self._tuners[stratum]
        holder: list[Outcome] = []

        def run_and_keep() -> Outcome:
            holder.append(run())
            return holder[0]

        tuner.pending[kt_trial.trial_id] = run_and_keep
        tuner.run_trial(kt_trial)
        return holder[0]

    def report(self, proposal: Proposal, outcome: Outcome) -> None:
        stratum, tuner_id, kt_trial = proposal.handle
        failed = outcome.result.state in (TrialState.FAILED, TrialState.INFEASIBLE)
        with self._locked(stratum) as tuner:
            trial = tuner.oracle.trials.get(kt_trial.trial_id, kt_trial)
            trial.hyperparameters.values.update(proposal.params)  # as settled and run
            if failed:
                trial.status = keras_tuner.engine.trial.TrialStatus.FAILED
                trial.message = (outcome.result.error or outcome.result.state.value)[-2000:]
            else:
                tuner.oracle.update_trial(trial.trial_id, {OBJECTIVE.name: outcome.objective})
                trial.status = keras_tuner.engine.trial.TrialStatus.COMPLETED
            tuner.oracle.ongoing_trials[tuner_id] = trial
            with contextlib.redirect_stdout(io.StringIO()):
                tuner.on_trial_end(trial)
            self._ours.get(stratum, {}).pop(tuner_id, None)
            self._seen[stratum] = self._state_mtime(stratum)


def _drop_from_retry_queue(oracle: keras_tuner.Oracle, trial_ids: set[str]) -> None:
    """Keep trials that live processes still run out of the oracle's retry queue.

    KerasTuner's ``Oracle.reload`` sends every trial that was ongoing when the state was saved
    to the retry queue, assuming the saving process died; with several processes sharing one
    oracle most of them are alive. KerasTuner has no public API to edit the queue, so these two
    adapters touch the private ``_retry_queue``.
    """
    oracle._retry_queue = [tid for tid in oracle._retry_queue if tid not in trial_ids]


@contextlib.contextmanager
def _retries_held(oracle: keras_tuner.Oracle) -> Iterator[None]:
    """Hold the oracle's retry queue back while another backend's trial is fed to it:
    ``create_trial`` serves a waiting retry before anything else, and the retry belongs to the
    next proposal of this backend, not to the fed trial."""
    queue, oracle._retry_queue = oracle._retry_queue, []
    try:
        yield
    finally:
        oracle._retry_queue = queue + oracle._retry_queue
