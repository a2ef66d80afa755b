"""The docker backend's proxy bridge: with `spec.proxy_uds`, after the container starts, `forwarder.py` is
started on the host with `nsenter --net=/proc/<container pid>/ns/net` (so it needs root / CAP_SYS_ADMIN and
the daemon on this machine), listening on the container's `127.0.0.1:<proxy_port>` and relaying to the proxy's
model API socket. Only that socket is bridged: the proxy's admin listener is never reachable from a container.
The forwarder dies with `destroy()`, with the orchestrator (PR_SET_PDEATHSIG), and with the container."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from ..base import SandboxError, SandboxSpec
from ..common import FORWARDER_PY

__all__ = ["start_forwarder", "stop_process"]


async def start_forwarder(spec: SandboxSpec, pid: int, python: str) -> asyncio.subprocess.Process:
    """Start the forwarder in the network namespace of the container whose init is host pid `pid`; returns
    once it listens. SandboxError (with the forwarder's complaint) when it cannot."""
    if spec.proxy_uds is None:
        raise SandboxError(f"sandbox {spec.name}: no proxy socket to bridge (spec.proxy_uds is unset)")
    nsenter = shutil.which("nsenter")
    if nsenter is None:
        raise SandboxError("the proxy bridge needs `nsenter` (util-linux) on the host")
    if not os.path.exists(f"/proc/{pid}/ns/net"):
        raise SandboxError(
            f"sandbox {spec.name}: the container's process {pid} is not visible here; the proxy bridge needs the "
            "orchestrator on the Docker host (same pid namespace)"
        )
    argv = [
        nsenter,
        f"--net=/proc/{pid}/ns/net",
        "--",
        python,
        "-I",
        str(FORWARDER_PY),
        "--listen",
        f"127.0.0.1:{spec.proxy_port}",
        "--uds",
        str(Path(spec.proxy_uds).resolve()),
        "--parent-pid",
        str(os.getpid()),
        "--watch-pid",
        str(pid),
    ]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None  # opened with PIPE
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 15)
    except TimeoutError:
        line = b""
    if not line.startswith(b"READY"):
        await stop_process(proc, 0.5)
        err = (await proc.stderr.read()).decode(errors="replace").strip()
        if "Operation not permitted" in err or "Permission denied" in err:
            err += " (entering a container's network namespace needs root / CAP_SYS_ADMIN)"
        raise SandboxError(f"sandbox {spec.name}: the proxy forwarder did not start: {err or 'no output'}")
    return proc


async def stop_process(proc: asyncio.subprocess.Process | None, grace_s: float = 2.0) -> None:
    """Terminate a forwarder (SIGTERM, SIGKILL after `grace_s`) and reap it; nothing if it has exited."""
    if proc is None or proc.returncode is not None:
        if proc is not None:
            try:
                await proc.wait()
            except Exception:  # noqa: BLE001, S110 - reaping only
                pass
        return
    try:
        proc.terminate()
    except ProcessLookupError:
        pass
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        await proc.wait()
