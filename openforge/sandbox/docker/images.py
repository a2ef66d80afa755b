"""Task images for the docker backend: `spec.image` through the image map (never pulled), or
`spec.dockerfile_dir` built with `docker build` (legacy builder, `pull=False`) into
`openforge-task:<sha256 of the build context[:16]>`, where the hash covers every file (path, mode, content) with
the `FROM` lines already rewritten by the image map (`openforge.tasks.images.ImageMap`, applied here, once); an
existing tag is a cache hit (no rebuild). Base images a Dockerfile needs must exist locally (checked before
building, with a hint to map them).

A build context is a third party's directory (docs/design.md, invariant 7): it is checked first
(`openforge.tasks.context.check_build_context`: no link out of it, no device or FIFO, at most
`max_context_bytes`), copied without following links, and built within `spec.build_timeout_s`, with `RUN` steps
offline (`network_mode="none"`) unless the spec allows the network (the task's `allow_internet`) or the
provider was given a `build_network` explicitly.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from openforge.tasks.context import DEFAULT_MAX_CONTEXT_BYTES, BuildContextError, check_build_context
from openforge.tasks.digest import tree_digest
from openforge.tasks.images import ImageMap

from ..base import LABEL_MANAGED, SandboxError, SandboxSpec
from ..common import WorkerPool
from .client import DockerConnection, short_error

__all__ = ["BUILD_SALT", "TASK_IMAGE_REPO", "ImageBuild", "ImageBuilder", "context_hash"]

TASK_IMAGE_REPO = "openforge-task"
BUILD_SALT = b"openforge-build-v1\x00"


def context_hash(context: Path, dockerfile_text: str) -> str:
    """sha256 over the build context: every path (sorted), its type, permission bits and content (symlinks:
    their target), with the Dockerfile replaced by `dockerfile_text` (the rewritten one)."""
    return tree_digest(Path(context), BUILD_SALT, {"Dockerfile": dockerfile_text.encode()})


def _hang_up(events: Any) -> None:
    """Shut the socket of a running `api.build` stream down (from another thread: that wakes its reader)."""
    try:
        response = events.gi_frame.f_locals.get("response") if events.gi_frame is not None else None
        raw = getattr(response, "raw", None)
        conn = getattr(raw, "connection", None) or getattr(raw, "_connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass


class ImageBuild:
    """The result of `DockerProvider.build_image`."""

    def __init__(self, tag: str, digest: str, cached: bool, seconds: float):
        self.tag, self.digest, self.cached, self.seconds = tag, digest, cached, seconds

    def __repr__(self) -> str:
        return f"ImageBuild(tag={self.tag!r}, cached={self.cached}, seconds={self.seconds:.2f})"


class ImageBuilder:
    """Resolves and builds the images of one provider (`image_map`: the provider's map, under each spec's own;
    `build_network`: when given, the network of every build's `RUN` steps; None: offline unless a spec allows
    the network, then the daemon's default). `builds` counts cache misses."""

    def __init__(
        self,
        conn: DockerConnection,
        pool: WorkerPool,
        image_map: ImageMap,
        build_network: str | None,
        max_context_bytes: int = DEFAULT_MAX_CONTEXT_BYTES,
    ):
        self.conn = conn
        self.pool = pool
        self.image_map = image_map
        self.build_network = build_network
        self.max_context_bytes = max_context_bytes
        self.builds = 0
        self._locks: dict[str, asyncio.Lock] = {}

    def image_exists(self, ref: str) -> bool:
        import docker.errors

        try:
            self.conn.api.inspect_image(ref)
            return True
        except docker.errors.NotFound:  # ImageNotFound too
            return False

    def network_for(self, allow_network: bool) -> str:
        """The network `RUN` steps get: the provider's explicit choice, else none unless allowed."""
        if self.build_network is not None:
            return self.build_network
        return "default" if allow_network else "none"

    async def build(
        self, context: Path, image_map: ImageMap, *, allow_network: bool = False, timeout_s: float | None = None
    ) -> ImageBuild:
        """Build the image of a build context (a directory with a `Dockerfile`), or reuse the one built from
        identical content; `image_map` (over the provider's) rewrites its FROM lines. SandboxError when the
        context is unsafe (naming the file), the build fails or runs past `timeout_s`."""
        context = Path(context)
        try:
            await self.pool.submit(lambda: check_build_context(context, max_bytes=self.max_context_bytes))
        except BuildContextError as e:
            raise SandboxError(f"cannot build {context}: {e}") from None
        dockerfile = context / "Dockerfile"
        if not dockerfile.is_file():
            raise SandboxError(f"no Dockerfile in {context}")
        text, bases = self.image_map.merged(image_map).rewrite_dockerfile(dockerfile.read_text())
        digest = await self.pool.submit(context_hash, context, text)
        tag = f"{TASK_IMAGE_REPO}:{digest[:16]}"
        async with self._locks.setdefault(tag, asyncio.Lock()):
            start = time.monotonic()
            if await self.pool.submit(self.image_exists, tag):
                return ImageBuild(tag, digest, True, time.monotonic() - start)
            for base in bases:
                if not await self.pool.submit(self.image_exists, base):
                    raise SandboxError(
                        f"{context}/Dockerfile needs base image {base!r}, which is not on this machine and will not "
                        f"be pulled; map it to a local image (--image-map {base}=openforge-base:bookworm, built by "
                        "scripts/build-base-image.sh) or load it with `docker load`"
                    )
            await self.pool.submit(
                self._build_blocking, context, text, tag, digest, self.network_for(allow_network), timeout_s
            )
            self.builds += 1
            return ImageBuild(tag, digest, False, time.monotonic() - start)

    def _build_blocking(
        self, context: Path, dockerfile_text: str, tag: str, digest: str, network: str, timeout_s: float | None
    ) -> None:
        with tempfile.TemporaryDirectory(prefix="openforge-build-") as tmp:
            ctx = Path(tmp) / "ctx"
            shutil.copytree(context, ctx, symlinks=True)  # links stay links (checked: none leaves the context)
            (ctx / "Dockerfile").unlink()  # never write through a link the task put there
            (ctx / "Dockerfile").write_text(dockerfile_text)
            log: list[str] = []
            error: str | None = None
            late = f"the build ran past its {timeout_s or 0:g}s limit ([environment] build_timeout_sec)"
            events = self.conn.api.build(
                path=str(ctx),
                tag=tag,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
                labels={LABEL_MANAGED: "1", "openforge.context-hash": digest},
                network_mode=network,
                timeout=timeout_s + 30 if timeout_s else None,
            )
            # at the deadline, cut the connection: the daemon cancels a build whose client went away
            watchdog = threading.Timer(timeout_s, _hang_up, (events,)) if timeout_s else None
            start = time.monotonic()
            if watchdog is not None:
                watchdog.daemon = True
                watchdog.start()
            try:
                for ev in events:
                    if "stream" in ev:
                        log.extend(ev["stream"].splitlines())
                    if "error" in ev:
                        error = ev.get("error") or str(ev.get("errorDetail"))
                    if timeout_s is not None and time.monotonic() - start > timeout_s:
                        error = late
                        break
            except Exception as e:  # noqa: BLE001 - the SDK, requests and urllib3 each raise their own
                error = late if timeout_s is not None and time.monotonic() - start >= timeout_s else short_error(e)
            finally:
                if watchdog is not None:
                    watchdog.cancel()
                events.close()
            if error:
                tail = "\n".join(line for line in log[-20:] if line.strip())
                raise SandboxError(f"building the image of {context} failed: {error.strip()}\n{tail}")

    async def resolve(self, spec: SandboxSpec) -> str:
        """The local image a spec runs: built from `dockerfile_dir`, else `image` mapped through the map."""
        spec_map = ImageMap(spec.image_map)
        if spec.dockerfile_dir is not None:
            return (
                await self.build(
                    spec.dockerfile_dir, spec_map, allow_network=spec.build_network, timeout_s=spec.build_timeout_s
                )
            ).tag
        if not spec.image:
            raise SandboxError(f"sandbox {spec.name}: the spec names neither an image nor a dockerfile_dir")
        ref = self.image_map.merged(spec_map).map_image(spec.image)
        if not await self.pool.submit(self.image_exists, ref):
            hint = " (mapped from " + spec.image + ")" if ref != spec.image else ""
            raise SandboxError(
                f"image {ref!r}{hint} is not on this machine and will not be pulled; map it to a local image "
                f"(--image-map {spec.image}=openforge-base:bookworm) or load it with `docker load`"
            )
        return ref
