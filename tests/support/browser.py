"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for the viewer's browser tests.
No tests here.

    with Browser() as browser:
        load = browser.load("http://127.0.0.1:8321/")
        assert not load.errors
        browser.evaluate("document.querySelectorAll('table').length")
        browser.screenshot(path)
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from websockets.sync.client import connect

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
]


class BrowserError(RuntimeError):
    pass


@dataclass
class PageLoad:
    url: str
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions, failed loads, CSP reports
    dialogs: list[str] = field(default_factory=list)  # alert()/confirm() a script opened


class Browser:
    def __init__(self, executable: str = CHROMIUM, width: int = 1360, height: int = 900):
        self.profile = Path(tempfile.mkdtemp(prefix="openforge-chromium-"))
        self.width, self.height = width, height
        self.proc = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            port = self._devtools_port()
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
            page = next(t for t in targets if t.get("type") == "page")
            self._connection = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=20)
            self.ws = self._connection.__enter__()
        except BaseException:
            self.close()
            raise
        self._id = 0
        self._events: list[dict] = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _devtools_port(self, timeout: float = 30) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrowserError(f"chromium exited: {self.proc.stderr.read().decode(errors='replace')[-2000:]}")
            if marker.is_file():
                text = marker.read_text().split()
                if text:
                    return int(text[0])
            time.sleep(0.05)
        raise BrowserError("chromium did not open its DevTools port")

    # ---- protocol -------------------------------------------------------------------------------------------

    def call(self, method: str, timeout: float = 60, **params) -> dict:
        self._id += 1
        mine = self._id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == mine:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self._events.append(message)

    def _wait_for(self, event: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, message in enumerate(self._events):
                if message["method"] == event:
                    return self._events.pop(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"no {event} within {timeout}s")
            self._events.append(json.loads(self.ws.recv(timeout=remaining)))

    def _drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                self._events.append(json.loads(self.ws.recv(timeout=remaining)))
            except TimeoutError:
                return

    # ---- pages ----------------------------------------------------------------------------------------------

    def load(self, url: str, timeout: float = 60) -> PageLoad:
        """Navigate, wait for the load event (and a moment for late console messages), collect what went wrong."""
        self._events.clear()
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError(f"{url}: {result['errorText']}")
        self._wait_for("Page.loadEventFired", timeout)
        self._drain(0.3)
        load = PageLoad(url)
        for message in self._events:
            method, params = message["method"], message.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                load.errors.append(
                    "console: "
                    + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                )
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                load.errors.append(
                    f"exception: {details.get('text')} {details.get('exception', {}).get('description')}"
                )
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                load.errors.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
            elif method == "Page.javascriptDialogOpening":
                load.dialogs.append(params.get("message", ""))
                self.call("Page.handleJavaScriptDialog", accept=True)
        return load

    def evaluate(self, expression: str):
        """The JSON value of `expression` in the page (run by the test through DevTools, not by the page)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = True, max_height: int = 6000) -> Path:
        params: dict = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            height = min(int(size["height"]) + 1, max_height)
            params.update(
                captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}
            )
        data = self.call("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def screenshot_element(self, selector: str, path: Path, max_height: int = 1600, pad: int = 8) -> Path:
        """The part of the page from `selector`'s element down (at most `max_height` pixels)."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + window.scrollX, r.y + window.scrollY]; })()"
        )
        y = max(0, box[1] - pad)
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        height = min(max_height, int(size["height"] - y))
        data = self.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": y, "width": self.width, "height": height, "scale": 1},
        )["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    # ---- lifecycle ------------------------------------------------------------------------------------------

    def close(self) -> None:
        connection = getattr(self, "_connection", None)
        if connection is not None:
            connection.__exit__(None, None, None)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
