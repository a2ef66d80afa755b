"""The docker backend's provider: one container per rollout on a real daemon, through the `docker` SDK.

Container: `network_mode="none"` (loopback only), `nano_cpus`, `mem_limit` with `memswap_limit` equal to it
(no swap), `pids_limit`, the daemon's init (`init=True`, tini) as PID 1 running `sleep infinity`, the
image's ENTRYPOINT overridden. Hardening (docs/design.md, invariant 7): every capability dropped but
`common.AGENT_CAPABILITIES` (what a root agent of a Harbor task needs), `no-new-privileges` (no setuid or
file-capability gains, for the agent and every exec), `nofile` limited to `common.NOFILE_LIMIT`, and
`storage_opt size=<storage_mb>` where the daemon's storage driver has quotas (overlay2 on xfs with `pquota`);
where it has none the provider logs once that `storage_mb` is not enforced and goes on without it. Runtime:
every container (agents and graders alike) runs under crun where the daemon has it registered — it starts
containers and commands for less of the machine's CPU than runc (docs/sandboxes.md, "Container runtime") — and
the daemon's default where it has not, or where crun cannot start a container that the default can (said once);
the `runtime` option names one instead.
Images: `images.py`; commands: `execs.py`; the proxy bridge: `bridge.py`; grading's process stop:
`processes.py`.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from openforge.tasks.context import DEFAULT_MAX_CONTEXT_BYTES
from openforge.tasks.images import ImageMap

from ..base import LABEL_MANAGED, Sandbox, SandboxError, SandboxProvider, SandboxSpec, grader_spec
from ..common import AGENT_CAPABILITIES, KEEPALIVE, NOFILE_LIMIT, WorkerPool, run_selector
from .bridge import start_forwarder
from .client import DockerConnection, docker_errors, short_error
from .images import ImageBuild, ImageBuilder
from .sandbox import DockerSandbox

__all__ = ["AUTO_RUNTIME", "PREFERRED_RUNTIME", "DockerProvider"]

log = logging.getLogger(__name__)

AUTO_RUNTIME = "auto"
# The runtime `auto` picks where the daemon has it: measured to cost the machine less CPU per container and
# per command than runc (benchmarks/results/episode-phases-crun.json).
PREFERRED_RUNTIME = "crun"


class DockerProvider(SandboxProvider):
    """Docker backend.

    Options: `image_map` (applied to every spec, under the spec's own map), `base_url` (default: the
    environment, `DOCKER_HOST` or /var/run/docker.sock), `build_network` (the network of every build's `RUN`
    steps, an explicit run option; default: none, unless the spec allows it — the task's `allow_internet` —
    then the daemon's default), `max_context_mb` (largest build context, default 1024), `init` (run the
    daemon's init as PID 1, default True), `forwarder_python` (interpreter for the forwarder, default this
    one), `max_workers` (threads for blocking Docker calls; one is busy per running exec, default 64),
    `runtime` (the OCI runtime the daemon starts containers with: `auto`, the default, is crun where the daemon
    has it, else the daemon's default; or a runtime the daemon has registered, e.g. `runc`, checked before a run
    starts).
    """

    name = "docker"

    def __init__(
        self,
        *,
        image_map: dict[str, str] | None = None,
        base_url: str | None = None,
        build_network: str | None = None,
        max_context_mb: int = DEFAULT_MAX_CONTEXT_BYTES >> 20,
        init: bool = True,
        forwarder_python: str | None = None,
        max_workers: int = 64,
        runtime: str = AUTO_RUNTIME,
        client: Any = None,
    ):
        self.image_map = ImageMap(image_map or {})
        self.base_url = base_url
        self.build_network = build_network
        self.init = init
        self.runtime = runtime or AUTO_RUNTIME
        #: The runtime containers are created with (None: the daemon's default); for `auto`, known at the first.
        self._runtime: str | None = None if self.runtime == AUTO_RUNTIME else self.runtime
        self._runtime_known = self.runtime != AUTO_RUNTIME
        self.forwarder_python = forwarder_python or sys.executable
        self.conn = DockerConnection(base_url, client)
        self.pool = WorkerPool(max_workers, "openforge-docker")
        self.images = ImageBuilder(self.conn, self.pool, self.image_map, build_network, int(max_context_mb) << 20)
        self._live: dict[str, DockerSandbox] = {}
        #: Whether the daemon enforces `storage_mb` / the open-files limit (None: not known yet).
        self.storage_quota: bool | None = None
        self.nofile_limit: bool | None = None
        self._degrade_lock = threading.Lock()

    @property
    def client(self) -> Any:
        return self.conn.client

    @property
    def api(self) -> Any:
        return self.conn.api

    @property
    def builds(self) -> int:
        """How many images this provider actually built (cache misses)."""
        return self.images.builds

    async def close(self) -> None:
        self.pool.shutdown()
        self.conn.close()

    def forget(self, container_id: str) -> None:
        """A destroyed sandbox leaves the provider's live set."""
        self._live.pop(container_id, None)

    # -- images --------------------------------------------------------------------------------------------

    async def build_image(
        self,
        context: Path,
        *,
        image_map: dict[str, str] | None = None,
        allow_network: bool = False,
        timeout_s: float | None = None,
    ) -> ImageBuild:
        """Build the image of a build context (a directory with a `Dockerfile`), or reuse the one built from
        identical content: tag `openforge-task:<sha256[:16]>` (`ImageBuilder.build`)."""
        return await self.images.build(
            context, ImageMap(image_map or {}), allow_network=allow_network, timeout_s=timeout_s
        )

    async def resolve_image(self, spec: SandboxSpec) -> str:
        """The local image a spec runs: built from `dockerfile_dir`, else `image` mapped through the map."""
        return await self.images.resolve(spec)

    async def missing_images(self, images: list[str]) -> list[str]:
        """`images` not on this daemon (nothing is pulled: each must be there, or be built from one that is)."""
        try:
            present = [await self.pool.submit(self.images.image_exists, i) for i in images]
        except docker_errors() as e:
            raise SandboxError(f"cannot list the Docker daemon's images: {short_error(e)}") from e
        return [i for i, ok in zip(images, present) if not ok]

    async def setup_problem(self, images: list[str]) -> str | None:
        """With a `runtime` named: why the daemon cannot start a container with it (not registered, or it fails
        on this host: one container from the first of `images` is started and removed to know), else None.
        `auto` is never a problem: it falls back to the daemon's default."""
        if self.runtime == AUTO_RUNTIME:
            return None
        return await self.pool.submit(self._runtime_problem, images[0] if images else None)

    def _runtime_problem(self, image: str | None) -> str | None:
        try:
            known = sorted((self.conn.api.info().get("Runtimes") or {}).keys())
        except docker_errors() as e:
            return f"cannot ask the Docker daemon which runtimes it has: {short_error(e)}"
        if self.runtime not in known:
            return (
                f"sandbox option runtime={self.runtime!r}: the Docker daemon has no such runtime (it has "
                f"{', '.join(known) or 'none'}); register it (dockerd --add-runtime {self.runtime}=PATH, or "
                '"runtimes" in /etc/docker/daemon.json), or leave the option out (auto: crun where the daemon has '
                "it, else its default)"
            )
        if image is None:
            return None
        spec = SandboxSpec(name=f"openforge-runtime-check-{uuid.uuid4().hex[:12]}")
        try:
            self.remove_container(self._create_container(spec, image, [], runtime=self.runtime))
        except docker_errors() as e:
            hint = ""
            if "hybrid" in str(e):
                hint = (
                    "; this host mounts cgroup v1 and v2 together: move the v2 hierarchy's controllers to v1 "
                    "(scripts/start-docker.sh does it for hugetlb) or run on a cgroup v2 host"
                )
            return f"sandbox option runtime={self.runtime!r}: a container does not start: {short_error(e)}{hint}"
        return None

    # -- create --------------------------------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> DockerSandbox:
        try:
            image = await self.resolve_image(spec)
        except docker_errors() as e:
            raise SandboxError(f"sandbox {spec.name}: {short_error(e)}") from e
        return await self._start(spec, image)

    async def create_grader(self, of: Sandbox) -> DockerSandbox:
        """A new container from the exact image `of`'s container was made from (its id: no tag or map is looked
        up again), without network, proxy bridge or mounts (`grader_spec`)."""
        if not isinstance(of, DockerSandbox):
            raise SandboxError(f"the docker backend cannot make a grader for {of!r}")
        return await self._start(grader_spec(of.spec, image=of.image_id), of.image_id)

    async def _start(self, spec: SandboxSpec, image: str) -> DockerSandbox:
        if spec.proxy_uds is not None and not Path(spec.proxy_uds).exists():
            raise SandboxError(f"sandbox {spec.name}: the proxy socket {spec.proxy_uds} does not exist")
        cid, pid, created, image_id = await self.pool.submit(self._create_blocking, spec, image)
        forwarder = None
        try:
            if spec.proxy_uds is not None:
                forwarder = await start_forwarder(spec, pid, self.forwarder_python)
        except BaseException:
            await self.pool.submit(self.remove_container, cid)
            raise
        sb = DockerSandbox(self, spec, cid, pid, created, forwarder, image_id)
        self._live[cid] = sb
        return sb

    def _create_blocking(self, spec: SandboxSpec, image: str) -> tuple[str, int, float, str]:
        import docker.types

        api = self.conn.api
        self._remove_stale(spec.name)
        mounts = [
            docker.types.Mount(
                target=m.target, source=str(Path(m.source).resolve()), type="bind", read_only=m.read_only
            )
            for m in spec.mounts
        ]
        for m in spec.mounts:
            if not Path(m.source).exists():
                raise SandboxError(f"sandbox {spec.name}: mount source {m.source} does not exist")
        created = time.time()
        cid: str | None = None
        try:
            cid = self._create_container(spec, image, mounts, runtime=self._container_runtime())
            info = api.inspect_container(cid)
            state = info.get("State", {})
            if not state.get("Running"):
                logs = api.logs(cid, tail=20).decode(errors="replace").strip()
                raise SandboxError(
                    f"sandbox {spec.name}: the container stopped right after starting "
                    f"(exit code {state.get('ExitCode')}): {logs or state.get('Error', '')}"
                )
            return cid, int(state["Pid"]), created, str(info.get("Image") or image)
        except SandboxError:
            if cid:
                self.remove_container(cid)
            raise
        except docker_errors() as e:
            if cid:
                self.remove_container(cid)
            raise SandboxError(
                f"sandbox {spec.name}: cannot create the container from {image}: {short_error(e)}"
            ) from e

    def _create_container(self, spec: SandboxSpec, image: str, mounts: list[Any], runtime: str | None) -> str:
        """Create and start the container under `runtime` (None: the daemon's default); where the daemon cannot
        give a disk quota or the open-files limit, say so once and create it without; where the runtime `auto`
        chose cannot start it and the daemon's default can, say so once and keep to the default."""
        import docker.errors

        while True:
            cid = None
            storage = bool(spec.storage_mb) and self.storage_quota is not False
            nofile = self.nofile_limit is not False
            try:
                cid = self._new_container(spec, image, mounts, storage=storage, nofile=nofile, runtime=runtime)
                self.conn.api.start(cid)
                if storage:
                    self.storage_quota = True
                return cid
            except docker.errors.APIError as e:
                if cid:
                    self.remove_container(cid)
                msg = short_error(e)
                if storage and "storage-opt" in msg:
                    self._without(
                        "storage_quota",
                        "the Docker daemon cannot limit a container's disk use (%s): "
                        "[environment] storage_mb is not enforced by this run's sandboxes",
                        msg,
                    )
                elif nofile and "rlimit" in msg:
                    self._without(
                        "nofile_limit",
                        "the Docker daemon cannot give containers an open-files limit of "
                        f"{NOFILE_LIMIT} (%s): they keep the daemon's",
                        msg,
                    )
                elif self.runtime == AUTO_RUNTIME and runtime is not None:
                    # the daemon's default decides: it starts the container (the runtime was the problem), or its
                    # error is raised (the container's own)
                    cid = self._create_container(spec, image, mounts, runtime=None)
                    self._without_runtime(runtime, msg)
                    return cid
                else:
                    raise

    def _container_runtime(self) -> str | None:
        """The runtime the next container is created with: for `auto`, crun where the daemon has it registered
        (asked once), else None (the daemon's default)."""
        with self._degrade_lock:
            if not self._runtime_known:
                try:
                    registered = self.conn.api.info().get("Runtimes") or {}
                except Exception:  # noqa: BLE001 - the daemon's default then; creating the container says what failed
                    registered = {}
                self._runtime = PREFERRED_RUNTIME if PREFERRED_RUNTIME in registered else None
                self._runtime_known = True
            return self._runtime

    def _without_runtime(self, runtime: str, error: str) -> None:
        """`auto`'s runtime could not start a container that the daemon's default could: the default from now on
        (said once per provider)."""
        with self._degrade_lock:
            if self._runtime == runtime:
                log.warning(
                    "%s cannot start containers on this Docker daemon (%s): they run under the daemon's default "
                    "runtime",
                    runtime,
                    error,
                )
            self._runtime = None

    def _without(self, feature: str, message: str, detail: str) -> None:
        with self._degrade_lock:
            if getattr(self, feature) is not False:  # said once per provider (one run)
                log.warning(message, detail)
            setattr(self, feature, False)

    def _new_container(
        self, spec: SandboxSpec, image: str, mounts: list[Any], *, storage: bool, nofile: bool, runtime: str | None
    ) -> str:
        import docker.types

        api = self.conn.api
        mem = f"{spec.memory_mb}m"
        storage_opt = {"size": f"{spec.storage_mb}M"} if storage else None
        ulimits = [docker.types.Ulimit(name="nofile", soft=NOFILE_LIMIT, hard=NOFILE_LIMIT)] if nofile else None
        host_config = api.create_host_config(
            network_mode="none",
            nano_cpus=int(spec.cpus * 1e9),
            mem_limit=mem,
            memswap_limit=mem,
            pids_limit=spec.pids,
            mounts=mounts,
            init=self.init or None,
            auto_remove=False,
            cap_drop=["ALL"],
            cap_add=list(AGENT_CAPABILITIES),
            security_opt=["no-new-privileges"],
            ulimits=ulimits,
            storage_opt=storage_opt,
            runtime=runtime,
        )
        return api.create_container(
            image,
            command=KEEPALIVE[1:],
            entrypoint=KEEPALIVE[:1],
            name=spec.name,
            labels=spec.all_labels(),
            environment=dict(spec.env),
            working_dir=spec.workdir or None,
            host_config=host_config,
            network_disabled=False,
            stop_signal="SIGKILL",
        )["Id"]

    def _remove_stale(self, name: str) -> None:
        import docker.errors

        try:
            info = self.conn.api.inspect_container(name)
        except docker.errors.NotFound:
            return
        labels = (info.get("Config") or {}).get("Labels") or {}
        if labels.get(LABEL_MANAGED) != "1":
            raise SandboxError(
                f"a container named {name} exists and was not created by openforge; "
                "remove it or choose another run name"
            )
        if info["Id"] in self._live:
            raise SandboxError(f"sandbox {name} already exists in this process; names must be unique per episode")
        self.remove_container(info["Id"])

    def remove_container(self, cid: str) -> None:
        import docker.errors

        for attempt in range(3):
            try:
                self.conn.api.remove_container(cid, force=True, v=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as e:
                if "already in progress" in str(e) or attempt < 2:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise SandboxError(f"cannot remove container {cid[:12]}: {short_error(e)}") from e

    # -- listing and cleanup -------------------------------------------------------------------------------

    def _containers(self, run_label: str | None) -> list[dict]:
        labels = [f"{k}={v}" for k, v in run_selector(run_label).items()]
        return self.conn.api.containers(all=True, filters={"label": labels})

    async def list(self, run_label: str | None = None) -> list[str]:
        rows = await self.pool.submit(self._containers, run_label)
        return sorted(r["Names"][0].lstrip("/") for r in rows)

    async def cleanup(self, run_label: str | None) -> int:
        rows = await self.pool.submit(self._containers, run_label)
        ids = {r["Id"] for r in rows}
        for cid in ids:
            sb = self._live.get(cid)
            if sb is not None:
                await sb.destroy()
            else:
                await self.pool.submit(self.remove_container, cid)
        return len(ids)
