"""The code version of this ``study`` installation: the package version and a short hash of its
source files, e.g. ``0.1.0+3f9c2a1b7e``.

A study records the code version that created it (`study.ledger.StudyRecord.code_version`);
every host that runs or joins it must run the same code, so trials are comparable
(`require_same_code`). ``$STUDY_CODE_VERSION`` pins the version instead (e.g. a release or the
commit a deployment was built from; the test suite pins the version it started with, so edits
to the sources during a run do not split its studies).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from study.errors import UsageError

#: The package version (`study.__version__`; pyproject.toml's ``version``).
__version__ = "0.1.0"

#: The files whose content makes the code version (the package's code and its schema).
SOURCE_SUFFIXES = (".py", ".json")
#: The environment variable that pins the code version.
PIN = "STUDY_CODE_VERSION"
_HASH_CHARS = 10


def code_version() -> str:
    """``$STUDY_CODE_VERSION`` if set, else `installed_version`."""
    return os.environ.get(PIN) or installed_version()


@functools.lru_cache(maxsize=1)
def installed_version() -> str:
    """``<package version>+<hash of the installed package's source files>``."""
    return f"{__version__}+{source_hash(Path(__file__).parent)}"


def source_hash(package: Path) -> str:
    """A short SHA-256 of every source file under ``package`` (relative path and content, in
    path order; caches such as ``__pycache__`` left out)."""
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in package.rglob("*")
        if p.suffix in SOURCE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts
    )
    for path in files:
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:_HASH_CHARS]


def require_same_code(study: str, recorded: str | None) -> None:
    """Refuse to run study ``study`` with other code than the one that created it (studies
    from before code versions were recorded pass).

    Raises:
        UsageError: e.g. ``study 'mnist' was created by study 0.1.0+3f9c2a1b7e but this host
            runs 0.1.0+81d0c4e2aa; install the same version of study here, or start a new
            study (another name) with this one``.
    """
    here = code_version()
    if recorded and recorded != here:
        raise UsageError(
            f"study {study!r} was created by study {recorded} but this host runs {here}; "
            "install the same version of study here, or start a new study (another name) "
            "with this one"
        )
