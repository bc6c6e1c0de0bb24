"""Optional dependencies: TensorFlow and the database drivers come from pip extras.

Each check fails with a `UsageError` that names the extra to install, written for how this
copy of `study` was installed (`install_command`): ``pip install -e '.[cpu]'`` in an editable
checkout, ``pip install '/path/to/study[cpu]'`` for a local directory installed as is,
``pip install 'scaling-study[cpu] @ git+https://...'`` from a repository and ``pip install
'scaling-study[cpu]'`` from a package index (`DISTRIBUTION`: the name on the index; the import
package and the command are ``study``). So a light install (no extra) still runs every command
that does not train.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from study.errors import UsageError

#: The distribution's name on a package index (``study`` there is another project's).
DISTRIBUTION = "scaling-study"


def install_command(extras: str) -> str:
    """The pip command that adds ``extras`` (``cpu``, ``postgres``) to this installation."""
    origin = installed_from()
    if origin is None:
        return f"pip install '{DISTRIBUTION}[{extras}]'"
    kind, where = origin
    if kind == "editable":
        return f"pip install -e '{_shown(where)}[{extras}]'"
    if kind == "directory":
        return f"pip install '{_shown(where)}[{extras}]'"
    return f"pip install '{DISTRIBUTION}[{extras}] @ {where}'"


@functools.cache
def installed_from() -> tuple[str, str] | None:
    """Where this installation came from: ``("editable", DIR)`` when the package runs from a
    source tree (its ``pyproject.toml`` beside it: an editable install or a checkout on
    ``sys.path``), else by the distribution's ``direct_url.json`` (PEP 610) ``("directory",
    DIR)`` or ``("url", URL)`` (a repository or an archive), or None for a package index."""
    tree = source_tree()
    if tree is not None:
        return ("editable", str(tree))
    texts = [d.read_text("direct_url.json") for d in _distributions()]
    text = next((t for t in texts if t), None)
    if not text:
        return None
    try:
        direct = json.loads(text)
    except ValueError:
        return None
    url = str(direct.get("url", ""))
    if "vcs_info" in direct:
        vcs = direct["vcs_info"].get("vcs", "git")
        return ("url", url if url.startswith(f"{vcs}+") else f"{vcs}+{url}")
    if url.startswith("file://") and "dir_info" in direct:
        path = unquote(urlparse(url).path)
        return ("editable" if direct["dir_info"].get("editable") else "directory", path)
    return ("url", url) if url else None


def source_tree() -> Path | None:
    """The checkout this package runs from (the folder holding ``pyproject.toml`` and
    ``study/``), or None when it is installed in site-packages."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def _distributions() -> list[metadata.Distribution]:
    try:
        return [metadata.distribution(DISTRIBUTION)]
    except metadata.PackageNotFoundError:
        return []


def _shown(path: str) -> str:
    """A directory as a command would name it: ``.`` for the working directory, else relative
    to it when inside it, else absolute."""
    here = os.getcwd()
    if os.path.abspath(path) == here:
        return "."
    relative = os.path.relpath(path, here)
    return relative if not relative.startswith("..") else path


def tensorflow_install() -> str:
    """How to install TensorFlow for `study`."""
    return f"{install_command('cpu')} (or '[gpu]' on a CUDA host)"


def driver_install() -> str:
    """How to install a database driver for `study`."""
    return f"{install_command('postgres')} or the '[mysql]' extra"


def require_tensorflow() -> None:
    """Fail early, with the install command, when TensorFlow is missing."""
    if importlib.util.find_spec("tensorflow") is None:
        raise UsageError(f"TensorFlow is not installed: {tensorflow_install()}")


#: What Keras imports when it is installed, for features a trainer worker never uses: its
#: scikit-learn wrappers (``keras.wrappers``) and its image gallery (matplotlib's pyplot).
#: Together 1.7 of the 5 CPU seconds ``import tensorflow`` takes here (TensorFlow imports Keras).
KERAS_EXTRAS = ("sklearn", "matplotlib")


class _Hidden(importlib.abc.MetaPathFinder):
    """An import finder that refuses ``names`` (and their submodules)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"{name} is hidden while TensorFlow is imported")
        return None


@contextlib.contextmanager
def without_keras_extras(extras: tuple[str, ...] = KERAS_EXTRAS) -> Iterator[None]:
    """Import TensorFlow in a trainer worker without ``extras`` (Keras takes each as not
    installed), e.g. ``with without_keras_extras(): import tensorflow``. Afterwards they import
    as usual: a user's model or workload that uses scikit-learn or matplotlib still gets them;
    only Keras' own wrappers for them stay off in that process. Extras already imported stay."""
    hidden = _Hidden(tuple(n for n in extras if n not in sys.modules))
    sys.meta_path.insert(0, hidden)
    try:
        yield
    finally:
        sys.meta_path.remove(hidden)


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
