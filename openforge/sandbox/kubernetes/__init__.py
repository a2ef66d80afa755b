"""Kubernetes sandboxes: one bare Pod per rollout, through the official `kubernetes` client (optional extra
`openforge-rl[kubernetes]`), and the manifests of a run's other objects.

- `provider.py`: `KubernetesProvider` (pods created, watched until they run, listed, cleaned up; the run's
  NetworkPolicy);
- `sandbox.py`: `KubernetesSandbox` (exec, tar-through-exec copies, status, destroy);
- `execs.py`: the exec script (environment, marker, workdir, user, stdin) and the websocket pump;
- `pods.py`: a pod's state judged from its JSON (`pod_problem`, `StartWait`);
- `client.py`: the API client and the pod calls, with their errors;
- `manifests.py`: every Kubernetes object as a plain dict (`openforge k8s manifests` prints them);
- `ratelimit.py`: the token bucket of pod creations.

Importing this package does not import the `kubernetes` client; the first API call does.
"""

from .execs import exec_script
from .pods import pod_problem
from .provider import KubernetesProvider
from .sandbox import KubernetesSandbox

__all__ = ["KubernetesProvider", "KubernetesSandbox", "exec_script", "pod_problem"]
