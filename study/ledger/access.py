"""How the ledger reaches its Optuna storage: study and trial ids, the stratum studies (with
the sampler the Optuna backend installs), the claimed `Slot`, and decoding stored trials.
`Ledger` and its parts (`claims`, `liveness`, `tuning`, `study_notes`) build on one
`StorageAccess`, which also holds the clock they read; nothing outside the ledger package uses
it."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.ledger import records
from study.ledger.clock import SYSTEM_CLOCK, Clock
from study.ledger.records import LedgerTrial, decode_trial, merge_stored
from study.results import TrialState

#: What a stratum's objective value is, for Optuna users (the study's metric name).
METRIC_NAME = "steps_to_target"
#: What its values mean (a stratum study attribute).
OBJECTIVE_MEANING = (
    "steps to the target (fewer is better); a trial that never reached it scores "
    "2 x step limit x (1 + its final shortfall from the target), a diverged or failed one "
    "5 x step limit, so both rank below every trial that reached it; a pruned trial's value is "
    "the steps it ran (it needs more); intermediate values are the distance to the target "
    "(fewer is better, <= 0 once met), the target metric itself is the user attribute "
    "target_curve"
)


@dataclass(frozen=True)
class Slot:
    """A claimed place in a stratum's budget: the trial about to run.

    ``trial`` is the Optuna trial behind it; only the Optuna backend samples on it.
    """

    stratum: Stratum
    number: int
    owner: str
    trial: Any = field(compare=False, repr=False)


class StorageAccess:
    """One study's studies and trials in an Optuna storage, by stratum, and the ``clock``
    its heartbeats are stamped and judged by."""

    def __init__(
        self, storage: optuna.storages.BaseStorage, name: str, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.storage = storage
        self.name = name
        self.clock = clock
        self._studies: dict[Stratum, optuna.Study] = {}
        self._sampler_for: Callable[[Stratum], Any] | None = None
        self._lock = threading.Lock()

    def _stratum_name(self, stratum: Stratum) -> str:
        return f"{self.name}/{stratum}"

    def _stratum_of(self, study_name: str, attrs: Mapping[str, Any]) -> Stratum:
        if "batch_size" in attrs and "strategy" in attrs:
            return Stratum(int(attrs["batch_size"]), str(attrs["strategy"]))
        return Stratum.parse(study_name.removeprefix(f"{self.name}/"))

    def _study(self, stratum: Stratum) -> optuna.Study:
        with self._lock:
            study = self._studies.get(stratum)
            if study is None:
                sampler = self._sampler_for(stratum) if self._sampler_for else None
                name = self._stratum_name(stratum)
                try:  # loading writes nothing; creating only when missing
                    study = optuna.load_study(
                        study_name=name, storage=self.storage, sampler=sampler
                    )
                except KeyError:
                    study = optuna.create_study(
                        storage=self.storage,
                        study_name=name,
                        direction="minimize",
                        sampler=sampler,
                        load_if_exists=True,
                    )
                if "batch_size" not in study.user_attrs:
                    study.set_user_attr("batch_size", stratum.batch_size)
                    study.set_user_attr("strategy", stratum.strategy)
                    study.set_user_attr(records.OBJECTIVE, OBJECTIVE_MEANING)
                    with warnings.catch_warnings():  # experimental in Optuna, and stable here
                        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                        study.set_metric_names([METRIC_NAME])
                self._studies[stratum] = study
            return study

    def _study_id(self, name: str) -> int:
        return self.storage.get_study_id_from_name(name)

    def _study_attrs(self, name: str) -> dict[str, Any] | None:
        try:
            return self.storage.get_study_user_attrs(self._study_id(name))
        except KeyError:
            return None

    def _frozen(self, stratum: Stratum) -> list[FrozenTrial]:
        try:
            study_id = self._study_id(self._stratum_name(stratum))
        except KeyError:
            return []
        return self.storage.get_all_trials(study_id, deepcopy=False)

    def _open_frozen(self, stratum: Stratum) -> list[FrozenTrial]:
        """The stratum's trials still open in the storage (reads only those)."""
        try:
            study_id = self._study_id(self._stratum_name(stratum))
        except KeyError:
            return []
        return self.storage.get_all_trials(study_id, deepcopy=False, states=(OptunaState.RUNNING,))

    def _trial_id(self, stratum: Stratum, number: int) -> int:
        study_id = self._study_id(self._stratum_name(stratum))
        return self.storage.get_trial_id_from_study_id_trial_number(study_id, number)

    def _slot_id(self, slot: Slot) -> int:
        """The storage id of the slot's trial (kept by its Optuna trial: no lookup)."""
        trial_id = getattr(slot.trial, "_trial_id", None)
        return trial_id if trial_id is not None else self._trial_id(slot.stratum, slot.number)

    @staticmethod
    def _status(frozen: FrozenTrial) -> TrialState:
        return TrialState(frozen.user_attrs.get(records.STATUS, TrialState.RUNNING.value))

    @staticmethod
    def _decode(stratum: Stratum, frozen: FrozenTrial) -> LedgerTrial:
        started = frozen.datetime_start.timestamp() if frozen.datetime_start else None
        return decode_trial(
            stratum,
            frozen.number,
            merge_stored(frozen.user_attrs, frozen.system_attrs),
            frozen.params,
            started,
            open=frozen.state is OptunaState.RUNNING,
        )
