"""KerasTuner backend: an Oracle (random, Bayesian optimisation, Hyperband) per stratum, driving
a `keras_tuner.Tuner` subclass whose ``run_trial`` calls the study's shared runner.

State lives under ``mlruns/keras_tuner/<study>/<stratum>/`` (KerasTuner's own files,
`study.paths.keras_tuner_dir`). Every read-modify-write of it holds a file lock and reloads what
other processes saved, so several ``study run`` processes share one search; a trial left
running by a dead process is retried (KerasTuner's reload sends it to the retry queue).
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import socket
import threading
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keras_tuner

from study.config.space import Stratum
from study.config.study import Oracle, StudyConfig
from study.ledger import Ledger, Slot
from study.paths import keras_tuner_dir
from study.results import TrialState
from study.tuners.base import History, Outcome, Proposal, TunerBackend, clean_params
from study.tuners.keras_tuner_space import to_hyperparameters

OBJECTIVE = keras_tuner.Objective("score", direction="min")
#: The ledger extra that links a trial to its KerasTuner trial.
KT_TRIAL = "keras_tuner_trial"
_HYPERBAND_MAX_EPOCHS = 9


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
        self._ours: dict[Stratum, dict[str, str]] = {}  # tuner_id -> KerasTuner trial id
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
        seed = (self.config.seed * 7919 + zlib.crc32(str(stratum).encode())) % (2**31)
        common = {
            "objective": OBJECTIVE,
            "hyperparameters": hp,
            "seed": seed,
            "max_consecutive_failed_trials": 1_000_000,
        }
        kind = self.config.tuner.oracle
        if kind is Oracle.RANDOM:
            return keras_tuner.oracles.RandomSearchOracle(max_trials=100_000, **common)
        if kind is Oracle.HYPERBAND:
            return keras_tuner.oracles.HyperbandOracle(
                max_epochs=_HYPERBAND_MAX_EPOCHS, factor=3, hyperband_iterations=1000, **common
            )
        initial = max(2, min(4, self.config.trials_per_stratum // 4))
        return keras_tuner.oracles.BayesianOptimizationOracle(
            max_trials=100_000, num_initial_points=initial, **common
        )

    def _state_mtime(self, stratum: Stratum) -> float:
        path = self.directory / self._project(stratum) / "oracle.json"
        return path.stat().st_mtime_ns if path.exists() else 0.0

    def _synced(self, stratum: Stratum, window: tuple[float, float] | None) -> StudyTuner:
        """This process's tuner for a stratum, reloaded if another process saved since."""
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
        self._seen[stratum] = self._state_mtime(stratum)
        return tuner

    def _fix_ongoing(self, stratum: Stratum, tuner: StudyTuner) -> None:
        """After a reload: keep trials of live processes out of the retry queue, ours ongoing."""
        oracle = tuner.oracle
        live = {
            str(t.extras[KT_TRIAL])
            for t in self.ledger.trials(stratum)
            if KT_TRIAL in t.extras and self.ledger.alive(t)
        }
        _drop_from_retry_queue(oracle, live)
        for tuner_id, trial_id in self._ours.get(stratum, {}).items():
            if trial_id in oracle.trials:
                oracle.ongoing_trials[tuner_id] = oracle.trials[trial_id]

    def _save(self, stratum: Stratum, tuner: StudyTuner) -> None:
        tuner.save()
        self._seen[stratum] = self._state_mtime(stratum)

    # -- the backend contract -------------------------------------------------------------
    def propose(self, slot: Slot, history: History) -> Proposal | None:
        stratum = slot.stratum
        tuner_id = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        with self._locked(stratum, history.window) as tuner, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the GP's convergence chatter on a few points
            known = set(tuner.oracle.trials)
            kt_trial = tuner.oracle.create_trial(tuner_id)
            if kt_trial.status != keras_tuner.engine.trial.TrialStatus.RUNNING:
                return None
            self._ours.setdefault(stratum, {})[tuner_id] = kt_trial.trial_id
            self._save(stratum, tuner)
        values = dict(kt_trial.hyperparameters.values)
        retry = kt_trial.trial_id in known
        fraction = 1.0
        if "tuner/epochs" in values:
            fraction = float(values["tuner/epochs"]) / _HYPERBAND_MAX_EPOCHS
        return Proposal(
            tuner=self.name,
            params=clean_params(values),
            origin="retry" if retry else "sampler",
            budget_fraction=fraction,
            extras={KT_TRIAL: kt_trial.trial_id},
            handle=(stratum, tuner_id, kt_trial),
        )

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
    oracle most of them are alive. KerasTuner has no public API to edit the queue, so this one
    adapter touches the private ``_retry_queue``.
    """
    oracle._retry_queue = [tid for tid in oracle._retry_queue if tid not in trial_ids]
