"""The storage a stratum's Optuna study (its sampler) goes through: the ledger's storage, but
inside a trial's set-up (`StorageAccess.recent`) it reads the stratum's trials from the ledger's
recent read and holds what the sampler writes to the trial being set up until the trial's next
write. A study's id is the ledger's (looked up once); its direction is to minimise.

TPE, for one, reads every trial of the stratum twice to propose one trial and, as a constant
liar, writes the proposal into the trial's system attributes: three transactions on a
database that the trial's set-up has already paid for (it read the stratum moments ago, and it
writes the trial when it reserves its point, `TunerState.reserve`). Outside a set-up every call
goes to the storage as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Container
from typing import Any, Protocol

from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.ledger.batch import TrialWrites


class SetUp(Protocol):
    """What the sampler's storage needs of the ledger's access (`StorageAccess` is one)."""

    storage: BaseStorage

    def recent_stratum(self, study_id: int) -> Any: ...

    def study_id(self, name: str) -> int: ...

    def frozen(self, stratum: Any) -> list[FrozenTrial]: ...

    def setting_up(self, trial_id: int) -> bool: ...

    def hold(self, writes: TrialWrites) -> None: ...


class SamplerStorage(BaseStorage):
    """The ledger's storage as its stratum studies see it (see the module docstring)."""

    def __init__(self, access: SetUp) -> None:
        self._access = access

    def __getattr__(self, name: str) -> Any:  # anything else the ledger's storage has
        if name == "_access":
            raise AttributeError(name)
        return getattr(self._access.storage, name)

    def get_study_id_from_name(self, study_name: str) -> int:
        """The id of a study, looked up once per ledger (`StorageAccess.study_id`): loading a
        stratum's study asks for it, and the ledger often knows it already."""
        return self._access.study_id(study_name)

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        """Minimise: the ledger creates every stratum's study so (`StorageAccess.study`) and
        only stratum studies go through this storage; loading one need not read it back."""
        return [StudyDirection.MINIMIZE]

    def get_all_trials(
        self,
        study_id: int,
        deepcopy: bool = True,
        states: Container[OptunaState] | None = None,
    ) -> list[FrozenTrial]:
        stratum = self._access.recent_stratum(study_id)
        if stratum is None:
            return self._access.storage.get_all_trials(study_id, deepcopy=deepcopy, states=states)
        trials = [t for t in self._access.frozen(stratum) if states is None or t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        if self._access.setting_up(trial_id):
            self._access.hold(TrialWrites(trial_id, system={key: value}))
        else:
            self._access.storage.set_trial_system_attr(trial_id, key, value)


def _delegate(name: str) -> Callable[..., Any]:
    def call(self: SamplerStorage, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._access.storage, name)(*args, **kwargs)

    call.__name__ = name
    call.__doc__ = f"`BaseStorage.{name}` of the ledger's storage."
    return call


for _name in [n for n in dir(BaseStorage) if not n.startswith("_")]:
    if _name not in SamplerStorage.__dict__:
        setattr(SamplerStorage, _name, _delegate(_name))
SamplerStorage.__abstractmethods__ = frozenset()
