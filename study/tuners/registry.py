"""Which backends search a study, and which one proposes for which slot.

Backends are registered by name with a lazy import. The tuner choice (field ``tuner``, a flag
of the run commands) builds a `Lineup`:

- ``optuna``: Optuna proposes every trial;
- ``keras-tuner``: KerasTuner proposes every trial;
- ``both`` (default): they alternate within each stratum, Optuna the even-numbered trials and
  KerasTuner the odd-numbered ones.

Optuna is always part of the lineup (its sampler lives on the ledger) and stands in when the
chosen backend has nothing to propose (e.g. Hyperband between brackets). With ``tuner.confirm``
a `study.tuners.confirm.Confirmer` takes each stratum's slots once its search is spent.
KerasTuner's oracle runs where the ``oracle`` factory given to `build_lineup` puts it (by
default in this process: `study.tuners.keras_tuner_backend`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from study.config.study import StudyConfig
from study.errors import FieldError
from study.ledger import Ledger, Slot
from study.tuners.base import History, Proposal, TunerBackend

#: Backend name -> ``module:class``.
BACKENDS = {
    "optuna": "study.tuners.optuna_backend:OptunaBackend",
    "keras-tuner": "study.tuners.keras_tuner_backend:KerasTunerBackend",
}
BOTH = "both"
#: The tuner choices.
TUNERS = (*BACKENDS, BOTH)


def uses_keras_tuner(choice: str) -> bool:
    """Whether the lineup of tuner choice ``choice`` holds KerasTuner (whose oracle a run starts
    early: `study.runner.launch`)."""
    return choice in (BOTH, "keras-tuner")


def backend_class(name: str) -> type[TunerBackend]:
    """The backend class registered as ``name`` (imported on first use)."""
    if name not in BACKENDS:
        raise _unknown(name)
    module, _, attr = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


class Lineup:
    """The backends of a run: ``rotation`` takes turns by trial number; ``fallback`` proposes
    when the backend whose turn it is has nothing to propose; ``confirmer`` (if any) goes first
    and proposes the confirmation trials of strata whose search is spent; ``warm_starter`` (if
    any) proposes each stratum's first trial from another study (``tuner.warm_start``) and
    ``designer`` the designed ones."""

    def __init__(
        self,
        rotation: Sequence[TunerBackend],
        fallback: TunerBackend,
        confirmer: TunerBackend | None = None,
        designer: TunerBackend | None = None,
        warm_starter: TunerBackend | None = None,
    ) -> None:
        self.rotation = tuple(rotation)
        self.fallback = fallback
        self.confirmer = confirmer
        self.designer = designer
        self.warm_starter = warm_starter

    @property
    def backends(self) -> list[TunerBackend]:
        """Every backend once."""
        extra = [b for b in (self.confirmer, self.warm_starter, self.designer) if b is not None]
        return list(dict.fromkeys([*self.rotation, self.fallback, *extra]))

    def for_slot(self, slot: Slot) -> TunerBackend:
        return self.rotation[slot.number % len(self.rotation)]

    def propose(self, slot: Slot, history: History) -> tuple[TunerBackend, Proposal]:
        """The first proposal of the confirmer, the warm start, the designer (these two recorded
        under the name of the backend whose turn it is), the backend whose turn it is, the
        fallback.

        Raises:
            RuntimeError: none of them proposed (the fallback always should).
        """
        turn = self.for_slot(slot)
        for backend in (self.confirmer, self.warm_starter, self.designer, turn, self.fallback):
            if backend is not None:
                proposal = backend.propose(slot, history)
                if proposal is not None:
                    if backend is self.designer or backend is self.warm_starter:
                        proposal = dataclasses.replace(proposal, tuner=turn.name)
                    return backend, proposal
        raise RuntimeError(f"no tuner proposed a trial for {slot.stratum}#{slot.number}")

    def warm(self) -> None:
        """Have every backend start what its first proposal needs (`TunerBackend.warm`)."""
        for backend in self.backends:
            backend.warm()

    def close(self) -> None:
        for backend in self.backends:
            backend.close()


def build_lineup(
    choice: str,
    config: StudyConfig,
    ledger: Ledger,
    oracle: Callable[[StudyConfig], Any] | None = None,
) -> Lineup:
    """The lineup for a tuner choice (see the module docstring), with a `Confirmer` when
    the study asks for confirmation trials (``tuner.confirm``); ``oracle`` makes the client
    of KerasTuner's oracle (`study.tuners.keras_tuner_backend.OracleClient`)."""
    if choice not in TUNERS:
        raise _unknown(choice)
    from study.tuners.confirm import Confirmer
    from study.tuners.designer import Designer
    from study.tuners.warm_start import WarmStarter

    confirmer = Confirmer(config, ledger) if config.tuner.confirm.enabled else None
    designer = Designer(config, ledger) if config.tuner.design else None
    warm = WarmStarter(config, ledger) if config.tuner.warm_start is not None else None
    optuna = backend_class("optuna")(config, ledger)
    if choice == "optuna":
        return Lineup([optuna], optuna, confirmer, designer, warm)
    options = {} if oracle is None else {"oracle": oracle}
    keras_tuner = backend_class("keras-tuner")(config, ledger, **options)  # type: ignore[call-arg]
    if choice == "keras-tuner":
        return Lineup([keras_tuner], optuna, confirmer, designer, warm)
    return Lineup([optuna, keras_tuner], optuna, confirmer, designer, warm)


def _unknown(name: str) -> FieldError:
    return FieldError(
        "tuner", value=name, detail=f"unknown tuner {name!r}; choose from {', '.join(TUNERS)}"
    )
