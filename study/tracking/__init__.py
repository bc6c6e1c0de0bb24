"""Experiment tracking in MLflow: one run per trial, nested under a parent run per study.

Defaults for MLflow in this process (each can be overridden by setting the variable):
no usage telemetry; no "View run at ..." lines on stdout for every run a server closes; and a
call to a tracking server that stops answering is given up after about 15 s (3 retries) instead
of MLflow's 4 minutes: logging then pauses until the server answers again and catches up from
the ledger, which keeps every trial (`study.tracking.jobs`).
"""

import os

#: MLflow's settings in a `study` process, each set unless the environment already sets it.
MLFLOW_DEFAULTS = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
}


def set_mlflow_defaults() -> None:
    """Set each of `MLFLOW_DEFAULTS` the environment does not set (done when this package is
    imported, before MLflow reads them)."""
    for name, value in MLFLOW_DEFAULTS.items():
        os.environ.setdefault(name, value)


set_mlflow_defaults()
