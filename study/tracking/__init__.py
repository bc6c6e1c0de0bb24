"""Experiment tracking in MLflow: one run per trial, nested under a parent run per study."""
