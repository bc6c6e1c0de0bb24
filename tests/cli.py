"""Running `study` as a user does: ``python -m study ARGS`` in a directory of its own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.zygote import run


def study(
    *args: str, cwd: Path, pythonpath: Path | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m study ARGS`` in ``cwd`` (a process forked from the zygote,
    `tests.zygote`): its store is ``cwd/mlruns``, its dataset cache ``cwd/cache``; no
    inherited tracking URI or store root; ``pythonpath`` is put first on the module path (a
    user's own modules)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    env["STUDY_CACHE_DIR"] = str(cwd / "cache")
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    return run(args, cwd=cwd, env=env, timeout=timeout)
