"""Drive headless Chromium over the DevTools protocol on a pipe, to look at MLflow's UI.

Chromium started with ``--remote-debugging-pipe`` reads protocol commands on file descriptor 3
and writes replies and events on 4, each a JSON message ended by a NUL byte: no extra package.
The UI is a single-page app, so a check waits for a JavaScript condition rather than a load
event.

Example::

    with Browser() as browser:
        browser.open("http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning")
        browser.wait_for("document.body.innerText.includes('quickstart')")
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-pipe",
    "--window-size=1400,1000",
)


def chromium() -> str | None:
    """The Chromium executable (Debian's ``chromium``), or None when there is none."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    """The Chromium executable; without one the calling test is skipped, except on CI (``CI``
    set), where it fails."""
    executable = chromium()
    if executable is None:
        message = "no chromium executable on PATH (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return executable


class Browser:
    """One headless Chromium with one page, in a fresh profile."""

    def __init__(self, timeout: float = 60.0) -> None:
        executable = chromium()
        if executable is None:
            raise FileNotFoundError("no chromium executable on PATH (apt-get install chromium)")
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-")
        commands_read, self._commands = os.pipe()
        self._events, events_write = os.pipe()
        # bash moves the pipe ends to descriptors 3 and 4, where Chromium expects them; from 10
        # up first, so that moving one cannot overwrite the other (dash takes single digits).
        commands_read, events_write = _above(commands_read, 10), _above(events_write, 10)
        script = f'exec "$0" "$@" 3<&{commands_read} 4>&{events_write}'
        profile = Path(self._profile.name)
        self._log = open(profile / "stderr.log", "wb")  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(
            ["bash", "-c", script, executable, *FLAGS, f"--user-data-dir={profile}"],
            pass_fds=(commands_read, events_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        os.close(commands_read)
        os.close(events_write)
        self._buffer = b""
        self._next_id = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self._call("Page.enable", session=True)
        self._call("Runtime.enable", session=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._send("Browser.close")
            self._process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._events)
        self._log.close()
        self._profile.cleanup()

    def open(self, url: str) -> None:
        """Navigate the page to ``url`` (returns once the navigation is under way)."""
        self._call("Page.navigate", {"url": url}, session=True)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        reply = self._call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=True,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression!r} raised {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, what: str = "") -> Any:
        """Poll ``expression`` until it is truthy and return its value (an expression that
        throws, e.g. before the page has a body, counts as not yet).

        Raises:
            TimeoutError: still falsy after ``timeout`` seconds; the page's text is attached.
        """
        deadline = time.monotonic() + timeout
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        while True:
            value = self.evaluate(guarded)
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.evaluate("document.body ? document.body.innerText : ''") or ""
                raise TimeoutError(
                    f"{what or expression} not seen within {timeout:.0f} s; page text: "
                    f"{' '.join(text.split())[:1500]!r}"
                )
            time.sleep(0.25)

    def text(self) -> str:
        """The page's visible text."""
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def _call(
        self, method: str, params: dict[str, Any] | None = None, session: bool = False
    ) -> dict[str, Any]:
        number = self._send(method, params, self._session if session else None)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def _send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select(
                [self._events], [], [], max(0.0, deadline - time.monotonic())
            )
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._events, 1 << 16)
            if not chunk:
                log = Path(self._profile.name, "stderr.log").read_text(errors="replace")
                raise RuntimeError(f"chromium closed its protocol pipe (crashed?):\n{log[-2000:]}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(raw))


def _above(fd: int, lowest: int) -> int:
    """``fd`` moved to the lowest free descriptor >= ``lowest``."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)
    os.close(fd)
    return moved
