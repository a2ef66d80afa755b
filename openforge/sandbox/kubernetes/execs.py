"""Commands in a pod through the `exec` subresource (a websocket, channel protocol v4/v5).

The Kubernetes exec API has no user, environment, working directory or "close stdin", so every command is
wrapped in a `/bin/sh -c` script (`exec_script`) that exports the environment and a random marker, `cd`s,
switches user with `setpriv` (util-linux), and feeds the command exactly `len(stdin)` bytes with `head -c` (so it
also works over v4, which cannot close stdin). `pump` moves the bytes; on timeout its caller kills the marked
processes (`openforge.sandbox.common.KILL_SCRIPT`) and the stream gets `KILL_GRACE_S` more to end
(`common.ExecDeadline`).
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from collections.abc import Callable
from typing import Any

from ..common import EXEC_MARKER, ExecDeadline, append_capped
from ..state import ByteSink
from .client import short_error

__all__ = ["RawExec", "exec_script", "exit_code_of", "pump"]

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def user_prefix(user: str | None) -> str:
    """`setpriv` prefix that runs a command as `user` ("name", "name:group", "uid", "uid:gid"); the sandbox
    container runs as root, so root needs no switch."""
    if user is None or user in ("root", "0", "0:0"):
        return ""
    name, _, group = user.partition(":")
    q = shlex.quote
    if name.isdigit():
        gid = group if group.isdigit() else name
        return f"setpriv --reuid={name} --regid={gid} --clear-groups -- "
    regid = (
        f"$(id -g {q(name)})"
        if not group
        else (group if group.isdigit() else f"$(getent group {q(group)} | cut -d: -f3)")
    )
    return f'setpriv --reuid="$(id -u {q(name)})" --regid="{regid}" --init-groups -- '


def exec_script(
    argv: list[str],
    *,
    marker: str,
    env: dict[str, str] | None = None,
    workdir: str | None = None,
    user: str | None = None,
    stdin_len: int | None = None,
) -> str:
    """The `/bin/sh -c` script that runs `argv` the way `Sandbox.exec` promises: environment + marker exported,
    in `workdir` (created if missing), as `user`, with exactly `stdin_len` bytes of stdin (else /dev/null)."""
    q = shlex.quote
    lines = [f"export {EXEC_MARKER}={q(marker)}"]
    for k, v in (env or {}).items():
        if not ENV_NAME.match(k):
            raise ValueError(f"environment variable name {k!r} is not valid in a shell")
        lines.append(f"export {k}={q(v)}")
    if workdir:
        lines.append(f"[ -d {q(workdir)} ] || mkdir -p {q(workdir)}")
        lines.append(f"cd {q(workdir)} || {{ echo 'openforge: cannot enter {workdir}' >&2; exit 126; }}")
    cmd = user_prefix(user) + " ".join(q(a) for a in argv)
    if stdin_len is None:
        lines.append(f"exec {cmd} </dev/null")
    else:
        lines.append(f"head -c {int(stdin_len)} | {cmd}")
    return "\n".join(lines) + "\n"


def exit_code_of(status: bytes) -> int | None:
    """Exit code from the exec's error channel (3): `{"status": "Success"}` or a Failure whose cause
    `ExitCode` carries it; None when there is none (the stream broke)."""
    if not status:
        return None
    try:
        st = json.loads(status.decode("utf-8", "replace"))
    except ValueError:
        return None
    if st.get("status") == "Success":
        return 0
    for cause in (st.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message"))
            except (TypeError, ValueError):
                return None
    return None


class RawExec:
    """What one exec stream produced, before it becomes an ExecResult."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.err = bytearray()
        self.code: int | None = None
        self.timed_out = False
        self.truncated = False
        self.duration = 0.0


def pump(
    ws: Any,
    stdin: bytes | None,
    *,
    start: float,
    timeout_s: float,
    output_cap: int,
    cancel: threading.Event,
    sink: ByteSink | None,
    kill: Callable[[], None],
) -> RawExec:
    """Feed `stdin` to an open exec stream and read stdout/stderr (stdout into `sink` when given) until it
    ends. At the deadline (`start` + `timeout_s`) or on `cancel`: `kill()`, `timed_out`, and a grace for the
    stream to end (`ExecDeadline`). `code` stays None when the stream broke without an exit status."""
    raw = RawExec()
    clock = ExecDeadline(start, timeout_s, cancel, kill)
    targets = {1: raw.out, 2: raw.err}

    def drain() -> None:
        for channel, buf in targets.items():
            data = ws.read_channel(channel)
            if not data:
                continue
            if channel == 1 and sink is not None:
                sink.write(data)
                continue
            raw.truncated |= append_capped(buf, data, output_cap)

    try:
        if stdin:
            for i in range(0, len(stdin), 1 << 20):
                ws.write_channel(0, stdin[i : i + (1 << 20)])
        while ws.is_open() and clock.keep_reading():
            ws.update(timeout=clock.wait_s())
            drain()
        drain()
        status = ws.read_channel(3)
    except Exception as e:  # noqa: BLE001 - the websocket broke: the caller decides from the pod's state
        status = b""
        if not clock.timed_out:
            raw.err += f"\nopenforge: the exec stream broke: {short_error(e)}\n".encode()
    finally:
        try:
            ws.close()
        except Exception:  # noqa: BLE001, S110 - already closed
            pass
    raw.timed_out = clock.timed_out
    raw.code = exit_code_of(status if isinstance(status, bytes) else str(status).encode())
    raw.duration = time.monotonic() - start
    return raw
