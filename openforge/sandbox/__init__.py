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
  docstring says what it does not isolate); it builds no image, so `Sandbox.setup_environment` replays the
  task's Dockerfile there (`local.replay`);
- `kubernetes` (`openforge.sandbox.kubernetes`): one pod per rollout through the official client (optional
  extra `openforge-rl[kubernetes]`), and the manifests of a run (`kubernetes.manifests`).

A fresh sandbox reaches the task's initial state with `await sb.setup_environment(task)`, whatever the
backend; `provider.spec_user(...)` says which `SandboxSpec.user` runs the agent as root or unprivileged there.

The light jail of in-process episodes (`openforge.rollout.family`: one shell command at a time in a host work
directory, far cheaper than a sandbox) is used through `prepare_workdir` and `run_jailed` (a `JailResult`);
`jail_available()` says whether it can run here.

What they share beyond the interface is in `common.py` (kill by exec marker, keep-alive PID 1, label
selectors, worker pool) and `archive.py` (tar copies); image names are mapped by `openforge.tasks.images`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from openforge.core.errors import ConfigurationError

from .base import (
    AGENT_USER,
    DEFAULT_OUTPUT_CAP,
    LABEL_MANAGED,
    LABEL_NAME,
    LABEL_RUN,
    ExecResult,
    Mount,
    PathChange,
    PathKind,
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxSetupError,
    SandboxSpec,
    SandboxStatus,
    label_value,
    sandbox_name,
)
from .local.jail import JailError, JailResult, jail_available, prepare_workdir, run_jailed
from .state import StateCopy, StateTooLargeError, state_roots

__all__ = [
    "AGENT_USER",
    "DEFAULT_OUTPUT_CAP",
    "LABEL_MANAGED",
    "LABEL_NAME",
    "LABEL_RUN",
    "PROVIDERS",
    "ExecResult",
    "JailError",
    "JailResult",
    "Mount",
    "PathChange",
    "PathKind",
    "Sandbox",
    "SandboxError",
    "SandboxProvider",
    "SandboxSetupError",
    "SandboxSpec",
    "SandboxStatus",
    "StateCopy",
    "StateTooLargeError",
    "UnknownSandboxError",
    "cleanup_run",
    "docker_available",
    "get_provider",
    "jail_available",
    "label_value",
    "local_available",
    "prepare_workdir",
    "run_jailed",
    "sandbox_name",
    "state_roots",
]

PROVIDERS = ("docker", "local", "kubernetes")


class UnknownSandboxError(ConfigurationError, ValueError):
    """A sandbox backend name that is not one of PROVIDERS."""


def get_provider(name: str, **options: object) -> SandboxProvider:
    """A sandbox backend by name: "docker" (options: see `DockerProvider`), "local" (see `LocalProvider`) or
    "kubernetes" (see `KubernetesProvider`).
    Creating a provider contacts nothing; the first `create()` does."""
    return _provider_class(name)(**options)


def _provider_class(name: str) -> Callable[..., SandboxProvider]:
    """The backend's class (imported only when asked for: each needs its own client library); its keyword
    options differ per backend, and its constructor checks them."""
    if name == "docker":
        from .docker import DockerProvider

        return DockerProvider
    if name == "local":
        from .local import LocalProvider

        return LocalProvider
    if name in ("kubernetes", "k8s"):
        from .kubernetes import KubernetesProvider

        return KubernetesProvider
    raise UnknownSandboxError(f"unknown sandbox backend {name!r}; choose one of: {', '.join(PROVIDERS)}")


def cleanup_run(backend: str, run_label: str, **options: object) -> int:
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
