"""Which backends search a study, and which one proposes for which slot.

Backends are registered by name with a lazy import (KerasTuner imports TensorFlow). The
tuner choice (field ``tuner``, a flag of the run commands) builds a `Lineup`:

- ``optuna``: Optuna proposes every trial;
- ``keras-tuner``: KerasTuner proposes every trial;
- ``both`` (default): they alternate within each stratum, Optuna the even-numbered trials and
  KerasTuner the odd-numbered ones.

Optuna is always part of the lineup (its sampler lives on the ledger) and stands in when the
chosen backend has nothing to propose (e.g. Hyperband between brackets). With ``tuner.confirm``
a `study.tuners.confirm.Confirmer` takes each stratum's slots once its search is spent.

KerasTuner joins a lineup `Deferred`: it is built (and TensorFlow imported into the host, about
4 CPU-seconds) when a slot first falls to it, so a host that never proposes for it (one trial
per stratum, a resumed study whose search is spent, a fleet's host that only takes Optuna's
slots) does not pay for it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
from collections.abc import Callable, Sequence

from study.config.study import StudyConfig
from study.errors import FieldError
from study.ledger import Ledger, Slot
from study.tuners.base import History, Outcome, Proposal, TunerBackend

#: Backend name -> ``module:class``.
BACKENDS = {
    "optuna": "study.tuners.optuna_backend:OptunaBackend",
    "keras-tuner": "study.tuners.keras_tuner_backend:KerasTunerBackend",
}
BOTH = "both"
#: The tuner choices.
TUNERS = (*BACKENDS, BOTH)


def backend_class(name: str) -> type[TunerBackend]:
    """The backend class registered as ``name`` (imported on first use)."""
    if name not in BACKENDS:
        raise _unknown(name)
    module, _, attr = BACKENDS[name].partition(":")
    if name == "keras-tuner":
        from study.deps import without_keras_extras

        # KerasTuner imports Keras and so TensorFlow; its Bayesian oracle needs scikit-learn,
        # nothing of it needs Keras' matplotlib gallery (0.7 s). It is imported by a trial
        # thread (`Deferred`), so standard error stays as it is (`quiet_stderr` would swallow
        # another thread's lines, such as a storage outage's); the level hides TF's chatter.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        with without_keras_extras(("matplotlib",)):
            return getattr(importlib.import_module(module), attr)
    return getattr(importlib.import_module(module), attr)


class Deferred(TunerBackend):
    """The registered backend ``backend`` (a name of `BACKENDS`), built on its first proposal.

    Only for a backend whose state is the ledger (KerasTuner's oracles are derived from it
    before every proposal): what it did not hear before it was built (`adopt`), it reads then.
    """

    def __init__(self, backend: str, config: StudyConfig, ledger: Ledger) -> None:
        super().__init__(config, ledger)
        self.backend = backend
        self._built: TunerBackend | None = None
        self._lock = threading.Lock()

    @property  # type: ignore[override]
    def name(self) -> str:  # the registered name, known without building the backend
        return self.backend

    @property
    def built(self) -> TunerBackend | None:
        """The backend, once a proposal has built it."""
        return self._built

    def build(self) -> TunerBackend:
        """The backend, built (its module imported) on the first call."""
        with self._lock:
            if self._built is None:
                self._built = backend_class(self.backend)(self.config, self.ledger)
            return self._built

    def propose(self, slot: Slot, history: History) -> Proposal | None:
        return self.build().propose(slot, history)

    def execute(self, proposal: Proposal, run: Callable[[], Outcome]) -> Outcome:
        return self.build().execute(proposal, run)

    def report(self, proposal: Proposal, outcome: Outcome) -> None:
        self.build().report(proposal, outcome)

    def adopt(self, slot: Slot, proposal: Proposal) -> None:
        if self._built is not None:
            self._built.adopt(slot, proposal)

    def close(self) -> None:
        if self._built is not None:
            self._built.close()


class Lineup:
    """The backends of a run: ``rotation`` takes turns by trial number; ``fallback`` proposes
    when the backend whose turn it is has nothing to propose; ``confirmer`` (if any) goes first
    and proposes the confirmation trials of strata whose search is spent."""

    def __init__(
        self,
        rotation: Sequence[TunerBackend],
        fallback: TunerBackend,
        confirmer: TunerBackend | None = None,
        designer: TunerBackend | None = None,
    ) -> None:
        self.rotation = tuple(rotation)
        self.fallback = fallback
        self.confirmer = confirmer
        self.designer = designer

    @property
    def backends(self) -> list[TunerBackend]:
        """Every backend once."""
        extra = [b for b in (self.confirmer, self.designer) if b is not None]
        return list(dict.fromkeys([*self.rotation, self.fallback, *extra]))

    def for_slot(self, slot: Slot) -> TunerBackend:
        return self.rotation[slot.number % len(self.rotation)]

    def propose(self, slot: Slot, history: History) -> tuple[TunerBackend, Proposal]:
        """The first proposal of the confirmer, the designer (recorded under the name of the
        backend whose turn it is), the backend whose turn it is, the fallback.

        Raises:
            RuntimeError: none of them proposed (the fallback always should).
        """
        turn = self.for_slot(slot)
        for backend in (self.confirmer, self.designer, turn, self.fallback):
            if backend is not None:
                proposal = backend.propose(slot, history)
                if proposal is not None:
                    if backend is self.designer:
                        proposal = dataclasses.replace(proposal, tuner=turn.name)
                    return backend, proposal
        raise RuntimeError(f"no tuner proposed a trial for {slot.stratum}#{slot.number}")

    def close(self) -> None:
        for backend in self.backends:
            backend.close()


def build_lineup(choice: str, config: StudyConfig, ledger: Ledger) -> Lineup:
    """The lineup for a tuner choice (see the module docstring), with a `Confirmer` when
    the study asks for confirmation trials (``tuner.confirm``)."""
    if choice not in TUNERS:
        raise _unknown(choice)
    from study.tuners.confirm import Confirmer
    from study.tuners.design import Designer

    confirmer = Confirmer(config, ledger) if config.tuner.confirm.enabled else None
    designer = Designer(config, ledger) if config.tuner.design else None
    optuna = backend_class("optuna")(config, ledger)
    if choice == "optuna":
        return Lineup([optuna], optuna, confirmer, designer)
    keras_tuner = Deferred("keras-tuner", config, ledger)
    if choice == "keras-tuner":
        return Lineup([keras_tuner], optuna, confirmer, designer)
    return Lineup([optuna, keras_tuner], optuna, confirmer, designer)


def _unknown(name: str) -> FieldError:
    return FieldError(
        "tuner", value=name, detail=f"unknown tuner {name!r}; choose from {', '.join(TUNERS)}"
    )
