"""MLflow tracking servers: whether one answers, and the links that open a study in the UI.

A study's link opens the *model-training* runs view of its experiment: the UI picks its views
from the ``workflowType`` query parameter (without it, it opens the GenAI overview of traces,
tokens and cost), e.g. ``http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning``;
a study's experiment also has a saved view of its trials (`study.tracking.views`), which the
link opens with ``&viewStateShareKey=study-trials``.

`check_answers` is what ``study run`` does before it records anything: MLflow's HTTP client
retries a server that does not answer for minutes, so a plain request with a 3 s timeout decides
first. A server that stops answering later pauses the tracker's logging (`is_unreachable` says
it did; `probe` finds it back) and nothing else: once it answers again the tracker logs what
it missed from the ledger (`study.tracking.jobs`, `StudyTracker.repair`), in the same run.
"""

from __future__ import annotations

import re
from typing import Any

from study.errors import UsageError
from study.paths import masked
from study.tracking.views import view_query, view_tag

#: Experiment tag marking an experiment as model training (the UI's runs table, not traces).
#: The UI of MLflow 3.x follows ``workflowType`` in the link instead when it has both views.
EXPERIMENT_KIND = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"
#: The port ``study ui`` serves on unless told otherwise.
DEFAULT_UI_PORT = 5000
#: The UI's workflow that shows runs, their metrics and models (not traces).
MODEL_TRAINING_VIEW = "workflowType=machine_learning"
#: How long `check_answers` waits for an answer, in seconds.
PROBE_TIMEOUT = 3.0
#: A cheap read every MLflow tracking server answers (with 401/403 if it wants credentials).
_PROBE_PATH = "/api/2.0/mlflow/experiments/search"
_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")


def is_http(uri: str) -> bool:
    """Whether ``uri`` names a tracking server (``http://`` or ``https://``), not a store."""
    return uri.lower().startswith(("http://", "https://"))


def runs_view_url(base: str, experiment_id: str, *, view: bool = False) -> str:
    """The link that opens an experiment on its runs table (``view``: in the study's saved
    view), e.g. ``runs_view_url("http://127.0.0.1:5000", "3")`` is
    ``http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning``."""
    url = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{MODEL_TRAINING_VIEW}"
    return f"{url}&{view_query()}" if view else url


def experiments_url(base: str) -> str:
    """The link to the list of experiments, in the model-training view."""
    return f"{base.rstrip('/')}/#/experiments?{MODEL_TRAINING_VIEW}"


def browse_hint(uri: str, experiment_id: str, *, uri_option: str | None = None) -> str:
    """Where to see a study's runs (in its saved view): its runs view on a tracking server, or
    (for a store such as the local SQLite file) the link ``study ui`` serves it on, and how to
    start that."""
    if is_http(uri):
        return runs_view_url(masked(uri), experiment_id, view=True)
    command = "study ui" + (f" --tracking-uri {masked(uri)}" if uri_option else "")
    url = runs_view_url(f"http://127.0.0.1:{DEFAULT_UI_PORT}", experiment_id, view=True)
    return f"{url} (start the UI with `{command}`)"


def probe(uri: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why no MLflow tracking server answers at ``uri``, or None when one does.

    Only connection failures, timeouts, server errors (HTTP 5xx, which MLflow's client would
    retry for minutes) and HTTP 404 (not an MLflow server) count; a server that asks for
    credentials or presents a certificate this host does not trust answers, and MLflow reports
    those problems itself. Stores that are not servers (``sqlite:///...``) are not probed.
    """
    if not is_http(uri):
        return None
    import requests

    try:
        response = requests.get(
            uri.rstrip("/") + _PROBE_PATH, params={"max_results": 1}, timeout=timeout
        )
    except requests.exceptions.SSLError:
        return None
    except requests.exceptions.Timeout:
        return f"no answer within {timeout:g} s"
    except requests.exceptions.RequestException as exc:
        found = _ERRNO.search(str(exc))
        return found.group(0).strip() if found else type(exc).__name__
    if response.status_code == 404:
        return f"HTTP 404 for {_PROBE_PATH}: not an MLflow tracking server"
    if response.status_code >= 500:
        return f"HTTP {response.status_code} {response.reason}".strip()
    return None


def check_answers(uri: str, source: str = "--tracking-uri") -> None:
    """Fail fast unless a tracking server answers at ``uri`` (stores pass unchecked).

    Raises:
        UsageError: e.g. ``--tracking-uri: no MLflow tracking server answers at
            http://127.0.0.1:1 ([Errno 111] Connection refused); start one ...``.
    """
    reason = probe(uri)
    if reason is None:
        return
    instead = (
        "leave out --tracking-uri" if source == "--tracking-uri" else f"unset {source}"
    ) + " to use the local store"
    raise UsageError(
        f"{source}: no MLflow tracking server answers at {masked(uri)} ({reason}); start one "
        f"(e.g. `mlflow server --host 127.0.0.1 --port {DEFAULT_UI_PORT}`) or {instead}"
    )


def is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it came from) says the tracking server did not answer:
    a refused or failed connection, one broken mid-answer (a server killed while it replied), a
    timeout, or retries used up."""
    import requests

    kinds: tuple[type[BaseException], ...] = (
        requests.exceptions.ConnectionError,
        requests.exceptions.ChunkedEncodingError,
        requests.exceptions.Timeout,
        requests.exceptions.RetryError,
    )
    seen: BaseException | None = exc
    for _ in range(10):  # cause chains are short; a cycle must not hang us
        if seen is None:
            return False
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def experiment_links(base: str, experiments: list[dict[str, Any]]) -> list[str]:
    """One ``name  link`` line per experiment (REST ``experiments/search`` records); the link
    opens the study's saved view where the experiment has one."""
    width = max((len(e["name"]) for e in experiments), default=0)
    return [
        f"{e['name']:<{width}}  "
        + runs_view_url(
            base,
            e["experiment_id"],
            view=any(t.get("key") == view_tag() for t in e.get("tags") or ()),
        )
        for e in experiments
    ]
