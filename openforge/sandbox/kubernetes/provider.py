"""The kubernetes backend's provider: one bare Pod per rollout, through the official `kubernetes` client
(`pip install 'openforge-rl[kubernetes]'`).

Why a Pod and not a Job: a sandbox is a long-lived container that the orchestrator execs into, under a name
it chose (`sandbox_name`). A Job would add a controller between us and the pod (random pod-name suffixes, a
second object to delete, a controller that may re-create a pod we are about to exec into); `restartPolicy:
Never` plus `activeDeadlineSeconds` gives what matters: a dead sandbox stays dead (the episode is a
`sandbox_error` and is retried in a new pod) and a forgotten one is killed by the kubelet. Bare pods have no
`ttlSecondsAfterFinished`, so the API objects of finished pods are removed by `destroy()` and by
`provider.cleanup(run)` (every pod labelled `openforge.run=<run>`), and carry an `openforge.io/expires-at`
annotation for any external reaper.

The pod (`manifests.sandbox_pod`): the task's image (the image map applied; a Dockerfile task needs a pre-built
image, nothing is built in the cluster), CPU/memory (and `storage_mb` as `ephemeral-storage`) requests = limits
from the spec (the pids limit is the node's `podPidsLimit`, not settable per pod), the hardened security context
of `manifests.security_context`, `automountServiceAccountToken: false`, the proxy's URL in
`OPENFORGE_PROXY_URL` (by default the proxy Service's cluster IP, read once through the API: pods cannot reach
the orchestrator's Unix socket, so `proxy_uds` only says "bridge the proxy" here, and they get no DNS), and the
harness bundle copied by an init container from the harness bundle image into an emptyDir mounted read-only
where the orchestrator mounts the bundle. The run's NetworkPolicy (created once per run) allows egress only to
the proxy's model port; a spec without a run label is refused (the policy selects pods by it), and
`network_policy=False` — for clusters that isolate pods another way — is logged loudly once.

For grading (`Sandbox.stop_agent_processes`, `changed_paths`), everything happens in band, through exec: the
pod's file system is listed when it starts and again at grading (`openforge.sandbox.filesnap`), and processes
are stopped by `common.STOP_SCRIPT`. Both run the pod's own `find` and `sh`, which a root agent can replace:
weaker than Docker's out-of-band checks (`track_changes=False` skips the listing).

A pod that stays unschedulable (PodScheduled=False, reason Unschedulable) longer than
`unschedulable_timeout_s`, or an image that cannot be pulled → SandboxError (the orchestrator's
`sandbox_error`, retried). Readiness is followed with a watch on the pod, never by polling. Blocking client
calls run on this provider's thread pool, never on the event loop; pod creations are rate-limited by a token
bucket (`creation_rate` per second, `creation_burst` at once).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from openforge.tasks.images import ImageMap

from ..base import LABEL_MANAGED, Sandbox, SandboxError, SandboxProvider, SandboxSpec, grader_spec
from ..common import WorkerPool, run_selector
from .client import KubeClient
from .manifests import (
    EXPIRES_ANNOTATION,
    MODEL_PORT,
    PROXY_NAME,
    RUN_ANNOTATION,
    grader_network_policy,
    grader_policy_name,
    network_policy_name,
    run_network_policy,
    sandbox_pod,
)
from .pods import StartWait
from .ratelimit import TokenBucket
from .sandbox import KubernetesSandbox

__all__ = ["KubernetesProvider"]

log = logging.getLogger(__name__)


class KubernetesProvider(SandboxProvider):
    """Kubernetes backend: `get_provider("kubernetes", namespace=..., harness_image=..., ...)`.

    Options:
    - `namespace` (default `openforge`): where pods and the run's NetworkPolicy live; create it and the
      orchestrator's RBAC with `openforge k8s manifests`.
    - `proxy_url`: the model API as pods reach it (default: `http://<cluster IP>:8100` of the Service
      `openforge-proxy` that `openforge k8s manifests` makes, read through the API). A host name needs
      `allow_dns=True`.
    - `harness_image`: the harness bundle image (`openforge harness image --push REGISTRY`); needed by the
      real harnesses (claude-code, codex, openclaw), not by `react`.
    - `image_map`: as in the docker backend, applied to every spec's image (under the spec's own map).
    - `creation_rate` (pods per second, default 5) and `creation_burst` (default 10): the creation token bucket.
    - `unschedulable_timeout_s` (default 120): how long a pod may stay unschedulable before the sandbox fails;
      `start_timeout_s` (default 600): how long it may take to start at all (image pulls included).
    - `default_deadline_s` (default 4 h): `activeDeadlineSeconds` when the spec has no `timeout_s`.
    - `network_policy` (default True): create the run's NetworkPolicy (False is logged loudly: the pods can then
      reach whatever the cluster lets them); `allow_dns` (default False): let them reach kube-dns too.
    - `track_changes` (default True): list the pod's files when it starts, for grading's tamper check.
    - `pull_policy` (default IfNotPresent), `node_selector`, `tolerations`: passed to the pod.
    - `configuration` (a `kubernetes.client.Configuration`), else `kubeconfig` / `context`, else the
      in-cluster service account, else `~/.kube/config`.
    - `max_workers` (threads for blocking API calls; one is busy per running exec, default 64).
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        namespace: str = "openforge",
        proxy_url: str | None = None,
        harness_image: str | None = None,
        image_map: dict[str, str] | None = None,
        creation_rate: float = 5.0,
        creation_burst: int = 10,
        unschedulable_timeout_s: float = 120.0,
        start_timeout_s: float = 600.0,
        default_deadline_s: float = 4 * 3600,
        network_policy: bool = True,
        allow_dns: bool = False,
        track_changes: bool = True,
        pull_policy: str = "IfNotPresent",
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        configuration: Any = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        max_workers: int = 64,
    ):
        self.namespace = namespace
        if proxy_url is not None and not allow_dns and not _host_is_ip(proxy_url):
            raise ValueError(
                f"proxy_url {proxy_url!r} names a host, but sandboxes get no DNS: give the proxy's "
                "cluster IP (or leave proxy_url out: the Service's is read through the API), or set "
                "allow_dns=True"
            )
        self.proxy_url = proxy_url
        self.harness_image = harness_image
        self.image_map = ImageMap(image_map or {})
        self.bucket = TokenBucket(creation_rate, creation_burst)
        self.unschedulable_timeout_s = float(unschedulable_timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.default_deadline_s = float(default_deadline_s)
        self.network_policy = network_policy
        self.allow_dns = allow_dns
        self.track_changes = track_changes
        self._warned_no_policy = False
        self.pull_policy = pull_policy
        self.node_selector = dict(node_selector or {})
        self.tolerations = list(tolerations or [])
        self.kube = KubeClient(namespace, configuration=configuration, kubeconfig=kubeconfig, context=context)
        self.pool = WorkerPool(max_workers, "openforge-k8s")
        self._live: dict[str, KubernetesSandbox] = {}
        self._policies: set[str] = set()

    async def close(self) -> None:
        self.pool.shutdown()
        self.kube.close()

    def forget(self, name: str) -> None:
        """A destroyed sandbox leaves the provider's live set."""
        self._live.pop(name, None)

    # -- images and mounts ---------------------------------------------------------------------------------

    def resolve_image(self, spec: SandboxSpec) -> str:
        """The image a pod runs: `spec.image` through the image map. Dockerfile tasks need a pre-built image."""
        if spec.dockerfile_dir is not None:
            raise SandboxError(
                f"sandbox {spec.name}: the task builds its image from {spec.dockerfile_dir}/Dockerfile, and the "
                "kubernetes backend builds nothing in the cluster. Build and push the image "
                "(docker build -t REGISTRY/NAME:TAG . && docker push ...), then name it in the task's task.toml "
                '([environment] docker_image = "REGISTRY/NAME:TAG") or map the task\'s image to it with '
                "--image-map / the rollout's image_map"
            )
        if not spec.image:
            raise SandboxError(f"sandbox {spec.name}: the spec names no image")
        return self.image_map.merged(ImageMap(spec.image_map)).map_image(spec.image)

    def _harness_target(self, spec: SandboxSpec) -> str | None:
        """Where the harness bundle goes (the target of the spec's bundle mount), or None. Host paths cannot
        be bind-mounted into a pod: the bundle comes from `harness_image`, anything else is an error."""
        target = None
        for m in spec.mounts:
            if (Path(m.source) / "manifest.json").is_file():
                if self.harness_image is None:
                    raise SandboxError(
                        f"sandbox {spec.name}: the harness bundle ({m.source}) cannot be bind-mounted into a pod; "
                        "build its image with `openforge harness image --push REGISTRY` and give the sandbox "
                        "option harness_image=REGISTRY/openforge-harnesses:TAG"
                    )
                target = m.target
            else:
                raise SandboxError(
                    f"sandbox {spec.name}: mount {m.source} -> {m.target}: kubernetes pods cannot bind-mount "
                    "host paths; put the files in the task's image or copy them in with copy_in"
                )
        return target

    def pod_manifest(
        self, spec: SandboxSpec, image: str, harness_target: str | None, proxy_url: str | None = None
    ) -> dict[str, Any]:
        deadline = math.ceil(spec.timeout_s if spec.timeout_s is not None else self.default_deadline_s)
        expires = datetime.now(UTC) + timedelta(seconds=deadline)
        env = dict(spec.env)
        if self._wants_proxy(spec):
            env["OPENFORGE_PROXY_URL"] = proxy_url or self.proxy_url or ""
        annotations = {EXPIRES_ANNOTATION: expires.strftime("%Y-%m-%dT%H:%M:%SZ")}
        if spec.run is not None:
            annotations[RUN_ANNOTATION] = spec.run
        return sandbox_pod(
            name=spec.name,
            namespace=self.namespace,
            image=image,
            labels=spec.all_labels(),
            cpus=spec.cpus,
            memory_mb=spec.memory_mb,
            env=env,
            workdir=spec.workdir,
            active_deadline_s=deadline,
            annotations=annotations,
            harness_image=self.harness_image if harness_target else None,
            harness_target=harness_target,
            pull_policy=self.pull_policy,
            node_selector=self.node_selector,
            tolerations=self.tolerations,
            storage_mb=spec.storage_mb,
        )

    def _proxy_url_blocking(self) -> str:
        """The model API as pods reach it: `proxy_url`, else the proxy Service's cluster IP (read once)."""
        from kubernetes.client.rest import ApiException

        if self.proxy_url is None:
            try:
                resp = self.kube.core.read_namespaced_service(PROXY_NAME, self.namespace, _preload_content=False)
            except ApiException as e:
                raise self.kube.api_error(
                    f"cannot read the proxy's Service {PROXY_NAME} (pods reach the proxy by its cluster IP; "
                    "apply `openforge k8s manifests`, or give the sandbox option proxy_url=http://IP:PORT)",
                    e,
                ) from e
            ip = (json.loads(resp.data).get("spec") or {}).get("clusterIP")
            if not ip or ip == "None":
                raise SandboxError(f"the Service {PROXY_NAME} has no cluster IP; give proxy_url=http://IP:PORT")
            self.proxy_url = f"http://{ip}:{MODEL_PORT}"
        return self.proxy_url

    @staticmethod
    def _wants_proxy(spec: SandboxSpec) -> bool:
        return spec.proxy_uds is not None or spec.proxy_tcp is not None

    # -- create --------------------------------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> KubernetesSandbox:
        return await self._create(spec, baseline=self.track_changes)

    async def create_grader(self, of: Sandbox) -> KubernetesSandbox:
        """A new pod of the task's image (`grader_spec`: no proxy URL, no harness bundle), which the run's grader
        NetworkPolicy cuts off every network; its files are not listed (nothing judges its changes)."""
        return await self._create(grader_spec(of.spec), baseline=False, grader=True)

    async def _create(self, spec: SandboxSpec, *, baseline: bool, grader: bool = False) -> KubernetesSandbox:
        image = self.resolve_image(spec)
        self._check_isolation(spec)
        proxy_url = await self.pool.submit(self._proxy_url_blocking) if self._wants_proxy(spec) else None
        body = self.pod_manifest(spec, image, self._harness_target(spec), proxy_url)
        if grader:  # an exec runs in its container's working directory, and a grader's work area is replaced
            body["spec"]["containers"][0]["workingDir"] = "/"
        await self.bucket.acquire()
        cancel = threading.Event()
        try:
            uid = await self.pool.submit(self._create_blocking, spec, body, cancel)
        except asyncio.CancelledError:
            cancel.set()  # the worker deletes the pod it made
            raise
        sb = KubernetesSandbox(self, spec, uid, proxy_url)
        self._live[spec.name] = sb
        if baseline:
            try:
                await sb.take_baseline()
            except BaseException:
                await sb.destroy()
                raise
        return sb

    def _check_isolation(self, spec: SandboxSpec) -> None:
        """A pod the run's NetworkPolicy would not select is refused; running without policies is said once."""
        if not self.network_policy:
            if not self._warned_no_policy:
                self._warned_no_policy = True
                log.warning(
                    "kubernetes sandboxes of namespace %s are created WITHOUT a NetworkPolicy "
                    "(network_policy=False): they reach whatever the cluster's network lets them, not only "
                    "the proxy",
                    self.namespace,
                )
            return
        if spec.run is None:
            raise SandboxError(
                f"sandbox {spec.name}: no run label, so the run's NetworkPolicy (which selects pods "
                "by it) would not isolate it; give SandboxSpec.run (or network_policy=False, "
                "knowingly)"
            )

    def _create_blocking(self, spec: SandboxSpec, body: dict[str, Any], cancel: threading.Event) -> str:
        from kubernetes.client.rest import ApiException

        if self.network_policy and spec.run is not None:  # (None is refused by `_check_isolation`)
            self._ensure_policy(spec.run)
        self._remove_stale(spec.name)
        try:
            resp = self.kube.core.create_namespaced_pod(self.namespace, body, _preload_content=False)
        except ApiException as e:
            raise self.kube.api_error(f"sandbox {spec.name}: cannot create its pod", e) from e
        created = json.loads(resp.data)
        try:
            self._wait_running(spec.name, created["metadata"].get("resourceVersion"), cancel)
        except BaseException:
            try:
                self.kube.delete_pod(spec.name)
            except SandboxError:
                pass
            raise
        return created["metadata"].get("uid") or spec.name

    def _wait_running(self, name: str, resource_version: str | None, cancel: threading.Event) -> None:
        """Follow the pod with a watch until its container runs; SandboxError when it cannot."""
        from kubernetes.client.rest import ApiException

        waiting = StartWait(name, self.start_timeout_s, self.unschedulable_timeout_s, cancel)
        pod = self.kube.get_pod(name)  # the state now, in case no event follows
        rv = ((pod or {}).get("metadata") or {}).get("resourceVersion") or resource_version
        while not waiting.ready(pod):
            try:
                for kind, obj in self.kube.watch(name, rv, waiting.next_wait()):
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    pod = None if kind == "DELETED" else obj
                    if waiting.ready(pod):
                        return
            except ApiException as e:
                if e.status != 410:
                    raise self.kube.api_error(f"sandbox {name}: watching its pod failed", e) from e
                pod = self.kube.get_pod(name)  # the resourceVersion expired: start again from the current state
                rv = ((pod or {}).get("metadata") or {}).get("resourceVersion")

    # -- network policy, stale pods ------------------------------------------------------------------------

    def _ensure_policy(self, run: str) -> None:
        from kubernetes.client.rest import ApiException

        if run in self._policies:
            return
        for body in (
            run_network_policy(run, self.namespace, proxy_port=MODEL_PORT, allow_dns=self.allow_dns),
            grader_network_policy(run, self.namespace),
        ):
            try:
                self.kube.net.create_namespaced_network_policy(self.namespace, body)
            except ApiException as e:
                if e.status != 409:  # 409: it exists already (another orchestrator process of the run)
                    raise self.kube.api_error(f"cannot create the NetworkPolicies of run {run}", e) from e
        self._policies.add(run)

    def _remove_stale(self, name: str) -> None:
        pod = self.kube.get_pod(name)
        if pod is None:
            return
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(LABEL_MANAGED) != "1":
            raise SandboxError(
                f"a pod named {name} exists in namespace {self.namespace} and was not created by "
                "openforge; remove it or choose another run name"
            )
        if name in self._live:
            raise SandboxError(f"sandbox {name} already exists in this process; names must be unique per episode")
        self.kube.delete_pod(name)
        end = time.monotonic() + 60
        rv = (pod.get("metadata") or {}).get("resourceVersion")
        while self.kube.get_pod(name) is not None:
            if time.monotonic() >= end:
                raise SandboxError(f"sandbox {name}: the leftover pod of that name was not deleted within 60s")
            for kind, obj in self.kube.watch(name, rv, 5):
                rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                if kind == "DELETED":
                    break

    # -- listing and cleanup -------------------------------------------------------------------------------

    @staticmethod
    def _selector(run_label: str | None) -> str:
        return ",".join(f"{k}={v}" for k, v in run_selector(run_label).items())

    def _list_blocking(self, run_label: str | None) -> list[str]:
        from kubernetes.client.rest import ApiException

        try:
            resp = self.kube.core.list_namespaced_pod(
                self.namespace, label_selector=self._selector(run_label), _preload_content=False
            )
        except ApiException as e:
            raise self.kube.api_error("cannot list pods", e) from e
        return sorted(p["metadata"]["name"] for p in json.loads(resp.data).get("items") or [])

    async def list(self, run_label: str | None = None) -> list[str]:
        return await self.pool.submit(self._list_blocking, run_label)

    def _delete_policies(self, run_label: str | None) -> int:
        from kubernetes.client.rest import ApiException

        try:
            resp = self.kube.net.list_namespaced_network_policy(
                self.namespace, label_selector=self._selector(run_label), _preload_content=False
            )
            names = [p["metadata"]["name"] for p in json.loads(resp.data).get("items") or []]
        except ApiException as e:
            raise self.kube.api_error("cannot list NetworkPolicies", e) from e
        if run_label is not None:
            names += [n for n in (network_policy_name(run_label), grader_policy_name(run_label)) if n not in names]
        removed = 0
        for n in names:
            try:
                self.kube.net.delete_namespaced_network_policy(n, self.namespace)
                removed += 1
            except ApiException as e:
                if e.status != 404:
                    raise self.kube.api_error(f"cannot delete NetworkPolicy {n}", e) from e
        return removed

    async def cleanup(self, run_label: str | None) -> int:
        """Delete every pod of run `run_label` (all managed pods with None) and the run's NetworkPolicy."""
        names = await self.list(run_label)
        for name in names:
            sb = self._live.get(name)
            if sb is not None:
                await sb.destroy()
            else:
                await self.pool.submit(self.kube.delete_pod, name)
        await self.pool.submit(self._delete_policies, run_label)
        if run_label is None:
            self._policies.clear()
        else:
            self._policies.discard(run_label)
        return len(names)


def _host_is_ip(url: str) -> bool:
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
