"""Kubernetes sandboxes: one bare Pod per rollout, through the official `kubernetes` client
(`pip install 'openforge[kubernetes]'`).

Why a Pod and not a Job: a sandbox is a long-lived container that the orchestrator execs into, under a name
it chose (`sandbox_name`). A Job would add a controller between us and the pod (random pod-name suffixes, a
second object to delete, a controller that may re-create a pod we are about to exec into); `restartPolicy:
Never` plus `activeDeadlineSeconds` gives what matters: a dead sandbox stays dead (the episode is a
`sandbox_error` and is retried in a new pod) and a forgotten one is killed by the kubelet. Bare pods have no
`ttlSecondsAfterFinished`, so the API objects of finished pods are removed by `destroy()` and by
`provider.cleanup(run)` (every pod labelled `openforge.run=<run>`), and carry an `openforge.io/expires-at`
annotation for any external reaper.

The pod (see `openforge.k8s.manifests.sandbox_pod`): the task's image (`image_map` applied; a Dockerfile task
needs a pre-built image, nothing is built in the cluster), CPU/memory requests = limits from the spec (the
pids limit is the node's `podPidsLimit`, not settable per pod), `automountServiceAccountToken: false`, the
proxy's URL in `OPENFORGE_PROXY_URL` (the Service DNS name: pods cannot reach the orchestrator's Unix socket,
so `proxy_uds` only says "bridge the proxy" here), and the harness bundle copied by an init container from
the harness bundle image into an emptyDir mounted read-only where the orchestrator mounts the bundle. The
run's NetworkPolicy (created once per run) allows egress only to the proxy's model port (and DNS).

Exec: the `exec` subresource over a websocket (`kubernetes.stream`, channel protocol v4/v5). The Kubernetes
exec API has no user, environment, working directory or "close stdin", so every command is wrapped in a
`/bin/sh -c` script that exports the environment and a random marker, `cd`s, switches user with `setpriv`
(util-linux), and feeds the command exactly `len(stdin)` bytes with `head -c` (so it also works over v4,
which cannot close stdin). On timeout the marked processes are SIGKILLed by a second exec (the docker
backend's kill script), and the stream is closed. Copy in/out are tar through exec, as `kubectl cp` does.

Failures, mapped as the docker backend maps its own: a pod that stays unschedulable (PodScheduled=False,
reason Unschedulable) longer than `unschedulable_timeout_s`, an image that cannot be pulled, a pod evicted or
deleted mid-episode → SandboxError (the orchestrator's `sandbox_error`, retried); the pod's
`activeDeadlineSeconds` expiring during a command (reason DeadlineExceeded) → that command's `timed_out`
(the orchestrator's `timeout`). Readiness is followed with a watch on the pod, never by polling.

Blocking client calls run on this provider's thread pool, never on the event loop; pod creations are
rate-limited by a token bucket (`creation_rate` per second, `creation_burst` at once).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shlex
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypeVar

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
from .ratelimit import TokenBucket

__all__ = ["KubernetesProvider", "KubernetesSandbox", "exec_script", "pod_problem"]

T = TypeVar("T")

EXEC_MARKER = "OPENFORGE_EXEC_ID"
CONTAINER = "sandbox"
KILL_GRACE_S = 5.0
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# exit codes of the helper scripts (chosen outside what cat/tar/wc return)
_MISSING, _IS_DIR, _TOO_BIG = 44, 45, 46
# container waiting reasons that will not resolve by waiting
_FATAL_WAITING = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                  "CreateContainerError", "ErrImageNeverPull", "CrashLoopBackOff", "RunContainerError"}


# -- pure helpers (tested without a server) ------------------------------------------------------------------

def _user_prefix(user: str | None) -> str:
    """`setpriv` prefix that runs a command as `user` ("name", "name:group", "uid", "uid:gid"); the sandbox
    container runs as root, so root needs no switch."""
    if user is None or user in ("root", "0", "0:0"):
        return ""
    name, _, group = user.partition(":")
    q = shlex.quote
    if name.isdigit():
        gid = group if group.isdigit() else name
        return f"setpriv --reuid={name} --regid={gid} --clear-groups -- "
    regid = f"$(id -g {q(name)})" if not group else (group if group.isdigit() else f"$(getent group {q(group)} | cut -d: -f3)")
    return f'setpriv --reuid="$(id -u {q(name)})" --regid="{regid}" --init-groups -- '


def exec_script(argv: list[str], *, marker: str, env: dict[str, str] | None = None, workdir: str | None = None,
                user: str | None = None, stdin_len: int | None = None) -> str:
    """The `/bin/sh -c` script that runs `argv` the way `Sandbox.exec` promises: environment + marker exported,
    in `workdir` (created if missing), as `user`, with exactly `stdin_len` bytes of stdin (else /dev/null)."""
    q = shlex.quote
    lines = [f"export {EXEC_MARKER}={q(marker)}"]
    for k, v in (env or {}).items():
        if not _ENV_NAME.match(k):
            raise ValueError(f"environment variable name {k!r} is not valid in a shell")
        lines.append(f"export {k}={q(v)}")
    if workdir:
        lines.append(f"[ -d {q(workdir)} ] || mkdir -p {q(workdir)}")
        lines.append(f"cd {q(workdir)} || {{ echo 'openforge: cannot enter {workdir}' >&2; exit 126; }}")
    cmd = _user_prefix(user) + " ".join(q(a) for a in argv)
    if stdin_len is None:
        lines.append(f"exec {cmd} </dev/null")
    else:
        lines.append(f"head -c {int(stdin_len)} | {cmd}")
    return "\n".join(lines) + "\n"


def _condition(pod: dict, kind: str) -> dict | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None


def _container_status(pod: dict) -> dict | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == CONTAINER:
            return cs
    return None


def pod_problem(pod: dict | None) -> tuple[str, str] | None:
    """Why a pod cannot (or can no longer) run commands: (kind, message), kind one of `deleted`, `deadline`,
    `evicted`, `oom`, `failed`, `image`; None while it is fine (pending or running)."""
    if pod is None:
        return "deleted", "the pod was deleted"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "deleted", "the pod is being deleted"
    status = pod.get("status") or {}
    phase, reason, message = status.get("phase"), status.get("reason") or "", status.get("message") or ""
    cs = _container_status(pod) or {}
    terminated = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated") or {}
    if reason == "DeadlineExceeded":
        return "deadline", f"the pod ran past its activeDeadlineSeconds ({message or reason})"
    if reason == "Evicted":
        return "evicted", f"the pod was evicted: {message or reason}"
    if terminated.get("reason") == "OOMKilled":
        return "oom", "the sandbox container was OOM-killed"
    if phase in ("Failed", "Succeeded"):
        detail = message or reason or terminated.get("reason") or f"exit code {terminated.get('exitCode')}"
        return "failed", f"the pod stopped (phase {phase}): {detail}"
    if terminated:
        return "failed", f"the sandbox container exited: {terminated.get('reason') or terminated.get('exitCode')}"
    waiting = (cs.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in _FATAL_WAITING:
        return "image", f"{waiting['reason']}: {waiting.get('message') or ''}".strip()
    return None


def _running(pod: dict) -> bool:
    cs = _container_status(pod) or {}
    return (pod.get("status") or {}).get("phase") == "Running" and "running" in (cs.get("state") or {})


def _unschedulable(pod: dict) -> str | None:
    """The scheduler's message while it cannot place the pod, else None."""
    c = _condition(pod, "PodScheduled")
    if c and c.get("status") == "False" and c.get("reason") == "Unschedulable":
        return c.get("message") or "Unschedulable"
    return None


def _exit_code(status: bytes) -> int | None:
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


def _short(e: BaseException) -> str:
    body = getattr(e, "body", None)
    if body:
        try:
            msg = json.loads(body).get("message")
            if msg:
                return str(msg)[:500]
        except (ValueError, AttributeError):
            pass
    reason = getattr(e, "reason", None)
    status = getattr(e, "status", None)
    if reason or status:
        return f"{status or ''} {reason or ''}".strip()[:500]
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:500]


class _Raw:
    """What one exec stream produced, before it becomes an ExecResult."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.err = bytearray()
        self.code: int | None = None
        self.timed_out = False
        self.truncated = False
        self.duration = 0.0


class _StartWait:
    """Judges a starting pod's successive states: ready, still worth waiting for, or failed (SandboxError)."""

    def __init__(self, name: str, start_timeout_s: float, unschedulable_timeout_s: float, cancel: threading.Event):
        self.name = name
        self.start = time.monotonic()
        self.start_timeout_s = start_timeout_s
        self.unschedulable_timeout_s = unschedulable_timeout_s
        self.unschedulable_since: float | None = None
        self.cancel = cancel

    def ready(self, pod: dict | None) -> bool:
        name = self.name
        problem = pod_problem(pod)
        if problem is not None:
            raise SandboxError(f"sandbox {name}: {problem[1]} (while starting)")
        if _running(pod):
            return True
        now = time.monotonic()
        why = _unschedulable(pod)
        if why is None:
            self.unschedulable_since = None
        else:
            self.unschedulable_since = self.unschedulable_since or now
            if now - self.unschedulable_since >= self.unschedulable_timeout_s:
                raise SandboxError(f"sandbox {name}: the pod stayed unschedulable for "
                                   f"{self.unschedulable_timeout_s:g}s: {why}")
        if now - self.start >= self.start_timeout_s:
            raise SandboxError(f"sandbox {name}: the pod did not start within {self.start_timeout_s:g}s "
                               f"(phase {(pod.get('status') or {}).get('phase')})")
        if self.cancel.is_set():
            raise SandboxError(f"sandbox {name}: creation cancelled")
        return False

    def next_wait(self) -> float:
        """How long the next watch may block before the timeouts need judging again."""
        now = time.monotonic()
        limits = [self.start_timeout_s - (now - self.start), 5.0]
        if self.unschedulable_since is not None:
            limits.append(self.unschedulable_timeout_s - (now - self.unschedulable_since))
        return max(0.5, min(limits))


# -- the sandbox ---------------------------------------------------------------------------------------------

class KubernetesSandbox(Sandbox):
    def __init__(self, provider: KubernetesProvider, spec: SandboxSpec, uid: str, proxy_url: str | None):
        self._p = provider
        self.spec = spec
        self.name = spec.name
        self.id = uid
        self.proxy_url = proxy_url
        self._destroyed = False
        self._destroy_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"KubernetesSandbox(name={self.name!r}, namespace={self._p.namespace!r})"

    # -- exec ----------------------------------------------------------------------------------------------

    async def exec(self, cmd: list[str] | str, *, timeout_s: float, env: dict[str, str] | None = None,
                   workdir: str | None = None, user: str | None = None, stdin: bytes | None = None,
                   output_cap: int = DEFAULT_OUTPUT_CAP) -> ExecResult:
        self._check()
        argv = command_argv(cmd)
        marker = uuid.uuid4().hex
        script = exec_script(argv, marker=marker, env=env, workdir=workdir or self.spec.workdir,
                             user=user if user is not None else self.spec.user,
                             stdin_len=None if stdin is None else len(stdin))
        raw = await self._run(script, marker, stdin, float(timeout_s), int(output_cap))
        return ExecResult(exit_code=-1 if raw.code is None else raw.code, stdout=raw.out.decode("utf-8", "replace"),
                          stderr=raw.err.decode("utf-8", "replace"), timed_out=raw.timed_out,
                          truncated=raw.truncated, duration_s=round(raw.duration, 4))

    async def _run(self, script: str, marker: str, stdin: bytes | None, timeout_s: float, output_cap: int,
                   sink: IO[bytes] | None = None) -> _Raw:
        cancel = threading.Event()
        return await await_worker(
            self._p._submit(self._exec_blocking, script, marker, stdin, timeout_s, output_cap, cancel, sink), cancel)

    def _open_stream(self, argv: list[str], stdin: bool) -> Any:
        from kubernetes.client.rest import ApiException
        from kubernetes.stream import stream

        try:
            return stream(self._p.core.connect_get_namespaced_pod_exec, self.name, self._p.namespace,
                          command=argv, container=CONTAINER, stdin=stdin, stdout=True, stderr=True, tty=False,
                          _preload_content=False, binary=True)
        except ApiException as e:
            raise self._p._pod_error(self.name, f"cannot start a command ({_short(e)})") from e

    def _exec_blocking(self, script: str, marker: str, stdin: bytes | None, timeout_s: float, output_cap: int,
                       cancel: threading.Event, sink: IO[bytes] | None) -> _Raw:
        raw = _Raw()
        start = time.monotonic()
        ws = self._open_stream(["/bin/sh", "-c", script], stdin is not None)
        deadline = start + max(0.0, timeout_s)
        hard_deadline: float | None = None
        targets = {1: raw.out, 2: raw.err}

        def drain() -> None:
            for channel, buf in targets.items():
                data = ws.read_channel(channel)
                if not data:
                    continue
                if channel == 1 and sink is not None:
                    sink.write(data)
                    continue
                room = output_cap - len(buf)
                if len(data) > room:
                    raw.truncated = True
                    data = data[:max(0, room)]
                buf += data

        try:
            if stdin:
                for i in range(0, len(stdin), 1 << 20):
                    ws.write_channel(0, stdin[i:i + (1 << 20)])
            while ws.is_open():
                now = time.monotonic()
                if hard_deadline is None and (now >= deadline or cancel.is_set()):
                    raw.timed_out = True
                    self._kill_marker(marker)
                    hard_deadline = time.monotonic() + KILL_GRACE_S
                if hard_deadline is not None and now >= hard_deadline:
                    break
                wait = (hard_deadline if hard_deadline is not None else deadline) - now
                ws.update(timeout=max(0.0, min(0.25, wait)))
                drain()
            drain()
            status = ws.read_channel(3)
        except Exception as e:  # noqa: BLE001 - the websocket broke: decided below from the pod's state
            status = b""
            if not raw.timed_out:
                raw.err += f"\nopenforge: the exec stream broke: {_short(e)}\n".encode()
        finally:
            try:
                ws.close()
            except Exception:  # noqa: BLE001, S110 - already closed
                pass
        raw.code = _exit_code(status if isinstance(status, bytes) else str(status).encode())
        raw.duration = time.monotonic() - start
        if not raw.timed_out and (raw.code is None or raw.code >= 128):
            # killed from outside, or the stream broke: the pod's state says whose failure it was
            problem = pod_problem(self._p._get_pod(self.name))
            if problem is not None and problem[0] == "deadline":
                raw.timed_out = True
            elif problem is not None:
                raise SandboxError(f"sandbox {self.name}: {problem[1]}")
            elif raw.code is None:
                raise SandboxError(f"sandbox {self.name}: the exec stream ended without an exit status")
        return raw

    def _kill_marker(self, marker: str) -> None:
        """SIGKILL every process started by the exec carrying `marker` (a second exec, as root)."""
        from .docker import _KILL_SCRIPT

        try:
            ws = self._open_stream(["/bin/sh", "-c", _KILL_SCRIPT, "sh", f"{EXEC_MARKER}={marker}"], False)
            ws.run_forever(timeout=10)
            ws.close()
        except Exception:  # noqa: BLE001, S110 - best effort: closing the stream and the pod's deadline remain
            pass

    async def _script(self, script: str, *, stdin: bytes | None = None, timeout_s: float = 300,
                      output_cap: int = DEFAULT_OUTPUT_CAP, sink: IO[bytes] | None = None) -> _Raw:
        """Run a helper script as the container's user (root)."""
        marker = uuid.uuid4().hex
        wrapped = exec_script(["/bin/sh", "-c", script], marker=marker,
                              stdin_len=None if stdin is None else len(stdin))
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
            r = await self.exec(["chown", "-R", chown_name, str(dest_p)], timeout_s=60, user="0")
            if r.exit_code != 0:
                raise SandboxError(f"chown {chown_name} {dest_p} failed in {self.name}: {r.stderr.strip()}")

    async def copy_out(self, src: str, dest: Path) -> None:
        self._check()
        p = PurePosixPath(src)
        q = shlex.quote
        script = (f"[ -e {q(src)} ] || [ -L {q(src)} ] || exit {_MISSING}\n"
                  f"if [ -d {q(src)} ]; then printf D; else printf F; fi\n"
                  f"cd {q(str(p.parent))} && exec tar -c -f - {q(p.name or '.')}\n")
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as tmp:
            raw = await self._script(script, sink=tmp, timeout_s=600)
            if raw.code == _MISSING:
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
        script = (f"[ -e {q} ] || exit {_MISSING}\n[ -d {q} ] && exit {_IS_DIR}\n"
                  f"[ \"$(wc -c < {q})\" -gt {int(max_bytes)} ] && exit {_TOO_BIG}\nexec cat {q}\n")
        raw = await self._script(script, output_cap=max_bytes + 1)
        if raw.code == _MISSING:
            return None
        if raw.code == _IS_DIR:
            raise IsADirectoryError(f"{self.name}:{path}")
        if raw.code == _TOO_BIG:
            raise ValueError(f"{path} in {self.name} is larger than {max_bytes} bytes")
        if raw.code != 0:
            raise SandboxError(f"reading {path} from {self.name} failed (exit {raw.code}): {raw.err.decode()[-500:]}")
        return bytes(raw.out)

    async def logs(self, tail_lines: int = 200) -> str:
        """The sandbox container's log (its PID 1's output; commands run by exec are not in it)."""
        return await self._p._submit(self._p._logs_blocking, self.name, tail_lines)

    # -- status / destroy ----------------------------------------------------------------------------------

    async def status(self) -> SandboxStatus:
        if self._destroyed:
            return SandboxStatus(alive=False, reason="destroyed")
        pod = await self._p._submit(self._p._get_pod, self.name)
        problem = pod_problem(pod)
        cs = (_container_status(pod) or {}) if pod else {}
        oom = any(((cs.get(k) or {}).get("terminated") or {}).get("reason") == "OOMKilled"
                  for k in ("state", "lastState"))
        if problem is None and pod is not None and _running(pod):
            return SandboxStatus(alive=True, oom_killed=oom, reason="running")
        exit_code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
        return SandboxStatus(alive=False, oom_killed=oom, exit_code=exit_code,
                             reason=problem[1] if problem else f"pod phase {(pod.get('status') or {}).get('phase')}")

    async def destroy(self) -> None:
        async with self._destroy_lock:
            if self._destroyed:
                return
            self._destroyed = True
            await self._p._submit(self._p._delete_pod, self.name)
            self._p._live.pop(self.name, None)


# -- the provider --------------------------------------------------------------------------------------------

class KubernetesProvider(SandboxProvider):
    """Kubernetes backend: `get_provider("kubernetes", namespace=..., harness_image=..., ...)`.

    Options:
    - `namespace` (default `openforge`): where pods and the run's NetworkPolicy live; create it and the
      orchestrator's RBAC with `openforge k8s manifests`.
    - `proxy_url`: the model API as pods reach it (default `http://openforge-proxy.<namespace>.svc:8100`,
      the Service of `openforge k8s manifests`).
    - `harness_image`: the harness bundle image (`openforge harness image --push REGISTRY`); needed by the
      real harnesses (claude-code, codex, openclaw), not by `react`.
    - `image_map`: as in the docker backend, applied to every spec's image (under the spec's own map).
    - `creation_rate` (pods per second, default 5) and `creation_burst` (default 10): the creation token bucket.
    - `unschedulable_timeout_s` (default 120): how long a pod may stay unschedulable before the sandbox fails;
      `start_timeout_s` (default 600): how long it may take to start at all (image pulls included).
    - `default_deadline_s` (default 4 h): `activeDeadlineSeconds` when the spec has no `timeout_s`.
    - `network_policy` (default True) and `allow_dns` (default True): create the run's NetworkPolicy.
    - `pull_policy` (default IfNotPresent), `node_selector`, `tolerations`: passed to the pod.
    - `configuration` (a `kubernetes.client.Configuration`), else `kubeconfig` / `context`, else the
      in-cluster service account, else `~/.kube/config`.
    - `max_workers` (threads for blocking API calls; one is busy per running exec, default 64).
    """

    name = "kubernetes"

    def __init__(self, *, namespace: str = "openforge", proxy_url: str | None = None,
                 harness_image: str | None = None, image_map: dict[str, str] | None = None,
                 creation_rate: float = 5.0, creation_burst: int = 10, unschedulable_timeout_s: float = 120.0,
                 start_timeout_s: float = 600.0, default_deadline_s: float = 4 * 3600, network_policy: bool = True,
                 allow_dns: bool = True, pull_policy: str = "IfNotPresent",
                 node_selector: dict[str, str] | None = None, tolerations: list[dict[str, Any]] | None = None,
                 configuration: Any = None, kubeconfig: str | None = None, context: str | None = None,
                 max_workers: int = 64):
        from openforge.k8s.manifests import MODEL_PORT

        self.namespace = namespace
        self.proxy_url = proxy_url or f"http://openforge-proxy.{namespace}.svc:{MODEL_PORT}"
        self.harness_image = harness_image
        self.image_map = dict(image_map or {})
        self.bucket = TokenBucket(creation_rate, creation_burst)
        self.unschedulable_timeout_s = float(unschedulable_timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.default_deadline_s = float(default_deadline_s)
        self.network_policy = network_policy
        self.allow_dns = allow_dns
        self.pull_policy = pull_policy
        self.node_selector = dict(node_selector or {})
        self.tolerations = list(tolerations or [])
        self._configuration = configuration
        self._kubeconfig = kubeconfig
        self._context = context
        self._api: Any = None
        self._core: Any = None
        self._net: Any = None
        self._client_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="openforge-k8s")
        self._live: dict[str, KubernetesSandbox] = {}
        self._policies: set[str] = set()

    # -- plumbing ------------------------------------------------------------------------------------------

    def _connect(self) -> None:
        with self._client_lock:
            if self._api is not None:
                return
            try:
                from kubernetes import client, config
            except ImportError as e:
                raise SandboxError("the kubernetes sandbox needs the `kubernetes` package: "
                                   "pip install 'openforge[kubernetes]'") from e
            if self._configuration is not None:
                api = client.ApiClient(self._configuration)
            else:
                cfg = client.Configuration()
                try:
                    if self._kubeconfig or self._context:
                        raise config.ConfigException("explicit kubeconfig")
                    config.load_incluster_config(client_configuration=cfg)
                except config.ConfigException:
                    try:
                        config.load_kube_config(config_file=self._kubeconfig, context=self._context,
                                                client_configuration=cfg)
                    except (config.ConfigException, OSError) as e:
                        raise SandboxError(
                            f"no Kubernetes credentials: {e}; run in-cluster with the service account of "
                            "`openforge k8s manifests`, or give the sandbox option kubeconfig=PATH (and context=)") from e
                api = client.ApiClient(cfg)
            self._core = client.CoreV1Api(api)
            self._net = client.NetworkingV1Api(api)
            self._api = api

    @property
    def core(self) -> Any:
        if self._core is None:
            self._connect()
        return self._core

    @property
    def net(self) -> Any:
        if self._net is None:
            self._connect()
        return self._net

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        return asyncio.get_running_loop().run_in_executor(self._executor, partial(fn, *args))

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._api is not None:
            try:
                self._api.close()
            except Exception:  # noqa: BLE001, S110 - closing anyway
                pass

    def _api_error(self, what: str, e: BaseException) -> SandboxError:
        hint = ""
        if getattr(e, "status", None) == 403:
            hint = (" (the orchestrator's service account lacks this permission: apply the RBAC of "
                    "`openforge k8s manifests`)")
        elif getattr(e, "status", None) == 404 and "namespace" in _short(e).lower():
            hint = f" (does namespace {self.namespace!r} exist? `openforge k8s manifests` creates it)"
        return SandboxError(f"{what}: {_short(e)}{hint}")

    def _pod_error(self, name: str, what: str) -> SandboxError:
        """A failure talking to a pod, explained by the pod's state when it has a problem."""
        try:
            problem = pod_problem(self._get_pod(name))
        except SandboxError:
            problem = None
        return SandboxError(f"sandbox {name}: {problem[1] if problem else what}")

    def _get_pod(self, name: str) -> dict | None:
        from kubernetes.client.rest import ApiException

        try:
            resp = self.core.read_namespaced_pod(name, self.namespace, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            raise self._api_error(f"cannot read pod {name}", e) from e
        return json.loads(resp.data)

    def _logs_blocking(self, name: str, tail_lines: int) -> str:
        from kubernetes.client.rest import ApiException

        try:
            return self.core.read_namespaced_pod_log(name, self.namespace, container=CONTAINER,
                                                     tail_lines=tail_lines)
        except ApiException as e:
            raise self._api_error(f"cannot read the log of pod {name}", e) from e

    def _delete_pod(self, name: str) -> bool:
        from kubernetes.client.rest import ApiException

        try:
            self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0,
                                            propagation_policy="Background")
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise self._api_error(f"cannot delete pod {name}", e) from e

    # -- images and mounts ---------------------------------------------------------------------------------

    def resolve_image(self, spec: SandboxSpec) -> str:
        """The image a pod runs: `spec.image` through the image map. Dockerfile tasks need a pre-built image."""
        from .docker import map_image

        if spec.dockerfile_dir is not None:
            raise SandboxError(
                f"sandbox {spec.name}: the task builds its image from {spec.dockerfile_dir}/Dockerfile, and the "
                "kubernetes backend builds nothing in the cluster. Build and push the image "
                "(docker build -t REGISTRY/NAME:TAG . && docker push ...), then name it in the task's task.toml "
                "([environment] docker_image = \"REGISTRY/NAME:TAG\") or map the task's image to it with "
                "--image-map / the rollout's image_map")
        if not spec.image:
            raise SandboxError(f"sandbox {spec.name}: the spec names no image")
        return map_image(spec.image, {**self.image_map, **spec.image_map})

    def _harness_target(self, spec: SandboxSpec) -> str | None:
        """Where the harness bundle goes (the target of the spec's bundle mount), or None. Host paths cannot
        be bind-mounted into a pod: the bundle comes from `harness_image`, anything else is an error."""
        target = None
        for m in spec.mounts:
            if (Path(m.source) / "manifest.json").is_file():
                if self.harness_image is None:
                    raise SandboxError(
                        f"sandbox {spec.name}: the harness bundle ({m.source}) cannot be bind-mounted into a pod; "
                        "build its image with `openforge harness image --push REGISTRY` and give the sandbox "
                        "option harness_image=REGISTRY/openforge-harnesses:TAG")
                target = m.target
            else:
                raise SandboxError(
                    f"sandbox {spec.name}: mount {m.source} -> {m.target}: kubernetes pods cannot bind-mount "
                    "host paths; put the files in the task's image or copy them in with copy_in")
        return target

    def pod_manifest(self, spec: SandboxSpec, image: str, harness_target: str | None) -> dict[str, Any]:
        from openforge.k8s.manifests import (
            EXPIRES_ANNOTATION,
            RUN_ANNOTATION,
            sandbox_pod,
        )

        deadline = math.ceil(spec.timeout_s if spec.timeout_s is not None else self.default_deadline_s)
        expires = datetime.now(UTC) + timedelta(seconds=deadline)
        env = dict(spec.env)
        if self._wants_proxy(spec):
            env["OPENFORGE_PROXY_URL"] = self.proxy_url
        annotations = {EXPIRES_ANNOTATION: expires.strftime("%Y-%m-%dT%H:%M:%SZ")}
        if spec.run is not None:
            annotations[RUN_ANNOTATION] = spec.run
        return sandbox_pod(
            name=spec.name, namespace=self.namespace, image=image, labels=spec.all_labels(), cpus=spec.cpus,
            memory_mb=spec.memory_mb, env=env, workdir=spec.workdir, active_deadline_s=deadline,
            annotations=annotations, harness_image=self.harness_image if harness_target else None,
            harness_target=harness_target, pull_policy=self.pull_policy, node_selector=self.node_selector,
            tolerations=self.tolerations)

    @staticmethod
    def _wants_proxy(spec: SandboxSpec) -> bool:
        return spec.proxy_uds is not None or spec.proxy_tcp is not None

    # -- create --------------------------------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> KubernetesSandbox:
        image = self.resolve_image(spec)
        body = self.pod_manifest(spec, image, self._harness_target(spec))
        await self.bucket.acquire()
        cancel = threading.Event()
        try:
            uid = await self._submit(self._create_blocking, spec, body, cancel)
        except asyncio.CancelledError:
            cancel.set()  # the worker deletes the pod it made
            raise
        sb = KubernetesSandbox(self, spec, uid, self.proxy_url if self._wants_proxy(spec) else None)
        self._live[spec.name] = sb
        return sb

    def _create_blocking(self, spec: SandboxSpec, body: dict[str, Any], cancel: threading.Event) -> str:
        from kubernetes.client.rest import ApiException

        if spec.run is not None and self.network_policy:
            self._ensure_policy(spec.run)
        self._remove_stale(spec.name)
        try:
            resp = self.core.create_namespaced_pod(self.namespace, body, _preload_content=False)
        except ApiException as e:
            raise self._api_error(f"sandbox {spec.name}: cannot create its pod", e) from e
        created = json.loads(resp.data)
        try:
            self._wait_running(spec.name, created["metadata"].get("resourceVersion"), cancel)
        except BaseException:
            try:
                self._delete_pod(spec.name)
            except SandboxError:
                pass
            raise
        return created["metadata"].get("uid") or spec.name

    def _watch(self, name: str, resource_version: str | None, timeout_s: float):
        """Events of one pod (a watch with a server-side timeout): yields (type, pod dict). An expired
        resourceVersion raises ApiException 410."""
        from kubernetes import watch

        w = watch.Watch()
        kwargs: dict[str, Any] = {"field_selector": f"metadata.name={name}",
                                  "timeout_seconds": max(1, math.ceil(timeout_s)), "deserialize": False}
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            for ev in w.stream(self.core.list_namespaced_pod, self.namespace, **kwargs):
                yield ev["type"], ev.get("object") or {}
        finally:
            w.stop()

    def _wait_running(self, name: str, resource_version: str | None, cancel: threading.Event) -> None:
        """Follow the pod with a watch until its container runs; SandboxError when it cannot."""
        from kubernetes.client.rest import ApiException

        waiting = _StartWait(name, self.start_timeout_s, self.unschedulable_timeout_s, cancel)
        pod = self._get_pod(name)  # the state now, in case no event follows
        rv = ((pod or {}).get("metadata") or {}).get("resourceVersion") or resource_version
        while not waiting.ready(pod):
            try:
                for kind, obj in self._watch(name, rv, waiting.next_wait()):
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    pod = None if kind == "DELETED" else obj
                    if waiting.ready(pod):
                        return
            except ApiException as e:
                if e.status != 410:
                    raise self._api_error(f"sandbox {name}: watching its pod failed", e) from e
                pod = self._get_pod(name)  # the resourceVersion expired: start again from the current state
                rv = ((pod or {}).get("metadata") or {}).get("resourceVersion")

    # -- network policy, stale pods ------------------------------------------------------------------------

    def _ensure_policy(self, run: str) -> None:
        from kubernetes.client.rest import ApiException

        from openforge.k8s.manifests import MODEL_PORT, run_network_policy

        if run in self._policies:
            return
        body = run_network_policy(run, self.namespace, proxy_port=MODEL_PORT, allow_dns=self.allow_dns)
        try:
            self.net.create_namespaced_network_policy(self.namespace, body)
        except ApiException as e:
            if e.status != 409:  # 409: it exists already (another orchestrator process of the run)
                raise self._api_error(f"cannot create the NetworkPolicy of run {run}", e) from e
        self._policies.add(run)

    def _remove_stale(self, name: str) -> None:
        pod = self._get_pod(name)
        if pod is None:
            return
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_MANAGED) != "1":
            raise SandboxError(f"a pod named {name} exists in namespace {self.namespace} and was not created by "
                               "openforge; remove it or choose another run name")
        if name in self._live:
            raise SandboxError(f"sandbox {name} already exists in this process; names must be unique per episode")
        self._delete_pod(name)
        end = time.monotonic() + 60
        rv = (pod.get("metadata") or {}).get("resourceVersion")
        while self._get_pod(name) is not None:
            if time.monotonic() >= end:
                raise SandboxError(f"sandbox {name}: the leftover pod of that name was not deleted within 60s")
            for kind, obj in self._watch(name, rv, 5):
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if kind == "DELETED":
                    break

    # -- listing and cleanup -------------------------------------------------------------------------------

    def _selector(self, run_label: str | None) -> str:
        sel = f"{LABEL_MANAGED}=1"
        if run_label is not None:
            sel += f",{LABEL_RUN}={label_value(run_label)}"
        return sel

    def _list_blocking(self, run_label: str | None) -> list[str]:
        from kubernetes.client.rest import ApiException

        try:
            resp = self.core.list_namespaced_pod(self.namespace, label_selector=self._selector(run_label),
                                                 _preload_content=False)
        except ApiException as e:
            raise self._api_error("cannot list pods", e) from e
        return sorted(p["metadata"]["name"] for p in json.loads(resp.data).get("items") or [])

    async def list(self, run_label: str | None = None) -> list[str]:
        return await self._submit(self._list_blocking, run_label)

    def _delete_policies(self, run_label: str | None) -> int:
        from kubernetes.client.rest import ApiException

        from openforge.k8s.manifests import network_policy_name

        try:
            resp = self.net.list_namespaced_network_policy(self.namespace, label_selector=self._selector(run_label),
                                                           _preload_content=False)
            names = [p["metadata"]["name"] for p in json.loads(resp.data).get("items") or []]
        except ApiException as e:
            raise self._api_error("cannot list NetworkPolicies", e) from e
        if run_label is not None and network_policy_name(run_label) not in names:
            names.append(network_policy_name(run_label))
        removed = 0
        for n in names:
            try:
                self.net.delete_namespaced_network_policy(n, self.namespace)
                removed += 1
            except ApiException as e:
                if e.status != 404:
                    raise self._api_error(f"cannot delete NetworkPolicy {n}", e) from e
        return removed

    async def cleanup(self, run_label: str | None) -> int:
        """Delete every pod of run `run_label` (all managed pods with None) and the run's NetworkPolicy."""
        names = await self.list(run_label)
        for name in names:
            sb = self._live.get(name)
            if sb is not None:
                await sb.destroy()
            else:
                await self._submit(self._delete_pod, name)
        await self._submit(self._delete_policies, run_label)
        if run_label is None:
            self._policies.clear()
        else:
            self._policies.discard(run_label)
        return len(names)
