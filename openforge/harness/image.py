"""The harness bundle image, for Kubernetes: the bundle directory inside an image built FROM the local base
image (`openforge-base:bookworm`, so it has `cp` for the init container that copies the bundle into each
sandbox pod; Docker Hub is never contacted: `pull=False`). `openforge harness image` builds it with the local
Docker daemon and, with `--push REGISTRY`, tags and pushes it where the cluster can pull it.

The tag is derived from the bundle's manifest (pinned versions + platform), so the same bundle always gives
the same tag and a new pin gives a new one.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from openforge.harness.bundle import MANIFEST, BundleError, BundleSetupError

if TYPE_CHECKING:
    from docker import DockerClient

__all__ = [
    "DEFAULT_BASE",
    "IMAGE_REPO",
    "HarnessImage",
    "build_context",
    "build_harness_image",
    "dockerfile",
    "image_tag",
]

DEFAULT_BASE = "openforge-base:bookworm"
IMAGE_REPO = "openforge-harnesses"


@dataclass
class HarnessImage:
    tag: str  # the local tag
    pushed: list[str] = field(default_factory=list)  # registry references pushed


def image_tag(bundle: Path) -> str:
    """`openforge-harnesses:<sha256 of manifest.json, 12 hex>`."""
    manifest = Path(bundle) / MANIFEST
    if not manifest.is_file():
        raise BundleSetupError(
            f"{bundle} holds no {MANIFEST}: install the harnesses first (`openforge harness install`)"
        )
    return f"{IMAGE_REPO}:{hashlib.sha256(manifest.read_bytes()).hexdigest()[:12]}"


def dockerfile(base: str = DEFAULT_BASE) -> str:
    from openforge.sandbox.kubernetes.manifests import HARNESS_IMAGE_DIR

    return f"FROM {base}\nCOPY bundle {HARNESS_IMAGE_DIR}\n"


def build_context(bundle: Path, base: str = DEFAULT_BASE) -> IO[bytes]:
    """A tar build context: the Dockerfile and the bundle under `bundle/` (symlinks kept as links)."""
    tmp = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - returned open, the caller closes it
    with tarfile.open(fileobj=tmp, mode="w", format=tarfile.PAX_FORMAT) as tf:
        data = dockerfile(base).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        tf.add(str(bundle), arcname="bundle", recursive=True)
    tmp.seek(0)
    return tmp


def build_harness_image(
    bundle: Path,
    *,
    base: str = DEFAULT_BASE,
    tag: str | None = None,
    push: str | None = None,
    client: DockerClient | None = None,
) -> HarnessImage:
    """Build the image (docker SDK, local daemon, no pull) and optionally push it to registry `push`
    (`registry.example.com/team`): the pushed reference is `<push>/openforge-harnesses:<tag>`."""
    bundle = Path(bundle)
    tag = tag or image_tag(bundle)
    if client is None:
        import docker

        try:
            client = docker.from_env()
            client.ping()
        except Exception as e:
            raise BundleSetupError(f"cannot reach the Docker daemon ({e}); start it (scripts/start-docker.sh)") from e
    api = client.api
    log: list[str] = []
    with build_context(bundle, base) as ctx:
        for ev in api.build(fileobj=ctx, custom_context=True, tag=tag, pull=False, rm=True, decode=True):
            log.extend(ev.get("stream", "").splitlines())
            if "error" in ev:
                tail = "\n".join(line for line in log[-15:] if line.strip())
                hint = (
                    f" (is the base image {base} built? scripts/build-base-image.sh)" if "pull" in ev["error"] else ""
                )
                raise BundleError(f"building {tag} failed: {ev['error'].strip()}{hint}\n{tail}")
    result = HarnessImage(tag)
    if push:
        repo, _, version = tag.rpartition(":")
        remote = f"{push.rstrip('/')}/{repo}"
        api.tag(tag, remote, version)
        for ev in api.push(remote, tag=version, stream=True, decode=True):
            if "error" in ev:
                raise BundleError(f"pushing {remote}:{version} failed: {ev['error'].strip()}")
        result.pushed.append(f"{remote}:{version}")
    return result
