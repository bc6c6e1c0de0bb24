"""Where things are stored: the default local store under ``mlruns/`` and URI resolution.

Default: MLflow's SQLite backend ``sqlite:///<cwd>/mlruns/mlflow.db`` with artifacts under
``mlruns/artifacts``, and the Optuna journal ``mlruns/optuna.journal``. ``--tracking-uri`` or
``MLFLOW_TRACKING_URI`` override the MLflow store; ``--storage`` the Optuna one.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_ROOT = Path("mlruns")


def store_root(root: Path | None = None) -> Path:
    """The local store directory (absolute), created if needed."""
    path = (root or Path(os.environ.get("STUDY_HOME", DEFAULT_ROOT))).absolute()
    path.mkdir(parents=True, exist_ok=True)
    return path


def tracking_uri(option: str | None = None, root: Path | None = None) -> str:
    """The MLflow tracking URI: the option, else ``MLFLOW_TRACKING_URI``, else the local SQLite store."""
    if option:
        return option
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{store_root(root) / 'mlflow.db'}"


def artifact_root(uri: str, root: Path | None = None) -> str | None:
    """Artifact location for new experiments: under ``mlruns/artifacts`` for a local SQLite store."""
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        return (db.parent / "artifacts").absolute().as_uri()
    return None
