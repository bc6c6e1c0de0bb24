"""Headless Chromium for the tests (Debian's ``chromium``), over the DevTools protocol on a pipe.

No extra package: Chromium started with ``--remote-debugging-pipe`` reads protocol commands on
file descriptor 3 and writes replies and events on 4, each a JSON message ended by a NUL byte.
A `Browser` holds one page in a fresh profile with networking features off; it records every
request the page makes and every console error, evaluates JavaScript, and waits for a
JavaScript condition to hold (`Browser.wait_for`) rather than for a fixed time: a single-page app
such as MLflow's UI keeps rendering after its load event; `Browser.wait_in_frame` does the same
inside an iframe of its own process (MLflow shows an HTML artifact in a sandboxed one). `open_page` loads one file and reads
a few values off it (the HTML report). `require_chromium` skips a test without Chromium, except
on CI (``CI`` set), where it fails.

Example::

    with Browser() as browser:
        browser.open("http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning")
        browser.wait_for("document.body.innerText.includes('quickstart')", what="the study")

    page = open_page(Path("report.html"), {"title": "document.title"})
    page.values["title"], page.requests, page.errors
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until

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
MISSING = "no chromium executable on PATH (apt-get install chromium)"


def chromium() -> str | None:
    """The Chromium executable (Debian's ``chromium``), or None when there is none."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    """The Chromium executable; without one the calling test is skipped, except on CI (``CI``
    set), where it fails."""
    executable = chromium()
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail(f"{MISSING}; required in CI")
        pytest.skip(MISSING)
    return executable


@dataclass
class Page:
    """What happened while a page loaded: the URLs it requested (data URLs cut short), its
    console errors and the values of the expressions asked for."""

    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)


def open_page(
    path: Path,
    expressions: Mapping[str, str],
    *,
    width: int = 1280,
    height: int = 900,
    timeout: float = 60.0,
) -> Page:
    """Load the file ``path`` at ``width`` x ``height`` CSS pixels and, once its document is
    complete, evaluate ``expressions`` (JavaScript, promises awaited).

    Raises:
        FileNotFoundError: no Chromium is installed.
    """
    url = path.resolve().as_uri()
    with Browser(width=width, height=height, timeout=timeout) as browser:
        browser.open(url)
        browser.wait_for(
            f"location.href === {json.dumps(url)} && document.readyState === 'complete'",
            timeout=timeout,
            what=f"{path.name} loaded",
        )
        values = {name: browser.evaluate(e) for name, e in expressions.items()}
        return Page(requests=list(browser.requests), errors=list(browser.errors), values=values)


class Browser:
    """One headless Chromium with one page of ``width`` x ``height`` CSS pixels, in a fresh
    profile. ``requests`` and ``errors`` grow as the page's events arrive."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 60.0) -> None:
        executable = chromium()
        if executable is None:
            raise FileNotFoundError(MISSING)
        self.timeout = timeout
        self.requests: list[str] = []
        self.errors: list[str] = []
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-")
        profile = Path(self._profile.name)
        commands_read, self._commands = os.pipe()
        self._events, events_write = os.pipe()
        # bash moves the pipe ends to descriptors 3 and 4, where Chromium expects them; from 10
        # up first, so that moving one cannot overwrite the other (dash takes single digits).
        commands_read, events_write = _above(commands_read, 10), _above(events_write, 10)
        script = f'exec "$0" "$@" 3<&{commands_read} 4>&{events_write}'
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
        self._session: str | None = None
        #: Sessions attached to out-of-process frames, by target id (`wait_in_frame`).
        self._frames: dict[str, str] = {}
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = str(attached["sessionId"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            self._call(f"{domain}.enable", session=True)
        self._call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close Chromium (killed if it does not exit within 10 s) and remove its profile."""
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
        """The value of a JavaScript expression in the page (promises awaited).

        Raises:
            RuntimeError: the expression threw.
        """
        reply = self._call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=True,
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression!r} raised {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(
        self, expression: str, timeout: float = 30.0, what: str = "", poll: float = 0.1
    ) -> Any:
        """Evaluate ``expression`` every ``poll`` seconds until it is truthy and return its
        value (an expression that throws, e.g. before the page has a body, counts as not yet).

        Raises:
            pytest.fail.Exception: still falsy after ``timeout`` seconds; the page's text is in
                the message.
        """
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        return wait_until(
            lambda: self.evaluate(guarded),
            timeout,
            what or expression,
            poll,
            detail=lambda: f"page text: {' '.join(self.text().split())[:1500]!r}",
        )

    def wait_in_frame(
        self, url_prefix: str, expression: str, timeout: float = 30.0, what: str = ""
    ) -> Any:
        """Like `wait_for`, in the page's frame whose URL starts with ``url_prefix``: an iframe
        of its own process (a sandboxed ``blob:`` one, as MLflow's artifact view shows HTML
        in) is attached to first. Until there is such a frame, the condition does not hold."""
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"

        def value() -> Any:
            targets = self._call("Target.getTargets")["targetInfos"]
            frame = next(
                (t for t in targets if t["type"] == "iframe" and t["url"].startswith(url_prefix)),
                None,
            )
            if frame is None:
                return None
            if frame["targetId"] not in self._frames:
                attached = self._call(
                    "Target.attachToTarget", {"targetId": frame["targetId"], "flatten": True}
                )
                self._frames[frame["targetId"]] = str(attached["sessionId"])
            reply = self._call(
                "Runtime.evaluate",
                {"expression": guarded, "awaitPromise": True, "returnByValue": True},
                session=self._frames[frame["targetId"]],
            )
            return reply["result"].get("value")

        return wait_until(value, timeout, what or expression, 0.1)

    def text(self) -> str:
        """The page's visible text."""
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def _call(
        self, method: str, params: Mapping[str, Any] | None = None, session: bool | str = False
    ) -> dict[str, Any]:
        """Send one command (to the page with ``session=True``, or to the session named) and
        wait for its reply; events meanwhile are observed."""
        target = self._session if session is True else session or None
        number = self._send(method, params, target)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._observe(message)

    def _send(
        self, method: str, params: Mapping[str, Any] | None = None, session: str | None = None
    ) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._events], [], [], left)
            if not ready:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._events, 1 << 16)
            if not chunk:
                log = Path(self._profile.name, "stderr.log").read_text(errors="replace")
                raise RuntimeError(f"chromium closed its protocol pipe (crashed?):\n{log[-2000:]}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(raw))

    def _observe(self, event: Mapping[str, Any]) -> None:
        """Record a request or a console error from one protocol event."""
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            self.requests.append(url[:60] + "..." if url.startswith("data:") else url)
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in args))
        elif method == "Runtime.exceptionThrown":
            self.errors.append(str(params["exceptionDetails"].get("text")))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"{entry.get('text')} ({entry.get('url', '')})")


def _above(fd: int, lowest: int) -> int:
    """``fd`` moved to the lowest free descriptor >= ``lowest``."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)
    os.close(fd)
    return moved
