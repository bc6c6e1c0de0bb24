"""The Python API of `study`, re-exported from the package (``study.load``, ``study.run``).

- `run` runs or continues a study (like ``study run``) and returns its `Study`;
- `load` opens a stored study read only (like ``study status`` and ``study report``);
- `fit_ladder` joins finished studies at growing training-set sizes into a `Ladder` (like
  ``study ladder``): the laws of the answers in the data size and the next rung's answer;
- `Study` reads the ledger: ``table()``, ``trials()``, ``runs()``, ``fit()`` (a `Fit`),
  ``report()`` and ``plot``;
- `train` trains one trial (like ``study train``) and returns its `TrialResult`; its fields
  are those of `TrialDefinition` (the flags of ``study train``, the keys of a study file).

Importing it is light: TensorFlow only when training (in worker processes), Optuna when the
ledger is read, MLflow when runs are read or written.
"""

from __future__ import annotations

from study.api.fit import Fit
from study.api.ladder import Ladder, fit_ladder
from study.api.studies import Study, load
from study.api.training import run, study_config, train
from study.config.definition import TrialDefinition

__all__ = [
    "Fit",
    "Ladder",
    "Study",
    "TrialDefinition",
    "fit_ladder",
    "load",
    "run",
    "study_config",
    "train",
]
