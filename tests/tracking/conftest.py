"""The tracking tests reach a real MLflow tracking server through its REST API: the session's
``mlflow_server`` fixture (tests/conftest.py; started by `tests.services.mlflow_server`).

``free_port``, ``answers`` and ``stop_group`` are re-exported for the tests that import them
from here.
"""

from __future__ import annotations

from tests.services import answers, free_port, stop_group

__all__ = ["answers", "free_port", "stop_group"]
