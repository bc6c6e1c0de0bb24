"""KerasTuner backend: an Oracle (random, Bayesian optimisation, Hyperband) per stratum, derived
from the ledger before every proposal.

This module reads and writes the ledger and imports no KerasTuner: the oracle itself
(`study.tuners.keras_tuner_oracle`, which imports Keras and so TensorFlow) runs where an
``oracle`` factory puts it, by default in this process (`LocalOracle`); a study's host puts it
in a process forked from its trainer workers' server, which imported TensorFlow already
(`study.runner.oracle_process`), so the host itself never imports TensorFlow.

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

import dataclasses
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from study.config.space import Stratum
from study.config.study import Oracle, StudyConfig
from study.ledger import Ledger, LedgerTrial, Slot
from study.ledger.records import Origin
from study.results import TrialState
from study.tuners.base import History, Proposal, TunerBackend, clean_params
from study.tuners.keras_tuner_records import (
    HYPERBAND,
    HYPERBAND_MAX_EPOCHS,
    KT_TRIAL,
    LR_WINDOW,
    DrawRequest,
)
from study.tuners.points import Point, lr_range, settle

if TYPE_CHECKING:  # pragma: no cover  (importing it imports TensorFlow)
    from study.tuners.keras_tuner_oracle import Derived

__all__ = ["HYPERBAND", "KT_TRIAL", "LR_WINDOW", "KerasTunerBackend", "OracleClient"]


class OracleClient(Protocol):
    """Where the oracle runs: ``call("draw", request)`` and ``call("redraw", attempt)`` on an
    `study.tuners.keras_tuner_oracle.OracleWorker` for the study; `warm` starts what the first
    call needs without waiting for it; `close` releases it."""

    def call(self, method: str, *args: Any) -> Any: ...

    def warm(self) -> None: ...

    def close(self) -> None: ...


def local_oracle(config: StudyConfig) -> OracleClient:
    """The oracle in this process (imports KerasTuner, and so TensorFlow, on first use)."""
    from study.deps import without_keras_extras

    # Maybe from a trial thread: standard error stays as it is (`quiet_stderr` would swallow
    # other threads' lines); the log level hides TensorFlow's start-up chatter. Nothing of
    # KerasTuner needs Keras' matplotlib gallery (0.7 s).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with without_keras_extras(("matplotlib",)):
        from study.tuners.keras_tuner_oracle import LocalOracle

    return LocalOracle(config)


class KerasTunerBackend(TunerBackend):
    """Proposes with a KerasTuner Oracle per stratum, derived from the ledger each time;
    ``oracle`` makes the `OracleClient` (started on the first proposal)."""

    name = "keras-tuner"

    def __init__(
        self,
        config: StudyConfig,
        ledger: Ledger,
        oracle: Callable[[StudyConfig], OracleClient] = local_oracle,
    ) -> None:
        super().__init__(config, ledger)
        self._lock = threading.Lock()
        self._make_oracle = oracle
        self._oracle: OracleClient | None = None
        #: slot -> extras of this process's proposals not yet started in the ledger (another
        #: thread's derivation counts them, so two threads do not fill one Hyperband place)
        self._proposed: dict[tuple[Stratum, int], dict[str, Any]] = {}

    # -- the oracle ---------------------------------------------------------------------------
    def request(
        self,
        stratum: Stratum,
        window: tuple[float, float] | None,
        number: int,
        trials: Sequence[LedgerTrial] | None = None,
    ) -> DrawRequest:
        """What the stratum's oracle is derived from (``trials``: the stratum's trials just
        read, else read now): its trials with this process's proposals not started yet, and
        the reserved points of those whose params are not recorded yet."""
        trials = self._with_proposed(self.ledger.trials(stratum) if trials is None else trials)
        unsettled = any(not t.params and t.number != number for t in trials)
        points = dict(self.ledger.tuning.points(stratum)) if unsettled else {}
        return DrawRequest(stratum, window, number, tuple(trials), points)

    def derive(
        self,
        stratum: Stratum,
        window: tuple[float, float] | None,
        number: int,
        trials: Sequence[LedgerTrial] | None = None,
    ) -> Derived:
        """The stratum's oracle as the ledger says it stands, in this process (see
        `study.tuners.keras_tuner_oracle.derive`)."""
        from study.tuners.keras_tuner_oracle import derive

        return derive(self.config, self.request(stratum, window, number, trials))

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

    # -- the backend contract -------------------------------------------------------------
    def warm(self) -> None:
        """Make the oracle's client and have it start its process in the background (the run's
        `study.runner.oracle_process.OracleProcess` imports KerasTuner there while the first
        trials train). The client comes from ``oracle``: `local_oracle` imports KerasTuner
        here."""
        with self._lock:
            if self._oracle is None:
                self._oracle = self._make_oracle(self.config)
            oracle = self._oracle
        oracle.warm()

    def propose(self, slot: Slot, history: History) -> Proposal | None:
        stratum = slot.stratum
        trials = self.ledger.trials(stratum)
        lost = self.lost(trials)
        if lost is not None:
            return self._retry(slot, history, lost)
        with self._lock:
            if self._oracle is None:
                self._oracle = self._make_oracle(self.config)
            oracle = self._oracle
            draw = oracle.call("draw", self.request(stratum, history.window, slot.number, trials))
            if draw is None:
                return None
            extras: dict[str, Any] = {KT_TRIAL: str(slot.number), **draw.extras}
            redraw = None
            if self.config.tuner.oracle is not Oracle.HYPERBAND:

                def redraw(attempt: int, taken: Sequence[Point]) -> Mapping[str, Any]:
                    return oracle.call("redraw", attempt)

            params = settle(
                self.ledger, slot, draw.values, redraw, lr_range(self.config), redraws=1
            )
            self._proposed[(stratum, slot.number)] = dict(extras)
        return self._proposal(params, "sampler", _fraction(extras), extras, history)

    def close(self) -> None:
        with self._lock:
            if self._oracle is not None:
                self._oracle.close()
                self._oracle = None

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
        origin: Origin,
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


def _fraction(extras: Mapping[str, Any]) -> float:
    """The budget fraction of a Hyperband trial (its round's epochs over the maximum), else 1."""
    place = extras.get(HYPERBAND)
    if not place:
        return 1.0
    epochs = _epochs(int(place["bracket"]), int(place["round"]))
    return epochs / HYPERBAND_MAX_EPOCHS


def _epochs(bracket: int, round_num: int) -> int:
    """Hyperband's epochs for a round of a bracket (KerasTuner's ``_get_epochs``, factor 3)."""
    return -(-HYPERBAND_MAX_EPOCHS // 3 ** (bracket - round_num))
