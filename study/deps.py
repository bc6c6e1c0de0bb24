"""Optional dependencies: TensorFlow and the database drivers come from pip extras.

Each check fails with a `UsageError` that names the extra to install, so a light install
(``pip install -e .``) still runs every command that does not train.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator

from study.errors import UsageError

#: How to install what an extra provides.
INSTALL = {
    "tensorflow": "pip install -e '.[cpu]' (or '.[gpu]' on a CUDA host)",
    "database driver": "pip install -e '.[postgres]' or '.[mysql]'",
}


def require_tensorflow() -> None:
    """Fail early, with the install command, when TensorFlow is missing."""
    if importlib.util.find_spec("tensorflow") is None:
        raise UsageError(f"TensorFlow is not installed: {INSTALL['tensorflow']}")


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Hide TensorFlow's C++ start-up chatter while importing it (it ignores
    ``TF_CPP_MIN_LOG_LEVEL`` for some lines), e.g. ``with quiet_stderr(): import tensorflow``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
