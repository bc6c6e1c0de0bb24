"""Facts about the host a study runs on (for the parent run's ``environment.json``), read
without importing TensorFlow: Python and package versions, platform, CPU model and count, GPUs
as ``nvidia-smi -L`` lists them, ``TF_CONFIG`` and ``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Any


def environment_info() -> dict[str, Any]:
    """Package versions and host facts, without importing TensorFlow."""
    packages = {}
    for name in (
        "scaling-study",  # this package (`study.deps.DISTRIBUTION`)
        "tensorflow",
        "tensorflow-cpu",
        "keras",
        "keras-tuner",
        "optuna",
        "mlflow",
        "numpy",
        "pandas",
    ):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "gpus": _gpus(),
        "packages": packages,
        "tf_config": os.environ.get("TF_CONFIG"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _gpus() -> list[str]:
    """GPUs as ``nvidia-smi -L`` lists them (empty without an NVIDIA driver)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]
