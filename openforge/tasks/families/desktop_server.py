"""The desktop of a desktop GUI task, and the only door to it: a server that shows the desktop's accessibility tree
and a screenshot, and acts on it through GUI operations only (the OSWorld design: a server inside the machine
exposes observe / act).

Run as a plain file by the sandbox's own python3 (Debian's, with python3-gi and python3-pyatspi from the desktop
image `openforge-desktop:bookworm`), never imported by OpenForge, which copies it into each desktop task's
environment (`openforge.tasks.families.desktop`):

    python3 server.py start [--app CMD]  as root (the task's `[environment.gui] service`): `serve` started as the
                                         user `deskapp` in its own session; returns once the app's window is in
                                         the accessibility tree
    python3 server.py serve [--app CMD]  the desktop itself (what `start` runs): Xvfb with a cookie only
                                         `deskapp` can read, a D-Bus session bus and the AT-SPI bus (its user
                                         only), the matchbox window manager, the app, and the socket
    python3 server.py call JSON          one request to the socket, its answer on stdout (a client: a task's
                                         solve.sh, the tests)

The socket, /run/desktop/gui.sock, is the one thing of the desktop another user may reach. One JSON object per
line each way; the operations are GUI operations and nothing else:

    {"op": "snapshot", "budget": 6000}   -> {"text": "window \\"Contacts\\"\\n[1] combobox \\"Contact\\" ..."}
    {"op": "screenshot"}                 -> {"png": BASE64, "title": "Contacts"}
    {"op": "click", "ref": "3"} | {"op": "click", "x": 10, "y": 20}
    {"op": "type", "ref": "4", "text": "..."}     replaces the field's text
    {"op": "select", "ref": "2", "value": "Work"} chooses a combo box's item by its visible text
    {"op": "key", "key": "Enter"}                 (xdotool names too: Return, ctrl+s)
    {"op": "scroll", "dy": 300}
                                         -> {"ok": true} or {"error": "why"}

Refs are numbered in the order of the tree as the latest snapshot walked it (the same desktop state gives the
same refs); an action takes a ref of the latest snapshot. Acting goes through AT-SPI (an element's own action,
its editable text, its selection) or xdotool (keys, clicks at a point, the wheel) on the desktop's display:
never the app's files. The app's state lives where the agent's user cannot reach it (the task's `[verifier]
state_paths`); the agent's user cannot reach the display (no cookie), the buses (their user only) or the
processes (another uid) either.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import pwd
import secrets
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any

USER = "deskapp"
SOCKET_DIR = "/run/desktop"  # 0755: the socket is what others may reach
SOCKET = SOCKET_DIR + "/gui.sock"
PRIVATE = "/run/deskapp"  # 0700: the display's cookie, the session bus, the app's HOME
LOG = "/var/log/desktop.log"
DISPLAY = ":1"
SCREEN = (1280, 800)
APP = "python3 -I /opt/desktop/app.py run"
DEFAULT_BUDGET = 6000
NAME_CAP = 160
SETTLE_S = 0.3  # after an action: the app's handlers run, the accessibility tree follows

# AT-SPI role names -> the words the snapshot shows (the web snapshot's, where one means the same)
ROLES = {
    "push button": "button",
    "toggle button": "button",
    "text": "textbox",
    "entry": "textbox",
    "password text": "textbox",
    "check box": "checkbox",
    "radio button": "radio",
    "combo box": "combobox",
    "menu item": "menuitem",
    "check menu item": "menuitemcheckbox",
    "radio menu item": "menuitemradio",
    "menu": "menu",
    "menu bar": "menubar",
    "page tab": "tab",
    "page tab list": "tablist",
    "spin button": "spinbutton",
    "slider": "slider",
    "toggle switch": "switch",
    "link": "link",
    "list item": "option",
    "table cell": "cell",
    "heading": "heading",
    "dialog": "dialog",
    "alert": "alert",
    "status bar": "status",
}
ACTIONS = ("click", "press", "activate", "toggle", "jump")  # an element's own action, in this order of preference
KEYS = {
    "enter": "Return",
    "escape": "Escape",
    "esc": "Escape",
    "backspace": "BackSpace",
    "delete": "Delete",
    "tab": "Tab",
    "space": "space",
    "arrowup": "Up",
    "arrowdown": "Down",
    "arrowleft": "Left",
    "arrowright": "Right",
    "pageup": "Prior",
    "pagedown": "Next",
    "home": "Home",
    "end": "End",
    "control": "ctrl",
    "ctrl": "ctrl",
    "alt": "alt",
    "shift": "shift",
    "meta": "super",
}


# In OpenForge's process (the tests import it) this joins the error tree; in a sandbox this file runs alone.
try:
    from openforge.core.errors import RequestError as _ActionKind
except ImportError:  # pragma: no cover - the sandbox's path

    class _ActionKind(Exception):  # type: ignore[no-redef]
        pass


class ActionError(_ActionKind, ValueError):
    """What the agent asked for cannot be done (unknown ref, no such item): its message goes back."""


# ---- the desktop (as `deskapp`) -------------------------------------------------------------------------------


def xauthority(path: str, display: str) -> None:
    """A cookie for the display, in Xauthority's format (family Wild: any host), readable by its owner only."""
    number = display.lstrip(":").encode()
    name, cookie = b"MIT-MAGIC-COOKIE-1", secrets.token_bytes(16)

    def field(b: bytes) -> bytes:
        return struct.pack(">H", len(b)) + b

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(struct.pack(">H", 0xFFFF) + field(b"") + field(number) + field(name) + field(cookie))


def wait_for(what: str, ok: Any, proc: subprocess.Popen[bytes] | None, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not ok():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready within {limit_s:g}s")
        time.sleep(0.05)


class Desktop:
    """Xvfb, the buses, the window manager and the app, as children of this process."""

    def __init__(self, app: str):
        self.app_command = app
        self.procs: list[subprocess.Popen[bytes]] = []
        self.app: subprocess.Popen[bytes] | None = None

    def spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=os.environ.copy())
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        os.makedirs(PRIVATE, mode=0o700, exist_ok=True)
        auth = os.path.join(PRIVATE, "Xauthority")
        xauthority(auth, DISPLAY)
        bus = os.path.join(PRIVATE, "bus")
        os.environ.update(
            {
                "HOME": PRIVATE,
                "XDG_RUNTIME_DIR": PRIVATE,
                "DISPLAY": DISPLAY,
                "XAUTHORITY": auth,
                "DBUS_SESSION_BUS_ADDRESS": "unix:path=" + bus,
                "GDK_BACKEND": "x11",
                "NO_AT_BRIDGE": "0",
                "GTK_A11Y": "atspi",
            }
        )
        w, h = SCREEN
        xvfb = self.spawn(["Xvfb", DISPLAY, "-screen", "0", f"{w}x{h}x24", "-nolisten", "tcp", "-auth", auth])
        wait_for("Xvfb", lambda: os.path.exists("/tmp/.X11-unix/X" + DISPLAY.lstrip(":")), xvfb)
        dbus = self.spawn(["dbus-daemon", "--session", "--nofork", "--nopidfile", "--address=unix:path=" + bus])
        wait_for("the session bus", lambda: os.path.exists(bus), dbus)
        launcher = "/usr/libexec/at-spi-bus-launcher"
        if os.path.exists(launcher):
            self.spawn([launcher, "--launch-immediately"])
        self.spawn(["matchbox-window-manager", "-use_titlebar", "no"])
        self.app = subprocess.Popen(["/bin/sh", "-c", "exec " + self.app_command], stdin=subprocess.DEVNULL)
        self.procs.append(self.app)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=3)


# ---- the accessibility tree as text --------------------------------------------------------------------------


def _quote(text: str) -> str:
    text = " ".join(str(text).split())
    if len(text) > NAME_CAP:
        text = text[: NAME_CAP - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


class Tree:
    """The AT-SPI tree of the desktop's apps, rendered (`render`) and acted on (`click`, `type`, `select`, ...)."""

    def __init__(self) -> None:
        import pyatspi  # here: it connects to the session bus of the environment `Desktop.start` set

        self.pyatspi = pyatspi
        self.refs: dict[str, tuple[Any, str, str, Any]] = {}  # ref -> (accessible, role, name, its combo box)

    def pump(self) -> None:
        """Let the AT-SPI library take the events the app sent (its cache follows them)."""
        from gi.repository import GLib

        ctx = GLib.MainContext.default()
        while ctx.pending():
            ctx.iteration(False)

    def apps(self) -> list[Any]:
        self.pump()
        desktop = self.pyatspi.Registry.getDesktop(0)
        out = []
        for i in range(desktop.childCount):
            with contextlib.suppress(Exception):
                app = desktop.getChildAtIndex(i)
                if app is not None:
                    with contextlib.suppress(Exception):  # its properties read afresh, whatever events were missed
                        (getattr(app, "clear_cache", None) or app.clearCache)()
                    out.append(app)
        return out

    def windows(self) -> list[Any]:
        found = []
        for app in self.apps():
            for i in range(app.childCount):
                with contextlib.suppress(Exception):
                    win = app.getChildAtIndex(i)
                    if win is not None and win.getState().contains(self.pyatspi.STATE_SHOWING):
                        found.append(win)
        return found

    def ready(self) -> bool:
        return any(w.getRoleName() in ("frame", "window", "dialog") for w in self.windows())

    def render(self, budget: int = DEFAULT_BUDGET) -> str:
        P = self.pyatspi
        lines: list[str] = []
        refs: dict[str, tuple[Any, str, str, Any]] = {}

        def add(acc: Any, role: str, name: str, depth: int, states: list[str], combo: Any = None) -> None:
            ref = str(len(refs) + 1)
            refs[ref] = (acc, role, name, combo)
            lines.append(
                "  " * depth
                + f"[{ref}] {role}"
                + (f" {_quote(name)}" if name else "")
                + (f" ({', '.join(states)})" if states else "")
            )

        for win in self.windows():
            title = win.name or ""
            kind = "dialog" if win.getRoleName() in ("dialog", "alert") else "window"
            lines.append(f"{kind} {_quote(title)}")
            stack: list[tuple[Any, int]] = [(c, 1) for c in reversed(_reading_order(P, _children(win)))]
            while stack:
                acc, depth = stack.pop()
                try:
                    state = acc.getState()
                    raw = acc.getRoleName()
                    name = (acc.name or "").strip()
                except Exception:  # noqa: BLE001 - a node gone while walking
                    continue
                if not state.contains(P.STATE_SHOWING):
                    continue
                role = ROLES.get(raw)
                if raw == "combo box":
                    items = _items(acc)
                    value = _combo_value(acc, items)
                    add(acc, "combobox", name, depth, _states(P, state, value))
                    for item in items:
                        add(item[0], "option", item[1], depth + 1, ["selected"] if item[1] == value else [], acc)
                    continue
                if role is not None:
                    value = _text(acc) if role in ("textbox", "spinbutton") else None
                    add(acc, role, name, depth, _states(P, state, value, raw))
                    if role in ("button", "checkbox", "radio", "textbox", "option", "menuitem"):
                        continue  # their children are their own parts
                elif raw in ("label", "static", "caption", "paragraph", "heading"):
                    text = name or (_text(acc) or "")
                    if text and not _labels_something(P, acc):
                        lines.append("  " * depth + f"text {_quote(text)}")
                    continue
                stack.extend((c, depth + (1 if role else 0)) for c in reversed(_reading_order(P, _children(acc))))
        self.refs = refs
        return _cut(lines, budget)

    # -- acting ------------------------------------------------------------------------------------------------
    def node(self, ref: Any) -> tuple[Any, str, str, Any]:
        key = str(ref if ref is not None else "").strip().strip("[]").strip()
        key = key[4:] if key.startswith("ref=") else key
        if key not in self.refs:
            raise ActionError(f"no element [{key}] on the desktop: use a ref from the latest snapshot")
        return self.refs[key]

    def click(self, ref: Any) -> None:
        acc, role, name, combo = self.node(ref)
        if combo is not None:  # a combo box's item: choosing it is what clicking it means
            self.choose(combo, name)
            return
        try:
            action = acc.queryAction()
        except NotImplementedError:
            action = None
        if role in ("textbox", "spinbutton"):  # a field's own action is Enter's: a click puts the cursor there
            action = None
        if action is not None:
            names = [action.getName(i) for i in range(action.nActions)]
            for wanted in ACTIONS:
                if wanted in names:
                    action.doAction(names.index(wanted))
                    return
        x, y = _center(self.pyatspi, acc)
        xdotool("mousemove", str(x), str(y), "click", "1")

    def type(self, ref: Any, text: str) -> None:
        acc, role, name, _ = self.node(ref)
        try:
            editable = acc.queryEditableText()
        except NotImplementedError:
            raise ActionError(f"[{ref}] {role} {_quote(name)} takes no text") from None
        with contextlib.suppress(Exception):
            acc.queryComponent().grabFocus()
        if not editable.setTextContents(text):
            raise ActionError(f"[{ref}] {role} {_quote(name)} did not take the text")

    def select(self, ref: Any, value: str) -> None:
        acc, role, name, combo = self.node(ref)
        target = combo if combo is not None else acc
        if combo is None and role != "combobox":
            raise ActionError(f"[{ref}] {role} {_quote(name)} is not a drop-down: select takes a combobox's ref")
        self.choose(target, value)

    def choose(self, combo: Any, value: str) -> None:
        items = _items(combo)
        labels = [label for _, label in items]
        norm = " ".join(value.split()).lower()
        index = next((i for i, label in enumerate(labels) if label == value), None)
        if index is None:
            index = next((i for i, label in enumerate(labels) if " ".join(label.split()).lower() == norm), None)
        if index is None:
            raise ActionError(f"no item {json.dumps(value)}; items: {', '.join(json.dumps(x) for x in labels)}")
        if not combo.querySelection().selectChild(index):
            raise ActionError(f"the drop-down did not take {json.dumps(labels[index])}")

    def click_at(self, x: Any, y: Any) -> None:
        xdotool("mousemove", str(int(float(x))), str(int(float(y))), "click", "1")

    def key(self, key: str) -> None:
        if not key.strip():
            raise ActionError("key: name a key, e.g. Enter, Tab, Escape, ctrl+s")
        parts = [KEYS.get(p.strip().lower(), p.strip()) for p in key.replace("-", "+").split("+") if p.strip()]
        xdotool("key", "--clearmodifiers", "+".join(parts))

    def scroll(self, dy: Any) -> None:
        steps = max(1, min(20, abs(int(float(dy))) // 100))
        button = "5" if int(float(dy)) > 0 else "4"
        w, h = SCREEN
        xdotool("mousemove", str(w // 2), str(h // 2), "click", "--repeat", str(steps), button)


def _children(acc: Any) -> list[Any]:
    out: list[Any] = []
    try:
        n = acc.childCount
    except Exception:  # noqa: BLE001
        return out
    for i in range(min(n, 500)):
        with contextlib.suppress(Exception):
            c = acc.getChildAtIndex(i)
            if c is not None:
                out.append(c)
    return out


def _reading_order(P: Any, children: list[Any]) -> list[Any]:
    """Siblings top to bottom, left to right on the screen (a toolkit's own order can be any: GTK's grid lists
    its children last attached first); ties and elements without a place keep their order."""
    keyed = []
    for i, c in enumerate(children):
        try:
            e = c.queryComponent().getExtents(P.DESKTOP_COORDS)
            keyed.append(((e.y, e.x, i), c))
        except Exception:  # noqa: BLE001 - no component: after the placed ones
            keyed.append(((1 << 30, 1 << 30, i), c))
    return [c for _, c in sorted(keyed, key=lambda kc: kc[0])]


def _items(combo: Any) -> list[tuple[Any, str]]:
    """A combo box's items (accessible, visible text): the menu under it, or its own children."""
    out: list[tuple[Any, str]] = []
    for child in _children(combo):
        subs = _children(child) if child.getRoleName() in ("menu", "list", "list box", "window") else [child]
        for item in subs:
            with contextlib.suppress(Exception):
                if item.getRoleName() in ("menu item", "list item", "table cell") and item.name:
                    out.append((item, item.name))
    return out


def _combo_value(combo: Any, items: list[tuple[Any, str]]) -> str | None:
    with contextlib.suppress(Exception):
        sel = combo.querySelection()
        if sel.nSelectedChildren > 0:
            chosen = sel.getSelectedChild(0)
            if chosen is not None and chosen.name:
                return str(chosen.name)
    return None


def _text(acc: Any) -> str | None:
    try:
        t = acc.queryText()
        return str(t.getText(0, t.characterCount))
    except Exception:  # noqa: BLE001 - no text interface
        return None


def _labels_something(P: Any, acc: Any) -> bool:
    with contextlib.suppress(Exception):
        return any(r.getRelationType() == P.RELATION_LABEL_FOR for r in acc.getRelationSet())
    return False


def _states(P: Any, state: Any, value: str | None, raw: str = "") -> list[str]:
    out = []
    if value not in (None, ""):
        out.append(f"value {_quote(str(value))}")
    if raw in ("check box", "radio button", "toggle button", "check menu item", "radio menu item", "toggle switch"):
        out.append("checked" if state.contains(P.STATE_CHECKED) else "unchecked")
    if not state.contains(P.STATE_SENSITIVE):
        out.append("disabled")
    if state.contains(P.STATE_FOCUSED):
        out.append("focused")
    return out


def _center(P: Any, acc: Any) -> tuple[int, int]:
    try:
        e = acc.queryComponent().getExtents(P.DESKTOP_COORDS)
    except Exception:  # noqa: BLE001
        raise ActionError("the element has no place on the screen to click") from None
    return e.x + e.width // 2, e.y + e.height // 2


def _cut(lines: list[str], budget: int) -> str:
    out, size = [], 0
    for i, line in enumerate(lines):
        if size + len(line) + 1 > budget and i > 0:
            out.append(f"... {len(lines) - i} more lines not shown (the desktop is longer than {budget} characters)")
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def xdotool(*args: str) -> None:
    r = subprocess.run(["xdotool", *args], capture_output=True, timeout=10)
    if r.returncode != 0:
        raise ActionError(f"xdotool {' '.join(args)}: {r.stderr.decode(errors='replace').strip()[-200:]}")


def screenshot() -> tuple[str, str]:
    """(PNG of the whole screen as base64, the active window's title)."""
    import gi

    gi.require_version("Gdk", "3.0")
    from gi.repository import Gdk

    root = Gdk.get_default_root_window()
    w, h = root.get_width(), root.get_height()
    pixbuf = Gdk.pixbuf_get_from_window(root, 0, 0, w, h)
    if pixbuf is None:
        raise ActionError("the screen could not be read")
    ok, data = pixbuf.save_to_bufferv("png", [], [])
    return base64.b64encode(bytes(data)).decode(), ""


# ---- the socket ------------------------------------------------------------------------------------------------


def handle(tree: Tree, app: subprocess.Popen[bytes] | None, request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if app is not None and app.poll() is not None:
        return {"error": f"the app exited (status {app.returncode})"}
    try:
        if op == "ping":
            return {"ok": True, "ready": tree.ready()}
        if op == "snapshot":
            return {"text": tree.render(int(request.get("budget") or DEFAULT_BUDGET))}
        if op == "screenshot":
            png, _ = screenshot()
            titles = [w.name for w in tree.windows()]
            return {"png": png, "title": titles[-1] if titles else ""}
        if op == "click":
            if request.get("ref") in (None, "") and "x" in request and "y" in request:
                tree.click_at(request["x"], request["y"])
            else:
                tree.click(request.get("ref"))
        elif op == "type":
            tree.type(request.get("ref"), str(request.get("text", "")))
        elif op == "select":
            tree.select(request.get("ref"), str(request.get("value", "")))
        elif op == "key":
            tree.key(str(request.get("key", "")))
        elif op == "scroll":
            tree.scroll(request.get("dy", 0))
        else:
            return {"error": f"unknown op {op!r}: snapshot, screenshot, click, type, select, key, scroll"}
    except ActionError as e:
        return {"error": str(e)}
    except (ValueError, TypeError) as e:
        return {"error": f"{op}: {e}"}
    except Exception as e:  # noqa: BLE001 - AT-SPI's errors (a node gone, the app busy) go back as the action's
        return {"error": f"{op}: {type(e).__name__}: {e}"}
    time.sleep(SETTLE_S)
    return {"ok": True}


def serve(app: str) -> int:
    desktop = Desktop(app)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        desktop.start()
        os.environ["NO_AT_BRIDGE"] = "1"  # this server is no accessible app itself
        tree = Tree()
        wait_for("the app's window", lambda: _quiet(tree.ready), desktop.app, 60.0)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SOCKET)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(SOCKET)
        os.chmod(SOCKET, 0o666)  # the agent's user connects: the operations are what it may do
        srv.listen(8)
        print(f"desktop ready on {SOCKET}", flush=True)
        while True:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(120)
                _serve_connection(conn, tree, desktop.app)
    finally:
        desktop.stop()


def _quiet(check: Any) -> bool:
    try:
        return bool(check())
    except Exception:  # noqa: BLE001 - the buses still starting
        return False


def _serve_connection(conn: socket.socket, tree: Tree, app: subprocess.Popen[bytes] | None) -> None:
    buf = b""
    while True:
        try:
            chunk = conn.recv(65536)
        except OSError:
            return
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                request = json.loads(line)
                answer = handle(tree, app, request) if isinstance(request, dict) else {"error": "send a JSON object"}
            except ValueError as e:
                answer = {"error": f"not JSON: {e}"}
            try:
                conn.sendall(json.dumps(answer).encode() + b"\n")
            except OSError:
                return


def call(request: dict[str, Any], path: str = SOCKET, timeout: float = 60.0) -> dict[str, Any]:
    """One request to the desktop server and its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(json.dumps(request).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    return dict(json.loads(buf))


# ---- the service (as root) -------------------------------------------------------------------------------------


def start(app: str, user: str, log: str, wait_s: float) -> int:
    """Start `serve` as `user` in its own session (no capability, a clean environment, output to `log`) and wait
    until its socket says the app's window is there; 0, or 1 with the reason on stderr."""
    if os.geteuid() != 0:
        sys.stderr.write(f"server.py start runs as root (the task's service), to start the desktop as {user}\n")
        return 1
    pw = pwd.getpwnam(user)
    for path, mode in ((SOCKET_DIR, 0o755), (PRIVATE, 0o700)):
        os.makedirs(path, exist_ok=True)
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, mode)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    argv = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "--inh-caps=-all", "--bounding-set=-all"]
    argv += ["--", sys.executable, "-I", "-B", os.path.abspath(__file__), "serve", "--app", app]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": PRIVATE}
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env, cwd="/", start_new_session=True
    )
    os.close(fd)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.stderr.write(f"the desktop exited with status {proc.returncode}; its log ({log}):\n{tail(log)}")
            return 1
        with contextlib.suppress(OSError, ValueError):
            if call({"op": "ping"}, timeout=5).get("ready"):
                return 0
        time.sleep(0.2)
    sys.stderr.write(f"the desktop was not ready within {wait_s:g}s; its log ({log}):\n{tail(log)}")
    return 1


def tail(path: str, n: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")
    except OSError as e:
        return str(e)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="server.py", description="The desktop of OpenForge's desktop tasks.")
    sub = ap.add_subparsers(dest="command")
    for name in ("start", "serve"):
        s = sub.add_parser(name)
        s.add_argument("--app", default=APP)
        if name == "start":
            s.add_argument("--user", default=USER)
            s.add_argument("--log", default=LOG)
            s.add_argument("--wait", type=float, default=90.0)
    c = sub.add_parser("call")
    c.add_argument("request")
    a = ap.parse_args(argv)
    if a.command == "start":
        return start(a.app, a.user, a.log, a.wait)
    if a.command == "serve":
        return serve(a.app)
    if a.command == "call":
        answer = call(json.loads(a.request))
        print(json.dumps(answer))
        return 1 if "error" in answer else 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
