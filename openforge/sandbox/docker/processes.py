"""Stopping every process of a container but its init and keep-alive, for grading
(`Sandbox.stop_agent_processes`): from the host, through the container's cgroup — every process is sent
SIGSTOP (a stopped process cannot fork; the list is read again until no running one is left), then SIGKILL,
and again until none is left. A fork bomb cannot outrun it and an agent cannot hide from it (nothing runs in
the container). The cgroup freezer (`docker pause`) would do the first part at once, but it fails on a
container busy forking ("unable to freeze"), so it is not used. Needs the daemon's pid namespace (the
orchestrator on the Docker host, as root); elsewhere it falls back to the in-band `common.STOP_SCRIPT`,
sparing the keep-alive.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from ..base import SandboxError
from ..common import stop_script_argv
from .client import DockerConnection, docker_errors, infra_error

__all__ = ["container_host_pids", "container_oom_kills", "stop_container_processes"]

ROUNDS = 30


def _cgroup_files(container_id: str, bases: tuple[str, ...], name: str) -> list[Path]:
    """Where the container's cgroup file `name` may be, under each of `bases` (cgroupfs and systemd drivers)."""
    rels = (f"docker/{container_id}", f"system.slice/docker-{container_id}.scope")
    return [Path(base) / rel / name for base in bases for rel in rels]


def container_host_pids(container_id: str) -> list[int]:
    """Host pids of the container's processes (its cgroup's process list; empty if not visible)."""
    for p in _cgroup_files(
        container_id, ("/sys/fs/cgroup/pids", "/sys/fs/cgroup/memory", "/sys/fs/cgroup"), "cgroup.procs"
    ):
        try:
            return [int(x) for x in p.read_text().split()]
        except (OSError, ValueError):
            continue
    return []


def container_oom_kills(container_id: str) -> int | None:
    """How many processes the kernel's OOM killer has killed in the container, from its memory cgroup
    (`oom_kill` of cgroup v1's memory.oom_control, v2's memory.events); None where that is not visible from here.
    The kernel's own count, whatever runtime started the container (the daemon's `oom` events are the shim's,
    and crun's containers get none)."""
    files = _cgroup_files(container_id, ("/sys/fs/cgroup/memory",), "memory.oom_control")
    files += _cgroup_files(container_id, ("/sys/fs/cgroup",), "memory.events")
    for p in files:
        try:
            text = p.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a host process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _living(pids: list[int]) -> dict[int, tuple[str, int, int]]:
    out = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None and st[0] not in ("Z", "X"):
            out[pid] = st
    return out


def _keep(init_pid: int, has_init: bool, procs: dict[int, tuple[str, int, int]]) -> set[int]:
    """The container's init and, under an init (tini), its eldest child: the keep-alive, started before any
    exec (an orphan the agent left is re-parented to the init too, but later)."""
    keep = {init_pid}
    if has_init:
        children = [(st[2], pid) for pid, st in procs.items() if st[1] == init_pid]
        if children:
            keep.add(min(children)[1])
    return keep


def stop_container_processes(
    conn: DockerConnection, container_id: str, name: str, init_pid: int, has_init: bool
) -> None:
    """Blocking: end every process of the container but its init and keep-alive (see the module docstring).
    SandboxError when they cannot be ended."""
    if not os.path.exists(f"/proc/{init_pid}") or not container_host_pids(container_id):
        _stop_in_band(conn, container_id, name, has_init)
        return
    for _ in range(ROUNDS):
        procs = _living(container_host_pids(container_id))
        if init_pid not in procs:
            raise SandboxError(f"sandbox {name}: the container's init process is gone")
        keep = _keep(init_pid, has_init, procs)
        victims = [pid for pid in procs if pid not in keep]
        if not victims:
            return
        stopped: set[int] = set()
        for _ in range(ROUNDS):  # stop everything, including what forked while we were stopping
            running = [
                pid
                for pid, st in _living(container_host_pids(container_id)).items()
                if pid not in keep and pid not in stopped
            ]
            if not running:
                break
            for pid in running:
                _signal(pid, signal.SIGSTOP)
                stopped.add(pid)
        for pid in stopped | set(victims):
            _signal(pid, signal.SIGKILL)
        end = time.monotonic() + 2.0
        while time.monotonic() < end and _living(list(stopped)):
            time.sleep(0.02)
    raise SandboxError(f"sandbox {name}: processes remain after {ROUNDS} rounds of SIGKILL")


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _stop_in_band(conn: DockerConnection, container_id: str, name: str, has_init: bool) -> None:
    api = conn.api
    try:
        eid = api.exec_create(
            container_id, stop_script_argv(spare_keepalive=has_init), stdout=True, stderr=True, user="0:0", workdir="/"
        )["Id"]
        out = api.exec_start(eid)
        code = api.exec_inspect(eid).get("ExitCode")
    except docker_errors() as e:
        raise infra_error(f"cannot stop the processes of sandbox {name}", e) from e
    if code != 0:
        text = out.decode(errors="replace").strip() if isinstance(out, bytes) else str(out)
        raise SandboxError(f"sandbox {name}: could not stop the agent's processes: {text[-500:] or code}")
