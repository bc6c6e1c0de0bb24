"""The Python API of `study`, re-exported from the package (``study.load``, ``study.run``).

- `run` runs or continues a study (like ``study run``) and returns its `Study`;
- `load` opens a stored study read only (like ``study status`` and ``study report``);
- `Study` reads the ledger: ``table()``, ``trials()``, ``runs()``, ``fit()`` (a `Fit`),
  ``report()`` and ``plot``;
- `train` trains one trial (like ``study train``) and returns its `TrialResult`.

Importing it is light: TensorFlow only when training (in worker processes), Optuna when the
ledger is read, MLflow when runs are read or written.
"""

from __future__ import annotations

from study.api.fit import Fit
from study.api.studies import Study, load
from study.api.training import run, study_config, train

__all__ = ["Fit", "Study", "load", "run", "study_config", "train"]
