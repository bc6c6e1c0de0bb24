"""What the tuners keep in the ledger beside the trials: the sampler that proposes a stratum's
parameters, its learning-rate window, its source, params chosen outside the sampler, and the
points claimed trials reserved (so two processes never run one point twice).

Example: the Optuna backend installs its sampler (`TunerState.use_sampler`), and transfer
centres a stratum's search on a window (`TunerState.set_window`); KerasTuner records the
params it chose (`TunerState.record_params`) so Optuna's sampler learns from them too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import optuna

from study.adapters.optuna_internals import id_of_study
from study.config.space import Stratum
from study.ledger.access import Slot, StorageAccess
from study.ledger.batch import TrialWrites, write_study
from study.ledger.records import SEED

_WINDOW = "lr_window"
_CENTRE = "lr_centre"
#: The system attribute holding the point a claimed trial reserved (`TunerState.reserve`).
_POINT = "study:point"


class TunerState:
    """One study's tuner state in the ledger (see the module docstring)."""

    def __init__(self, access: StorageAccess) -> None:
        self._access = access
        self._windows: dict[Stratum, tuple[tuple[float, ...], str]] = {}

    def use_sampler(self, sampler_for: Callable[[Stratum], Any]) -> None:
        """Sample the parameters of claimed trials with ``sampler_for(stratum)`` (an Optuna
        sampler; the Optuna backend installs it, so its sampler sees every ledger trial)."""
        self._access.use_sampler(sampler_for)

    def window(self, stratum: Stratum) -> tuple[float, float] | None:
        """The learning-rate range the stratum's search is centred on (set by transfer)."""
        attrs = self._access.study_attrs(self._access.stratum_name(stratum)) or {}
        window = attrs.get(_WINDOW)
        return (float(window[0]), float(window[1])) if window else None

    def set_window(self, stratum: Stratum, window: tuple[float, float], centre: float) -> None:
        """Note the stratum's learning-rate window and its centre, in one write (when they
        differ from what this ledger last wrote)."""
        key = (tuple(window), repr(centre))
        if self._windows.get(stratum) == key:
            return
        study = self._access.study(stratum)
        attrs = {_WINDOW: list(window), _CENTRE: centre}
        write_study(self._access.storage, id_of_study(study), attrs)
        self._windows[stratum] = key

    def set_stratum_source(self, stratum: Stratum, source: str) -> None:
        """Note where a stratum's trials came from (an imported study's directory)."""
        self._access.study(stratum).set_user_attr("source", source)

    def record_params(
        self, slot: Slot, params: Mapping[str, Any], distributions: Mapping[str, Any]
    ) -> None:
        """Store params chosen outside Optuna's sampler as the trial's Optuna params (with their
        distributions), so Optuna's sampler learns from them; unknown names are skipped. They
        are written with the trial's next write (its start, `Claims.start`)."""
        chosen = {n: (v, distributions[n]) for n, v in params.items() if n in distributions}
        if chosen:
            self._access.hold(TrialWrites(self._access.slot_id(slot), params=chosen))

    def reserve(self, slot: Slot, point: Mapping[str, Any]) -> None:
        """Note the point (metaparameters and seed) the slot's trial is about to run, before its
        params are recorded, so other processes see it (`points`), in one write with what is
        held for the trial. A later call replaces it."""
        trial_id = self._access.slot_id(slot)
        self._access.flush(TrialWrites(trial_id, system={_POINT: json.dumps(dict(point))}))
        self._access.changed(trial_id)  # what `points` reads next must be read afresh

    def points(self, stratum: Stratum) -> list[tuple[int, dict[str, Any]]]:
        """``(number, point)`` of every trial that consumes the stratum's budget (running or
        finished): the point it reserved, else its params with its ``seed`` (None for the
        study's seed). Trials with neither are left out."""
        found = []
        for frozen in self._access.frozen(stratum):
            if not self._access.status(frozen).counts():
                continue
            reserved = frozen.system_attrs.get(_POINT)
            if reserved:
                found.append((frozen.number, dict(json.loads(reserved))))
            elif frozen.params:
                seed = frozen.user_attrs.get(SEED)
                found.append((frozen.number, {**frozen.params, SEED: seed}))
        return found

    def frozen(self, slot: Slot) -> optuna.trial.FrozenTrial:
        """The slot's trial as Optuna's samplers take it (with ``slot.trial.study``): as this
        process wrote it, not read back."""
        return self._access.mine(slot)
