"""Experiment tracking in MLflow: one run per trial, nested under a parent run per study.

Defaults for MLflow in this process (each can be overridden by setting the variable):
no usage telemetry; no "View run at ..." lines on stdout for every run a server closes; and a
call to a tracking server that stops answering is given up after about 15 s (3 retries) instead
of MLflow's 4 minutes: logging then pauses until the server answers again and catches up from
the ledger, which keeps every trial (`study.tracking.jobs`).
"""

import os

for _name, _value in {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
}.items():
    os.environ.setdefault(_name, _value)
