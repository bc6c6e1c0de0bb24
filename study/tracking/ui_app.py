"""The MLflow server app ``study ui`` runs: MLflow's own, minus a misleading telemetry notice.

MLflow's home page shows "MLflow collects usage data ..." until the browser has dismissed it
once (a flag in the page's ``localStorage``), even when the server has telemetry off: no server
setting hides it. This app serves MLflow's app unchanged, except that the page (``/``) sets
that flag first when telemetry is off (``MLFLOW_DISABLE_TELEMETRY`` or ``DO_NOT_TRACK``), so the
notice never shows. ``mlflow server --app-name study`` runs it once the package registers it:

    [project.entry-points."mlflow.app"]
    study = "study.tracking.ui_app:app"
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The ``localStorage`` flag of MLflow's UI (key ``mlflow.telemetry.info.alert.dismissed``,
#: version 1) that records the notice as dismissed.
NOTICE_DISMISSED = "mlflow.telemetry.info.alert.dismissed_v1"
SCRIPT = (
    f'<script>try{{localStorage.setItem("{NOTICE_DISMISSED}","true")}}catch(e){{}}</script>'
).encode()
#: The name this app is registered under in the ``mlflow.app`` entry points.
APP_NAME = "study"


def telemetry_off(environ: MutableMapping[str, str] | None = None) -> bool:
    """Whether MLflow telemetry is off in ``environ`` (default: this process)."""
    env = os.environ if environ is None else environ
    return any(
        env.get(name, "").strip().lower() in ("true", "1")
        for name in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")
    )


class NoticeDismissed:
    """ASGI middleware: ``inner``, with `SCRIPT` at the top of the HTML page at ``/``."""

    def __init__(self, inner: ASGIApp, enabled: bool = True) -> None:
        self.inner = inner
        self.enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        page = scope["type"] == "http" and scope.get("method") == "GET" and scope["path"] == "/"
        if not (self.enabled and page):
            await self.inner(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def edit(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            headers, body = _with_script(list(start.get("headers", [])), b"".join(chunks))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.inner(scope, receive, edit)


def _with_script(
    headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """An uncompressed HTML ``body`` with `SCRIPT` right after ``<head>``, and its headers."""
    named = {k.lower(): v for k, v in headers}
    html = named.get(b"content-type", b"").startswith(b"text/html")
    if not html or b"content-encoding" in named or b"<head>" not in body:
        return headers, body
    body = body.replace(b"<head>", b"<head>" + SCRIPT, 1)
    headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    return [*headers, (b"content-length", str(len(body)).encode())], body


def __getattr__(name: str) -> Any:
    """``app``: built on first use, so importing this module does not load MLflow's server."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from mlflow.server.fastapi_app import app as mlflow_app

    return NoticeDismissed(mlflow_app, enabled=telemetry_off())
