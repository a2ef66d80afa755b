"""`FakeKubernetesAPI`: a FAKE Kubernetes API server for tests (no real cluster can run on these machines).

A real HTTP server (Starlette + uvicorn in a thread, 127.0.0.1, random port) implementing the subset of the
API that the `kubernetes` sandbox backend calls, so the official client runs unmodified against it:

- pods: create, get, list, delete, watch (`?watch=true`: JSON lines, from a resourceVersion, label and field
  selectors, `timeoutSeconds`), log;
- pods/exec over a websocket with the channel protocol `v4.channel.k8s.io` (first byte of each frame: 0 stdin,
  1 stdout, 2 stderr, 3 the exit status as a `Status` JSON);
- networkpolicies: create, list, delete;
- services: get (the proxy's Service, with a cluster IP).

A fake "kubelet" runs each pod's commands for real: every pod gets a local bubblewrap sandbox
(`openforge.sandbox.local`, its own root directory, the host's /usr read-only), and exec runs the requested
argv there, so tar-through-exec copies, exit codes and kills are real. Differences from a real cluster (on
purpose, or because they need one): images are ignored (the pod's files are the host's /usr plus its own
root); each pod has its own pid namespace whose PID 1 is the pod's command (the backend's keep-alive, started
with `unshare --pid --mount-proc`; every exec enters it with `nsenter`, so kill-by-marker and the process stop
work as in a container), and the fake also kills an exec's processes when its websocket closes (a real kubelet
may leave them running); scheduling, eviction and deadlines happen when the test (or a timer) says so; no
admission, no RBAC, no NetworkPolicy enforcement.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from openforge.sandbox import SandboxSpec
from openforge.sandbox.local import BASE_PATH, Cgroup, LocalProvider, remove_sandbox_dir
from openforge.sandbox.local.sandbox import RUN_DIR

FORWARDER_IN_SANDBOX = f"{RUN_DIR}/forwarder.py"

V4 = "v4.channel.k8s.io"


def _container_privileges(container: dict) -> list[str]:
    """A command prefix giving a process the container's privileges: the capabilities its securityContext adds
    (the rest dropped from the bounding set, so root's permitted set is exactly those) and no_new_privs."""
    added = container.get("securityContext", {}).get("capabilities", {}).get("add", [])
    bounding = ",".join(["-all", *(f"+{c.lower()}" for c in added)])
    return ["setpriv", f"--bounding-set={bounding}", "--no-new-privs", "--"]


def _status(code: int, reason: str, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        },
        status_code=code,
    )


def _labels_match(obj: dict, selector: str | None) -> bool:
    if not selector:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in selector.split(","):
        k, _, v = term.partition("=")
        if labels.get(k) != v:
            return False
    return True


def _fields_match(obj: dict, selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        k, _, v = term.partition("=")
        if k == "metadata.name" and obj["metadata"]["name"] != v:
            return False
    return True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FakeKubernetesAPI:
    """Start with `with FakeKubernetesAPI(tmp_path) as api:`; `api.configuration()` is a client configuration
    pointing at it. Test controls: `unschedulable` (a predicate on pod names), `evict(name)`,
    `delete_pod(name)`, `pods`, `policies`, `create_times`, `created_bodies`, `events`."""

    def __init__(self, root: Path, *, host_network: bool = False, schedule_delay_s: float = 0.05):
        self.root = Path(root)
        self.host_network = host_network  # pods share the host's network (to reach a proxy on loopback)
        self.schedule_delay_s = schedule_delay_s
        self.unschedulable: Callable[[str], bool] = lambda name: False
        self.pods: dict[str, dict] = {}
        self.policies: dict[str, dict] = {}
        self.services: dict[str, dict] = {
            "openforge-proxy": {"metadata": {"name": "openforge-proxy"}, "spec": {"clusterIP": "10.96.0.10"}}
        }
        self.create_times: dict[str, float] = {}
        self.created_bodies: list[dict] = []
        self.events: list[tuple[int, str, str, dict]] = []  # (rv, kind, type, object)
        self.exec_count = 0
        self.pod_gets = 0  # GETs of single pods (a backend that polled would make many)
        self.watches = 0
        self._lifecycles: set[asyncio.Task] = set()  # the pods' own tasks (kept: the loop holds tasks weakly)
        #: called with (pod name, argv) at each exec; a number = evict the pod that many seconds later
        self.on_exec: Callable[[str, list[str]], float | None] = lambda name, argv: None
        self._rv = 1
        self._local = LocalProvider(root=self.root / "pods", cgroups=False)
        self._sandboxes: dict[str, Any] = {}
        self._procs: dict[str, set[asyncio.subprocess.Process]] = {}
        self._pid1: dict[str, asyncio.subprocess.Process] = {}  # each pod's `unshare --pid` (its namespace's parent)
        self._init_pid: dict[str, int] = {}  # host pid of each pod's PID 1
        self._timers: dict[str, list[asyncio.Task]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._cond: asyncio.Condition | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle -----------------------------------------------------------------------------------------

    def __enter__(self) -> FakeKubernetesAPI:  # noqa: PYI034
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), lifespan="off", log_level="warning", ws="websockets-sansio")
        self._server = uvicorn.Server(config)
        ready = threading.Event()

        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self._cond = asyncio.Condition()
            ready.set()
            await self._server.serve(sockets=[sock])

        self._thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True, name="fake-k8s-api")
        self._thread.start()
        ready.wait(10)
        end = time.monotonic() + 10
        while not self._server.started and time.monotonic() < end:
            time.sleep(0.01)

    def stop(self) -> None:
        if self.loop is not None:
            for name in list(self.pods):
                self.call(self._remove_pod(name))
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def configuration(self) -> Any:
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.url
        cfg.api_key = {"authorization": "Bearer fake-token"}
        return cfg

    def write_kubeconfig(self, path: Path, namespace: str = "openforge") -> Path:
        import yaml

        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "fake",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "fake", "user": {"token": "fake-token"}}],
                    "contexts": [
                        {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}
                    ],
                }
            )
        )
        return path

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the server's loop from the test's thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # -- test controls (thread-safe) -----------------------------------------------------------------------

    def evict(self, name: str, message: str = "The node was low on resource: memory.") -> None:
        self.call(self._fail_pod(name, "Evicted", message))

    def delete_pod(self, name: str) -> None:
        self.call(self._remove_pod(name))

    def phases(self) -> dict[str, str]:
        return {n: p["status"].get("phase") for n, p in self.pods.items()}

    # -- state changes (on the server's loop) --------------------------------------------------------------

    async def _emit(self, kind: str, type_: str, obj: dict) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self.events.append((self._rv, kind, type_, json.loads(json.dumps(obj))))
        async with self._cond:
            self._cond.notify_all()

    def _kill_execs(self, name: str) -> None:
        for proc in list(self._procs.get(name, ())):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def _fail_pod(self, name: str, reason: str, message: str) -> None:
        pod = self.pods.get(name)
        if pod is None:
            return
        pod["status"].update(phase="Failed", reason=reason, message=message)
        pod["status"]["containerStatuses"] = [
            {
                "name": "sandbox",
                "ready": False,
                "restartCount": 0,
                "image": pod["spec"]["containers"][0]["image"],
                "imageID": "",
                "state": {"terminated": {"exitCode": 137, "reason": "Error"}},
            }
        ]
        self._kill_execs(name)
        await self._emit("pods", "MODIFIED", pod)

    async def _remove_pod(self, name: str) -> dict | None:
        pod = self.pods.pop(name, None)
        if pod is None:
            return None
        for t in self._timers.pop(name, []):
            t.cancel()
        self._kill_execs(name)
        holder = self._pid1.pop(name, None)
        self._init_pid.pop(name, None)
        if holder is not None and holder.returncode is None:
            try:
                os.killpg(holder.pid, signal.SIGKILL)  # --kill-child: the namespace's PID 1, and so all of it, dies
            except ProcessLookupError:
                pass
            await holder.wait()
        sb = self._sandboxes.pop(name, None)
        if sb is not None:
            self._local.forget(name)
            await asyncio.to_thread(remove_sandbox_dir, sb.dir, Cgroup.existing(name))
        await self._emit("pods", "DELETED", pod)
        return pod

    async def _lifecycle(self, name: str) -> None:
        """The fake scheduler and kubelet: schedule (or not), start the container, enforce the deadline."""
        await asyncio.sleep(self.schedule_delay_s)
        pod = self.pods.get(name)
        if pod is None:
            return
        if self.unschedulable(name):
            pod["status"]["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": _now(),
                    "message": "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available.",
                }
            ]
            await self._emit("pods", "MODIFIED", pod)
            return
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()}]
        pod["status"]["containerStatuses"] = [
            {
                "name": "sandbox",
                "ready": False,
                "restartCount": 0,
                "image": pod["spec"]["containers"][0]["image"],
                "imageID": "",
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ]
        await self._emit("pods", "MODIFIED", pod)
        container = pod["spec"]["containers"][0]
        spec = SandboxSpec(
            name=name,
            workdir=(container.get("workingDir") or "/").rstrip("/") or "/app",  # a grader starts in /
            proxy_tcp="127.0.0.1:1" if self.host_network else None,
        )
        self._sandboxes[name] = await asyncio.to_thread(self._local._create_blocking, spec)
        await self._start_pid_namespace(name, container)
        await asyncio.sleep(self.schedule_delay_s)
        if name not in self.pods:
            return
        pod["status"].update(phase="Running", startTime=_now(), podIP="10.0.0.7")
        pod["status"]["conditions"].append({"type": "Ready", "status": "True", "lastTransitionTime": _now()})
        pod["status"]["containerStatuses"][0].update(ready=True, started=True, state={"running": {"startedAt": _now()}})
        await self._emit("pods", "MODIFIED", pod)
        deadline = pod["spec"].get("activeDeadlineSeconds")
        if deadline:

            async def expire() -> None:
                await asyncio.sleep(deadline)
                await self._fail_pod(
                    name, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
                )

            self._timers.setdefault(name, []).append(asyncio.create_task(expire()))

    async def _start_pid_namespace(self, name: str, container: dict) -> None:
        """The pod's pid namespace, its PID 1 running the pod's command (the keep-alive) as the container would."""
        argv = [*container.get("command", []), *container.get("args", [])] or ["sleep", "infinity"]
        holder = await asyncio.create_subprocess_exec(
            "unshare",
            "--pid",
            "--mount",
            "--mount-proc",
            "--fork",
            "--kill-child",
            *_container_privileges(container),
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        self._pid1[name] = holder
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text().split()
            except OSError:
                children = []
            if children:
                self._init_pid[name] = int(children[0])
                return
            await asyncio.sleep(0.01)
        raise RuntimeError(f"fake kubelet: the pid namespace of pod {name} did not start")

    # -- HTTP ----------------------------------------------------------------------------------------------

    def _app(self) -> Starlette:
        pods = "/api/v1/namespaces/{ns}/pods"
        nps = "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"
        return Starlette(
            routes=[
                Route(pods, self._pods, methods=["GET", "POST"]),
                Route(pods + "/{name}", self._pod, methods=["GET", "DELETE"]),
                Route(pods + "/{name}/log", self._log, methods=["GET"]),
                WebSocketRoute(pods + "/{name}/exec", self._exec),
                Route(nps, self._policies, methods=["GET", "POST"]),
                Route(nps + "/{name}", self._policy, methods=["GET", "DELETE"]),
                Route("/api/v1/namespaces/{ns}/services/{name}", self._service, methods=["GET"]),
            ]
        )

    async def _service(self, request: Request) -> Response:
        svc = self.services.get(request.path_params["name"])
        if svc is None:
            return _status(404, "NotFound", f'services "{request.path_params["name"]}" not found')
        return JSONResponse(svc)

    async def _pods(self, request: Request) -> Response:
        ns = request.path_params["ns"]
        q = request.query_params
        if request.method == "POST":
            body = await request.json()
            name = body["metadata"]["name"]
            if name in self.pods:
                return _status(409, "AlreadyExists", f'pods "{name}" already exists')
            self.created_bodies.append(json.loads(json.dumps(body)))
            self.create_times[name] = time.monotonic()
            body["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
            body["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
            self.pods[name] = body
            await self._emit("pods", "ADDED", body)
            lifecycle = asyncio.create_task(self._lifecycle(name))
            self._lifecycles.add(lifecycle)
            lifecycle.add_done_callback(self._lifecycles.discard)
            return JSONResponse(body, status_code=201)
        if q.get("watch") in ("true", "1"):
            self.watches += 1
            return StreamingResponse(self._watch("pods", q), media_type="application/json")
        items = [
            p
            for p in self.pods.values()
            if _labels_match(p, q.get("labelSelector")) and _fields_match(p, q.get("fieldSelector"))
        ]
        return JSONResponse(
            {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self._rv)}, "items": items}
        )

    async def _watch(self, kind: str, q: Any):
        since = int(q.get("resourceVersion") or 0)
        end = time.monotonic() + float(q.get("timeoutSeconds") or 30)
        label_sel, field_sel = q.get("labelSelector"), q.get("fieldSelector")
        if since == 0:  # no resourceVersion: the current objects first, as ADDED
            for p in list(self.pods.values()):
                if _labels_match(p, label_sel) and _fields_match(p, field_sel):
                    yield json.dumps({"type": "ADDED", "object": p}) + "\n"
            since = self._rv
        while True:
            for rv, k, type_, obj in list(self.events):
                if rv > since and k == kind and _labels_match(obj, label_sel) and _fields_match(obj, field_sel):
                    yield json.dumps({"type": type_, "object": obj}) + "\n"
            since = max(since, self._rv)
            left = end - time.monotonic()
            if left <= 0:
                return
            async with self._cond:
                try:
                    await asyncio.wait_for(self._cond.wait(), left)
                except TimeoutError:
                    pass

    async def _pod(self, request: Request) -> Response:
        name = request.path_params["name"]
        if request.method == "DELETE":
            pod = await self._remove_pod(name)
            if pod is None:
                return _status(404, "NotFound", f'pods "{name}" not found')
            return JSONResponse(pod)
        self.pod_gets += 1
        pod = self.pods.get(name)
        if pod is None:
            return _status(404, "NotFound", f'pods "{name}" not found')
        return JSONResponse(pod)

    async def _log(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.pods:
            return _status(404, "NotFound", f'pods "{name}" not found')
        return PlainTextResponse(f"fake log of {name}\n")

    async def _policies(self, request: Request) -> Response:
        if request.method == "POST":
            body = await request.json()
            name = body["metadata"]["name"]
            if name in self.policies:
                return _status(409, "AlreadyExists", f'networkpolicies.networking.k8s.io "{name}" already exists')
            self.policies[name] = body
            await self._emit("networkpolicies", "ADDED", body)
            return JSONResponse(body, status_code=201)
        sel = request.query_params.get("labelSelector")
        items = [p for p in self.policies.values() if _labels_match(p, sel)]
        return JSONResponse(
            {
                "kind": "NetworkPolicyList",
                "apiVersion": "networking.k8s.io/v1",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }
        )

    async def _policy(self, request: Request) -> Response:
        name = request.path_params["name"]
        pol = self.policies.pop(name, None) if request.method == "DELETE" else self.policies.get(name)
        if pol is None:
            return _status(404, "NotFound", f'networkpolicies.networking.k8s.io "{name}" not found')
        return JSONResponse(pol)

    # -- exec ----------------------------------------------------------------------------------------------

    async def _exec(self, ws: WebSocket) -> None:
        name = ws.path_params["name"]
        q = ws.query_params
        pod = self.pods.get(name)
        sb = self._sandboxes.get(name)
        if V4 not in ws.scope.get("subprotocols", []):
            await ws.close(code=1002)
            return
        if pod is None or sb is None or pod["status"].get("phase") != "Running":
            await ws.close(code=1008)  # before accept: the handshake fails, as for a pod that is not running
            return
        await ws.accept(subprotocol=V4)
        self.exec_count += 1
        argv = q.getlist("command")
        want_stdin = q.get("stdin") in ("true", "1")
        container = pod["spec"]["containers"][0]
        env = {
            "PATH": BASE_PATH,
            "HOME": "/root",
            "LANG": "C.UTF-8",
            **{e["name"]: e.get("value", "") for e in container.get("env") or []},
        }
        bargv = sb._bwrap_argv(argv, workdir=container.get("workingDir") or "/", env=env, uid=0, gid=0)
        # The container's privileges, as the kubelet would set them from the pod's securityContext: the local
        # backend's launcher (which drops every capability) is replaced by `setpriv` keeping the capabilities
        # the pod adds, with no_new_privs (allowPrivilegeEscalation: false).
        start = bargv.index("--") + 1  # bwrap's own arguments end here; the launcher follows
        assert bargv[start + 2] == FORWARDER_IN_SANDBOX, bargv
        launcher = bargv.index("--", start)
        bargv[start : launcher + 1] = _container_privileges(container)
        # execs of one pod share its pid namespace, as in a container: the backend's kill-by-marker exec must see
        # the command it kills, and the process stop must see everything but the pod's PID 1
        bargv.remove("--unshare-pid")
        bargv = ["nsenter", f"--target={self._init_pid[name]}", "--pid", "--mount", "--", *bargv]
        proc = await asyncio.create_subprocess_exec(
            *bargv,
            stdin=asyncio.subprocess.PIPE if want_stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self._procs.setdefault(name, set()).add(proc)
        # the eviction clock starts once the command runs, so "evict 0 s later" always hits it mid-command
        evict_after = self.on_exec(name, argv)
        if evict_after is not None:

            async def evict_later() -> None:
                await asyncio.sleep(evict_after)
                await self._fail_pod(name, "Evicted", "The node was low on resource: memory.")

            self._timers.setdefault(name, []).append(asyncio.create_task(evict_later()))

        async def pump(stream: asyncio.StreamReader, channel: int) -> None:
            while chunk := await stream.read(1 << 16):
                await ws.send_bytes(bytes([channel]) + chunk)

        async def receive() -> None:
            try:
                while True:
                    msg = await ws.receive_bytes()
                    if msg[:1] == b"\x00" and proc.stdin is not None:
                        proc.stdin.write(msg[1:])
                        await proc.stdin.drain()
            except (WebSocketDisconnect, RuntimeError, ConnectionError, KeyError):
                # the client went away (a timeout, a cancelled command): end the command's processes
                if proc.returncode is None:
                    os.killpg(proc.pid, signal.SIGKILL)

        receiver = asyncio.create_task(receive())
        try:
            await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
            rc = await proc.wait()
            code = 128 - rc if rc < 0 else rc
            if code == 0:
                status = {"metadata": {}, "status": "Success"}
            else:
                status = {
                    "metadata": {},
                    "status": "Failure",
                    "reason": "NonZeroExitCode",
                    "message": f"command terminated with non-zero exit code: exit status {code}",
                    "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
                }
            await ws.send_bytes(b"\x03" + json.dumps(status).encode())
            await ws.close()
        except Exception:  # noqa: BLE001, S110 - the client disconnected mid-stream
            pass
        finally:
            receiver.cancel()
            self._procs.get(name, set()).discard(proc)
            if proc.returncode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
