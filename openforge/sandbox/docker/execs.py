"""Commands in a Docker container through the exec API.

`exec` uses the low-level API: demultiplexed stdout/stderr over the hijacked socket, read on a worker thread
so a hung process never blocks the event loop. Every exec carries a random marker in its environment
(`EXEC_MARKER`); on timeout every process of the container carrying it is SIGKILLed by a second exec (as root,
`KILL_SCRIPT`) — and when that cannot start (a fork bomb has used up the pids limit) from the host, with the
container frozen so nothing forks meanwhile (needs root on the daemon's host). A process that clears its
environment escapes the per-exec kill; it dies with the container.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import struct
import threading
import time
import uuid

from ..base import ExecResult, SandboxError
from ..common import EXEC_MARKER, ExecDeadline, append_capped, kill_script_argv
from .client import DockerConnection, docker_errors, infra_error
from .processes import container_host_pids

__all__ = ["ContainerExec"]

BUF_SEND = 1 << 16


class ContainerExec:
    """Runs commands in container `container_id` (named `name`, its init process `init_pid` on the host),
    blocking: call `run` on a worker thread."""

    def __init__(self, conn: DockerConnection, container_id: str, name: str, init_pid: int, default_user: str | None):
        self.conn = conn
        self.id = container_id
        self.name = name
        self.init_pid = init_pid
        self.default_user = default_user
        self._pids_visible = os.path.exists(f"/proc/{init_pid}")  # same pid namespace as the daemon?

    def run(
        self,
        argv: list[str],
        timeout_s: float,
        env: dict[str, str] | None,
        workdir: str | None,
        user: str | None,
        stdin: bytes | None,
        output_cap: int,
        cancel: threading.Event,
    ) -> ExecResult:
        """Run `argv` and wait for it, at most `timeout_s` (or until `cancel` is set): then its processes are
        killed and `timed_out` is set. SandboxError when the container itself goes away."""
        api = self.conn.api
        marker = uuid.uuid4().hex
        environment = dict(env or {})
        environment[EXEC_MARKER] = marker
        user = user if user is not None else self.default_user
        start = time.monotonic()
        try:
            exec_id = api.exec_create(
                self.id,
                argv,
                stdout=True,
                stderr=True,
                stdin=stdin is not None,
                tty=False,
                environment=environment,
                workdir=workdir or None,
                user=user or "",
            )["Id"]
            sock_io = api.exec_start(exec_id, socket=True)
        except docker_errors() as e:
            raise infra_error(f"cannot start a command in sandbox {self.name}", e) from e
        sock: socket.socket = getattr(sock_io, "_sock", sock_io)
        out = bytearray()
        err = bytearray()
        truncated = False
        buf = bytearray()
        pending = memoryview(stdin) if stdin is not None else None
        clock = ExecDeadline(start, timeout_s, cancel, lambda: self.kill_marker(marker))
        sel = selectors.DefaultSelector()
        try:
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if pending is not None else 0))
            if pending is not None and len(pending) == 0:
                self._shut_wr(sock)
                pending = None
                sel.modify(sock, selectors.EVENT_READ)
            eof = False
            while not eof and clock.keep_reading():
                for _key, mask in sel.select(timeout=clock.wait_s()):
                    if mask & selectors.EVENT_WRITE and pending is not None:
                        try:
                            n = sock.send(pending[:BUF_SEND])
                            pending = pending[n:]
                        except (BlockingIOError, InterruptedError):
                            pass
                        except OSError:
                            pending = memoryview(b"")  # the command closed its stdin
                        if len(pending) == 0:
                            self._shut_wr(sock)
                            pending = None
                            sel.modify(sock, selectors.EVENT_READ)
                    if mask & selectors.EVENT_READ:
                        try:
                            data = sock.recv(1 << 16)
                        except (BlockingIOError, InterruptedError):
                            continue
                        except OSError:
                            data = b""
                        if not data:
                            eof = True
                            break
                        buf += data
                        while len(buf) >= 8:
                            stream, size = struct.unpack(">BxxxL", bytes(buf[:8]))
                            if len(buf) < 8 + size:
                                break
                            payload = bytes(buf[8 : 8 + size])
                            del buf[: 8 + size]
                            truncated |= append_capped(err if stream == 2 else out, payload, output_cap)
        finally:
            sel.close()
            try:
                sock_io.close()
            except Exception:
                pass
            try:
                sock.close()
            except Exception:
                pass
        timed_out = clock.timed_out
        exit_code = self._exit_code(exec_id, wait_s=1.0 if timed_out else 2.0)
        if exit_code is None:
            exit_code = -1
        if not timed_out and (exit_code < 0 or exit_code >= 128) and not self.container_running():
            # killed because the whole container went away: the infrastructure's failure, not the command's
            raise SandboxError(f"sandbox {self.name}: the container stopped while running {argv[0]!r}")
        if exit_code == 126 and not out and not err:
            err += (
                f"openforge: the container runtime could not start {argv[0]!r} (user {user or 'default'!r}, "
                f"workdir {workdir or 'default'!r}: does the user exist?)\n"
            ).encode()
        return ExecResult(
            exit_code=exit_code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            truncated=truncated,
            duration_s=round(time.monotonic() - start, 4),
        )

    @staticmethod
    def _shut_wr(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _exit_code(self, exec_id: str, wait_s: float) -> int | None:
        end = time.monotonic() + wait_s
        while True:
            try:
                info = self.conn.api.exec_inspect(exec_id)
            except docker_errors():
                return None
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if time.monotonic() >= end:
                return None
            time.sleep(0.02)

    def container_running(self, settle_s: float = 0.3) -> bool:
        """Is the container still up? A command killed by a signal may be the first sign that the container is
        going down, before the daemon says so: look at its init process too, and ask the daemon twice."""
        for attempt in range(2):
            try:
                state = self.conn.api.inspect_container(self.id).get("State", {})
            except docker_errors():
                return False
            if not state.get("Running"):
                return False
            try:
                with open(f"/proc/{self.init_pid}/stat") as f:
                    if f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                        return False
            except FileNotFoundError:
                if self._pids_visible:  # we see the daemon's pids, and the container's init is gone
                    return False
            except OSError:
                pass
            if attempt == 0:
                time.sleep(settle_s)
        return True

    def kill_marker(self, marker: str) -> None:
        """SIGKILL every process of this container started by the exec carrying `marker`."""
        api = self.conn.api
        try:
            kid = api.exec_create(self.id, kill_script_argv(marker), stdout=True, stderr=True, user="0")["Id"]
            api.exec_start(kid)
            code = api.exec_inspect(kid).get("ExitCode")
            if code == 0:
                return
        except docker_errors():
            pass
        self._kill_marker_from_host(marker)

    def _kill_marker_from_host(self, marker: str) -> None:
        """Fallback when no process can be started in the container (pids limit exhausted): freeze it, kill
        the marked processes through the host's /proc, thaw. Needs root on the daemon's host."""
        needle = f"{EXEC_MARKER}={marker}".encode()
        api = self.conn.api
        paused = False
        try:
            api.pause(self.id)
            paused = True
        except docker_errors():
            pass
        try:
            for _ in range(5):
                killed = 0
                for pid in container_host_pids(self.id):
                    try:
                        with open(f"/proc/{pid}/environ", "rb") as f:
                            if needle in f.read():
                                os.kill(pid, signal.SIGKILL)
                                killed += 1
                    except (OSError, ValueError):
                        continue
                if not killed:
                    break
        finally:
            if paused:
                try:
                    api.unpause(self.id)
                except docker_errors():
                    pass
