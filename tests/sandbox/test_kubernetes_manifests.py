"""Every manifest OpenForge produces validates against the Kubernetes schemas of a pinned version
(`kubernetes-validate`, bundled schemas, strict: unknown fields are errors); the isolation rules say what
they should; the harness bundle image's build context. No cluster involved."""

from __future__ import annotations

import io
import tarfile

import pytest
import yaml
from typer.testing import CliRunner

from openforge.cli import app
from openforge.sandbox import SandboxSpec
from openforge.sandbox.kubernetes.manifests import (
    ADMIN_PORT,
    MODEL_PORT,
    PROXY_LABELS,
    grader_network_policy,
    run_network_policy,
    sandbox_pod,
)

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S_VERSION = "1.31.0"  # pinned: the schemas kubernetes-validate bundles for Kubernetes 1.31


def validate(obj: dict) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def cli_manifests(*args: str) -> list[dict]:
    r = CliRunner().invoke(app, ["k8s", "manifests", *args])
    assert r.exit_code == 0, r.output
    return [d for d in yaml.safe_load_all(r.output) if d]


@pytest.mark.parametrize(
    "args",
    [
        ["--run", "demo"],
        [
            "--run",
            "My_Run.2026",
            "--namespace",
            "rl-team",
            "--proxy-image",
            "registry.example/openforge:1",
            "--backend",
            "vllm:http://vllm:8000",
            "--model-pvc",
            "models",
            "--runs-pvc",
            "runs",
            "--admin-token-secret",
            "proxy-admin",
            "--run-label",
            "my-run-1a2b3c4d",
            "--no-dns",
        ],
    ],
)
def test_every_output_of_k8s_manifests_validates(args):
    objects = cli_manifests(*args)
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "NetworkPolicy",
        "NetworkPolicy",
        "NetworkPolicy",
    ]
    for o in objects:
        validate(o)


def test_validation_is_not_vacuous():
    pod = sandbox_pod(name="of-a-b", namespace="ns", image="img", labels={"a": "b"}, cpus=1, memory_mb=64)
    validate(pod)
    pod["spec"]["containers"][0]["imagePullPolcy"] = "Always"  # a typo: unknown field
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod)
    bad = run_network_policy("r", "ns")
    bad["spec"]["egress"][0]["ports"][0]["port"] = {"nope": 1}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(bad)


def test_sandbox_pods_are_hardened():
    pod = sandbox_pod(
        name="of-a-b",
        namespace="ns",
        image="img",
        labels={"a": "b"},
        cpus=1,
        memory_mb=64,
        storage_mb=1024,
        harness_image="reg/h:1",
        harness_target="/opt/h",
    )
    validate(pod)
    for c in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False and sc["runAsUser"] == 0
        assert sc["capabilities"]["drop"] == ["ALL"] and "NET_RAW" not in sc["capabilities"]["add"]
        assert "SETPCAP" in sc["capabilities"]["add"] and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    res = pod["spec"]["containers"][0]["resources"]
    assert res["limits"]["ephemeral-storage"] == res["requests"]["ephemeral-storage"] == "1024Mi"
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert "OPENFORGE_KEEPALIVE=1" in pod["spec"]["containers"][0]["args"][-1]


@pytest.mark.parametrize("optional", [False, True])
def test_sandbox_pod_with_and_without_optional_fields(optional):
    extra = (
        {
            "env": {"A": "1"},
            "workdir": "/app",
            "active_deadline_s": 900,
            "annotations": {"openforge.io/run": "r"},
            "harness_image": "reg/openforge-harnesses:abc",
            "harness_target": "/opt/openforge/harnesses",
            "node_selector": {"pool": "rollouts"},
            "tolerations": [{"key": "rollouts", "operator": "Exists", "effect": "NoSchedule"}],
        }
        if optional
        else {}
    )
    pod = sandbox_pod(
        name="of-run-ep",
        namespace="openforge",
        image="debian:bookworm-slim",
        labels={"openforge.managed": "1"},
        cpus=4,
        memory_mb=4096,
        **extra,
    )
    validate(pod)
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "4000m", "memory": "4096Mi"} == pod["spec"]["containers"][0]["resources"]["requests"]
    assert ("initContainers" in pod["spec"]) is optional


def test_provider_pod_manifest_validates(tmp_path):
    from openforge.sandbox import get_provider

    p = get_provider(
        "kubernetes",
        namespace="ns",
        harness_image="reg/h:1",
        tolerations=[{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}],
    )
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text("{}")
    from openforge.sandbox import Mount

    for spec in (
        SandboxSpec(name="of-a-1", image="img"),
        SandboxSpec(
            name="of-a-2",
            run="a",
            image="img",
            cpus=0.25,
            memory_mb=100,
            workdir=None,
            env={"X": "y"},
            timeout_s=77.5,
            proxy_uds=tmp_path / "s.sock",
            user="agent",
            mounts=[Mount(source=bundle, target="/opt/h")],
        ),
    ):
        body = p.pod_manifest(spec, p.resolve_image(spec), p._harness_target(spec))
        validate(body)
    assert body["spec"]["activeDeadlineSeconds"] == 78


def test_network_policy_allows_only_the_model_port_of_the_proxy():
    pol = run_network_policy("run-1", "openforge")
    validate(pol)
    spec = pol["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
    assert spec["podSelector"]["matchLabels"] == {"openforge.managed": "1", "openforge.run": "run-1"}
    # graders are left out: their own policy cuts them off every network
    assert spec["podSelector"]["matchExpressions"] == [
        {"key": "openforge.role", "operator": "NotIn", "values": ["grader"]}
    ]
    # no DNS by default: the sandboxes reach the proxy by its Service's cluster IP (a name server is a tunnel out)
    (proxy_rule,) = spec["egress"]
    assert proxy_rule["to"] == [{"podSelector": {"matchLabels": PROXY_LABELS}}]
    assert proxy_rule["ports"] == [{"protocol": "TCP", "port": MODEL_PORT}]
    with_dns = run_network_policy("run-1", "openforge", allow_dns=True)
    validate(with_dns)
    proxy_rule, dns_rule = with_dns["spec"]["egress"]
    ports = [p["port"] for rule in with_dns["spec"]["egress"] for p in rule["ports"]]
    assert ADMIN_PORT not in ports and set(ports) == {MODEL_PORT, 53}
    assert dns_rule["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}


def test_graders_reach_no_network():
    pol = grader_network_policy("run-1", "openforge")
    validate(pol)
    assert pol["spec"] == {
        "podSelector": {
            "matchLabels": {"openforge.managed": "1", "openforge.run": "run-1", "openforge.role": "grader"}
        },
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": [],
    }
    names = {o["metadata"]["name"] for o in cli_manifests("--run", "run-1") if o["kind"] == "NetworkPolicy"}
    assert pol["metadata"]["name"] in names


def test_proxy_admin_port_only_from_the_orchestrator():
    objects = {(o["kind"], o["metadata"]["name"]): o for o in cli_manifests("--run", "demo")}
    ingress = objects[("NetworkPolicy", "openforge-proxy-ingress")]["spec"]["ingress"]
    admin = [r for r in ingress if r["ports"][0]["port"] == ADMIN_PORT]
    assert admin == [
        {
            "from": [{"podSelector": {"matchLabels": {"openforge.role": "orchestrator"}}}],
            "ports": [{"protocol": "TCP", "port": ADMIN_PORT}],
        }
    ]
    service_ports = {p["name"]: p["port"] for p in objects[("Service", "openforge-proxy")]["spec"]["ports"]}
    assert service_ports == {"model": MODEL_PORT, "admin": ADMIN_PORT}
    rules = objects[("Role", "openforge-orchestrator")]["rules"]
    assert {r for rule in rules for r in rule["resources"]} >= {"pods", "pods/exec", "pods/log", "networkpolicies"}


def test_harness_image_build_context_and_push(tmp_path):
    from openforge.harness.image import build_harness_image, image_tag

    bundle = tmp_path / "bundle"
    (bundle / "codex" / "bin").mkdir(parents=True)
    (bundle / "manifest.json").write_text('{"format": 1}')
    (bundle / "codex" / "bin" / "codex").write_bytes(b"\x7fELF")
    (bundle / "codex" / "current").symlink_to("bin")

    class FakeDockerAPI:  # records what the docker SDK would have been asked
        def __init__(self):
            self.calls = []

        def build(self, fileobj, **kw):
            with tarfile.open(fileobj=io.BytesIO(fileobj.read())) as tf:
                self.calls.append(
                    (
                        "build",
                        kw["tag"],
                        kw["pull"],
                        tf.extractfile("Dockerfile").read().decode(),
                        sorted(tf.getnames()),
                        tf.getmember("bundle/codex/current").issym(),
                    )
                )
            return iter([{"stream": "Step 1/2"}])

        def tag(self, image, repository, tag):
            self.calls.append(("tag", image, repository, tag))

        def push(self, repository, tag, stream, decode):
            self.calls.append(("push", repository, tag))
            return iter([{"status": "Pushed"}])

    class FakeDockerClient:
        api = FakeDockerAPI()

    client = FakeDockerClient()
    built = build_harness_image(bundle, push="registry.example/team/", client=client)
    tag = image_tag(bundle)
    assert built.tag == tag and built.pushed == [f"registry.example/team/{tag}"]
    build, tag_call, push_call = client.api.calls
    assert build[1:3] == (tag, False)
    assert build[3] == "FROM openforge-base:bookworm\nCOPY bundle /opt/openforge/harness-bundle\n"
    assert "bundle/codex/bin/codex" in build[4] and build[5]
    assert tag_call == ("tag", tag, "registry.example/team/openforge-harnesses", tag.split(":")[1])
    assert push_call == ("push", "registry.example/team/openforge-harnesses", tag.split(":")[1])
