"""Docker sandboxes: one container per rollout, on a real daemon, through the `docker` SDK.

- `provider.py`: `DockerProvider` (create, list, cleanup; the container's limits and keep-alive PID 1);
- `sandbox.py`: `DockerSandbox` (files through the archive API, status with OOM kills, destroy);
- `execs.py`: commands through the exec API, killed by marker on timeout;
- `images.py`: task images: mapped (`ImageMap`, never pulled) or built from a Dockerfile, cached by content hash;
- `bridge.py`: the proxy forwarder in the container's network namespace;
- `client.py`: the SDK connection, its errors, `docker_available`.
"""

from .client import docker_available
from .images import ImageBuild, context_hash
from .provider import DockerProvider
from .sandbox import DockerSandbox

__all__ = ["DockerProvider", "DockerSandbox", "ImageBuild", "context_hash", "docker_available"]
