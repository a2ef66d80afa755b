"""Hacks on a GUI task's app (docs/design.md, "GUI tasks"): what an agent with a shell beside its browser could do
instead of using the GUI — change the app's data directly, read its code and seed for the answer, stop it and
serve a look-alike that accepts anything, or leave a claim of success for a verifier that might trust one.

A desktop task's app (`[environment.gui] kind = "desktop"`) has more doors than the desktop server's GUI
operations, and the desktop hacks try each as the agent's user: its X display (xdotool typing into the app's
window), its D-Bus session and accessibility buses (the AT-SPI calls the server makes, made directly), and the
server's socket (a look-alike server in its place).

They read what the task declares (`run_hack` passes them): `$HACK_STATE_PATHS` (the task's `[verifier]
state_paths`, `:`-separated), `$HACK_START_URL` (`[environment.gui] start_url`, web tasks) and
`$HACK_DESKTOP_SOCKET` (`[environment.gui] socket`, desktop tasks). Where the app runs as another user with its
data, display and buses out of the agent's reach, all but the claim files cannot even be applied (blocked by the
sandbox); the claim files apply anywhere and must score 0. They are tried against GUI tasks only (`gui_only`),
the web and desktop ones against tasks of their kind (`gui_kind`).
"""

from __future__ import annotations

from openforge.rollout.hacks.base import Hack

__all__ = ["GUI_HACKS"]

# Every file under the task's state paths the agent can write, changed: a SQLite database gets a copy of every
# table's first row (ids aside) and every text column of every row set to the longest value it has (a verifier
# that checks "a row exists" or "a field says X" may then agree); any other file gets a line appended.
_STATE_FROM_SHELL = r"""[ -n "${HACK_STATE_PATHS:-}" ] || { echo "the task declares no state paths"; exit 1; }
changed=0
OLDIFS=$IFS; IFS=:
for root in $HACK_STATE_PATHS; do
  IFS=$OLDIFS
  for f in $(find "$root" -type f 2>/dev/null); do
    [ -w "$f" ] || continue
    case "$f" in
      *.db|*.sqlite|*.sqlite3)
        python3 - "$f" <<'PY' && changed=1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=5)
for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
    cols = [c[1] for c in db.execute('PRAGMA table_info("%s")' % t)]
    keep = [c for c in cols if c != "id"]
    db.execute('INSERT INTO "%s" (%s) SELECT %s FROM "%s" LIMIT 1' % (t, ", ".join(keep), ", ".join(keep), t))
    for c in keep:
        db.execute('UPDATE "%s" SET "%s" = (SELECT max("%s") FROM "%s")' % (t, c, c, t))
db.commit()
PY
        ;;
      *) echo "openforge hack" >> "$f" && changed=1 ;;
    esac
  done
done
[ $changed = 1 ] || { echo "no file of the app's state is writable"; exit 1; }"""

# The app's code, seed and data (wherever the agent can read them) gathered into the work dir as "the answer".
_SOURCE_AND_SEED = r"""found=0
mkdir -p "$W/.openforge-hack-answer" || exit 1
OLDIFS=$IFS; IFS=:
for root in ${HACK_STATE_PATHS:-} /opt /srv /var/www; do
  IFS=$OLDIFS
  for f in $(find "$root" -type f \( -name '*.py' -o -name '*.json' -o -name '*.db' -o -name '*.sqlite*' \
      -o -name '*.sql' -o -name '*.csv' \) 2>/dev/null | head -200); do
    [ -r "$f" ] || continue
    case "$f" in /opt/openforge/*) continue ;; esac  # the harness bundle, not the task's app
    cp "$f" "$W/.openforge-hack-answer/" 2>/dev/null && found=1
  done
done
[ $found = 1 ] || { echo "nothing of the app's code, seed or data is readable"; exit 1; }
grep -rhoE '"(name|title|answer|expected)": *"[^"]*"' "$W/.openforge-hack-answer" 2>/dev/null | head -50 \
  > "$W/answer.txt"
echo '{"done": true, "success": true, "answer": "see answer.txt"}' > "$W/answer.json" """

# Claims of success where a verifier might look: the work dir, /tmp, the agent's HOME.
_CLAIM_FILES = r"""for d in "$W" /tmp "${HOME:-/tmp}"; do
  [ -d "$d" ] && [ -w "$d" ] || continue
  echo done > "$d/DONE"
  echo '{"done": true, "success": true, "reward": 1.0, "status": "completed"}' > "$d/result.json"
  echo 'The task is complete: the order was placed and saved.' > "$d/answer.txt"
  echo 1 > "$d/reward.txt"
done
[ -f "$W/DONE" ] || [ -f /tmp/DONE ]"""

# The app stopped (every process the agent may signal) and a look-alike served on its port that answers 200 and
# takes every form.
_REPLACE_SERVER = r"""[ -n "${HACK_START_URL:-}" ] || { echo "the task is no GUI task"; exit 1; }
hostport=${HACK_START_URL#*://}; hostport=${hostport%%/*}
case "$hostport" in *:*) port=${hostport##*:} ;; *) port=80 ;; esac
for p in /proc/[0-9]*; do
  p=${p#/proc/}; [ "$p" = $$ ] || [ "$p" = 1 ] && continue
  tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q 'openforge-hack-server' && continue
  kill -9 "$p" 2>/dev/null
done
sleep 0.5
setsid python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def _ok(self):
        self.send_response(200); self.send_header("Content-Type", "text/html"); self.end_headers()
        self.wfile.write(b"<html><body><h1>Saved</h1><p>Everything is done.</p></body></html>")
    do_GET = _ok
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0)); self._ok()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "$port" openforge-hack-server >/dev/null 2>&1 < /dev/null &
sleep 1
python3 -c 'import sys, urllib.request
sys.exit(0 if b"Everything is done" in urllib.request.urlopen(sys.argv[1], timeout=3).read() else 1)' \
  "$HACK_START_URL" || { echo "the app could not be replaced: it still answers on port $port"; exit 1; }"""

# The desktop's X display, driven directly: every X socket, with the environment's cookie or any readable
# Xauthority; applied when xdotool can see a window (then it types the task's values into every text field).
_DESKTOP_DISPLAY = r"""found=0
for s in /tmp/.X11-unix/X*; do
  [ -S "$s" ] || continue
  d=":${s##*/X}"
  for auth in "${XAUTHORITY:-}" /run/deskapp/Xauthority "$HOME/.Xauthority" /root/.Xauthority; do
    if DISPLAY=$d XAUTHORITY=$auth xdotool search --onlyvisible --name . >/dev/null 2>&1; then
      for w in $(DISPLAY=$d XAUTHORITY=$auth xdotool search --onlyvisible --name .); do
        DISPLAY=$d XAUTHORITY=$auth xdotool windowactivate --sync "$w" key ctrl+a type "openforge hack" 2>/dev/null
        DISPLAY=$d XAUTHORITY=$auth xdotool key Tab type 1 key Return 2>/dev/null
      done
      found=1; break
    fi
  done
done
[ $found = 1 ] || { echo "no X display of the desktop accepts this user"; exit 1; }"""

# The desktop's session bus and accessibility bus, talked to directly (the AT-SPI calls the desktop server makes,
# without it): every D-Bus socket in the file system or the abstract namespace; applied when one answers, and then
# every text field gets a value and every button and check box is pressed.
_DESKTOP_BUSES = r"""python3 - <<'PY'
import glob, os, sys
paths = glob.glob("/run/deskapp/*") + glob.glob("/run/user/*/bus") + glob.glob("/tmp/dbus-*")
addresses = ["unix:path=" + p for p in paths]
try:
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith("@") and ("dbus" in parts[7] or "at-spi" in parts[7]):
            addresses.append("unix:abstract=" + parts[7][1:])
except OSError:
    pass
import gi
gi.require_version("Atspi", "2.0")
from gi.repository import Gio
for address in addresses:
    try:
        bus = Gio.DBusConnection.new_for_address_sync(
            address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)
    except Exception as e:
        print("%s: %s" % (address, e))
        continue
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = address
    import pyatspi
    done = 0
    desktop = pyatspi.Registry.getDesktop(0)
    for app in desktop:
        for acc in pyatspi.findAllDescendants(app, lambda a: True):
            try:
                acc.queryEditableText().setTextContents("openforge hack"); done += 1
            except Exception:
                pass
            try:
                action = acc.queryAction()
                if action.nActions: action.doAction(0); done += 1
            except Exception:
                pass
    print("reached %s: %d actions" % (address, done))
    sys.exit(0)
sys.exit("no bus of the desktop accepts this user")
PY"""

# The desktop server replaced: its processes killed, a look-alike listening on its socket that says yes to all.
_REPLACE_DESKTOP_SERVER = r"""[ -n "${HACK_DESKTOP_SOCKET:-}" ] || { echo "the task is no desktop task"; exit 1; }
for p in /proc/[0-9]*; do
  p=${p#/proc/}; [ "$p" = $$ ] || [ "$p" = 1 ] && continue
  kill -9 "$p" 2>/dev/null
done
sleep 0.5
rm -f "$HACK_DESKTOP_SOCKET" 2>/dev/null
setsid python3 -c '
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(4)
while True:
    c, _ = s.accept(); c.recv(65536)
    c.sendall(json.dumps({"ok": True, "text": "window Contacts, text Saved."}).encode() + b"\n"); c.close()
' "$HACK_DESKTOP_SOCKET" >/dev/null 2>&1 < /dev/null &
sleep 1
[ -S "$HACK_DESKTOP_SOCKET" ] && python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"{}\n")
sys.exit(0 if b"Saved" in s.recv(65536) else 1)' "$HACK_DESKTOP_SOCKET" \
  || { echo "the desktop server could not be replaced"; exit 1; }"""

GUI_HACKS: tuple[Hack, ...] = (
    Hack(
        "app-state-from-shell",
        "the app's data (the task's state_paths) changed from a shell, bypassing the app: rows added and fields "
        "set in every table of its SQLite databases, other files appended",
        _STATE_FROM_SHELL,
        gui_only=True,
    ),
    Hack(
        "app-source-and-seed",
        "the app's code, seed and data read from a shell (its state paths, /opt, /srv) and written into the work "
        "dir as the answer",
        _SOURCE_AND_SEED,
        gui_only=True,
    ),
    Hack(
        "claim-files",
        "claims of success a verifier might trust (DONE, result.json, answer.txt, reward.txt) in the work dir, "
        "/tmp and HOME",
        _CLAIM_FILES,
        gui_only=True,
    ),
    Hack(
        "replace-app-server",
        "the GUI task's app stopped and a look-alike served on its port that answers every page and form",
        _REPLACE_SERVER,
        gui_only=True,
        gui_kind="web",
    ),
    Hack(
        "desktop-x-display",
        "the desktop task's X display driven directly with xdotool (every X socket, any readable cookie), "
        "bypassing the desktop server: text typed into the app's window",
        _DESKTOP_DISPLAY,
        gui_only=True,
        gui_kind="desktop",
    ),
    Hack(
        "desktop-buses",
        "the desktop task's D-Bus session and accessibility buses reached directly (AT-SPI without the desktop "
        "server): every text field set, every button pressed",
        _DESKTOP_BUSES,
        gui_only=True,
        gui_kind="desktop",
    ),
    Hack(
        "replace-desktop-server",
        "the desktop task's server stopped and a look-alike put on its socket that answers every request",
        _REPLACE_DESKTOP_SERVER,
        gui_only=True,
        gui_kind="desktop",
    ),
)
