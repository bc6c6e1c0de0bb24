"""KerasTuner's side of the KerasTuner backend: a stratum's oracle derived from its trials, and
its proposal (`OracleWorker`).

This is the only module (with `study.adapters.keras_tuner_internals`, its door to KerasTuner's
private names) that imports KerasTuner, and so Keras and TensorFlow (about 4 CPU-seconds).
`study.tuners.keras_tuner_backend` reads and writes the ledger and hands this
module the trials as plain records, so it can run where TensorFlow is already imported: a
process forked from the trainer workers' server (`study.runner.oracle_process`), or the
caller's own process (`LocalOracle`).

A fresh oracle is built for each proposal (its learning-rate range the stratum's current window;
seeded from the study's tuner seed, the stratum and the slot number) and fed every counted trial
through KerasTuner's public trial API: ``create_trial`` with the trial's values (`_LedgerFed`
returns the given values instead of sampling), then ``update_trial`` with its objective and
``end_trial`` for a finished one; running ones stay ongoing. Hyperband's bracket bookkeeping is
rebuilt from the trials' `HYPERBAND` places.
"""

from __future__ import annotations

import contextlib
import io
import warnings
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import keras_tuner

from study.adapters.keras_tuner_internals import (
    LeanGaussianProcess,
    TrialStatus,
    Unsaved,
    hyperband_brackets,
    hyperband_iteration,
    set_hyperband_state,
)
from study.analysis.threads import one_blas_thread
from study.config.space import Stratum
from study.config.study import Oracle, StudyConfig
from study.ledger import LedgerTrial
from study.results import TrialState
from study.tuners.base import clean_params
from study.tuners.keras_tuner_records import (
    HYPERBAND,
    HYPERBAND_MAX_EPOCHS,
    KT_TRIAL,
    Draw,
    DrawRequest,
)
from study.tuners.keras_tuner_space import to_hyperparameters

OBJECTIVE = keras_tuner.Objective("score", direction="min")
#: The tuner id under which the oracle proposes.
PROPOSER = "study"

_RUNNING = TrialStatus.RUNNING
_COMPLETED = TrialStatus.COMPLETED
_FAILED = TrialStatus.FAILED


class _LedgerFed(Unsaved):
    """Mixin for KerasTuner oracles derived from the ledger: while ``given`` is set,
    ``populate_space`` returns those values (a recorded trial) instead of sampling; nothing is
    saved (`Unsaved`: the ledger is the state)."""

    given: dict[str, Any] | None = None

    def populate_space(self, trial_id: str) -> dict[str, Any]:
        if self.given is not None:
            return {"status": _RUNNING, "values": dict(self.given)}
        return super().populate_space(trial_id)  # type: ignore[misc]


class RandomOracle(_LedgerFed, keras_tuner.oracles.RandomSearchOracle):
    """Random search derived from the ledger."""


class BayesianOracle(
    _LedgerFed, LeanGaussianProcess, keras_tuner.oracles.BayesianOptimizationOracle
):
    """Gaussian-process Bayesian optimisation derived from the ledger."""


class HyperbandOracle(_LedgerFed, keras_tuner.oracles.HyperbandOracle):
    """Hyperband derived from the ledger (its brackets rebuilt from `HYPERBAND` extras)."""


@dataclass
class Derived:
    """A stratum's oracle rebuilt from the ledger, and the KerasTuner id -> oracle trial id of
    every trial fed to it."""

    oracle: keras_tuner.Oracle
    ids: dict[str, str] = field(default_factory=dict)

    def kt_id(self, oracle_id: str) -> str | None:
        """The ledger's KerasTuner id of an oracle trial."""
        return next((k for k, v in self.ids.items() if v == oracle_id), None)


def seed(config: StudyConfig, stratum: Stratum, number: int) -> int:
    """The oracle's seed for the proposal in slot ``number``: the study's tuner seed, the
    stratum and the slot, so a proposal does not depend on which host makes it."""
    key = f"{stratum}#{number}".encode()
    return (config.tuner_seed * 7919 + zlib.crc32(key)) % (2**31)


def build_oracle(
    config: StudyConfig, stratum: Stratum, window: tuple[float, float] | None, number: int
) -> keras_tuner.Oracle:
    """The configured oracle; its learning-rate range is the stratum's window, if set."""
    common = {
        "objective": OBJECTIVE,
        "hyperparameters": to_hyperparameters(config.space, window),
        "seed": seed(config, stratum, number),
        "max_consecutive_failed_trials": 1_000_000,
    }
    kind = config.tuner.oracle
    if kind is Oracle.RANDOM:
        oracle: keras_tuner.Oracle = RandomOracle(max_trials=100_000, **common)
    elif kind is Oracle.HYPERBAND:
        oracle = HyperbandOracle(
            max_epochs=HYPERBAND_MAX_EPOCHS, factor=3, hyperband_iterations=1000, **common
        )
    else:
        initial = max(2, min(4, config.trials_per_stratum // 4))
        oracle = BayesianOracle(max_trials=100_000, num_initial_points=initial, **common)
    oracle.verbose = 0
    return oracle


def derive(config: StudyConfig, request: DrawRequest) -> Derived:
    """The stratum's oracle as its trials say it stands: every trial that counts fed to it
    (finished ones with their objective, running ones ongoing, their values the reserved
    point until their params are recorded), Hyperband's brackets rebuilt."""
    derived = Derived(build_oracle(config, request.stratum, request.window, request.number))
    for t in sorted(request.trials, key=lambda t: t.number):
        if t.status.counts():
            _feed(derived, t, t.params or request.points.get(t.number) or {})
    if isinstance(derived.oracle, HyperbandOracle):
        _rebuild_brackets(derived, request.trials)
    return derived


class OracleWorker:
    """Draws proposals for one study: `draw` derives the stratum's oracle and lets it propose;
    `redraw` asks that same oracle again (when the point drawn is taken)."""

    def __init__(self, config: StudyConfig) -> None:
        self.config = config
        self._current: Derived | None = None

    @one_blas_thread  # the GP's fits: in the oracle's process, BLAS' threads spun by default
    def draw(self, request: DrawRequest) -> Draw | None:
        """The oracle's proposal for the slot; None when it has nothing to propose now
        (Hyperband between brackets)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the GP's convergence chatter on a few points
            derived = derive(self.config, request)
            known = set(derived.oracle.trials)
            kt_trial = derived.oracle.create_trial(PROPOSER)
        self._current = derived
        if kt_trial.status != _RUNNING or kt_trial.trial_id in known:
            return None
        extras: dict[str, Any] = {}
        if isinstance(derived.oracle, HyperbandOracle):
            extras[HYPERBAND] = _place(derived, kt_trial.trial_id)
        return Draw(clean_params(kt_trial.hyperparameters.values), extras)

    @one_blas_thread
    def redraw(self, attempt: int) -> dict[str, Any]:
        """Another draw of the oracle of the last `draw` (random search, Bayesian
        optimisation)."""
        if self._current is None:
            raise RuntimeError("redraw before any draw")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            response = self._current.oracle.populate_space(f"redraw-{attempt}")
        return clean_params(response.get("values") or {})


class LocalOracle:
    """An `OracleWorker` in the caller's own process (which then imports KerasTuner)."""

    def __init__(self, config: StudyConfig) -> None:
        self.worker = OracleWorker(config)

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.worker, method)(*args)

    def warm(self) -> None:
        """Nothing to start: the oracle is this process's."""

    def close(self) -> None:
        """Nothing to release."""


def _feed(derived: Derived, t: LedgerTrial, params: Mapping[str, Any]) -> None:
    """Feed one ledger trial to the oracle (skipped: no learning rate, or finished without a
    score)."""
    oracle = derived.oracle
    finished = not t.open and t.status is not TrialState.RUNNING
    if "learning_rate" not in params or (finished and t.score is None):
        return
    names = {p.name for p in oracle.hyperparameters.space}
    tuner_id = f"ledger-{t.number}"
    oracle.given = {k: v for k, v in params.items() if k in names}
    try:
        kt_trial = oracle.create_trial(tuner_id)
    finally:
        oracle.given = None
    derived.ids[str(t.extras.get(KT_TRIAL, f"ledger-{t.number}"))] = kt_trial.trial_id
    if not finished:
        return  # ongoing: its values are taken, its score unknown
    if t.status in (TrialState.FAILED, TrialState.INFEASIBLE):
        kt_trial.status = _FAILED
    else:
        oracle.update_trial(kt_trial.trial_id, {OBJECTIVE.name: float(t.score or 0.0)})
        kt_trial.status = _COMPLETED
    with contextlib.redirect_stdout(io.StringIO()):
        oracle.end_trial(kt_trial)


def _place(derived: Derived, oracle_id: str) -> dict[str, Any]:
    """Where the oracle put a new trial: ``{"iteration", "bracket", "round", "past"}``."""
    oracle = derived.oracle
    for bracket in hyperband_brackets(oracle):
        for round_num, round_info in enumerate(bracket["rounds"]):
            for info in round_info:
                if info["id"] == oracle_id:
                    past = info["past_id"]
                    return {
                        "iteration": int(bracket.get("iteration", hyperband_iteration(oracle))),
                        "bracket": int(bracket["bracket_num"]),
                        "round": round_num,
                        "past": None if past is None else derived.kt_id(past),
                    }
    raise AssertionError(f"Hyperband placed trial {oracle_id} in no bracket")


def _rebuild_brackets(derived: Derived, trials: Sequence[LedgerTrial]) -> None:
    """Set a fed Hyperband oracle's bracket bookkeeping from the trials' `HYPERBAND` places.

    KerasTuner keeps them private, with no public setter
    (`study.adapters.keras_tuner_internals.set_hyperband_state` writes them).
    """
    oracle = derived.oracle
    groups: dict[tuple[int, int], list[list[dict[str, Any]]]] = {}
    for t in sorted(trials, key=lambda t: t.number):
        place = t.extras.get(HYPERBAND)
        kt_id = str(t.extras.get(KT_TRIAL, ""))
        if not place or not t.status.counts() or kt_id not in derived.ids:
            continue
        key = (int(place["iteration"]), int(place["bracket"]))
        rounds = groups.setdefault(key, [[] for _ in range(key[1] + 1)])
        past = place.get("past")
        rounds[int(place["round"])].append(
            {
                "past_id": derived.ids.get(str(past)) if past is not None else None,
                "id": derived.ids[kt_id],
            }
        )
    if not groups:
        return
    order = sorted(groups, key=lambda k: (k[0], -k[1]))
    brackets = [{"bracket_num": b, "rounds": groups[(i, b)], "iteration": i} for i, b in order]
    set_hyperband_state(oracle, brackets, *order[-1])
