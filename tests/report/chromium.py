"""Open a page in headless Chromium and watch it, over the DevTools protocol on a pipe.

No extra package: Chromium started with ``--remote-debugging-pipe`` reads protocol commands on
file descriptor 3 and writes replies and events on 4, each a JSON message ended by a NUL byte
(the child process puts the pipe ends there before it runs Chromium).
`open_page` loads one file in a fresh profile with networking features off, records every
request the page makes and every console error, evaluates JavaScript expressions and can take a
screenshot.

Example::

    page = open_page(Path("report.html"), {"title": "document.title"})
    page.values["title"], page.requests, page.errors
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--mute-audio",
    "--remote-debugging-pipe",
)


def chromium() -> str | None:
    """The Chromium executable (Debian's ``chromium``), or None when there is none."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Page:
    """What happened while a page loaded: the URLs it requested (data URLs cut short), its
    console errors, the values of the expressions asked for and, if asked, a PNG screenshot."""

    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""


def open_page(
    path: Path,
    expressions: Mapping[str, str],
    *,
    width: int = 1280,
    height: int = 900,
    screenshot: bool = False,
    timeout: float = 60.0,
) -> Page:
    """Load ``path`` in headless Chromium at ``width`` x ``height`` CSS pixels and evaluate
    ``expressions`` (JavaScript, promises awaited) once it has loaded.

    Raises:
        FileNotFoundError: no Chromium is installed.
        TimeoutError: the browser did not answer within ``timeout`` seconds.
        RuntimeError: the browser answered a command with an error.
    """
    executable = chromium()
    if executable is None:
        raise FileNotFoundError("no chromium executable on PATH (apt-get install chromium)")
    with (
        tempfile.TemporaryDirectory(prefix="chromium-") as profile,
        _Browser(executable, Path(profile), timeout) as browser,
    ):
        return browser.load(path, expressions, width, height, screenshot)


def _high_pipe() -> tuple[int, int]:
    """A pipe whose two ends are numbered 10 or more, clear of descriptors 3 and 4."""
    low = os.pipe()
    high = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in low)
    for fd in low:
        os.close(fd)
    return high[0], high[1]


class _Browser:
    """One Chromium process and its protocol pipe."""

    def __init__(self, executable: str, profile: Path, timeout: float) -> None:
        commands_read, self._commands = _high_pipe()
        self._events, events_write = _high_pipe()

        def on_3_and_4() -> None:  # in the child, before exec: where Chromium expects them
            os.dup2(commands_read, 3)
            os.dup2(events_write, 4)

        self._log = open(profile / "stderr.log", "wb")  # noqa: SIM115 - closed in __exit__
        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}"],
            pass_fds=(3, 4, commands_read, events_write),
            preexec_fn=on_3_and_4,  # safe: the tests start no threads
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        os.close(commands_read)
        os.close(events_write)
        self._deadline = time.monotonic() + timeout
        self._buffer = b""
        self._next_id = 0
        self._queue: list[dict[str, Any]] = []

    def __enter__(self) -> _Browser:
        return self

    def __exit__(self, *_: object) -> None:
        with contextlib.suppress(OSError):
            self._send("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._events)
        self._log.close()

    def load(
        self,
        path: Path,
        expressions: Mapping[str, str],
        width: int,
        height: int,
        screenshot: bool,
    ) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        page = Page()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self._wait_for("Page.loadEventFired")
        for name, expression in expressions.items():
            page.values[name] = self._evaluate(expression, session)
        if screenshot:
            shot = self.call(
                "Page.captureScreenshot",
                {"format": "png", "captureBeyondViewport": True},
                session=session,
            )
            page.screenshot = base64.b64decode(shot["data"])
        for event in self._queue:
            _observe(event, page)
        self._queue.clear()
        return page

    def _evaluate(self, expression: str, session: str) -> Any:
        reply = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=session,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression!r} raised {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def call(
        self, method: str, params: Mapping[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        """Send one command and wait for its reply; events meanwhile are queued."""
        number = self._send(method, params, session)
        while True:
            message = self._receive()
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._queue.append(message)

    def _wait_for(self, method: str) -> None:
        while not any(event.get("method") == method for event in self._queue):
            self._queue.append(self._receive())

    def _send(
        self, method: str, params: Mapping[str, Any] | None = None, session: str | None = None
    ) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = self._deadline - time.monotonic()
            ready, _, _ = select.select([self._events], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._events, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its protocol pipe (did it crash?)")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)


def _observe(event: Mapping[str, Any], page: Page) -> None:
    """Record a request or a console error from one protocol event."""
    method, params = event.get("method"), event.get("params", {})
    if method == "Network.requestWillBeSent":
        url = params["request"]["url"]
        page.requests.append(url[:60] + "..." if url.startswith("data:") else url)
    elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        args = params.get("args", [])
        page.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in args))
    elif method == "Runtime.exceptionThrown":
        page.errors.append(str(params["exceptionDetails"].get("text")))
    elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
        page.errors.append(f"{params['entry'].get('text')} ({params['entry'].get('url', '')})")
