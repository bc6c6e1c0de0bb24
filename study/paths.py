"""Where a study's state lives on disk: the local store under ``mlruns/`` (or ``$STUDY_HOME``).

Layout of the local store::

    mlruns/optuna.journal   the ledger (Optuna journal storage; `study.ledger`)
    mlruns/mlflow.db        MLflow's SQLite tracking store
    mlruns/artifacts/       MLflow artifacts of every experiment

Where studies are stored, said once (each command prints it: `where`); the first that is set
wins:

- the local store: ``$STUDY_HOME`` (`HOME_ENV`), else ``./mlruns`` in the working directory.
  This is the one setting for a single host: set it once (e.g. in the shell's profile) and
  every command, in any folder, reads and writes the same studies;
- the ledger: ``--storage URL`` (a database, a ``study serve-storage`` proxy or a journal
  file; the Python API's ``storage=``), else the local store's ``optuna.journal``;
- the MLflow runs: ``--tracking-uri URL``, else ``$MLFLOW_TRACKING_URI``, else the local
  store's ``mlflow.db``.

Hosts that share a study share ``--storage`` and ``--tracking-uri`` (servers). KerasTuner
keeps no state of its own: its oracles are derived from the ledger
(`study.tuners.keras_tuner_backend`), so a study on a database server and a tracking server
needs no shared filesystem.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from study.errors import FieldError

DEFAULT_ROOT = Path("mlruns")
#: The environment variable that moves the local store (default: ``./mlruns``).
HOME_ENV = "STUDY_HOME"
JOURNAL = "optuna.journal"
MLFLOW_DB = "mlflow.db"
ARTIFACTS = "artifacts"


#: A study name: one path component of its own, since folders are named after it
#: (``reports/NAME``) and so are the ledger's studies; dots alone (``.``, ``..``) are refused.
STUDY_NAME = re.compile(r"^(?!\.+$)[A-Za-z0-9_.-]+$")
STUDY_NAME_RULE = (
    "letters, digits, '_', '.' or '-', not dots alone (it names folders: reports/NAME)"
)


def study_name(name: str | None, *, called: str = "name") -> str | None:
    """``name`` if it is a good study name (`STUDY_NAME`) or None, else a `FieldError` on
    ``name`` (its message calls it ``called``, e.g. a flag).

    Example: ``study_name("..")`` raises ``name must be letters, digits, ... (got '..')``.
    """
    if name is not None and (not isinstance(name, str) or not STUDY_NAME.match(name)):
        raise FieldError("name", f"must be {STUDY_NAME_RULE}", name, name=called)
    return name


def cache_dir() -> Path:
    """Where generated datasets and facts about data files are cached: ``$STUDY_CACHE_DIR`` if
    set, else ``~/.cache/study``."""
    configured = os.environ.get("STUDY_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "study"


def store_root(root: Path | None = None, *, create: bool = True) -> Path:
    """The local store directory (absolute): ``root``, ``$STUDY_HOME`` or ``./mlruns``."""
    path = (root or Path(os.environ.get(HOME_ENV) or DEFAULT_ROOT)).absolute()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def journal_path(root: Path | None = None, *, create: bool = True) -> Path:
    """The default ledger file (``create``: make its folder if missing)."""
    return store_root(root, create=create) / JOURNAL


def local_tracking_uri(root: Path | None = None, *, create: bool = True) -> str:
    """The URI of the local MLflow store, ``sqlite:///<store>/mlflow.db``."""
    return f"sqlite:///{store_root(root, create=create) / MLFLOW_DB}"


def tracking_uri(option: str | None = None, root: Path | None = None) -> str:
    """The MLflow tracking URI: the option, else ``MLFLOW_TRACKING_URI``, else the local store."""
    if option:
        return option
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return local_tracking_uri(root)


def where(storage: str | None = None, tracking: str | None = None, *, runs: bool = True) -> str:
    """Where a command stores studies, and what chose it (the module docstring's order): the
    local store when both the ledger (``storage``: ``--storage``) and the MLflow runs
    (``tracking``: ``--tracking-uri``; ``runs=False``: a command that reads no runs) are in
    it, else each of them.

    Example: in ``/home/ana/proj`` with nothing set, ``mlruns/ (the default: ./mlruns; set
    STUDY_HOME to keep studies elsewhere)``; with ``STUDY_HOME=/data/studies``,
    ``/data/studies/ ($STUDY_HOME)``; with ``--storage postgresql://ana:pw@db/s``, ``ledger
    postgresql://ana:***@db/s (--storage), MLflow runs mlruns/mlflow.db (the default)``.
    """
    root = store_root(create=False)
    home = bool(os.environ.get(HOME_ENV))
    chosen = f"${HOME_ENV}" if home else "the default"
    uri = (tracking or os.environ.get("MLFLOW_TRACKING_URI")) if runs else None
    if not storage and not uri:
        hint = "" if home else f": ./{DEFAULT_ROOT}; set {HOME_ENV} to keep studies elsewhere"
        return f"{shown(root)}/ ({chosen}{hint})"
    ledger = f"{masked(storage)} (--storage)" if storage else f"{shown(root / JOURNAL)} ({chosen})"
    parts = [f"ledger {ledger}"]
    if runs:
        source = "--tracking-uri" if tracking else "$MLFLOW_TRACKING_URI"
        mlflow = f"{masked(uri)} ({source})" if uri else f"{shown(root / MLFLOW_DB)} ({chosen})"
        parts.append(f"MLflow runs {mlflow}")
    return ", ".join(parts)


def shown(path: Path) -> str:
    """``path`` as messages show it: relative to the working directory when inside it, else absolute."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def sqlite_file(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH[?QUERY]`` URI; None for any other store
    (a server, in-memory SQLite)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri.removeprefix("sqlite:///").partition("?")[0]
    return Path(path) if path and path != ":memory:" else None


def tracking_store_exists(option: str | None = None) -> bool:
    """Whether the MLflow store a command would use already exists (remote stores: assumed)."""
    uri = option or os.environ.get("MLFLOW_TRACKING_URI") or local_tracking_uri(create=False)
    db = sqlite_file(uri)
    return db is None or db.exists()


def artifact_root(uri: str) -> str | None:
    """Artifact location for new experiments: ``artifacts/`` next to a local SQLite store."""
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        return (db.parent / ARTIFACTS).absolute().as_uri()
    return None


_PASSWORD = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<password>[^@/\s]+)@"
)


_SECRET_QUERY = re.compile(r"([?&](?:password|passwd|pwd|secret|token)=)[^&\s]*", re.I)


def masked(text: str, url: str | None = None) -> str:
    """``text`` with every URL password (``user:PASSWORD@`` or ``?password=...``) replaced by
    ``***``; with ``url``, that URL's password is also masked wherever it appears as a word of
    its own (e.g. in a driver's error message).

    Example: ``masked("postgresql://study:s3cret@db:5432/ledger")`` is
    ``"postgresql://study:***@db:5432/ledger"``.
    """
    out = _SECRET_QUERY.sub(r"\1***", _PASSWORD.sub(r"\g<scheme>\g<user>:***@", text))
    secret = _PASSWORD.search(url or "")
    if secret:  # as a word of its own: a password "p" leaves "port" alone
        bare = re.escape(secret.group("password"))
        out = re.sub(rf"(?<![A-Za-z0-9]){bare}(?![A-Za-z0-9])", "***", out)
    return out


def exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists; False too where the system cannot say (a name too long for it,
    a NUL in it), as for a missing path, so that a user's odd path meets the missing one's
    message and not an exception."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


def is_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file, as `exists` answers (False where the system cannot say)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False
