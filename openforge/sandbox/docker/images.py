"""Task images for the docker backend: `spec.image` through the image map (never pulled), or
`spec.dockerfile_dir` built with `docker build` (legacy builder, `pull=False`) into
`openforge-task:<sha256 of the build context[:16]>`, where the hash covers every file (path, mode, content) with
the `FROM` lines already rewritten by the image map (`openforge.tasks.images.ImageMap`, applied here, once); an
existing tag is a cache hit (no rebuild). Base images a Dockerfile needs must exist locally (checked before
building, with a hint to map them).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import stat as statmod
import tempfile
import time
from pathlib import Path

from openforge.tasks.images import ImageMap

from ..base import LABEL_MANAGED, SandboxError, SandboxSpec
from ..common import WorkerPool
from .client import DockerConnection, docker_errors, short_error

__all__ = ["BUILD_SALT", "TASK_IMAGE_REPO", "ImageBuild", "ImageBuilder", "context_hash"]

TASK_IMAGE_REPO = "openforge-task"
BUILD_SALT = b"openforge-build-v1\x00"


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



class ImageBuilder:
    """Resolves and builds the images of one provider (`image_map`: the provider's map, under each spec's own;
    `build_network`: the network of `RUN` steps, `"none"` to build offline). `builds` counts cache misses."""

    def __init__(self, conn: DockerConnection, pool: WorkerPool, image_map: ImageMap, build_network: str | None):
        self.conn = conn
        self.pool = pool
        self.image_map = image_map
        self.build_network = build_network
        self.builds = 0
        self._locks: dict[str, asyncio.Lock] = {}

    def image_exists(self, ref: str) -> bool:
        import docker.errors

        try:
            self.conn.api.inspect_image(ref)
            return True
        except docker.errors.NotFound:  # ImageNotFound too
            return False

    async def build(self, context: Path, image_map: ImageMap) -> ImageBuild:
        """Build the image of a build context (a directory with a `Dockerfile`), or reuse the one built from
        identical content; `image_map` (over the provider's) rewrites its FROM lines."""
        context = Path(context)
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
                        "scripts/build-base-image.sh) or load it with `docker load`")
            await self.pool.submit(self._build_blocking, context, text, tag, digest)
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
                for ev in self.conn.api.build(path=str(ctx), tag=tag, rm=True, forcerm=True, pull=False, decode=True,
                                              labels={LABEL_MANAGED: "1", "openforge.context-hash": digest},
                                              network_mode=self.build_network):
                    if "stream" in ev:
                        log.extend(ev["stream"].splitlines())
                    if "error" in ev:
                        error = ev.get("error") or str(ev.get("errorDetail"))
            except docker_errors() as e:
                error = short_error(e)
            if error:
                tail = "\n".join(line for line in log[-20:] if line.strip())
                raise SandboxError(f"building the image of {context} failed: {error.strip()}\n{tail}")

    async def resolve(self, spec: SandboxSpec) -> str:
        """The local image a spec runs: built from `dockerfile_dir`, else `image` mapped through the map."""
        spec_map = ImageMap(spec.image_map)
        if spec.dockerfile_dir is not None:
            return (await self.build(spec.dockerfile_dir, spec_map)).tag
        if not spec.image:
            raise SandboxError(f"sandbox {spec.name}: the spec names neither an image nor a dockerfile_dir")
        ref = self.image_map.merged(spec_map).map_image(spec.image)
        if not await self.pool.submit(self.image_exists, ref):
            hint = " (mapped from " + spec.image + ")" if ref != spec.image else ""
            raise SandboxError(
                f"image {ref!r}{hint} is not on this machine and will not be pulled; map it to a local image "
                f"(--image-map {spec.image}=openforge-base:bookworm) or load it with `docker load`")
        return ref
