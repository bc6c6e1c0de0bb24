"""KerasTuner backend: an Oracle (random, Bayesian optimisation, Hyperband) per stratum, derived
from the ledger before every proposal.

Nothing of KerasTuner lives on disk: the ledger is its state, so hosts that share only the
study's storage share one search. Before each proposal a fresh oracle is built for the stratum
(its learning-rate range the stratum's current window, `History.window`; seeded from the
study's tuner seed, the stratum and the slot number) and fed every trial of the stratum through
KerasTuner's public trial API: ``create_trial`` with the trial's values (a small oracle subclass,
`_LedgerFed`, returns the given values instead of sampling), then ``update_trial`` with its
objective and ``end_trial`` for a finished one; running ones stay ongoing. The oracle then
proposes. Its ``save`` writes nothing.

What cannot be derived from the trials' values and scores is stored with each KerasTuner
trial in the ledger (``extras``): its KerasTuner trial id (`KT_TRIAL`: the slot number of its
first proposal) and, for Hyperband, its place in the brackets (`HYPERBAND`: iteration, bracket,
round and the trial it continues), from which the bracket bookkeeping is rebuilt. A KerasTuner
trial whose process died (``interrupted`` in the ledger) is proposed again, as KerasTuner retries
a lost trial: same values, same KerasTuner id, origin ``retry``.

Proposals of one process that have not started in the ledger yet count in its own derivations
(threads do not fill one Hyperband place twice). Two hosts proposing at the same instant read
the same ledger: a Hyperband round may then take one trial more than its size, and
`study.tuners.points.settle` keeps their points apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import threading
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import keras_tuner

from study.config.space import Stratum
from study.config.study import Oracle, StudyConfig
from study.ledger import Ledger, LedgerTrial, Slot
from study.results import TrialState
from study.tuners.base import History, Proposal, TunerBackend, clean_params
from study.tuners.keras_tuner_space import to_hyperparameters
from study.tuners.points import Point, lr_range, settle

OBJECTIVE = keras_tuner.Objective("score", direction="min")
#: The ledger extra that links a trial to its KerasTuner trial.
KT_TRIAL = "keras_tuner_trial"
#: The ledger extra holding the learning-rate window a trial was drawn in.
LR_WINDOW = "lr_window"
#: The ledger extra holding a Hyperband trial's place: ``{"iteration", "bracket", "round",
#: "past"}`` (``past``: the KerasTuner id of the trial it continues, or None).
HYPERBAND = "hyperband"
#: The tuner id under which the oracle proposes.
PROPOSER = "study"
_HYPERBAND_MAX_EPOCHS = 9
_RUNNING = keras_tuner.engine.trial.TrialStatus.RUNNING
_COMPLETED = keras_tuner.engine.trial.TrialStatus.COMPLETED
_FAILED = keras_tuner.engine.trial.TrialStatus.FAILED


class _LedgerFed:
    """Mixin for KerasTuner oracles derived from the ledger: while ``given`` is set,
    ``populate_space`` returns those values (a recorded trial) instead of sampling; ``save``
    writes nothing (the ledger is the state)."""

    given: dict[str, Any] | None = None

    def populate_space(self, trial_id: str) -> dict[str, Any]:
        if self.given is not None:
            return {"status": _RUNNING, "values": dict(self.given)}
        return super().populate_space(trial_id)  # type: ignore[misc]

    def save(self) -> None:
        """Nothing to save: the oracle is rebuilt from the ledger."""

    def _save_trial(self, trial: keras_tuner.engine.trial.Trial) -> None:
        """Nothing to save: the ledger holds every trial."""


class RandomOracle(_LedgerFed, keras_tuner.oracles.RandomSearchOracle):
    """Random search derived from the ledger."""


class BayesianOracle(_LedgerFed, keras_tuner.oracles.BayesianOptimizationOracle):
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


class KerasTunerBackend(TunerBackend):
    """Proposes with a KerasTuner Oracle per stratum, derived from the ledger each time."""

    name = "keras-tuner"

    def __init__(self, config: StudyConfig, ledger: Ledger) -> None:
        super().__init__(config, ledger)
        self._lock = threading.Lock()
        #: slot -> extras of this process's proposals not yet started in the ledger (another
        #: thread's derivation counts them, so two threads do not fill one Hyperband place)
        self._proposed: dict[tuple[Stratum, int], dict[str, Any]] = {}

    # -- the oracle ---------------------------------------------------------------------------
    def seed(self, stratum: Stratum, number: int) -> int:
        """The oracle's seed for the proposal in slot ``number``: the study's tuner seed, the
        stratum and the slot, so a proposal does not depend on which host makes it."""
        key = f"{stratum}#{number}".encode()
        return (self.config.tuner_seed * 7919 + zlib.crc32(key)) % (2**31)

    def _oracle(
        self, stratum: Stratum, window: tuple[float, float] | None, number: int
    ) -> keras_tuner.Oracle:
        """The configured oracle; its learning-rate range is the stratum's window, if set."""
        common = {
            "objective": OBJECTIVE,
            "hyperparameters": to_hyperparameters(self.config.space, window),
            "seed": self.seed(stratum, number),
            "max_consecutive_failed_trials": 1_000_000,
        }
        kind = self.config.tuner.oracle
        if kind is Oracle.RANDOM:
            oracle: keras_tuner.Oracle = RandomOracle(max_trials=100_000, **common)
        elif kind is Oracle.HYPERBAND:
            oracle = HyperbandOracle(
                max_epochs=_HYPERBAND_MAX_EPOCHS, factor=3, hyperband_iterations=1000, **common
            )
        else:
            initial = max(2, min(4, self.config.trials_per_stratum // 4))
            oracle = BayesianOracle(max_trials=100_000, num_initial_points=initial, **common)
        oracle.verbose = 0
        return oracle

    def derive(
        self,
        stratum: Stratum,
        window: tuple[float, float] | None,
        number: int,
        trials: Sequence[LedgerTrial] | None = None,
    ) -> Derived:
        """The stratum's oracle as the ledger says it stands (``trials``: the stratum's trials
        just read, else read now): every trial that counts fed to it (finished ones with their
        objective, running ones ongoing, their values the reserved point until their params are
        recorded), Hyperband's brackets rebuilt."""
        derived = Derived(self._oracle(stratum, window, number))
        trials = self._with_proposed(self.ledger.trials(stratum) if trials is None else trials)
        unsettled = any(not t.params and t.number != number for t in trials)
        points = dict(self.ledger.tuning.points(stratum)) if unsettled else {}
        for t in sorted(trials, key=lambda t: t.number):
            if t.status.counts():
                self._feed(derived, t, t.params or points.get(t.number) or {})
        if isinstance(derived.oracle, HyperbandOracle):
            _rebuild_brackets(derived, trials)
        return derived

    def _with_proposed(self, trials: Sequence[LedgerTrial]) -> list[LedgerTrial]:
        """``trials`` with this process's proposals that have not started yet as KerasTuner's
        (forgetting those the ledger now shows started, or closed)."""
        out = []
        for t in trials:
            key = (t.stratum, t.number)
            extras = self._proposed.get(key)
            if extras is not None and (KT_TRIAL in t.extras or not t.open):
                self._proposed.pop(key, None)
            elif extras is not None:
                t = dataclasses.replace(t, tuner=self.name, extras={**t.extras, **extras})
            out.append(t)
        return out

    @staticmethod
    def _feed(derived: Derived, t: LedgerTrial, params: Mapping[str, Any]) -> None:
        """Feed one ledger trial to the oracle (skipped: no learning rate, or finished
        without a score)."""
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

    # -- the backend contract -------------------------------------------------------------
    def propose(self, slot: Slot, history: History) -> Proposal | None:
        stratum = slot.stratum
        trials = self.ledger.trials(stratum)
        lost = self.lost(trials)
        if lost is not None:
            return self._retry(slot, history, lost)
        with self._lock, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the GP's convergence chatter on a few points
            derived = self.derive(stratum, history.window, slot.number, trials)
            known = set(derived.oracle.trials)
            kt_trial = derived.oracle.create_trial(PROPOSER)
            if kt_trial.status != _RUNNING or kt_trial.trial_id in known:
                return None
            extras: dict[str, Any] = {KT_TRIAL: str(slot.number)}
            if isinstance(derived.oracle, HyperbandOracle):
                extras[HYPERBAND] = _place(derived, kt_trial.trial_id)
            redraw = None
            if self.config.tuner.oracle is not Oracle.HYPERBAND:
                redraw = self._redraw(derived)
            values = clean_params(kt_trial.hyperparameters.values)
            params = settle(self.ledger, slot, values, redraw, lr_range(self.config), redraws=1)
            self._proposed[(stratum, slot.number)] = dict(extras)
        return self._proposal(params, "sampler", _fraction(extras), extras, history)

    def lost(self, trials: Sequence[LedgerTrial]) -> LedgerTrial | None:
        """The first KerasTuner trial whose latest run was interrupted (its process died or was
        stopped) after its params were recorded, to be retried; None when every one ran or
        runs."""
        latest: dict[str, LedgerTrial] = {}
        for t in sorted(trials, key=lambda t: t.number):
            if (
                t.tuner == self.name
                and KT_TRIAL in t.extras
                and t.status is not TrialState.DISCARDED
            ):
                latest[str(t.extras[KT_TRIAL])] = t
        interrupted = [
            t
            for t in latest.values()
            if t.status is TrialState.INTERRUPTED and "learning_rate" in t.params
        ]
        return min(interrupted, key=lambda t: t.number) if interrupted else None

    def _retry(self, slot: Slot, history: History, lost: LedgerTrial) -> Proposal:
        """Propose ``lost``'s values again under its KerasTuner id (and Hyperband place)."""
        extras: dict[str, Any] = {KT_TRIAL: str(lost.extras[KT_TRIAL])}
        if HYPERBAND in lost.extras:
            extras[HYPERBAND] = dict(lost.extras[HYPERBAND])
        params = settle(
            self.ledger, slot, clean_params(lost.params), None, lr_range(self.config), redraws=1
        )
        return self._proposal(params, "retry", _fraction(extras), extras, history)

    def _proposal(
        self,
        params: Mapping[str, Any],
        origin: str,
        fraction: float,
        extras: dict[str, Any],
        history: History,
    ) -> Proposal:
        if history.window is not None:
            extras[LR_WINDOW] = list(history.window)
        return Proposal(
            tuner=self.name,
            params=params,
            origin=origin,
            budget_fraction=fraction,
            extras=extras,
        )

    @staticmethod
    def _redraw(derived: Derived) -> Callable[[int, Sequence[Point]], Mapping[str, Any]]:
        """Another draw of the derived oracle (random search, Bayesian optimisation)."""

        def redraw(attempt: int, taken: Sequence[Point]) -> Mapping[str, Any]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                response = derived.oracle.populate_space(f"redraw-{attempt}")
            return clean_params(response.get("values") or {})

        return redraw


def _fraction(extras: Mapping[str, Any]) -> float:
    """The budget fraction of a Hyperband trial (its round's epochs over the maximum), else 1."""
    place = extras.get(HYPERBAND)
    if not place:
        return 1.0
    epochs = _epochs(int(place["bracket"]), int(place["round"]))
    return epochs / _HYPERBAND_MAX_EPOCHS


def _epochs(bracket: int, round_num: int) -> int:
    """Hyperband's epochs for a round of a bracket (KerasTuner's ``_get_epochs``, factor 3)."""
    return -(-_HYPERBAND_MAX_EPOCHS // 3 ** (bracket - round_num))


def _place(derived: Derived, oracle_id: str) -> dict[str, Any]:
    """Where the oracle put a new trial: ``{"iteration", "bracket", "round", "past"}``."""
    oracle = derived.oracle
    for bracket in oracle._brackets:
        for round_num, round_info in enumerate(bracket["rounds"]):
            for info in round_info:
                if info["id"] == oracle_id:
                    past = info["past_id"]
                    return {
                        "iteration": int(bracket.get("iteration", oracle._current_iteration)),
                        "bracket": int(bracket["bracket_num"]),
                        "round": round_num,
                        "past": None if past is None else derived.kt_id(past),
                    }
    raise AssertionError(f"Hyperband placed trial {oracle_id} in no bracket")


def _rebuild_brackets(derived: Derived, trials: Sequence[LedgerTrial]) -> None:
    """Set a fed Hyperband oracle's bracket bookkeeping from the trials' `HYPERBAND` places.

    KerasTuner keeps brackets, the current bracket and iteration as private attributes
    (``_brackets``, ``_current_bracket``, ``_current_iteration``) with no public setter
    besides ``set_state`` from its own files; this is the one place that writes them.
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
    oracle._brackets = [
        {"bracket_num": b, "rounds": groups[(i, b)], "iteration": i} for i, b in order
    ]
    oracle._current_iteration, oracle._current_bracket = order[-1]
