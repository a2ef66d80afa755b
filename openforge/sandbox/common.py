"""What the backends share beyond the interface: the per-exec kill by marker, the keep-alive PID 1, the proxy
forwarder's path, label selectors and the worker pool for blocking client calls.

Every exec of the docker and kubernetes backends carries a random marker in its environment
(`EXEC_MARKER=<hex>`); on timeout `KILL_SCRIPT`, run as root in the same sandbox, SIGKILLs every process whose
environment carries it. The local backend needs no marker: each exec has its own pid namespace.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from .base import LABEL_MANAGED, LABEL_RUN, label_value

__all__ = [
    "AGENT_CAPABILITIES",
    "EXEC_MARKER",
    "FORWARDER_PY",
    "ExecDeadline",
    "KEEPALIVE",
    "KILL_GRACE_S",
    "KILL_SCRIPT",
    "WorkerPool",
    "append_capped",
    "STOP_SCRIPT",
    "kinds_script_argv",
    "kill_script_argv",
    "run_selector",
    "stop_script_argv",
]

T = TypeVar("T")

EXEC_MARKER = "OPENFORGE_EXEC_ID"

# The capabilities a sandbox's processes may hold (Docker `cap_drop: ALL` + `cap_add`, the same in Kubernetes):
# what a Harbor task's root agent needs to install packages and edit system files (file ownership and modes,
# switching users as apt and su do, signalling its own processes, binding low ports for a task's server),
# i.e. Docker's default set without NET_RAW (raw sockets), MKNOD (device nodes), SETFCAP (file capabilities)
# and SYS_CHROOT. SETPCAP stays: grading needs it to drop the verifier's capabilities (`setpriv`).
AGENT_CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "AUDIT_WRITE",
)
# Open files per process in a sandbox (a runtime's default can be a million); a daemon whose own limit is lower
# cannot grant it, and its sandboxes then keep the daemon's.
NOFILE_LIMIT = 16384
KILL_GRACE_S = 5.0  # after a timeout kill, how long to wait for the exec's output to end
FORWARDER_PY = Path(__file__).with_name("forwarder.py")  # the proxy bridge / local launcher, run as a file

# Runs as root inside the sandbox: SIGKILL every process whose environment carries the marker, a few rounds
# (a process may fork while we kill). One `grep` per process; no bash needed.
KILL_SCRIPT = r"""
m="$1"
for round in 1 2 3 4 5; do
  found=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    if grep -qaF "$m" "$d/environ" 2>/dev/null; then kill -9 "$p" 2>/dev/null && found=1; fi
  done
  [ -z "$found" ] && break
done
exit 0
"""

# Runs as root inside the sandbox (`Sandbox.stop_agent_processes`, in band): stop (SIGSTOP), then kill, every
# process but PID 1, this shell and its ancestors (none in a container exec; a launcher where the exec is
# wrapped), until none is left — with the argument `spare-keepalive` also the eldest child of PID 1 (the
# keep-alive under an init such as Docker's tini). Stopped processes cannot fork, so rounds converge on a fork
# bomb too. Zombies (state Z) are dead already and skipped. It refuses to run unless the keep-alive carries
# KEEPALIVE_MARK: in any other pid namespace (a host's) it would reach far more than a sandbox. Shell builtins
# only, but `sleep` (a fork bomb may leave no process to spare).
STOP_SCRIPT = r"""
keep=
guard=1
if [ "${1:-}" = spare-keepalive ]; then
  eldest=
  for d in /proc/[0-9]*; do
    { read -r line < "$d/stat"; } 2>/dev/null || continue
    set -- ${line##*) }
    if [ "$2" = 1 ] && { [ -z "$eldest" ] || [ "${20}" -lt "$eldest" ]; }; then eldest=${20}; keep=${d#/proc/}; fi
  done
  guard=$keep
fi
envline=
[ -n "$guard" ] && { read -r envline < "/proc/$guard/environ"; } 2>/dev/null
case "$envline" in
  *OPENFORGE_KEEPALIVE=1*) ;;
  *) echo "refusing to stop processes: process ${guard:-?} is not an openforge keep-alive" \
          "(not a sandbox's pid namespace)" >&2
     exit 2 ;;
esac
spare=" 1 $keep "
p=$$
while [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != 1 ]; do
  spare="$spare$p "
  { read -r line < "/proc/$p/stat"; } 2>/dev/null || break
  set -- ${line##*) }
  p=$2
done
count_others() {  # sets n and others without a subshell: a subshell would count itself
  n=0; others=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$spare" in *" $p "*) continue ;; esac
    { read -r line < "$d/stat"; } 2>/dev/null || continue
    state=${line##*) }; state=${state%% *}
    if [ "$state" != Z ] && [ "$state" != X ]; then n=$((n + 1)); others="$others $p"; fi
  done
}
round=0
count_others
while [ "$n" != 0 ]; do
  round=$((round + 1))
  if [ "$round" -gt 100 ]; then echo "$n processes remain after 100 rounds of SIGKILL" >&2; exit 1; fi
  for p in $others; do kill -STOP "$p" 2>/dev/null; done
  count_others
  for p in $others; do kill -STOP "$p" 2>/dev/null; done
  for p in $others; do kill -KILL "$p" 2>/dev/null; done
  sleep 0.05 2>/dev/null || :
  count_others
done
exit 0
"""

# Prints, NUL-separated, which of its arguments exist (a dangling symlink included).
# Prints "KIND PATH\0" for each argument that exists (KIND: link, dir, file or other; a link is not followed).
KINDS_SCRIPT = r"""for p; do
  if [ -L "$p" ]; then k=link; elif [ -d "$p" ]; then k=dir; elif [ -f "$p" ]; then k=file
  elif [ -e "$p" ]; then k=other; else continue; fi
  printf "%s %s\0" "$k" "$p"
done"""

# PID 1 of a container or pod (Docker: the init's child), whatever the image: `sleep infinity` where supported,
# else a loop. Its environment carries KEEPALIVE_MARK, by which the in-band process stop recognises it.
KEEPALIVE_MARK = "OPENFORGE_KEEPALIVE=1"
KEEPALIVE = ["/bin/sh", "-c", f"export {KEEPALIVE_MARK}; exec sleep infinity 2>/dev/null; while :; do sleep 3600; done"]


def kill_script_argv(marker: str) -> list[str]:
    """The command that kills every process of the exec carrying `marker` (run it as root in the sandbox)."""
    return ["/bin/sh", "-c", KILL_SCRIPT, "sh", f"{EXEC_MARKER}={marker}"]


def stop_script_argv(spare_keepalive: bool = False) -> list[str]:
    """The in-band command that ends every process but PID 1 (and, with `spare_keepalive`, PID 1's eldest
    child); run it as root in the sandbox."""
    return ["/bin/sh", "-c", STOP_SCRIPT, "sh"] + (["spare-keepalive"] if spare_keepalive else [])


def kinds_script_argv(paths: list[str]) -> list[str]:
    """The in-band command that prints (NUL-separated) which of `paths` exist, and as what (KINDS_SCRIPT)."""
    return ["/bin/sh", "-c", KINDS_SCRIPT, "sh", *paths]


def run_selector(run_label: str | None) -> dict[str, str]:
    """The labels every sandbox of run `run_label` carries (all managed sandboxes with None)."""
    labels = {LABEL_MANAGED: "1"}
    if run_label is not None:
        labels[LABEL_RUN] = label_value(run_label)
    return labels


def append_capped(buf: bytearray, data: bytes, cap: int) -> bool:
    """Append `data` to one stream's output, keeping at most `cap` bytes (the first); True if any were dropped."""
    room = cap - len(buf)
    if len(data) > room:
        buf += data[: max(0, room)]
        return True
    buf += data
    return False


class ExecDeadline:
    """The timeout of one exec read on a worker thread: when `timeout_s` has passed since `start` (or `cancel`
    is set), `kill` runs once and the output gets `KILL_GRACE_S` more to end."""

    def __init__(self, start: float, timeout_s: float, cancel: threading.Event, kill: Callable[[], None]):
        self.deadline = start + max(0.0, timeout_s)
        self.cancel = cancel
        self.kill = kill
        self.timed_out = False
        self._grace_end: float | None = None

    def keep_reading(self) -> bool:
        """Kill when the time has come; False once the grace after the kill is over."""
        now = time.monotonic()
        if self._grace_end is None and (now >= self.deadline or self.cancel.is_set()):
            self.timed_out = True
            self.kill()
            self._grace_end = time.monotonic() + KILL_GRACE_S
        return self._grace_end is None or now < self._grace_end

    def wait_s(self, most: float = 0.25) -> float:
        """How long the next read may block: until the deadline (or the end of the grace), at most `most`."""
        end = self._grace_end if self._grace_end is not None else self.deadline
        return max(0.0, min(most, end - time.monotonic()))


class WorkerPool:
    """The thread pool a backend runs its blocking client calls on, so none blocks the event loop."""

    def __init__(self, max_workers: int, name: str):
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, partial(fn, *args))

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
