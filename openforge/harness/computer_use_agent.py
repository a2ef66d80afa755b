"""OpenForge's built-in computer-use harness: a chat-completions tool loop that drives a headless Chromium, or a
desktop task's desktop through its desktop server.

Standard library only (python3 3.7+), like `react_agent.py`, whose model loop it reuses: the `computer-use`
adapter writes both files into the episode's home and runs this one with the sandbox's python3.

    python3 computer_use_agent.py --base-url URL --model NAME --instruction-file FILE
        (--start-url URL | --desktop SOCKET)
        [--observation snapshot|screenshot] [--snapshot-chars N] [--max-steps N] [--chromium PATH]
    (the episode key comes from the OPENFORGE_API_KEY environment variable)

A desktop task (`--desktop`): no browser; every observation and action is a request to the task's desktop
server on its unix socket (`openforge/tasks/families/desktop_server.py`: one JSON line each way), which shows
the desktop's accessibility tree in the same lines as a page's (`window "Contacts"`, `[2] textbox "Email"
(value "ada@example.com")`, `[5] checkbox "Favorite" (unchecked)`) and does the same tools but navigate.

The browser: the sandbox's Chromium, headless, a fresh profile under $HOME, driven over the DevTools protocol
on a pipe (`--remote-debugging-pipe`: null-terminated JSON on its fds 3 and 4, no websocket library needed).
Only loopback reaches the network (every other host goes to a dead proxy) and documents load only from the
start URL's origin (other navigations are blocked, also those a link or a script starts).

The agent's tools, GUI only (no shell): snapshot, click(ref), type(ref, text), select(ref, value), key(key),
scroll(dy), navigate(url), done(answer), and screenshot in the `screenshot` observation mode. After every
action the tool result is the page as it now is: in the `snapshot` mode (the default, for text-only models)
the page's accessibility tree as text, one line per meaningful node

    page "Orders" http://127.0.0.1:8080/orders
    [1] heading "Orders"
    [2] textbox "Customer" (value "Ada", focused)
    [3] combobox "Plan" (value "Basic")
      [4] option "Basic" (selected)
    [5] button "Save"
    text "3 orders"

whose refs are numbered in document order (the same page state gives the same refs), cut at a budget of
characters; in the `screenshot` mode a PNG (a Chat Completions `image_url` part) with the page's title and URL,
and click also takes x, y (pixels of the screenshot) instead of a ref.

It prints one JSON line per event on stdout and a final {"type": "result", ...}. Exit codes: 0 when the loop
ended (done, a plain answer, or the step limit), 3 when the model API failed (as react), 4 when the browser
failed (would not start, the start page did not load, it crashed): the infrastructure's failure, not the
agent's.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import select as select_module
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

try:  # in OpenForge's process (tests); in a sandbox the adapter writes react_agent.py beside this file
    from openforge.harness.react_agent import API_ERROR_EXIT, ModelAPIError, emit, run_agent
except ImportError:  # pragma: no cover - the sandbox's path
    from react_agent import API_ERROR_EXIT, ModelAPIError, emit, run_agent  # type: ignore[no-redef]

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


DEBIAN_BINARY = "/usr/lib/chromium/chromium"  # what Debian's /usr/bin/chromium script runs
BROWSER_ERROR_EXIT = 4  # the process's exit code when the browser failed (the infrastructure's fault)
DEFAULT_MAX_STEPS = 30
DEFAULT_SNAPSHOT_CHARS = 6000  # about 1.5-2k tokens: a tiny model's context holds a dozen of them
OBSERVATIONS = ("snapshot", "screenshot")
VIEWPORT = (1280, 800)
NAME_CAP = 160  # characters of one node's name shown
COMMAND_TIMEOUT_S = 30.0  # one DevTools command
SETTLE_QUIET_S = 0.15  # after an action: this long with nothing loading counts as settled
SETTLE_LIMIT_S = 8.0  # ... and never wait longer than this

SYSTEM_PROMPT = (
    "You are a web agent. You see the page as a list of elements, each with a [ref]. "
    "Use the tools to act on elements by ref, then call done."
)


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_REF = {"type": "string", "description": "an element's ref from the page, e.g. 3"}
TOOLS: dict[str, dict[str, Any]] = {
    "snapshot": _tool("snapshot", "Show the page's elements again.", {}, []),
    "screenshot": _tool("screenshot", "Take a screenshot of the page.", {}, []),
    "click": _tool("click", "Click an element.", {"ref": _REF}, ["ref"]),
    "type": _tool("type", "Replace the text of a field.", {"ref": _REF, "text": {"type": "string"}}, ["ref", "text"]),
    "select": _tool(
        "select", "Choose an option of a drop-down.", {"ref": _REF, "value": {"type": "string"}}, ["ref", "value"]
    ),
    "key": _tool("key", "Press a key, e.g. Enter, Tab, Escape.", {"key": {"type": "string"}}, ["key"]),
    "scroll": _tool("scroll", "Scroll the page by dy pixels (negative: up).", {"dy": {"type": "integer"}}, ["dy"]),
    "navigate": _tool("navigate", "Open a URL of this site.", {"url": {"type": "string"}}, ["url"]),
    "done": _tool("done", "Finish the task, with your answer if it asks for one.", {"answer": {"type": "string"}}, []),
}
_XY = {"x": {"type": "integer"}, "y": {"type": "integer"}}
_CLICK_XY = _tool("click", "Click an element by ref, or a point x, y of the screenshot.", {"ref": _REF, **_XY}, [])


DESKTOP_TOOLS: dict[str, dict[str, Any]] = {
    **{n: t for n, t in TOOLS.items() if n != "navigate"},  # a desktop has no URL
    "snapshot": _tool("snapshot", "Show the desktop's elements again.", {}, []),
    "screenshot": _tool("screenshot", "Take a screenshot of the desktop.", {}, []),
    "select": _tool(
        "select", "Choose an item of a drop-down.", {"ref": _REF, "value": {"type": "string"}}, ["ref", "value"]
    ),
    "scroll": _tool("scroll", "Scroll by dy pixels (negative: up).", {"dy": {"type": "integer"}}, ["dy"]),
}
DESKTOP_SYSTEM_PROMPT = (
    "You are a computer-use agent on a desktop. You see its windows as a list of elements, each with a [ref]. "
    "Use the tools to act on elements by ref, then call done."
)


def tool_specs(observation: str, desktop: bool = False, only: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The tools offered in an observation mode (the screenshot tool only where the model sees images), for a
    web page or (`desktop`) a desktop; `only`: just these of them (a small model reads fewer schemas)."""
    tools = DESKTOP_TOOLS if desktop else TOOLS
    if observation == "screenshot":
        specs = [_CLICK_XY if n == "click" else t for n, t in tools.items()]
    else:
        specs = [t for n, t in tools.items() if n != "screenshot"]
    return [t for t in specs if not only or t["function"]["name"] in only]


# In OpenForge's process these join the error tree; in a sandbox this file runs alone, on the standard library.
try:
    from openforge.core.errors import InfrastructureError as _BrowserKind
    from openforge.core.errors import RequestError as _ActionKind
except ImportError:  # pragma: no cover - the sandbox's path

    class _BrowserKind(Exception):  # type: ignore[no-redef]
        pass

    class _ActionKind(Exception):  # type: ignore[no-redef]
        pass


class BrowserError(_BrowserKind, RuntimeError):
    """The browser failed (would not start, crashed, did not answer): the infrastructure's failure."""


class ActionError(_ActionKind, ValueError):
    """An action the agent asked for could not be done (unknown ref, element gone, URL not allowed): its
    message goes back to the model."""


# -- the DevTools protocol over a pipe ------------------------------------------------------------------------


def find_chromium(explicit: str | None) -> str:
    """The browser: `explicit` (the adapter's `chromium` option) alone when given, else Debian's or one on PATH."""
    candidates = [explicit] if explicit else ["/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"]
    for candidate in candidates:
        found = shutil.which(candidate)
        if found and found == "/usr/bin/chromium" and os.access(DEBIAN_BINARY, os.X_OK):
            return DEBIAN_BINARY  # Debian's launcher script only adds flags (and runs findmnt, man, find)
        if found:
            return found
    raise BrowserError(f"no Chromium found (looked for {', '.join(candidates)}): the task's image needs one")


def _die_with_parent() -> None:
    """Linux: the browser is killed when this agent dies (a timeout kills the agent's process group, which the
    browser has left); its helper processes end when it does."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def origin(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


class Browser:
    """One headless Chromium, its one page, driven over `--remote-debugging-pipe`."""

    def __init__(self, chromium: str, profile: str, start_url: str, viewport: tuple[int, int] = VIEWPORT):
        self.chromium, self.profile, self.start_url, self.viewport = chromium, profile, start_url, viewport
        self.allowed = origin(start_url)
        self.proc: subprocess.Popen[bytes] | None = None
        self._next_id = 0
        self._buffer = b""
        self._responses: dict[int, dict[str, Any]] = {}
        self._unawaited: set[int] = set()
        self._session: str | None = None
        self._inflight: set[str] = set()
        self._loading = False
        self._frame: str | None = None
        self.notes: list[str] = []  # what happened beside the action (a dialog, a blocked navigation)
        self.document_status: int | None = None  # HTTP status of the last main-frame document

    # process ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the child's ends moved above 10 first, so putting them on fds 3 and 4 cannot overwrite each other
        child_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        child_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def on_fds_3_and_4() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)
            os.close(child_in)
            os.close(child_out)
            _die_with_parent()

        host = urlsplit(self.start_url).hostname or "127.0.0.1"
        argv = [
            self.chromium,
            "--headless",
            "--no-sandbox",  # a container's user namespaces do not allow Chromium's own sandbox
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-dev-shm-usage",  # Docker's /dev/shm is 64 MB
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--disable-crash-reporter",
            "--disable-breakpad",
            "--mute-audio",
            "--hide-scrollbars",
            "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
            # nothing but loopback (and the start URL's own host) reaches the network: the rest meets a dead proxy
            "--proxy-server=http://127.0.0.1:9",
            f"--proxy-bypass-list={host};127.0.0.1;localhost;[::1]",
            f"--window-size={self.viewport[0]},{self.viewport[1]}",
            "about:blank",
        ]
        self._log = open(os.path.join(self.profile, "chromium.log"), "wb")  # noqa: SIM115 - lives with the browser
        # its own short TMPDIR: Chromium's singleton socket goes there, and a socket path has ~107 bytes at most
        self._tmp = tempfile.mkdtemp(prefix="chromium-", dir="/tmp" if os.path.isdir("/tmp") else None)
        try:
            self.proc = subprocess.Popen(
                argv,
                env=dict(os.environ, TMPDIR=self._tmp),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                close_fds=False,  # fds 3 and 4 must reach it; everything else here is non-inheritable
                preexec_fn=on_fds_3_and_4,
                start_new_session=True,  # its own process group: stop() ends every process it started
            )
        except OSError as e:
            raise BrowserError(f"{self.chromium} did not start: {e}") from None
        finally:
            os.close(child_in)
            os.close(child_out)
        self._open_page()

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        with contextlib.suppress(BrowserError, OSError):
            self._send("Browser.close", {})
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=3)
        with contextlib.suppress(ProcessLookupError, PermissionError):  # what it left: renderers, helpers
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._log.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def log_tail(self, size: int = 600) -> str:
        try:
            with open(os.path.join(self.profile, "chromium.log"), "rb") as f:
                return f.read()[-size:].decode(errors="replace").strip()
        except OSError:
            return ""

    # protocol -------------------------------------------------------------------------------------------------
    def _send(self, method: str, params: dict[str, Any], session: bool = False, answer: bool = True) -> int:
        """Write one command; `answer=False`: its answer is not awaited (and dropped when it comes)."""
        self._next_id += 1
        if not answer:
            self._unawaited.add(self._next_id)
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session and self._session:
            message["sessionId"] = self._session
        data = json.dumps(message).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._to_browser, data) :]
        except OSError as e:
            raise BrowserError(f"the browser stopped reading its pipe ({e}){self._exited()}") from None
        return self._next_id

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> dict[str, Any]:
        """Send a command and wait for its answer (handling events meanwhile); ActionError when the browser
        refuses it (a node gone, ...), BrowserError when the browser does not answer."""
        wanted = self._send(method, params or {}, session)
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while wanted not in self._responses:
            if time.monotonic() > deadline:
                raise BrowserError(f"the browser did not answer {method} in {COMMAND_TIMEOUT_S:g} s")
            self._pump(deadline - time.monotonic())
        answer = self._responses.pop(wanted)
        if "error" in answer:
            raise ActionError(f"{method}: {answer['error'].get('message', answer['error'])}")
        result = answer.get("result") or {}
        return result if isinstance(result, dict) else {}

    def _exited(self) -> str:
        code = self.proc.poll() if self.proc is not None else None
        return "" if code is None else f"; chromium exited {code}: {self.log_tail()}"

    def _pump(self, timeout: float) -> None:
        """Read what the browser sent within `timeout` seconds and handle it."""
        ready, _, _ = select_module.select([self._from_browser], [], [], max(0.0, timeout))
        if not ready:
            return
        chunk = os.read(self._from_browser, 1 << 20)
        if not chunk:
            raise BrowserError(f"the browser closed its pipe{self._exited()}")
        self._buffer += chunk
        while b"\0" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\0", 1)
            message = json.loads(raw.decode())
            if "id" in message:
                if message["id"] in self._unawaited:
                    self._unawaited.discard(message["id"])
                else:
                    self._responses[message["id"]] = message
            else:
                self._event(message.get("method", ""), message.get("params") or {})

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Fetch.requestPaused":  # a document request: only the start URL's origin may load
            request_id, url = params.get("requestId"), (params.get("request") or {}).get("url", "")
            if url.startswith(("about:", "data:")) or origin(url) == self.allowed:
                self._send("Fetch.continueRequest", {"requestId": request_id}, session=True, answer=False)
            else:  # aborted, not blocked: a blocked navigation would put Chromium's error page in the tab
                self.notes.append(f"blocked a navigation to {url}: only {self.allowed} may be opened")
                self._send("Fetch.failRequest", {"requestId": request_id, "errorReason": "Aborted"}, True, False)
        elif method == "Network.requestWillBeSent":
            self._inflight.add(params.get("requestId", ""))
        elif method in ("Network.loadingFinished", "Network.loadingFailed"):
            self._inflight.discard(params.get("requestId", ""))
        elif method == "Network.responseReceived":
            if params.get("type") == "Document" and params.get("frameId") == self._frame:
                self.document_status = (params.get("response") or {}).get("status")
        elif method == "Page.frameStartedLoading" and params.get("frameId") == self._frame:
            self._loading = True
        elif method == "Page.frameStoppedLoading" and params.get("frameId") == self._frame:
            self._loading = False
        elif method == "Page.javascriptDialogOpening":  # a modal dialog would block the page: accept it
            self.notes.append(f"a {params.get('type', 'dialog')} said {params.get('message', '')!r}; accepted")
            self._send("Page.handleJavaScriptDialog", {"accept": True}, session=True, answer=False)
        elif method in ("Inspector.targetCrashed", "Target.targetCrashed"):
            raise BrowserError(f"the page crashed{self._exited()}")
        elif method == "Target.detachedFromTarget" and params.get("sessionId") == self._session:
            raise BrowserError(f"the page went away{self._exited()}")

    def _open_page(self) -> None:
        pages = [t for t in self.call("Target.getTargets", session=False).get("targetInfos", []) if t["type"] == "page"]
        target = (
            pages[0]["targetId"]
            if pages
            else self.call("Target.createTarget", {"url": "about:blank"}, False)["targetId"]
        )
        self._frame = target  # a page's main frame id is its target id
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, False)["sessionId"]
        for method in ("Page.enable", "Network.enable", "DOM.enable", "Accessibility.enable", "Inspector.enable"):
            self.call(method)
        self.call("Fetch.enable", {"patterns": [{"urlPattern": "*", "resourceType": "Document"}]})
        width, height = self.viewport
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def settle(self) -> None:
        """Wait until the page has loaded what the last action started (a navigation, requests)."""
        deadline = time.monotonic() + SETTLE_LIMIT_S
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            self._pump(0.03)
            if self._loading or self._inflight:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= SETTLE_QUIET_S:
                if self.evaluate("document.readyState") == "complete":
                    return
                quiet_since = time.monotonic()

    # actions --------------------------------------------------------------------------------------------------
    def navigate(self, url: str) -> None:
        if origin(url) != self.allowed:
            raise ActionError(f"{url} is outside this site: only {self.allowed} may be opened")
        self.document_status = None
        answer = self.call("Page.navigate", {"url": url})
        if answer.get("errorText"):
            self.notes = [n for n in self.notes if not n.startswith("blocked")]
            raise ActionError(f"{url} did not load: {answer['errorText']}")
        self.settle()

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return (answer.get("result") or {}).get("value")

    def on_node(self, backend_id: int, function: str, *args: Any) -> Any:
        """Run a JavaScript function with the node as `this`; its JSON value."""
        obj = self.call("DOM.resolveNode", {"backendNodeId": backend_id})["object"]["objectId"]
        answer = self.call(
            "Runtime.callFunctionOn",
            {
                "objectId": obj,
                "functionDeclaration": function,
                "arguments": [{"value": a} for a in args],
                "returnByValue": True,
                "awaitPromise": True,
            },
        )
        if answer.get("exceptionDetails"):
            raise ActionError(str(answer["exceptionDetails"].get("text", "script failed")))
        return (answer.get("result") or {}).get("value")

    def click_node(self, backend_id: int) -> None:
        try:
            self.call("DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend_id})
            quads = self.call("DOM.getContentQuads", {"backendNodeId": backend_id}).get("quads") or []
        except ActionError:
            quads = []
        if not quads:
            raise ActionError("the element is not visible on the page")
        quad = quads[0]
        x, y = sum(quad[0::2]) / 4, sum(quad[1::2]) / 4
        self.click_at(x, y)

    def click_at(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params: dict[str, Any] = {"type": kind, "x": x, "y": y}
            if kind != "mouseMoved":
                params.update(button="left", clickCount=1)
            self.call("Input.dispatchMouseEvent", params)
        self.settle()

    def type_into(self, backend_id: int, text: str) -> None:
        self.call("DOM.focus", {"backendNodeId": backend_id})
        self.on_node(backend_id, _SELECT_CONTENT)
        if text:
            self.call("Input.insertText", {"text": text})
        else:
            self.on_node(backend_id, _CLEAR)
        self.settle()

    def choose(self, backend_id: int, value: str) -> str:
        found = self.on_node(backend_id, _CHOOSE, value) or {}
        if "error" in found:
            raise ActionError(found["error"])
        self.settle()
        return str(found.get("chosen", value))

    def press(self, key: str) -> None:
        *mods, name = key.replace(" + ", "+").split("+") if len(key) > 1 else [key]
        modifiers = sum(_MODIFIERS.get(m.strip().lower(), 0) for m in mods)
        unknown = [m for m in mods if m.strip().lower() not in _MODIFIERS]
        if unknown or not name:
            raise ActionError(f"unknown key {key!r}: use a key name (Enter, Tab, ...) or one character")
        if name in _KEYS:
            code, vk, text = _KEYS[name]
        elif len(name) == 1:
            code, vk, text = "", ord(name.upper()), name
        else:
            raise ActionError(f"unknown key {name!r}; known: {', '.join(sorted(_KEYS))} or one character")
        base: dict[str, Any] = {"key": name, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers}
        down = dict(base, type="keyDown" if text and not modifiers & 7 else "rawKeyDown")
        if text and not modifiers & 7:
            down.update(text=text, unmodifiedText=text)
        self.call("Input.dispatchKeyEvent", down)
        self.call("Input.dispatchKeyEvent", dict(base, type="keyUp"))
        self.settle()

    def scroll(self, dy: int) -> None:
        self.evaluate(f"window.scrollBy(0, {int(dy)})")
        self.settle()

    def screenshot(self) -> str:
        return str(self.call("Page.captureScreenshot", {"format": "png"})["data"])

    def page(self) -> tuple[str, str]:
        info = self.call("Target.getTargetInfo", {"targetId": self._frame}, session=False)["targetInfo"]
        return str(info.get("title", "")), str(info.get("url", ""))

    def ax_nodes(self) -> list[dict[str, Any]]:
        return list(self.call("Accessibility.getFullAXTree").get("nodes") or [])


_MODIFIERS = {"alt": 1, "control": 2, "ctrl": 2, "meta": 4, "shift": 8}
# key name -> (code, windows virtual key code, text it types)
_KEYS: dict[str, tuple[str, int, str]] = {
    "Enter": ("Enter", 13, "\r"),
    "Tab": ("Tab", 9, ""),
    "Escape": ("Escape", 27, ""),
    "Backspace": ("Backspace", 8, ""),
    "Delete": ("Delete", 46, ""),
    "Space": ("Space", 32, " "),
    "ArrowUp": ("ArrowUp", 38, ""),
    "ArrowDown": ("ArrowDown", 40, ""),
    "ArrowLeft": ("ArrowLeft", 37, ""),
    "ArrowRight": ("ArrowRight", 39, ""),
    "PageUp": ("PageUp", 33, ""),
    "PageDown": ("PageDown", 34, ""),
    "Home": ("Home", 36, ""),
    "End": ("End", 35, ""),
}
_SELECT_CONTENT = """function () {
  if (typeof this.select === 'function') { this.select(); }
  else if (this.isContentEditable) { document.execCommand('selectAll'); }
}"""
_CLEAR = """function () {
  if ('value' in this) { this.value = ''; } else if (this.isContentEditable) { this.textContent = ''; }
  this.dispatchEvent(new Event('input', {bubbles: true}));
  this.dispatchEvent(new Event('change', {bubbles: true}));
}"""
_CHOOSE = """function (want) {
  var s = this.tagName === 'SELECT' ? this : (this.closest ? this.closest('select') : null);
  if (!s) { return {error: 'not a drop-down (select): click it instead'}; }
  var options = Array.prototype.slice.call(s.options);
  var norm = function (t) { return String(t).trim().toLowerCase(); };
  var found = options.filter(function (o) { return o.label === want || o.value === want; })[0] ||
      options.filter(function (o) { return norm(o.label) === norm(want) || norm(o.value) === norm(want); })[0];
  if (!found) {
    return {error: 'no option ' + JSON.stringify(want) + '; options: ' +
        options.map(function (o) { return JSON.stringify(o.label); }).join(', ')};
  }
  s.value = found.value;
  s.dispatchEvent(new Event('input', {bubbles: true}));
  s.dispatchEvent(new Event('change', {bubbles: true}));
  return {chosen: found.label};
}"""


# -- the page as text ---------------------------------------------------------------------------------------

# roles shown with a ref (what the agent acts on, and what structures a page)
ROLES = frozenset(
    (
        "button link textbox searchbox combobox listbox option checkbox radio switch slider spinbutton menuitem "
        "menuitemcheckbox menuitemradio tab treeitem heading navigation main form dialog alertdialog alert "
        "status table row search banner contentinfo complementary menu menubar tablist tree grid"
    ).split()
)
NAMED_ROLES = frozenset("img image figure region article group radiogroup list".split())  # shown when named
TEXT_ROLES = ("StaticText",)
# inline containers: their text belongs to the enclosing block's line (a `generic` one when it holds only text)
INLINE_ROLES = frozenset("none presentation strong emphasis mark code time abbr subscript superscript".split())


def _value(field: Any) -> Any:
    return field.get("value") if isinstance(field, dict) else None


def _quote(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > NAME_CAP:
        text = text[: NAME_CAP - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def _states(node: dict[str, Any], role: str) -> list[str]:
    props = {p.get("name"): _value(p.get("value")) for p in node.get("properties") or []}
    states = []
    value = _value(node.get("value"))
    if value not in (None, "") and role not in ("link", "button", "heading", "row"):
        states.append(f"value {_quote(str(value))}")
    checked = props.get("checked")
    if checked in ("true", True):
        states.append("checked")
    elif checked == "mixed":
        states.append("mixed")
    elif checked in ("false", False):
        states.append("unchecked")
    for flag in ("selected", "disabled", "expanded", "focused"):
        if props.get(flag) in (True, "true"):
            states.append(flag)
    return states


class Snapshot:
    """The page's accessibility tree as text, and the nodes its refs stand for."""

    def __init__(self, text: str, refs: dict[str, tuple[int, str, str]]):
        self.text = text
        self.refs = refs  # ref -> (backend DOM node id, role, name)


def render(nodes: list[dict[str, Any]], title: str, url: str, budget: int = DEFAULT_SNAPSHOT_CHARS) -> Snapshot:
    """One line per meaningful node, refs numbered in document order (so a page state always gives the same
    refs); text already in an enclosing node's name or value is left out, the pieces of text of one block
    (a paragraph with a highlighted word) make one line, a table row is one line (its cells' text); cut at
    `budget` characters."""
    by_id = {n.get("nodeId"): n for n in nodes}
    children_of = {n.get("nodeId"): n.get("childIds") or [] for n in nodes}
    root = next((n for n in nodes if not n.get("parentId")), nodes[0] if nodes else None)
    lines = [f"page {_quote(title)} {url}"]
    refs: dict[str, tuple[int, str, str]] = {}
    last_text: tuple[Any, int] | None = None  # (block, index in lines) of the latest text line
    # (node id, depth, the name and value of the nearest shown ancestor, the block the text belongs to); a
    # stack, not recursion: pages nest deeply
    top = children_of.get(root.get("nodeId"), []) if root else []
    stack: list[tuple[Any, int, str, Any]] = [(c, 0, "", None) for c in reversed(top)]
    while stack:
        node_id, depth, context, block = stack.pop()
        node = by_id.get(node_id)
        if node is None:
            continue
        role = str(_value(node.get("role")) or "")
        name = str(_value(node.get("name")) or "").strip()
        children = children_of.get(node_id, [])
        if node.get("ignored") or role in INLINE_ROLES or (role == "generic" and _only_text(by_id, children)):
            stack.extend((c, depth, context, block) for c in reversed(children))
            continue
        if role in TEXT_ROLES:
            text = " ".join(name.split())
            if not text or text in context:
                continue
            if last_text is not None and last_text[0] == block and last_text[1] == len(lines) - 1:
                lines[-1] = lines[-1][: lines[-1].index("text ")] + f"text {_quote(_unquote(lines[-1]) + ' ' + text)}"
            else:
                lines.append("  " * depth + f"text {_quote(text)}")
            last_text = (block, len(lines) - 1)
            continue
        if role == "row" and not name:
            name = " | ".join(filter(None, (_text_of(by_id, children_of, c) for c in children)))
        shown = role in ROLES or (role in NAMED_ROLES and name)
        if shown and node.get("backendDOMNodeId") is not None:
            ref = str(len(refs) + 1)
            refs[ref] = (int(node["backendDOMNodeId"]), role, name)
            states = _states(node, role)
            lines.append(
                "  " * depth
                + f"[{ref}] {role}"
                + (f" {_quote(name)}" if name else "")
                + (f" ({', '.join(states)})" if states else "")
            )
            inner = name + "\n" + str(_value(node.get("value")) or "")
            stack.extend((c, depth + 1, inner, node_id) for c in reversed(children))
        else:
            stack.extend((c, depth, context, node_id) for c in reversed(children))
    return Snapshot(_cut(lines, budget), refs)


def _only_text(by_id: dict[Any, dict[str, Any]], children: list[Any]) -> bool:
    """Whether a container holds text only (a `<span>` in a sentence, a `<div>` of one word): its text joins
    the enclosing block's line."""
    return all(_value((by_id.get(c) or {}).get("role")) in TEXT_ROLES for c in children)


def _unquote(line: str) -> str:
    return str(json.loads(line[line.index("text ") + 5 :]))


def _text_of(by_id: dict[Any, dict[str, Any]], children_of: dict[Any, list[Any]], node_id: Any) -> str:
    """All the text under a node, in order (a table cell's content)."""
    out, stack = [], [node_id]
    while stack:
        node = by_id.get(stack.pop())
        if node is None:
            continue
        if _value(node.get("role")) in TEXT_ROLES:
            out.append(" ".join(str(_value(node.get("name")) or "").split()))
            continue
        stack.extend(reversed(children_of.get(node.get("nodeId"), [])))
    return " ".join(t for t in out if t)


def _cut(lines: list[str], budget: int) -> str:
    out, size = [], 0
    for i, line in enumerate(lines):
        if size + len(line) + 1 > budget and i > 0:
            out.append(f"... {len(lines) - i} more lines not shown (the page is longer than {budget} characters)")
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


# -- the tools ------------------------------------------------------------------------------------------------


class Session:
    """The browser and the latest snapshot's refs: runs one tool call and says what the page now shows."""

    def __init__(self, browser: Browser, observation: str = "snapshot", budget: int = DEFAULT_SNAPSHOT_CHARS):
        if observation not in OBSERVATIONS:
            raise ValueError(f"unknown observation mode {observation!r}; known: {', '.join(OBSERVATIONS)}")
        self.browser, self.observation, self.budget = browser, observation, budget
        self.refs: dict[str, tuple[int, str, str]] = {}
        self.answer: str | None = None

    def snapshot(self) -> str:
        title, url = self.browser.page()
        snap = render(self.browser.ax_nodes(), title, url, self.budget)
        self.refs = snap.refs
        return self._with_notes(snap.text)

    def _with_notes(self, text: str) -> str:
        notes, self.browser.notes = self.browser.notes, []
        return "\n".join([f"({n})" for n in notes] + [text])

    def observe(self) -> Any:
        """What the model sees after an action: the snapshot, or a screenshot with the page's title and URL."""
        if self.observation == "snapshot":
            return self.snapshot()
        return self.screenshot()

    def screenshot(self) -> list[dict[str, Any]]:
        self.snapshot()  # keeps the refs current for click/type/select by ref
        title, url = self.browser.page()
        data = self.browser.screenshot()
        return [
            {"type": "text", "text": self._with_notes(f"page {_quote(title)} {url}")},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}},
        ]

    def node(self, arguments: Mapping[str, object]) -> tuple[int, str, str]:
        ref = _ref(arguments)
        if ref not in self.refs:
            raise ActionError(f"no element [{ref}] on the page: use a ref from the latest snapshot")
        return self.refs[ref]

    def run(self, name: str, arguments: Mapping[str, object]) -> tuple[Any, bool]:
        """(what the model sees, whether the agent is done). An ActionError becomes `[error: ...]` followed by
        the page as it is; a BrowserError ends the episode (the caller's)."""
        try:
            if name == "done":
                answer = arguments.get("answer")
                self.answer = str(answer) if answer not in (None, "") else None
                return "done", True
            if name == "snapshot":
                return self.snapshot(), False
            if name == "screenshot":
                return self.screenshot(), False
            if name == "click":
                if arguments.get("ref") in (None, "") and "x" in arguments and "y" in arguments:
                    self.browser.click_at(float(str(arguments["x"])), float(str(arguments["y"])))
                else:
                    backend, role, label = self.node(arguments)
                    if role == "option":  # a drop-down's option: its native popup cannot be clicked headless
                        self.browser.choose(backend, label)
                    else:
                        self.browser.click_node(backend)
            elif name == "type":
                self.browser.type_into(self.node(arguments)[0], str(arguments.get("text", "")))
            elif name == "select":
                self.browser.choose(self.node(arguments)[0], str(arguments.get("value", "")))
            elif name == "key":
                self.browser.press(str(arguments.get("key", "")))
            elif name == "scroll":
                self.browser.scroll(int(float(str(arguments.get("dy", 0)))))
            elif name == "navigate":
                url = str(arguments.get("url", ""))
                self.browser.navigate(urljoin(self.browser.page()[1] or self.browser.start_url, url))
            else:
                known = ", ".join(t["function"]["name"] for t in tool_specs(self.observation))
                raise ActionError(f"unknown tool {name!r}; use one of {known}")
        except (ActionError, ValueError) as e:
            return self._error(str(e)), False
        return self.observe(), False

    def _error(self, message: str) -> Any:
        page = self.observe()
        if isinstance(page, list):
            return [{"type": "text", "text": f"[error: {message}]"}, *page]
        return f"[error: {message}]\n{page}"


def _ref(arguments: Mapping[str, object]) -> str:
    """The ref as given ("3", 3, "[3]", "ref=3")."""
    ref = str(arguments.get("ref", "")).strip().strip("[]").strip()
    return ref[4:] if ref.startswith("ref=") else ref


# -- a desktop task: the desktop server --------------------------------------------------------------------------


class DesktopServer:
    """The task's desktop server on its unix socket: one connection per request, one JSON line each way."""

    def __init__(self, path: str, timeout_s: float = 60.0):
        self.path, self.timeout_s = path, timeout_s

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """The server's answer; ActionError when it refused the action, BrowserError when it did not answer."""
        import socket

        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout_s)
                s.connect(self.path)
                s.sendall(json.dumps(request).encode() + b"\n")
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    buf += chunk
            answer = json.loads(buf.decode())
        except (OSError, ValueError) as e:
            raise BrowserError(f"the desktop server at {self.path} did not answer {request.get('op')}: {e}") from None
        if not isinstance(answer, dict):
            raise BrowserError(f"the desktop server answered {request.get('op')} with {answer!r}")
        if "error" in answer:
            raise ActionError(str(answer["error"]))
        return answer


class DesktopSession:
    """`Session`'s tools on a desktop: each one a request to the desktop server (no navigate)."""

    def __init__(self, server: DesktopServer, observation: str = "snapshot", budget: int = DEFAULT_SNAPSHOT_CHARS):
        if observation not in OBSERVATIONS:
            raise ValueError(f"unknown observation mode {observation!r}; known: {', '.join(OBSERVATIONS)}")
        self.server, self.observation, self.budget = server, observation, budget
        self.answer: str | None = None

    def snapshot(self) -> str:
        return str(self.server.call({"op": "snapshot", "budget": self.budget})["text"])

    def screenshot(self) -> list[dict[str, Any]]:
        self.snapshot()  # the server's refs current for click/type/select by ref
        shot = self.server.call({"op": "screenshot"})
        return [
            {"type": "text", "text": f"window {_quote(str(shot.get('title') or ''))}"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + str(shot["png"])}},
        ]

    def observe(self) -> Any:
        return self.snapshot() if self.observation == "snapshot" else self.screenshot()

    def run(self, name: str, arguments: Mapping[str, object]) -> tuple[Any, bool]:
        """(what the model sees, whether the agent is done), as `Session.run`."""
        try:
            if name == "done":
                answer = arguments.get("answer")
                self.answer = str(answer) if answer not in (None, "") else None
                return "done", True
            if name == "snapshot":
                return self.snapshot(), False
            if name == "screenshot":
                return self.screenshot(), False
            if name == "click" and arguments.get("ref") in (None, "") and "x" in arguments and "y" in arguments:
                self.server.call({"op": "click", "x": arguments["x"], "y": arguments["y"]})
            elif name in ("click", "type", "select"):
                request: dict[str, Any] = {"op": name, "ref": _ref(arguments)}
                if name == "type":
                    request["text"] = str(arguments.get("text", ""))
                elif name == "select":
                    request["value"] = str(arguments.get("value", ""))
                self.server.call(request)
            elif name == "key":
                self.server.call({"op": "key", "key": str(arguments.get("key", ""))})
            elif name == "scroll":
                self.server.call({"op": "scroll", "dy": int(float(str(arguments.get("dy", 0))))})
            else:
                known = ", ".join(t["function"]["name"] for t in tool_specs(self.observation, desktop=True))
                raise ActionError(f"unknown tool {name!r}; use one of {known}")
        except (ActionError, ValueError) as e:
            return self._error(str(e)), False
        return self.observe(), False

    def _error(self, message: str) -> Any:
        try:
            page = self.observe()
        except ActionError as e:  # the desktop cannot even be shown (its app exited): not the agent's doing
            raise BrowserError(f"the desktop server: {e}") from None
        if isinstance(page, list):
            return [{"type": "text", "text": f"[error: {message}]"}, *page]
        return f"[error: {message}]\n{page}"


def open_start_page(browser: Browser) -> None:
    """The start URL, loaded: a BrowserError (the task's or the infrastructure's failure) when it is not."""
    try:
        browser.navigate(browser.start_url)
    except ActionError as e:
        raise BrowserError(f"the start page did not load: {e}") from None
    if browser.document_status is not None and browser.document_status >= 500:
        raise BrowserError(f"the start page {browser.start_url} answered HTTP {browser.document_status}")


def only_offered(
    session: Session | DesktopSession, offered: Sequence[dict[str, Any]]
) -> Callable[[str, Mapping[str, object]], tuple[Any, bool]]:
    """The session's tool runner, refusing (as an unknown tool) what the model was not offered (`offered`: the
    tool specs it was sent)."""
    names = [t["function"]["name"] for t in offered]

    def run(name: str, arguments: Mapping[str, object]) -> tuple[Any, bool]:
        if name not in names:
            return session._error(f"unknown tool {name!r}; use one of {', '.join(names)}"), False
        return session.run(name, arguments)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--instruction-file", required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--start-url", help="a web task: the page the browser opens")
    where.add_argument("--desktop", help="a desktop task: its desktop server's unix socket")
    parser.add_argument("--observation", choices=OBSERVATIONS, default="snapshot")
    parser.add_argument("--snapshot-chars", type=int, default=DEFAULT_SNAPSHOT_CHARS)
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--system-prompt", default=None, help="replaces the default system prompt; '' sends none")
    parser.add_argument("--tools", default="", help="comma-separated subset of the mode's tools (default: all)")
    args = parser.parse_args(argv)
    only = [t for t in args.tools.split(",") if t]
    with open(args.instruction_file) as f:
        instruction = f.read().strip()
    profile = os.path.join(os.environ.get("HOME") or ".", ".chromium")
    if args.desktop is None:
        os.makedirs(profile, exist_ok=True)
    t0 = time.monotonic()
    browser = None
    desktop = args.desktop is not None
    try:
        session: Session | DesktopSession
        if desktop:
            session = DesktopSession(DesktopServer(args.desktop), args.observation, args.snapshot_chars)
            try:
                first = session.snapshot()
            except ActionError as e:  # the desktop itself is broken (its app exited): not the agent's doing
                raise BrowserError(f"the desktop server: {e}") from None
            emit({"type": "browser", "start_s": round(time.monotonic() - t0, 3), "desktop": args.desktop})
        else:
            browser = Browser(find_chromium(args.chromium), profile, args.start_url)
            browser.start()
            open_start_page(browser)
            session = Session(browser, args.observation, args.snapshot_chars)
            first = session.snapshot()
            emit({"type": "browser", "start_s": round(time.monotonic() - t0, 3), "url": args.start_url})
        default_prompt = DESKTOP_SYSTEM_PROMPT if desktop else SYSTEM_PROMPT
        offered = tool_specs(args.observation, desktop, only)
        result = run_agent(
            args.base_url,
            os.environ.get("OPENFORGE_API_KEY", ""),
            args.model,
            f"{instruction}\n\nThe {'desktop' if desktop else 'page'}:\n{first}",
            max_steps=args.max_steps,
            max_tokens=args.max_tokens,
            tool_specs=offered,
            system_prompt=default_prompt if args.system_prompt is None else args.system_prompt,
            tool_runner=only_offered(session, offered) if only else session.run,
        )
        if session.answer is not None:
            result["final"] = session.answer
    except ModelAPIError as e:
        emit({"type": "result", "ok": False, "error": str(e)})
        print(f"computer-use: {e}", file=sys.stderr)
        return API_ERROR_EXIT
    except (BrowserError, OSError) as e:
        emit({"type": "result", "ok": False, "error": f"browser: {e}"})
        print(f"computer-use: browser: {e}", file=sys.stderr)
        return BROWSER_ERROR_EXIT
    finally:
        if browser is not None:
            browser.stop()
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
