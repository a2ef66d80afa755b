"""The Docker SDK behind the docker backend: one lazy connection per provider, its errors, and whether a
daemon answers at all."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from ..base import PathKind, SandboxError, SandboxSetupError

__all__ = [
    "DockerConnection",
    "docker_available",
    "docker_errors",
    "infra_error",
    "short_error",
    "stat_header_kind",
]

# Go's os.FileMode type bits, in which the archive API's path-stat header gives a path's mode.
_GO_DIR, _GO_SYMLINK = 1 << 31, 1 << 27
_GO_TYPE = _GO_DIR | _GO_SYMLINK | 1 << 26 | 1 << 25 | 1 << 24 | 1 << 21 | 1 << 19  # device, pipe, socket, ...


def docker_errors() -> tuple[type[BaseException], ...]:
    """What the SDK raises when the daemon or a request fails (imported late: the SDK is optional)."""
    import docker.errors
    import requests

    return (docker.errors.DockerException, requests.exceptions.RequestException)


def short_error(e: BaseException) -> str:
    """The daemon's explanation of an error, one line."""
    text = getattr(e, "explanation", None) or str(e)
    return str(text).strip().splitlines()[0][:500] if str(text).strip() else type(e).__name__


def infra_error(what: str, e: BaseException) -> SandboxError:
    return SandboxError(f"{what}: {short_error(e)}")


def stat_header_kind(header: str) -> PathKind:
    """What a path is, from the archive API's `X-Docker-Container-Path-Stat` header (base64 of JSON whose
    `mode` is a Go FileMode); SandboxError when the header says nothing readable."""
    try:
        mode = int(json.loads(base64.b64decode(header))["mode"])
    except (ValueError, KeyError, TypeError) as e:
        raise SandboxError(f"the daemon's path stat {header[:80]!r} is not readable: {e}") from None
    if mode & _GO_SYMLINK:
        return "link"
    if mode & _GO_DIR:
        return "dir"
    return "other" if mode & _GO_TYPE else "file"


class DockerConnection:
    """A Docker client made on first use (`base_url`, else `DOCKER_HOST` or /var/run/docker.sock), pinged once."""

    def __init__(self, base_url: str | None = None, client: Any = None):
        self.base_url = base_url
        self._client = client
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    @property
    def api(self) -> Any:
        """The low-level API client (exec streams, archives, builds)."""
        return self.client.api

    def _connect(self) -> Any:
        try:
            import docker
        except ImportError as e:  # pragma: no cover
            raise SandboxSetupError("the docker sandbox needs the `docker` package: pip install docker") from e
        try:
            if self.base_url:
                client = docker.DockerClient(base_url=self.base_url, version="auto", max_pool_size=64)
            else:
                client = docker.from_env(max_pool_size=64)
            client.ping()
        except docker_errors() as e:
            raise SandboxSetupError(
                f"cannot reach the Docker daemon ({short_error(e)}); start it with scripts/start-docker.sh"
            ) from e
        return client

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001, S110 - closing anyway
                pass


def docker_available(base_url: str | None = None) -> tuple[bool, str]:
    """(True, 'server <version> ...') when a Docker daemon answers, else (False, why)."""
    try:
        import docker
    except ImportError:
        return False, "the `docker` Python package is not installed (pip install docker)"
    try:
        client = docker.DockerClient(base_url=base_url, version="auto") if base_url else docker.from_env()
    except Exception as e:
        return False, f"Docker daemon not reachable: {short_error(e)} (start it with scripts/start-docker.sh)"
    try:
        v = client.version()
        return True, f"Docker server {v.get('Version')} (API {v.get('ApiVersion')})"
    except Exception as e:
        return False, f"Docker daemon not reachable: {short_error(e)}"
    finally:
        try:
            client.close()
        except Exception:
            pass
