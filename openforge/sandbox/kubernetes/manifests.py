"""Kubernetes manifests as plain dicts, one small function per object.

`openforge k8s manifests` prints `run_manifests(...)`; the `kubernetes` sandbox backend (this package) creates
the objects of `sandbox_pod` and `run_network_policy` through the API. Nothing here talks to a cluster.

Isolation (docs/design.md, invariants 4 and 7) in Kubernetes terms:

- a sandbox pod's container runs as root (`runAsUser: 0`: `exec` switches to the agent's user with `setpriv`,
  and grading runs as root), with `allowPrivilegeEscalation: false` (no setuid or file-capability gains),
  every capability dropped but `common.AGENT_CAPABILITIES` (the same set as Docker's), the runtime's default
  seccomp profile, `automountServiceAccountToken: false` (the agent gets no API credentials),
  `enableServiceLinks: false`, CPU/memory (and, with `storage_mb`, `ephemeral-storage`) requests equal to
  limits, and `activeDeadlineSeconds` so the kubelet reaps it on its own;
- the run's NetworkPolicy selects the run's sandbox pods and allows **no ingress** and **egress only to the
  proxy's pods on the model API port** (never the admin port) — and no DNS: the sandbox reaches the proxy by
  its Service's cluster IP (a name server would be a tunnel out); `allow_dns=True` adds kube-dns on port 53
  for clusters that need it;
- the proxy's own NetworkPolicy admits the model port from sandbox pods and the orchestrator, and the admin
  port only from pods labelled `openforge.role: orchestrator`;
- harness binaries come from the harness bundle image: an init container copies them into an emptyDir that
  the sandbox container mounts read-only (an init container works on every cluster; image volumes need
  Kubernetes >= 1.33 with a feature gate and a recent container runtime).
"""

from __future__ import annotations

from openforge import __version__
from openforge.core.json_types import JSONObject, JSONValue

from ..base import GRADER_ROLE, LABEL_MANAGED, LABEL_ROLE, LABEL_RUN, label_value, sandbox_name
from ..common import AGENT_CAPABILITIES, KEEPALIVE, run_selector

__all__ = [
    "ADMIN_PORT",
    "MODEL_PORT",
    "PROXY_LABELS",
    "ROLE_LABEL",
    "grader_network_policy",
    "grader_policy_name",
    "harness_init_container",
    "namespace",
    "network_policy_name",
    "orchestrator_rbac",
    "proxy_deployment",
    "proxy_network_policy",
    "proxy_service",
    "run_manifests",
    "run_network_policy",
    "sandbox_pod",
    "security_context",
    "to_yaml",
]

MODEL_PORT = 8100  # the proxy's model API (what harnesses call)
ADMIN_PORT = 8101  # the proxy's admin API (episodes, keys, pause): never reachable from a sandbox
ROLE_LABEL = LABEL_ROLE
PROXY_LABELS = {"app.kubernetes.io/name": "openforge-proxy", ROLE_LABEL: "proxy"}
ORCHESTRATOR_LABELS = {ROLE_LABEL: "orchestrator"}
PROXY_NAME = "openforge-proxy"
ORCHESTRATOR_SA = "openforge-orchestrator"
HARNESS_VOLUME = "openforge-harnesses"
# The proxy/CLI image docker/Dockerfile builds (scripts/build-image.sh tags it so).
PROXY_IMAGE = f"openforge:{__version__}"
HARNESS_IMAGE_DIR = "/opt/openforge/harness-bundle"  # where `openforge harness image` puts the bundle
EXPIRES_ANNOTATION = "openforge.io/expires-at"
RUN_ANNOTATION = "openforge.io/run"


def _meta(
    name: str,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> JSONObject:
    meta: JSONObject = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def network_policy_name(run_label: str) -> str:
    """The run's NetworkPolicy name: a DNS-1123 label derived from the run label (deterministic)."""
    return sandbox_name(run_label, "egress", prefix="of-np")


def grader_policy_name(run_label: str) -> str:
    """The name of the NetworkPolicy that cuts the run's graders off every network."""
    return sandbox_name(run_label, "graders", prefix="of-np")


# -- sandbox pods --------------------------------------------------------------------------------------------


def security_context() -> JSONObject:
    """The container security context of every sandbox container (see the module docstring)."""
    return {
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"], "add": list(AGENT_CAPABILITIES)},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def harness_init_container(image: str, *, pull_policy: str = "IfNotPresent") -> JSONObject:
    """Copies the harness bundle out of `image` (built by `openforge harness image`) into the shared emptyDir.
    The bundle image is FROM the base image, so it has `cp`."""
    return {
        "name": "harness-bundle",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["/bin/sh", "-c", f"cp -a {HARNESS_IMAGE_DIR}/. /bundle/"],
        "volumeMounts": [{"name": HARNESS_VOLUME, "mountPath": "/bundle"}],
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "500m", "memory": "256Mi"}},
        "securityContext": security_context(),
    }


def sandbox_pod(
    *,
    name: str,
    namespace: str,
    image: str,
    labels: dict[str, str],
    cpus: float,
    memory_mb: int,
    env: dict[str, str] | None = None,
    workdir: str | None = None,
    active_deadline_s: int | None = None,
    annotations: dict[str, str] | None = None,
    harness_image: str | None = None,
    harness_target: str | None = None,
    pull_policy: str = "IfNotPresent",
    node_selector: dict[str, str] | None = None,
    tolerations: list[JSONObject] | None = None,
    storage_mb: int | None = None,
) -> JSONObject:
    """One rollout's pod: a bare Pod with `restartPolicy: Never` (a dead sandbox is never silently
    restarted: the episode fails as `sandbox_error` and the orchestrator retries it in a new pod)."""
    cpu = f"{max(1, round(cpus * 1000))}m"
    mem = f"{memory_mb}Mi"
    resources = {"cpu": cpu, "memory": mem}
    if storage_mb:
        resources["ephemeral-storage"] = f"{storage_mb}Mi"
    container: JSONObject = {
        "name": "sandbox",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": list(KEEPALIVE[:1]),
        "args": list(KEEPALIVE[1:]),
        "resources": {"limits": dict(resources), "requests": dict(resources)},
        "securityContext": security_context(),
    }
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if workdir:
        container["workingDir"] = workdir
    spec: JSONObject = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    if active_deadline_s is not None:
        spec["activeDeadlineSeconds"] = int(active_deadline_s)
    if harness_image is not None:
        if harness_target is None:
            raise ValueError("harness_target (where the bundle appears in the sandbox) is needed with harness_image")
        spec["initContainers"] = [harness_init_container(harness_image, pull_policy=pull_policy)]
        spec["volumes"] = [{"name": HARNESS_VOLUME, "emptyDir": {}}]
        container["volumeMounts"] = [{"name": HARNESS_VOLUME, "mountPath": harness_target, "readOnly": True}]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, namespace, labels, annotations), "spec": spec}


def run_network_policy(
    run_label: str,
    namespace: str,
    *,
    proxy_port: int = MODEL_PORT,
    proxy_labels: dict[str, str] | None = None,
    allow_dns: bool = False,
) -> JSONObject:
    """Deny all ingress to the run's sandbox pods; allow egress only to the proxy's pods on the model port
    (sandboxes reach it by its Service's cluster IP); with `allow_dns` also to kube-dns on port 53."""
    egress: list[JSONValue] = [
        {
            "to": [{"podSelector": {"matchLabels": dict(proxy_labels or PROXY_LABELS)}}],
            "ports": [{"protocol": "TCP", "port": int(proxy_port)}],
        }
    ]
    if allow_dns:
        egress.append(
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            }
        )
    selector = run_selector(run_label)
    not_graders: JSONValue = [{"key": ROLE_LABEL, "operator": "NotIn", "values": [GRADER_ROLE]}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(network_policy_name(run_label), namespace, selector),
        "spec": {
            "podSelector": {"matchLabels": dict(selector), "matchExpressions": not_graders},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress,
        },
    }


def grader_network_policy(run_label: str, namespace: str) -> JSONObject:
    """Deny all ingress and egress to the run's graders (pods labelled `openforge.role: grader`, which
    `run_network_policy` leaves out): a verifier reaches nothing, not even the proxy."""
    selector = run_selector(run_label)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(grader_policy_name(run_label), namespace, selector),
        "spec": {
            "podSelector": {"matchLabels": {**selector, ROLE_LABEL: GRADER_ROLE}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }


# -- what a run needs besides its pods -----------------------------------------------------------------------


def namespace(name: str) -> JSONObject:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name, labels={LABEL_MANAGED: "1"})}


def proxy_deployment(
    run: str,
    namespace: str,
    image: str,
    *,
    model_path: str = "/models/policy",
    backend: str = "embedded",
    model_pvc: str | None = None,
    runs_pvc: str | None = None,
    admin_token_secret: str | None = None,
    cpus: float = 2,
    memory_mb: int = 8192,
) -> JSONObject:
    """The recording proxy (`openforge proxy`): model API on MODEL_PORT, admin API on ADMIN_PORT. Its run
    directory (trajectories.db) is on `runs_pvc` when given, else an emptyDir (lost with the pod)."""
    run_dir = f"/runs/{run}"
    args: list[JSONValue] = [
        "proxy",
        "--model",
        model_path,
        "--backend",
        backend,
        "--run",
        run_dir,
        "--listen",
        f"0.0.0.0:{MODEL_PORT}",
        "--admin-listen",
        f"0.0.0.0:{ADMIN_PORT}",
    ]
    cpu = f"{max(1, round(cpus * 1000))}m"
    container: JSONObject = {
        "name": "proxy",
        "image": image,
        "command": ["openforge"],
        "args": args,
        "ports": [
            {"name": "model", "containerPort": MODEL_PORT, "protocol": "TCP"},
            {"name": "admin", "containerPort": ADMIN_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": cpu, "memory": f"{memory_mb}Mi"},
            "limits": {"cpu": cpu, "memory": f"{memory_mb}Mi"},
        },
        "readinessProbe": {"tcpSocket": {"port": MODEL_PORT}, "periodSeconds": 5},
    }
    mounts: list[JSONValue] = [{"name": "runs", "mountPath": "/runs"}]
    container["volumeMounts"] = mounts
    volumes: list[JSONValue] = [
        {"name": "runs", **({"persistentVolumeClaim": {"claimName": runs_pvc}} if runs_pvc else {"emptyDir": {}})}
    ]
    if model_pvc:
        volumes.append({"name": "model", "persistentVolumeClaim": {"claimName": model_pvc, "readOnly": True}})
        mounts.append({"name": "model", "mountPath": model_path, "readOnly": True})
    if admin_token_secret:
        container["env"] = [
            {
                "name": "OPENFORGE_ADMIN_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": admin_token_secret, "key": "token"}},
            }
        ]
    labels = {**PROXY_LABELS, LABEL_RUN: label_value(run)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(PROXY_NAME, namespace, labels),
        "spec": {
            "replicas": 1,  # one proxy per run: it owns the run's trajectory store
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(PROXY_LABELS)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"automountServiceAccountToken": False, "containers": [container], "volumes": volumes},
            },
        },
    }


def proxy_service(namespace: str) -> JSONObject:
    """`openforge-proxy.<namespace>.svc`: the model port (what sandboxes call) and the admin port, separately."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(PROXY_NAME, namespace, PROXY_LABELS),
        "spec": {
            "selector": dict(PROXY_LABELS),
            "ports": [
                {"name": "model", "port": MODEL_PORT, "targetPort": MODEL_PORT, "protocol": "TCP"},
                {"name": "admin", "port": ADMIN_PORT, "targetPort": ADMIN_PORT, "protocol": "TCP"},
            ],
        },
    }


def proxy_network_policy(namespace: str) -> JSONObject:
    """Who may reach the proxy: sandbox pods and the orchestrator on the model port; only the orchestrator on
    the admin port."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta("openforge-proxy-ingress", namespace, PROXY_LABELS),
        "spec": {
            "podSelector": {"matchLabels": dict(PROXY_LABELS)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {"matchLabels": {LABEL_MANAGED: "1"}}},
                        {"podSelector": {"matchLabels": dict(ORCHESTRATOR_LABELS)}},
                    ],
                    "ports": [{"protocol": "TCP", "port": MODEL_PORT}],
                },
                {
                    "from": [{"podSelector": {"matchLabels": dict(ORCHESTRATOR_LABELS)}}],
                    "ports": [{"protocol": "TCP", "port": ADMIN_PORT}],
                },
            ],
        },
    }


def orchestrator_rbac(namespace: str) -> list[JSONObject]:
    """ServiceAccount + Role + RoleBinding: what the `kubernetes` sandbox backend calls, in one namespace."""
    rules: list[JSONValue] = [
        {
            "apiGroups": [""],
            "resources": ["pods"],
            "verbs": ["create", "get", "list", "watch", "delete", "deletecollection"],
        },
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies"],
            "verbs": ["create", "get", "list", "delete", "patch"],
        },
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(ORCHESTRATOR_SA, namespace)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(ORCHESTRATOR_SA, namespace),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(ORCHESTRATOR_SA, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ORCHESTRATOR_SA},
            "subjects": [{"kind": "ServiceAccount", "name": ORCHESTRATOR_SA, "namespace": namespace}],
        },
    ]


def run_manifests(
    run: str,
    *,
    namespace_name: str = "openforge",
    proxy_image: str = PROXY_IMAGE,
    backend: str = "embedded",
    model_pvc: str | None = None,
    runs_pvc: str | None = None,
    admin_token_secret: str | None = None,
    allow_dns: bool = False,
    run_label: str | None = None,
) -> list[JSONObject]:
    """Everything a run needs before its first sandbox: Namespace, proxy Deployment + Service + ingress policy,
    the orchestrator's RBAC, and the run's sandbox NetworkPolicy (`run_label` defaults to `run`)."""
    return [
        namespace(namespace_name),
        *orchestrator_rbac(namespace_name),
        proxy_deployment(
            run,
            namespace_name,
            proxy_image,
            backend=backend,
            model_pvc=model_pvc,
            runs_pvc=runs_pvc,
            admin_token_secret=admin_token_secret,
        ),
        proxy_service(namespace_name),
        proxy_network_policy(namespace_name),
        run_network_policy(run_label or run, namespace_name, allow_dns=allow_dns),
        grader_network_policy(run_label or run, namespace_name),
    ]


def to_yaml(objects: list[JSONObject]) -> str:
    """Multi-document YAML (`kubectl apply -f -` reads it)."""
    import yaml

    return "".join("---\n" + yaml.safe_dump(o, sort_keys=False) for o in objects)
