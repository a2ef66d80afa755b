"""Docker sandboxes: one container per rollout, on a real daemon, through the `docker` SDK.

Container: `network_mode="none"` (loopback only), `nano_cpus`, `mem_limit` with `memswap_limit` equal to it
(no swap), `pids_limit`, the daemon's init (`init=True`, tini) as PID 1 running `sleep infinity`, the
image's ENTRYPOINT overridden. Commands run with `exec` (low-level API, demultiplexed stdout/stderr over the
hijacked socket, read on a dedicated thread pool so a hung process never blocks the event loop). Every exec
carries a random marker in its environment (`OPENFORGE_EXEC_ID`); on timeout every process of the container
carrying it is SIGKILLed by a second exec (as root) — and when that cannot start (a fork bomb has used up the
pids limit) from the host, with the container frozen so nothing forks meanwhile (needs root on the daemon's
host). A process that clears its environment escapes the per-exec kill; it dies with the container.

Images: `spec.image` must exist locally (nothing is pulled: Docker Hub is unreachable here, and a pull would
send traffic off the machine); `image_map` maps names that cannot be pulled onto local images.
`spec.dockerfile_dir` is built with `docker build` (legacy builder, `pull=False`) into
`openforge-task:<sha256 of the build context[:16]>`, where the hash covers every file (path, mode, content)
with the `FROM` lines already rewritten by the image map; an existing tag is a cache hit (no rebuild). Base
images a Dockerfile needs must exist locally (checked before building, with a hint to map them).

Proxy bridge: with `spec.proxy_uds`, after the container starts, `forwarder.py` is started on the host with
`nsenter --net=/proc/<container pid>/ns/net` (so it needs root / CAP_SYS_ADMIN and the daemon on this
machine), listening on the container's `127.0.0.1:<proxy_port>` and relaying to the proxy's model API
socket. Only that socket is bridged: the proxy's admin listener is never reachable from a container.
The forwarder dies with `destroy()`, with the orchestrator (PR_SET_PDEATHSIG), and with the container.

OOM: the kernel kills the biggest process of the container's memory cgroup — usually an exec'd command, not
PID 1 — and Docker only sets `State.OOMKilled` when PID 1 dies. `status()` therefore also counts the
daemon's `oom` events for the container.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import selectors
import shutil
import signal
import socket
import stat as statmod
import struct
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, Callable, TypeVar

from ._archive import copy_in_target, extract_archive, make_tar
from .base import (
    DEFAULT_OUTPUT_CAP,
    LABEL_MANAGED,
    LABEL_RUN,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSpec,
    SandboxStatus,
    await_worker,
    command_argv,
    label_value,
)

__all__ = ["DockerProvider", "DockerSandbox", "ImageBuild", "context_hash", "map_image", "rewrite_from_lines"]

T = TypeVar("T")

TASK_IMAGE_REPO = "openforge-task"
BUILD_SALT = b"openforge-build-v1\x00"
EXEC_MARKER = "OPENFORGE_EXEC_ID"
FORWARDER_PY = Path(__file__).with_name("forwarder.py")
KILL_GRACE_S = 5.0  # after a timeout kill, how long to wait for the exec's stream to end

# Runs as root inside the container: SIGKILL every process whose environment carries the marker, a few rounds
# (a process may fork while we kill). One `grep` per process; no bash needed.
_KILL_SCRIPT = r"""
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

_INIT_CMD = ["/bin/sh", "-c", "exec sleep infinity 2>/dev/null; while :; do sleep 3600; done"]


# -- image names and build contexts -------------------------------------------------------------------------

def _normalize_ref(ref: str) -> str:
    """`debian` -> `debian:latest`, `docker.io/library/debian:12` -> `debian:12` (for map lookups)."""
    r = ref.strip()
    for p in ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/"):
        if r.startswith(p):
            r = r[len(p):]
            break
    if r.startswith("library/"):
        r = r[len("library/"):]
    last = r.rsplit("/", 1)[-1]
    if "@" not in r and ":" not in last:
        r += ":latest"
    return r


def map_image(ref: str, image_map: dict[str, str] | None) -> str:
    """`ref` mapped through `image_map` (keys compared after normalisation: `debian` == `debian:latest` ==
    `docker.io/library/debian:latest`); unchanged when not in the map."""
    if not image_map:
        return ref
    if ref in image_map:
        return image_map[ref]
    norm = {_normalize_ref(k): v for k, v in image_map.items()}
    return norm.get(_normalize_ref(ref), ref)


_FROM_RE = re.compile(r"^(?P<lead>\s*FROM\s+)(?P<flags>(?:--\S+\s+)*)(?P<image>\S+)(?P<rest>.*)$", re.IGNORECASE)


def rewrite_from_lines(dockerfile: str, image_map: dict[str, str] | None) -> tuple[str, list[str]]:
    """Rewrite the `FROM` lines of a Dockerfile through `image_map`. Returns (new text, the base images it
    needs after mapping — stage names, `scratch` and `${VAR}` references excluded)."""
    stages: set[str] = set()
    bases: list[str] = []
    out: list[str] = []
    for line in dockerfile.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = _FROM_RE.match(body)
        if not m:
            out.append(line)
            continue
        image = m.group("image")
        rest = m.group("rest")
        new = image
        if "$" not in image and image.lower() not in stages:
            new = map_image(image, image_map)
            if new.lower() != "scratch":
                bases.append(new)
        alias = re.match(r"\s+AS\s+(\S+)", rest, re.IGNORECASE)
        if alias:
            stages.add(alias.group(1).lower())
        out.append(f"{m.group('lead')}{m.group('flags')}{new}{rest}{line[len(body):]}")
    return "".join(out), bases


def context_hash(context: Path, dockerfile_text: str) -> str:
    """sha256 over the build context: every path (sorted), its type, permission bits and content (symlinks:
    their target), with the Dockerfile replaced by `dockerfile_text` (the rewritten one)."""
    h = hashlib.sha256(BUILD_SALT)
    root = Path(context)
    entries: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for n in dirnames + sorted(filenames):
            entries.append(Path(dirpath) / n)
    for p in sorted(entries, key=lambda q: q.relative_to(root).as_posix()):
        rel = p.relative_to(root).as_posix()
        st = p.lstat()
        if statmod.S_ISLNK(st.st_mode):
            h.update(b"L" + rel.encode() + b"\x00" + os.readlink(p).encode() + b"\x00")
        elif statmod.S_ISDIR(st.st_mode):
            h.update(b"D" + rel.encode() + b"\x00" + f"{st.st_mode & 0o7777:o}".encode() + b"\x00")
        elif statmod.S_ISREG(st.st_mode):
            h.update(b"F" + rel.encode() + b"\x00" + f"{st.st_mode & 0o7777:o}".encode() + b"\x00")
            if rel == "Dockerfile":
                data = dockerfile_text.encode()
                h.update(str(len(data)).encode() + b"\x00" + data)
            else:
                h.update(str(st.st_size).encode() + b"\x00")
                with open(p, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
    return h.hexdigest()


class ImageBuild:
    """The result of `DockerProvider.build_image`."""

    def __init__(self, tag: str, digest: str, cached: bool, seconds: float):
        self.tag, self.digest, self.cached, self.seconds = tag, digest, cached, seconds

    def __repr__(self) -> str:
        return f"ImageBuild(tag={self.tag!r}, cached={self.cached}, seconds={self.seconds:.2f})"


# -- the sandbox ---------------------------------------------------------------------------------------------

def _docker_errors() -> tuple[type[BaseException], ...]:
    import docker.errors
    import requests

    return (docker.errors.DockerException, requests.exceptions.RequestException)


def _short(e: BaseException) -> str:
    text = getattr(e, "explanation", None) or str(e)
    return str(text).strip().splitlines()[0][:500] if str(text).strip() else type(e).__name__


class DockerSandbox(Sandbox):
    def __init__(self, provider: "DockerProvider", spec: SandboxSpec, container_id: str, init_pid: int,
                 created_at: float, forwarder: asyncio.subprocess.Process | None):
        self._p = provider
        self.spec = spec
        self.id = container_id
        self.name = spec.name
        self.init_pid = init_pid
        self.created_at = created_at
        self._forwarder = forwarder
        self.proxy_url = f"http://127.0.0.1:{spec.proxy_port}" if forwarder is not None else None
        self._destroyed = False
        self._destroy_lock = asyncio.Lock()
        self._pids_visible = os.path.exists(f"/proc/{init_pid}")  # same pid namespace as the daemon?

    def __repr__(self) -> str:
        return f"DockerSandbox(name={self.name!r}, id={self.id[:12]})"

    @property
    def forwarder_pid(self) -> int | None:
        return self._forwarder.pid if self._forwarder is not None else None

    # -- exec ----------------------------------------------------------------------------------------------

    async def exec(self, cmd: list[str] | str, *, timeout_s: float, env: dict[str, str] | None = None,
                   workdir: str | None = None, user: str | None = None, stdin: bytes | None = None,
                   output_cap: int = DEFAULT_OUTPUT_CAP) -> ExecResult:
        self._check()
        argv = command_argv(cmd)
        cancel = threading.Event()
        return await await_worker(self._p._submit(self._exec_blocking, argv, float(timeout_s), env, workdir, user,
                                                  stdin, int(output_cap), cancel), cancel)

    def _exec_blocking(self, argv: list[str], timeout_s: float, env: dict[str, str] | None, workdir: str | None,
                       user: str | None, stdin: bytes | None, output_cap: int, cancel: threading.Event) -> ExecResult:
        api = self._p.api
        marker = uuid.uuid4().hex
        environment = dict(env or {})
        environment[EXEC_MARKER] = marker
        user = user if user is not None else self.spec.user
        start = time.monotonic()
        try:
            exec_id = api.exec_create(self.id, argv, stdout=True, stderr=True, stdin=stdin is not None,
                                      tty=False, environment=environment, workdir=workdir or None,
                                      user=user or "")["Id"]
            sock_io = api.exec_start(exec_id, socket=True)
        except _docker_errors() as e:
            raise self._infra_error(f"cannot start a command in sandbox {self.name}", e) from e
        sock: socket.socket = getattr(sock_io, "_sock", sock_io)
        out = bytearray()
        err = bytearray()
        truncated = False
        timed_out = False
        buf = bytearray()
        pending = memoryview(stdin) if stdin is not None else None
        deadline = start + max(0.0, timeout_s)
        hard_deadline: float | None = None
        sel = selectors.DefaultSelector()
        try:
            sock.setblocking(False)
            sel.register(sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if pending is not None else 0))
            if pending is not None and len(pending) == 0:
                self._shut_wr(sock)
                pending = None
                sel.modify(sock, selectors.EVENT_READ)
            eof = False
            while not eof:
                now = time.monotonic()
                if hard_deadline is None and (now >= deadline or cancel.is_set()):
                    timed_out = True
                    self._kill_marker(marker)
                    hard_deadline = time.monotonic() + KILL_GRACE_S
                if hard_deadline is not None and now >= hard_deadline:
                    break
                wait = (hard_deadline if hard_deadline is not None else deadline) - now
                for _key, mask in sel.select(timeout=max(0.0, min(0.25, wait))):
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
                            payload = bytes(buf[8:8 + size])
                            del buf[:8 + size]
                            target = err if stream == 2 else out
                            room = output_cap - len(target)
                            if len(payload) > room:
                                truncated = True
                                payload = payload[:max(0, room)]
                            target += payload
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
        exit_code = self._exit_code(exec_id, wait_s=1.0 if timed_out else 2.0)
        if exit_code is None:
            exit_code = -1
        if not timed_out and (exit_code < 0 or exit_code >= 128) and not self._container_running():
            # killed because the whole container went away: the infrastructure's failure, not the command's
            raise SandboxError(f"sandbox {self.name}: the container stopped while running {argv[0]!r}")
        if exit_code == 126 and not out and not err:
            err += (f"openforge: the container runtime could not start {argv[0]!r} (user {user or 'default'!r}, "
                    f"workdir {workdir or 'default'!r}: does the user exist?)\n").encode()
        return ExecResult(exit_code=exit_code, stdout=out.decode("utf-8", "replace"),
                          stderr=err.decode("utf-8", "replace"), timed_out=timed_out, truncated=truncated,
                          duration_s=round(time.monotonic() - start, 4))

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
                info = self._p.api.exec_inspect(exec_id)
            except _docker_errors():
                return None
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if time.monotonic() >= end:
                return None
            time.sleep(0.02)

    def _container_running(self, settle_s: float = 0.3) -> bool:
        """Is the container still up? A command killed by a signal may be the first sign that the container is
        going down, before the daemon says so: look at its init process too, and ask the daemon twice."""
        for attempt in range(2):
            try:
                state = self._p.api.inspect_container(self.id).get("State", {})
            except _docker_errors():
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

    def _kill_marker(self, marker: str) -> None:
        """SIGKILL every process of this container started by the exec carrying `marker`."""
        api = self._p.api
        try:
            kid = api.exec_create(self.id, ["/bin/sh", "-c", _KILL_SCRIPT, "sh", f"{EXEC_MARKER}={marker}"],
                                  stdout=True, stderr=True, user="0")["Id"]
            api.exec_start(kid)
            code = api.exec_inspect(kid).get("ExitCode")
            if code == 0:
                return
        except _docker_errors():
            pass
        self._kill_marker_from_host(marker)

    def _kill_marker_from_host(self, marker: str) -> None:
        """Fallback when no process can be started in the container (pids limit exhausted): freeze it, kill
        the marked processes through the host's /proc, thaw. Needs root on the daemon's host."""
        needle = f"{EXEC_MARKER}={marker}".encode()
        api = self._p.api
        paused = False
        try:
            api.pause(self.id)
            paused = True
        except _docker_errors():
            pass
        try:
            for _ in range(5):
                killed = 0
                for pid in self._container_host_pids():
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
                except _docker_errors():
                    pass

    def _container_host_pids(self) -> list[int]:
        """Host pids of the container's processes (via its cgroup's process list; empty if not visible)."""
        for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"):
            for rel in (f"docker/{self.id}", f"system.slice/docker-{self.id}.scope"):
                p = Path(base) / rel / "cgroup.procs"
                try:
                    return [int(x) for x in p.read_text().split()]
                except (OSError, ValueError):
                    continue
        return []

    # -- files ---------------------------------------------------------------------------------------------

    async def copy_in(self, src: Path, dest: str, *, owner: str | None = None) -> None:
        self._check()
        src, dest_p, uid, gid, chown_name = copy_in_target(src, dest, owner)
        await self._p._submit(self._copy_in_blocking, src, dest_p, uid, gid)
        if chown_name is not None:
            r = await self.exec(["chown", "-R", chown_name, str(dest_p)], timeout_s=60, user="0")
            if r.exit_code != 0:
                raise SandboxError(f"chown {chown_name} {dest_p} failed in {self.name}: {r.stderr.strip()}")

    def _copy_in_blocking(self, src: Path, dest: PurePosixPath, uid: int, gid: int) -> None:
        import docker.errors

        data = make_tar(src, dest.name, uid, gid)
        parent = str(dest.parent)
        api = self._p.api
        try:
            try:
                api.put_archive(self.id, parent, data)
            except docker.errors.NotFound:
                r = api.exec_create(self.id, ["mkdir", "-p", parent], user="0")
                api.exec_start(r["Id"])
                api.put_archive(self.id, parent, data)
        except docker.errors.NotFound as e:
            raise self._infra_error(f"copy into {self.name}:{dest} failed", e) from e
        except _docker_errors() as e:
            raise self._infra_error(f"copy into {self.name}:{dest} failed", e) from e

    async def copy_out(self, src: str, dest: Path) -> None:
        self._check()
        await self._p._submit(self._copy_out_blocking, src, Path(dest))

    def _get_archive(self, src: str, max_bytes: int | None = None) -> tuple[Any, dict] | None:
        import docker.errors

        try:
            stream, st = self._p.api.get_archive(self.id, src)
        except docker.errors.NotFound:
            # both "no such file" and "no such container" are 404s: tell them apart
            try:
                self._p.api.inspect_container(self.id)
            except docker.errors.NotFound as e:
                raise SandboxError(f"sandbox {self.name}: the container is gone") from e
            return None
        except _docker_errors() as e:
            raise self._infra_error(f"reading {src} from {self.name} failed", e) from e
        tmp = tempfile.SpooledTemporaryFile(max_size=32 << 20)
        total = 0
        for chunk in stream:
            total += len(chunk)
            if max_bytes is not None and total > max_bytes + (1 << 20):
                tmp.close()
                raise ValueError(f"{src} in {self.name} is larger than {max_bytes} bytes")
            tmp.write(chunk)
        tmp.seek(0)
        return tmp, st

    def _copy_out_blocking(self, src: str, dest: Path) -> None:
        got = self._get_archive(src)
        if got is None:
            raise FileNotFoundError(f"{self.name}:{src}")
        tmp, st = got
        with tmp, tarfile.open(fileobj=tmp, mode="r|*") as tf:
            extract_archive(tf, dest, is_dir=bool(int(st.get("mode", 0)) & (1 << 31)))

    async def read_file(self, path: str, *, max_bytes: int = 16 << 20) -> bytes | None:
        self._check()
        return await self._p._submit(self._read_file_blocking, path, max_bytes)

    def _read_file_blocking(self, path: str, max_bytes: int) -> bytes | None:
        got = self._get_archive(path, max_bytes)
        if got is None:
            return None
        tmp, st = got
        if int(st.get("mode", 0)) & (1 << 31):
            tmp.close()
            raise IsADirectoryError(f"{self.name}:{path}")
        with tmp, tarfile.open(fileobj=tmp, mode="r|*") as tf:
            for m in tf:
                if m.issym() or m.islnk():
                    # get_archive of a symlink gives the link itself: resolve by reading its target
                    target = m.linkname if m.linkname.startswith("/") else str(PurePosixPath(path).parent / m.linkname)
                    return self._read_file_blocking(target, max_bytes)
                if not m.isfile():
                    return None
                if m.size > max_bytes:
                    raise ValueError(f"{path} in {self.name} is {m.size} bytes, more than {max_bytes}")
                f = tf.extractfile(m)
                return f.read() if f is not None else b""
        return None

    # -- status / destroy ----------------------------------------------------------------------------------

    async def status(self) -> SandboxStatus:
        if self._destroyed:
            return SandboxStatus(alive=False, reason="destroyed")
        return await self._p._submit(self._status_blocking)

    def _status_blocking(self) -> SandboxStatus:
        import docker.errors

        api = self._p.api
        try:
            info = api.inspect_container(self.id)
        except docker.errors.NotFound:
            return SandboxStatus(alive=False, reason="the container was removed")
        except _docker_errors() as e:
            raise self._infra_error(f"cannot inspect sandbox {self.name}", e) from e
        state = info.get("State", {})
        ooms = self._oom_events()
        oom = bool(state.get("OOMKilled")) or ooms > 0
        running = bool(state.get("Running")) and not state.get("Paused") and not state.get("Restarting")
        fwd_dead = self._forwarder is not None and self._forwarder.returncode is not None
        if running and not fwd_dead:
            reason = "running"
            if ooms:
                reason += f"; the OOM killer killed a process in it ({ooms}x, memory limit {self.spec.memory_mb} MiB)"
            return SandboxStatus(alive=True, oom_killed=oom, reason=reason)
        if running and fwd_dead:
            return SandboxStatus(alive=False, oom_killed=oom,
                                 reason=f"the proxy forwarder exited (code {self._forwarder.returncode})")
        code = state.get("ExitCode")
        reason = f"container {state.get('Status', 'stopped')} with exit code {code}"
        if state.get("OOMKilled"):
            reason += " (OOM killed)"
        if state.get("Error"):
            reason += f": {state['Error']}"
        return SandboxStatus(alive=False, oom_killed=oom, exit_code=code, reason=reason)

    def _oom_events(self) -> int:
        api = self._p.api
        try:
            since = int(self.created_at) - 1
            until = int(time.time()) + 1
            events = api.events(since=since, until=until, decode=True,
                                filters={"container": self.id, "event": "oom", "type": "container"})
            try:
                return sum(1 for _ in events)
            finally:
                try:
                    events.close()
                except Exception:
                    pass
        except _docker_errors():
            return 0

    async def destroy(self) -> None:
        async with self._destroy_lock:
            if self._destroyed:
                return
            self._destroyed = True
            await _stop_process(self._forwarder)
            await self._p._submit(self._p._remove_container, self.id)
            self._p._live.pop(self.id, None)

    def _infra_error(self, what: str, e: BaseException) -> SandboxError:
        return SandboxError(f"{what}: {_short(e)}")


BUF_SEND = 1 << 16


async def _stop_process(proc: asyncio.subprocess.Process | None, grace_s: float = 2.0) -> None:
    if proc is None or proc.returncode is not None:
        if proc is not None:
            try:
                await proc.wait()
            except Exception:
                pass
        return
    try:
        proc.terminate()
    except ProcessLookupError:
        pass
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except asyncio.TimeoutError:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        await proc.wait()


# -- the provider --------------------------------------------------------------------------------------------

class DockerProvider(SandboxProvider):
    """Docker backend.

    Options: `image_map` (applied to every spec, under the spec's own map), `base_url` (default: the
    environment, `DOCKER_HOST` or /var/run/docker.sock), `build_network` (network of `RUN` steps while
    building task images; default the daemon's default, `"none"` to build offline), `init` (run the daemon's
    init as PID 1, default True), `forwarder_python` (interpreter for the forwarder, default this one),
    `max_workers` (threads for blocking Docker calls; one is busy per running exec, default 64).
    """

    name = "docker"

    def __init__(self, *, image_map: dict[str, str] | None = None, base_url: str | None = None,
                 build_network: str | None = None, init: bool = True, forwarder_python: str | None = None,
                 max_workers: int = 64, client: Any = None):
        self.image_map = dict(image_map or {})
        self.base_url = base_url
        self.build_network = build_network
        self.init = init
        self.forwarder_python = forwarder_python or sys.executable
        self._client = client
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="openforge-docker")
        self._build_locks: dict[str, asyncio.Lock] = {}
        self._live: dict[str, DockerSandbox] = {}
        self.builds = 0  # how many images this provider actually built (cache misses)

    # -- plumbing ------------------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import docker
            except ImportError as e:  # pragma: no cover
                raise SandboxError("the docker sandbox needs the `docker` package: pip install docker") from e
            try:
                if self.base_url:
                    self._client = docker.DockerClient(base_url=self.base_url, version="auto", max_pool_size=64)
                else:
                    self._client = docker.from_env(max_pool_size=64)
                self._client.ping()
            except _docker_errors() as e:
                self._client = None
                raise SandboxError(
                    f"cannot reach the Docker daemon ({_short(e)}); start it with scripts/start-docker.sh") from e
        return self._client

    @property
    def api(self) -> Any:
        return self.client.api

    def _submit(self, fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
        return asyncio.get_running_loop().run_in_executor(self._executor, partial(fn, *args))

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass

    # -- images --------------------------------------------------------------------------------------------

    def _image_exists(self, ref: str) -> bool:
        import docker.errors

        try:
            self.api.inspect_image(ref)
            return True
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.NotFound:
            return False

    async def build_image(self, context: Path, *, image_map: dict[str, str] | None = None) -> ImageBuild:
        """Build the image of a build context (a directory with a `Dockerfile`), or reuse the one built from
        identical content: tag `openforge-task:<sha256[:16]>`."""
        context = Path(context)
        dockerfile = context / "Dockerfile"
        if not dockerfile.is_file():
            raise SandboxError(f"no Dockerfile in {context}")
        merged = {**self.image_map, **(image_map or {})}
        text, bases = rewrite_from_lines(dockerfile.read_text(), merged)
        digest = await self._submit(context_hash, context, text)
        tag = f"{TASK_IMAGE_REPO}:{digest[:16]}"
        lock = self._build_locks.setdefault(tag, asyncio.Lock())
        async with lock:
            start = time.monotonic()
            if await self._submit(self._image_exists, tag):
                return ImageBuild(tag, digest, True, time.monotonic() - start)
            for base in bases:
                if not await self._submit(self._image_exists, base):
                    raise SandboxError(
                        f"{context}/Dockerfile needs base image {base!r}, which is not on this machine and will not "
                        f"be pulled; map it to a local image (--image-map {base}=openforge-base:bookworm, built by "
                        "scripts/build-base-image.sh) or load it with `docker load`")
            await self._submit(self._build_blocking, context, text, tag, digest)
            self.builds += 1
            return ImageBuild(tag, digest, False, time.monotonic() - start)

    def _build_blocking(self, context: Path, dockerfile_text: str, tag: str, digest: str) -> None:
        with tempfile.TemporaryDirectory(prefix="openforge-build-") as tmp:
            ctx = Path(tmp) / "ctx"
            shutil.copytree(context, ctx, symlinks=True)
            (ctx / "Dockerfile").write_text(dockerfile_text)
            log: list[str] = []
            error: str | None = None
            try:
                for ev in self.api.build(path=str(ctx), tag=tag, rm=True, forcerm=True, pull=False, decode=True,
                                         labels={LABEL_MANAGED: "1", "openforge.context-hash": digest},
                                         network_mode=self.build_network):
                    if "stream" in ev:
                        log.extend(ev["stream"].splitlines())
                    if "error" in ev:
                        error = ev.get("error") or str(ev.get("errorDetail"))
            except _docker_errors() as e:
                error = _short(e)
            if error:
                tail = "\n".join(line for line in log[-20:] if line.strip())
                raise SandboxError(f"building the image of {context} failed: {error.strip()}\n{tail}")

    async def resolve_image(self, spec: SandboxSpec) -> str:
        """The local image a spec runs: built from `dockerfile_dir`, else `image` mapped through the map."""
        merged = {**self.image_map, **spec.image_map}
        if spec.dockerfile_dir is not None:
            return (await self.build_image(spec.dockerfile_dir, image_map=spec.image_map)).tag
        if not spec.image:
            raise SandboxError(f"sandbox {spec.name}: the spec names neither an image nor a dockerfile_dir")
        ref = map_image(spec.image, merged)
        if not await self._submit(self._image_exists, ref):
            hint = " (mapped from " + spec.image + ")" if ref != spec.image else ""
            raise SandboxError(
                f"image {ref!r}{hint} is not on this machine and will not be pulled; map it to a local image "
                f"(--image-map {spec.image}=openforge-base:bookworm) or load it with `docker load`")
        return ref

    # -- create --------------------------------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> DockerSandbox:
        try:
            image = await self.resolve_image(spec)
        except _docker_errors() as e:
            raise SandboxError(f"sandbox {spec.name}: {_short(e)}") from e
        if spec.proxy_uds is not None and not Path(spec.proxy_uds).exists():
            raise SandboxError(f"sandbox {spec.name}: the proxy socket {spec.proxy_uds} does not exist")
        cid, pid, created = await self._submit(self._create_blocking, spec, image)
        forwarder = None
        try:
            if spec.proxy_uds is not None:
                forwarder = await self._start_forwarder(spec, pid)
        except BaseException:
            await self._submit(self._remove_container, cid)
            raise
        sb = DockerSandbox(self, spec, cid, pid, created, forwarder)
        self._live[cid] = sb
        return sb

    def _create_blocking(self, spec: SandboxSpec, image: str) -> tuple[str, int, float]:
        import docker.errors
        import docker.types

        api = self.api
        self._remove_stale(spec.name)
        mounts = [docker.types.Mount(target=m.target, source=str(Path(m.source).resolve()), type="bind",
                                     read_only=m.read_only) for m in spec.mounts]
        for m in spec.mounts:
            if not Path(m.source).exists():
                raise SandboxError(f"sandbox {spec.name}: mount source {m.source} does not exist")
        mem = f"{spec.memory_mb}m"
        host_config = api.create_host_config(
            network_mode="none", nano_cpus=int(spec.cpus * 1e9), mem_limit=mem, memswap_limit=mem,
            pids_limit=spec.pids, mounts=mounts, init=self.init or None, auto_remove=False,
        )
        created = time.time()
        cid: str | None = None
        try:
            cid = api.create_container(
                image, command=_INIT_CMD[1:], entrypoint=_INIT_CMD[:1], name=spec.name, labels=spec.all_labels(),
                environment=dict(spec.env), working_dir=spec.workdir or None, host_config=host_config,
                network_disabled=False, stop_signal="SIGKILL",
            )["Id"]
            api.start(cid)
            info = api.inspect_container(cid)
            state = info.get("State", {})
            if not state.get("Running"):
                logs = api.logs(cid, tail=20).decode(errors="replace").strip()
                raise SandboxError(f"sandbox {spec.name}: the container stopped right after starting "
                                   f"(exit code {state.get('ExitCode')}): {logs or state.get('Error', '')}")
            return cid, int(state["Pid"]), created
        except SandboxError:
            if cid:
                self._remove_container(cid)
            raise
        except _docker_errors() as e:
            if cid:
                self._remove_container(cid)
            raise SandboxError(f"sandbox {spec.name}: cannot create the container from {image}: {_short(e)}") from e

    def _remove_stale(self, name: str) -> None:
        import docker.errors

        try:
            info = self.api.inspect_container(name)
        except docker.errors.NotFound:
            return
        labels = (info.get("Config") or {}).get("Labels") or {}
        if labels.get(LABEL_MANAGED) != "1":
            raise SandboxError(f"a container named {name} exists and was not created by openforge; "
                               "remove it or choose another run name")
        if info["Id"] in self._live:
            raise SandboxError(f"sandbox {name} already exists in this process; names must be unique per episode")
        self._remove_container(info["Id"])

    def _remove_container(self, cid: str) -> None:
        import docker.errors

        for attempt in range(3):
            try:
                self.api.remove_container(cid, force=True, v=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as e:
                if "already in progress" in str(e) or attempt < 2:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise SandboxError(f"cannot remove container {cid[:12]}: {_short(e)}") from e

    async def _start_forwarder(self, spec: SandboxSpec, pid: int) -> asyncio.subprocess.Process:
        nsenter = shutil.which("nsenter")
        if nsenter is None:
            raise SandboxError("the proxy bridge needs `nsenter` (util-linux) on the host")
        if not os.path.exists(f"/proc/{pid}/ns/net"):
            raise SandboxError(
                f"sandbox {spec.name}: the container's process {pid} is not visible here; the proxy bridge needs the "
                "orchestrator on the Docker host (same pid namespace)")
        argv = [nsenter, f"--net=/proc/{pid}/ns/net", "--", self.forwarder_python, "-I", str(FORWARDER_PY),
                "--listen", f"127.0.0.1:{spec.proxy_port}", "--uds", str(Path(spec.proxy_uds).resolve()),
                "--parent-pid", str(os.getpid()), "--watch-pid", str(pid)]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), 15)
        except asyncio.TimeoutError:
            line = b""
        if not line.startswith(b"READY"):
            await _stop_process(proc, 0.5)
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            if "Operation not permitted" in err or "Permission denied" in err:
                err += " (entering a container's network namespace needs root / CAP_SYS_ADMIN)"
            raise SandboxError(f"sandbox {spec.name}: the proxy forwarder did not start: {err or 'no output'}")
        return proc

    # -- listing and cleanup -------------------------------------------------------------------------------

    def _filters(self, run_label: str | None) -> dict:
        labels = [f"{LABEL_MANAGED}=1"]
        if run_label is not None:
            labels.append(f"{LABEL_RUN}={label_value(run_label)}")
        return {"label": labels}

    async def list(self, run_label: str | None = None) -> list[str]:
        rows = await self._submit(lambda: self.api.containers(all=True, filters=self._filters(run_label)))
        return sorted(r["Names"][0].lstrip("/") for r in rows)

    async def cleanup(self, run_label: str | None) -> int:
        rows = await self._submit(lambda: self.api.containers(all=True, filters=self._filters(run_label)))
        ids = {r["Id"] for r in rows}
        for cid in ids:
            sb = self._live.get(cid)
            if sb is not None:
                await sb.destroy()
            else:
                await self._submit(self._remove_container, cid)
        return len(ids)


def docker_available(base_url: str | None = None) -> tuple[bool, str]:
    """(True, 'server <version> ...') when a Docker daemon answers, else (False, why)."""
    try:
        import docker
    except ImportError:
        return False, "the `docker` Python package is not installed (pip install docker)"
    try:
        client = docker.DockerClient(base_url=base_url, version="auto") if base_url else docker.from_env()
    except Exception as e:
        return False, f"Docker daemon not reachable: {_short(e)} (start it with scripts/start-docker.sh)"
    try:
        v = client.version()
        return True, f"Docker server {v.get('Version')} (API {v.get('ApiVersion')})"
    except Exception as e:
        return False, f"Docker daemon not reachable: {_short(e)}"
    finally:
        try:
            client.close()
        except Exception:
            pass
