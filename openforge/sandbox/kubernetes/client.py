"""The Kubernetes API behind the kubernetes backend: one lazy client per provider (`configuration`, else
`kubeconfig` / `context`, else the in-cluster service account, else `~/.kube/config`) and the pod calls the
backend makes, each failure a SandboxError that says what to do."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from typing import Any

from ..base import SandboxError, SandboxSetupError
from .pods import CONTAINER, pod_problem

__all__ = ["KubeClient", "short_error"]


def short_error(e: BaseException) -> str:
    """The API server's message for a failed call, one line."""
    body = getattr(e, "body", None)
    if body:
        try:
            msg = json.loads(body).get("message")
            if msg:
                return str(msg)[:500]
        except (ValueError, AttributeError):
            pass
    reason = getattr(e, "reason", None)
    status = getattr(e, "status", None)
    if reason or status:
        return f"{status or ''} {reason or ''}".strip()[:500]
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:500]


class KubeClient:
    """CoreV1 and NetworkingV1 clients for `namespace`, connected on first use. Exec streams are opened through a
    CoreV1 client of their own, one at a time (`open_exec`): the official client's `stream()` swaps its API
    client's transport while it opens one, and any other call made on that client meanwhile (another
    thread's `get_pod`) would go out as a websocket handshake."""

    def __init__(
        self, namespace: str, *, configuration: Any = None, kubeconfig: str | None = None, context: str | None = None
    ):
        self.namespace = namespace
        self._configuration = configuration
        self._kubeconfig = kubeconfig
        self._context = context
        self._api: Any = None
        self._core: Any = None
        self._net: Any = None
        self._exec_core: Any = None
        self._exec_api: Any = None
        self._lock = threading.Lock()
        self._exec_lock = threading.Lock()

    def _connect(self) -> None:
        with self._lock:
            if self._api is not None:
                return
            try:
                from kubernetes import client, config
            except ImportError as e:
                raise SandboxSetupError(
                    "the kubernetes sandbox needs the `kubernetes` package: pip install 'openforge-rl[kubernetes]'"
                ) from e
            if self._configuration is not None:
                cfg = self._configuration
            else:
                cfg = client.Configuration()
                try:
                    if self._kubeconfig or self._context:
                        raise config.ConfigException("explicit kubeconfig")
                    config.load_incluster_config(client_configuration=cfg)
                except config.ConfigException:
                    try:
                        config.load_kube_config(
                            config_file=self._kubeconfig, context=self._context, client_configuration=cfg
                        )
                    except (config.ConfigException, OSError) as e:
                        raise SandboxSetupError(
                            f"no Kubernetes credentials: {e}; run in-cluster with the service account of "
                            "`openforge k8s manifests`, or give the sandbox option kubeconfig=PATH (and context=)"
                        ) from e
            api = client.ApiClient(cfg)
            self._core = client.CoreV1Api(api)
            self._net = client.NetworkingV1Api(api)
            self._exec_api = client.ApiClient(cfg)
            self._exec_core = client.CoreV1Api(self._exec_api)
            self._api = api

    @property
    def core(self) -> Any:
        if self._core is None:
            self._connect()
        return self._core

    @property
    def net(self) -> Any:
        if self._net is None:
            self._connect()
        return self._net

    def open_exec(self, pod: str, argv: list[str], *, stdin: bool) -> Any:
        """An exec websocket into `pod`'s sandbox container (stdout and stderr, binary; stdin when asked)."""
        from kubernetes.stream import stream

        if self._exec_core is None:
            self._connect()
        with self._exec_lock:
            return stream(
                self._exec_core.connect_get_namespaced_pod_exec,
                pod,
                self.namespace,
                command=argv,
                container=CONTAINER,
                stdin=stdin,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
                binary=True,
            )

    def close(self) -> None:
        for api in (self._api, self._exec_api):
            if api is not None:
                try:
                    api.close()
                except Exception:  # noqa: BLE001, S110 - closing anyway
                    pass

    def api_error(self, what: str, e: BaseException) -> SandboxError:
        hint = ""
        if getattr(e, "status", None) == 403:
            hint = (
                " (the orchestrator's service account lacks this permission: apply the RBAC of "
                "`openforge k8s manifests`)"
            )
        elif getattr(e, "status", None) == 404 and "namespace" in short_error(e).lower():
            hint = f" (does namespace {self.namespace!r} exist? `openforge k8s manifests` creates it)"
        return SandboxError(f"{what}: {short_error(e)}{hint}")

    def pod_error(self, name: str, what: str) -> SandboxError:
        """A failure talking to a pod, explained by the pod's state when it has a problem."""
        try:
            problem = pod_problem(self.get_pod(name))
        except SandboxError:
            problem = None
        return SandboxError(f"sandbox {name}: {problem[1] if problem else what}")

    def get_pod(self, name: str) -> dict | None:
        from kubernetes.client.rest import ApiException

        try:
            resp = self.core.read_namespaced_pod(name, self.namespace, _preload_content=False)
        except ApiException as e:
            if e.status == 404:
                return None
            raise self.api_error(f"cannot read pod {name}", e) from e
        return json.loads(resp.data)

    def logs(self, name: str, tail_lines: int) -> str:
        from kubernetes.client.rest import ApiException

        try:
            return self.core.read_namespaced_pod_log(name, self.namespace, container=CONTAINER, tail_lines=tail_lines)
        except ApiException as e:
            raise self.api_error(f"cannot read the log of pod {name}", e) from e

    def delete_pod(self, name: str) -> bool:
        from kubernetes.client.rest import ApiException

        try:
            self.core.delete_namespaced_pod(
                name, self.namespace, grace_period_seconds=0, propagation_policy="Background"
            )
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise self.api_error(f"cannot delete pod {name}", e) from e

    def watch(self, name: str, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, dict]]:
        """Events of one pod (a watch with a server-side timeout): yields (type, pod dict). An expired
        resourceVersion raises ApiException 410."""
        from kubernetes import watch

        w = watch.Watch()
        kwargs: dict[str, Any] = {
            "field_selector": f"metadata.name={name}",
            "timeout_seconds": max(1, math.ceil(timeout_s)),
            "deserialize": False,
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            for ev in w.stream(self.core.list_namespaced_pod, self.namespace, **kwargs):
                yield ev["type"], ev.get("object") or {}
        finally:
            w.stop()
