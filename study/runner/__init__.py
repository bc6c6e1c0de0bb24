"""Running trials: worker processes keyed by device configuration."""

from study.runner.pool import WorkerPool

__all__ = ["WorkerPool"]
