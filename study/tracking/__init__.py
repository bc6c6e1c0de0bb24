"""Experiment tracking in MLflow: one run per trial, nested under a parent run per study."""

import os

# Offline by default: no usage telemetry from MLflow.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
