"""One pod as a sandbox: commands through the exec websocket (`execs.py`), copy in / copy out / read_file as
tar and shell through exec (as `kubectl cp` does), status and destroy from the pod's state.

Failures, mapped as the docker backend maps its own: a pod evicted or deleted mid-episode, or a stream that
breaks without an exit status → SandboxError (the orchestrator's `sandbox_error`); the pod's
`activeDeadlineSeconds` expiring during a command (reason DeadlineExceeded) → that command's `timed_out`.

Grading support is in band (see `openforge.sandbox.filesnap` for what that means): the pod's files are listed
when it starts (`take_baseline`, by the provider) and compared at `changed_paths`; processes are stopped by the
base class's `common.STOP_SCRIPT` (the pod's PID 1 is the keep-alive); `existing_paths` asks the pod's shell.
"""

from __future__ import annotations

import asyncio
import shlex
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from ..archive import copy_in_target, extract_archive, make_tar
from ..base import (
    DEFAULT_OUTPUT_CAP,
    ExecResult,
    PathChange,
    Sandbox,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    await_worker,
    command_argv,
)
from ..common import kill_script_argv
from ..filesnap import NO_GNU_FIND, SNAPSHOT_SCRIPT, Snapshot, diff_snapshots
from ..state import ByteSink, CappedSink, StateArchive, StateTooLargeError
from .client import short_error
from .execs import RawExec, exec_script, pump
from .pods import container_status, is_running, pod_problem

if TYPE_CHECKING:
    from .provider import KubernetesProvider

__all__ = ["KubernetesSandbox"]

# exit codes of the helper scripts (chosen outside what cat/tar/wc return)
MISSING, IS_DIR, TOO_BIG = 44, 45, 46
# What the kubelet and runtime put into every pod's file system: not the agent's changes.
RUNTIME_FILES = ("/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/dev/termination-log", "/etc/mtab")


class KubernetesSandbox(Sandbox):
    def __init__(self, provider: KubernetesProvider, spec: SandboxSpec, uid: str, proxy_url: str | None):
        self._p = provider
        self.spec = spec
        self.name = spec.name
        self.id = uid
        self.proxy_url = proxy_url
        self._destroyed = False
        self._destroy_lock = asyncio.Lock()
        self._baseline: Snapshot | None = None
        self._no_baseline = "the pod's files were not listed when it started (track_changes=False)"

    def __repr__(self) -> str:
        return f"KubernetesSandbox(name={self.name!r}, namespace={self._p.namespace!r})"

    # -- exec ----------------------------------------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str] | str,
        *,
        timeout_s: float,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        stdin: bytes | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        self._check()
        argv = command_argv(cmd)
        marker = uuid.uuid4().hex
        script = exec_script(
            argv,
            marker=marker,
            env=env,
            workdir=workdir or self.spec.workdir,
            user=user if user is not None else self.spec.user,
            stdin_len=None if stdin is None else len(stdin),
        )
        raw = await self._run(script, marker, stdin, float(timeout_s), int(output_cap))
        return ExecResult(
            exit_code=-1 if raw.code is None else raw.code,
            stdout=raw.out.decode("utf-8", "replace"),
            stderr=raw.err.decode("utf-8", "replace"),
            timed_out=raw.timed_out,
            truncated=raw.truncated,
            duration_s=round(raw.duration, 4),
        )

    async def _run(
        self,
        script: str,
        marker: str,
        stdin: bytes | None,
        timeout_s: float,
        output_cap: int,
        sink: ByteSink | None = None,
    ) -> RawExec:
        cancel = threading.Event()
        work = self._p.pool.submit(self._exec_blocking, script, marker, stdin, timeout_s, output_cap, cancel, sink)
        return await await_worker(work, cancel)

    def _open_stream(self, argv: list[str], stdin: bool) -> Any:
        from kubernetes.client.rest import ApiException

        try:
            return self._p.kube.open_exec(self.name, argv, stdin=stdin)
        except ApiException as e:
            raise self._p.kube.pod_error(self.name, f"cannot start a command ({short_error(e)})") from e

    def _exec_blocking(
        self,
        script: str,
        marker: str,
        stdin: bytes | None,
        timeout_s: float,
        output_cap: int,
        cancel: threading.Event,
        sink: ByteSink | None,
    ) -> RawExec:
        start = time.monotonic()
        ws = self._open_stream(["/bin/sh", "-c", script], stdin is not None)
        raw = pump(
            ws,
            stdin,
            start=start,
            timeout_s=timeout_s,
            output_cap=output_cap,
            cancel=cancel,
            sink=sink,
            kill=lambda: self._kill_marker(marker),
        )
        if not raw.timed_out and (raw.code is None or raw.code >= 128):
            # killed from outside, or the stream broke: the pod's state says whose failure it was
            problem = pod_problem(self._p.kube.get_pod(self.name))
            if problem is not None and problem[0] == "deadline":
                raw.timed_out = True
            elif problem is not None:
                raise SandboxError(f"sandbox {self.name}: {problem[1]}")
            elif raw.code is None:
                raise SandboxError(f"sandbox {self.name}: the exec stream ended without an exit status")
        return raw

    def _kill_marker(self, marker: str) -> None:
        """SIGKILL every process started by the exec carrying `marker` (a second exec, as root)."""
        try:
            ws = self._open_stream(kill_script_argv(marker), False)
            ws.run_forever(timeout=10)
            ws.close()
        except Exception:  # noqa: BLE001, S110 - best effort: closing the stream and the pod's deadline remain
            pass

    async def _script(
        self,
        script: str,
        *,
        stdin: bytes | None = None,
        timeout_s: float = 300,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        sink: ByteSink | None = None,
    ) -> RawExec:
        """Run a helper script as the container's user (root)."""
        marker = uuid.uuid4().hex
        wrapped = exec_script(["/bin/sh", "-c", script], marker=marker, stdin_len=None if stdin is None else len(stdin))
        raw = await self._run(wrapped, marker, stdin, timeout_s, output_cap, sink)
        if raw.timed_out:
            raise SandboxError(f"sandbox {self.name}: a file transfer ran past {timeout_s:g}s")
        return raw

    # -- files ---------------------------------------------------------------------------------------------

    async def copy_in(self, src: Path, dest: str, *, owner: str | None = None) -> None:
        self._check()
        src, dest_p, uid, gid, chown_name = copy_in_target(src, dest, owner)
        data = await asyncio.to_thread(make_tar, src, dest_p.name, uid, gid)
        q = shlex.quote
        parent = q(str(dest_p.parent))
        raw = await self._script(f"mkdir -p {parent} && tar -x -f - -C {parent}", stdin=data)
        if raw.code != 0:
            raise SandboxError(f"copy into {self.name}:{dest} failed (exit {raw.code}): {raw.err.decode()[-500:]}")
        if chown_name is not None:
            await self._chown_copied(chown_name, dest_p)

    async def copy_out(self, src: str, dest: Path) -> None:
        self._check()
        p = PurePosixPath(src)
        q = shlex.quote
        script = (
            f"[ -e {q(src)} ] || [ -L {q(src)} ] || exit {MISSING}\n"
            f"if [ -d {q(src)} ]; then printf D; else printf F; fi\n"
            f"cd {q(str(p.parent))} && exec tar -c -f - {q(p.name or '.')}\n"
        )
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as tmp:
            raw = await self._script(script, sink=tmp, timeout_s=600)
            if raw.code == MISSING:
                raise FileNotFoundError(f"{self.name}:{src}")
            if raw.code != 0:
                raise SandboxError(f"copy out of {self.name}:{src} failed (exit {raw.code}): {raw.err.decode()[-500:]}")
            tmp.seek(0)
            kind = tmp.read(1)

            def extract() -> None:
                with tarfile.open(fileobj=tmp, mode="r|*") as tf:
                    extract_archive(tf, Path(dest), is_dir=kind == b"D")

            await asyncio.to_thread(extract)

    async def read_file(self, path: str, *, max_bytes: int = 16 << 20) -> bytes | None:
        self._check()
        q = shlex.quote(path)
        script = (
            f"[ -e {q} ] || exit {MISSING}\n[ -d {q} ] && exit {IS_DIR}\n"
            f'[ "$(wc -c < {q})" -gt {int(max_bytes)} ] && exit {TOO_BIG}\nexec cat {q}\n'
        )
        raw = await self._script(script, output_cap=max_bytes + 1)
        if raw.code == MISSING:
            return None
        if raw.code == IS_DIR:
            raise IsADirectoryError(f"{self.name}:{path}")
        if raw.code == TOO_BIG:
            raise ValueError(f"{path} in {self.name} is larger than {max_bytes} bytes")
        if raw.code != 0:
            raise SandboxError(f"reading {path} from {self.name} failed (exit {raw.code}): {raw.err.decode()[-500:]}")
        return bytes(raw.out)

    # -- grading support (in band) -------------------------------------------------------------------------

    async def _snapshot(self) -> Snapshot | None:
        """The pod's file listing (`filesnap.SNAPSHOT_SCRIPT`); None when its `find` cannot make one."""
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as tmp:
            raw = await self._script(SNAPSHOT_SCRIPT, sink=tmp, timeout_s=600)
            if raw.code == NO_GNU_FIND:
                return None
            if raw.code != 0:
                raise SandboxError(
                    f"listing the files of {self.name} failed (exit {raw.code}): "
                    f"{raw.err.decode(errors='replace')[-500:]}"
                )
            tmp.seek(0)
            return await asyncio.to_thread(lambda: Snapshot(tmp.read()))

    async def take_baseline(self) -> None:
        """List the pod's files as they are before anything ran in it."""
        self._baseline = await self._snapshot()
        if self._baseline is None:
            self._no_baseline = "the image's find cannot list files (GNU findutils is needed)"

    async def changed_paths(self) -> list[PathChange]:
        self._check()
        if self._baseline is None:
            raise NotImplementedError(self._no_baseline)
        now = await self._snapshot()
        if now is None:
            raise NotImplementedError("the pod's find can no longer list files")
        ignore = [*RUNTIME_FILES, *(m.target for m in self.spec.mounts)]
        return await asyncio.to_thread(diff_snapshots, self._baseline, now, ignore=ignore)

    async def export_state(self, roots: list[str], archive: StateArchive) -> None:
        """The roots archived by the pod's own `tar` (in band: a root agent can replace it, so what it writes is
        sanitized as any archive is, `state.StateArchive`)."""
        self._check()
        names = " ".join(shlex.quote(r.lstrip("/")) for r in roots)
        script = (
            f'cd / && for p in {names}; do [ -e "$p" ] || [ -L "$p" ] && printf "%s\\0" "$p"; done '
            "| tar --null -T - -c -f - --numeric-owner"
        )
        with tempfile.TemporaryFile(prefix="openforge-state-") as tmp:
            sink = CappedSink(tmp, archive.max_bytes + (1 << 20))
            raw = await self._script(script, sink=sink, timeout_s=600)
            if sink.over:
                raise StateTooLargeError(archive.max_bytes)
            if raw.code != 0:
                raise SandboxError(
                    f"archiving the state of {self.name} failed (exit {raw.code}): {raw.err.decode()[-500:]}"
                )
            await asyncio.to_thread(archive.add_file, tmp)

    async def import_state(self, archive: IO[bytes]) -> None:
        """Extracted by the grader pod's own `tar` (its image's, untouched)."""
        self._check()
        data = await asyncio.to_thread(archive.read)
        raw = await self._script("exec tar -x -p --numeric-owner -f - -C /", stdin=data, timeout_s=600)
        if raw.code != 0:
            raise SandboxError(
                f"copying the state into {self.name} failed (exit {raw.code}): {raw.err.decode()[-500:]}"
            )

    async def logs(self, tail_lines: int = 200) -> str:
        """The sandbox container's log (its PID 1's output; commands run by exec are not in it)."""
        return await self._p.pool.submit(self._p.kube.logs, self.name, tail_lines)

    # -- status / destroy ----------------------------------------------------------------------------------

    async def status(self) -> SandboxStatus:
        if self._destroyed:
            return SandboxStatus(alive=False, reason="destroyed")
        pod = await self._p.pool.submit(self._p.kube.get_pod, self.name)
        problem = pod_problem(pod)
        cs = (container_status(pod) or {}) if pod else {}
        oom = any(
            ((cs.get(k) or {}).get("terminated") or {}).get("reason") == "OOMKilled" for k in ("state", "lastState")
        )
        if problem is None and pod is not None and is_running(pod):
            return SandboxStatus(alive=True, oom_killed=oom, reason="running")
        exit_code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
        return SandboxStatus(
            alive=False,
            oom_killed=oom,
            exit_code=exit_code,
            reason=problem[1] if problem else f"pod phase {((pod or {}).get('status') or {}).get('phase')}",
        )

    async def destroy(self) -> None:
        async with self._destroy_lock:
            if self._destroyed:
                return
            self._destroyed = True
            await self._p.pool.submit(self._p.kube.delete_pod, self.name)
            self._p.forget(self.name)
