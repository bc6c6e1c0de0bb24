"""study: experiment-tracked hyperparameter scaling studies for TensorFlow models.

The Python API (`study.api`)::

    import study
    s = study.run("search_spaces/quickstart.yaml")     # or study.load("quickstart")
    s.table(), s.trials(), s.fit().b_noise, s.plot.steps(), s.report("reports/quickstart")
    study.fit_ladder(["d5k", "d10k", "d20k"]).predict(40_000)   # the answer at more data
    result = study.train("mnist1d", batch_size=64, learning_rate=0.1)

Importing this package is cheap: TensorFlow, MLflow and Optuna are imported only by the
modules that need them, and the API's names are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from study.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from study.api import Fit, Ladder, Study, TrialDefinition, fit_ladder, load, run, train
    from study.errors import StorageUnavailable, StudyError, StudyNotFound, UsageError
    from study.results import TrialResult, TrialState

#: The public names and the module each comes from (imported on first use).
_PUBLIC = {
    "run": "study.api",
    "load": "study.api",
    "train": "study.api",
    "Study": "study.api",
    "Fit": "study.api",
    "Ladder": "study.api",
    "fit_ladder": "study.api",
    "TrialDefinition": "study.api",
    "StudyError": "study.errors",
    "StorageUnavailable": "study.errors",
    "StudyNotFound": "study.errors",
    "UsageError": "study.errors",
    "TrialResult": "study.results",
    "TrialState": "study.results",
}

__all__ = [
    "Fit",
    "Ladder",
    "StorageUnavailable",
    "Study",
    "StudyError",
    "StudyNotFound",
    "TrialDefinition",
    "TrialResult",
    "TrialState",
    "UsageError",
    "__version__",
    "fit_ladder",
    "load",
    "run",
    "train",
]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'study' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
