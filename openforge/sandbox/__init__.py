"""Sandboxes: where a rollout acts, isolated, reaching nothing but the proxy. This room owns all isolation:
the three backends, the Kubernetes manifests of a run, and the light jail of in-process episodes.

    from openforge.sandbox import get_provider, SandboxSpec, sandbox_name

    provider = get_provider("docker", image_map={"debian:bookworm-slim": "openforge-base:bookworm"})
    sb = await provider.create(SandboxSpec(name=sandbox_name(run, episode), run=run, dockerfile_dir=env_dir,
                                           proxy_uds=proxy_sock, mounts=[Mount(source=bundle, target="/opt/h")]))
    try:
        r = await sb.exec("echo hi", timeout_s=10)
    finally:
        await sb.destroy()

Backends, all behind the same `SandboxProvider` / `Sandbox` interface (`base.py`):

- `docker` (`openforge.sandbox.docker`): the real isolation: one container per rollout, no network but a
  bridge to the proxy's model socket;
- `local` (`openforge.sandbox.local`): bubblewrap + an unprivileged user, for machines without Docker (its
  docstring says what it does not isolate); also the light jail (`local.jail`) for in-process episodes;
- `kubernetes` (`openforge.sandbox.kubernetes`): one pod per rollout through the official client (optional
  extra `openforge[kubernetes]`), and the manifests of a run (`kubernetes.manifests`).

What they share beyond the interface is in `common.py` (kill by exec marker, keep-alive PID 1, label
selectors, worker pool) and `archive.py` (tar copies); image names are mapped by `openforge.tasks.images`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from openforge.core.errors import ConfigurationError

from .base import (
    DEFAULT_OUTPUT_CAP,
    LABEL_MANAGED,
    LABEL_NAME,
    LABEL_RUN,
    ExecResult,
    Mount,
    PathChange,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSetupError,
    SandboxSpec,
    SandboxStatus,
    label_value,
    sandbox_name,
)

__all__ = [
    "DEFAULT_OUTPUT_CAP",
    "LABEL_MANAGED",
    "LABEL_NAME",
    "LABEL_RUN",
    "PROVIDERS",
    "ExecResult",
    "Mount",
    "PathChange",
    "Sandbox",
    "SandboxError",
    "SandboxProvider",
    "SandboxSetupError",
    "SandboxSpec",
    "SandboxStatus",
    "UnknownSandboxError",
    "cleanup_run",
    "docker_available",
    "get_provider",
    "label_value",
    "local_available",
    "sandbox_name",
]

PROVIDERS = ("docker", "local", "kubernetes")


class UnknownSandboxError(ConfigurationError, ValueError):
    """A sandbox backend name that is not one of PROVIDERS."""


def get_provider(name: str, **options: Any) -> SandboxProvider:
    """A sandbox backend by name: "docker" (options: see `DockerProvider`), "local" (see `LocalProvider`) or
    "kubernetes" (see `KubernetesProvider`).
    Creating a provider contacts nothing; the first `create()` does."""
    if name == "docker":
        from .docker import DockerProvider

        return DockerProvider(**options)
    if name == "local":
        from .local import LocalProvider

        return LocalProvider(**options)
    if name in ("kubernetes", "k8s"):
        from .kubernetes import KubernetesProvider

        return KubernetesProvider(**options)
    raise UnknownSandboxError(f"unknown sandbox backend {name!r}; choose one of: {', '.join(PROVIDERS)}")


def cleanup_run(backend: str, run_label: str, **options: Any) -> int:
    """Remove every sandbox of run `run_label` that `backend` still holds (e.g. after a crash), with its other
    objects (Kubernetes: the run's NetworkPolicy); how many sandboxes were removed."""

    async def clean() -> int:
        provider = get_provider(backend, **options)
        try:
            return await provider.cleanup(run_label)
        finally:
            await provider.close()

    return asyncio.run(clean())


def docker_available(base_url: str | None = None) -> tuple[bool, str]:
    """(reachable, reason): whether a Docker daemon answers (and which), or why not."""
    from .docker import docker_available as _available

    return _available(base_url)


def local_available() -> tuple[bool, str]:
    """(usable, reason): whether bubblewrap can create the local sandbox's namespaces here."""
    from .local import bwrap_available

    return bwrap_available()
