"""The `kubernetes` sandbox backend against `FakeKubernetesAPI`, a FAKE API server (tests/support/k8s_fake.py): the
official client talks HTTP and websockets to it, and its fake kubelet runs each exec for real in a local
bubblewrap sandbox. Nothing here ran on a real cluster."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from openforge.sandbox import (
    LABEL_MANAGED,
    LABEL_NAME,
    LABEL_RUN,
    Mount,
    SandboxError,
    SandboxSpec,
    get_provider,
    local_available,
    sandbox_name,
)
from openforge.sandbox.kubernetes.manifests import grader_policy_name
from support.k8s_fake import FakeKubernetesAPI

pytest.importorskip("kubernetes")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S_VERSION = "1.31.0"
NS = "openforge"


@pytest.fixture(scope="module")
def fake_api(tmp_path_factory):
    ok, why = local_available()
    if not ok:
        pytest.skip(f"the fake API server's kubelet runs commands with bubblewrap: {why}")
    with FakeKubernetesAPI(tmp_path_factory.mktemp("fake-k8s")) as api:
        yield api


@pytest.fixture
async def provider(fake_api):
    p = get_provider(
        "kubernetes",
        configuration=fake_api.configuration(),
        namespace=NS,
        unschedulable_timeout_s=1.5,
        start_timeout_s=30,
    )
    yield p
    await p.cleanup(None)
    await p.close()


def spec(run: str, episode: str, **kw) -> SandboxSpec:
    kw.setdefault("image", "debian:bookworm-slim")
    return SandboxSpec(name=sandbox_name(run, episode), run=run, **kw)


async def test_create_exec_copy_read_destroy(fake_api, provider, tmp_path):
    sb = await provider.create(spec("life", "e1", env={"TASK_VAR": "t"}, proxy_uds=tmp_path / "unused.sock"))
    pod = fake_api.pods[sb.name]
    labels = pod["metadata"]["labels"]
    assert labels[LABEL_MANAGED] == "1" and labels[LABEL_RUN] == "life" and labels[LABEL_NAME] == sb.name
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["automountServiceAccountToken"] is False
    # the pod reaches the proxy by its Service's cluster IP (read through the API: pods get no DNS), not the
    # host's socket
    assert sb.proxy_url == "http://10.96.0.10:8100"
    assert {"name": "OPENFORGE_PROXY_URL", "value": sb.proxy_url} in pod["spec"]["containers"][0]["env"]

    r = await sb.exec('echo "$TASK_VAR $EXTRA"; pwd; echo oops >&2; exit 7', timeout_s=20, env={"EXTRA": "x y"})
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (7, "t x y\n/app\n", "oops\n", False)
    r = await sb.exec(["sh", "-c", "cat; pwd"], timeout_s=20, stdin=b"from stdin\n", workdir="/srv/new")
    assert r.ok and r.stdout == "from stdin\n/srv/new\n"
    r = await sb.exec(["id", "-u"], timeout_s=20, user="65534")
    assert r.stdout.strip() == "65534"
    r = await sb.exec("head -c 5000 /dev/zero | tr '\\0' a", timeout_s=20, output_cap=100)
    assert r.truncated and r.stdout == "a" * 100

    src = tmp_path / "tests"
    (src / "sub").mkdir(parents=True)
    (src / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (src / "sub" / "data.bin").write_bytes(bytes(range(256)) * 40)
    await sb.copy_in(src, "/tests", owner="1000:1000")
    assert (await sb.exec(["stat", "-c", "%u", "/tests/sub/data.bin"], timeout_s=20)).stdout.strip() == "1000"
    assert (await sb.exec(["bash", "/tests/test.sh"], timeout_s=20)).ok
    assert await sb.read_file("/logs/verifier/reward.txt") == b"1\n"
    assert await sb.read_file("/logs/verifier/nothing") is None
    with pytest.raises(IsADirectoryError):
        await sb.read_file("/tests")
    with pytest.raises(ValueError):
        await sb.read_file("/tests/sub/data.bin", max_bytes=100)
    await sb.copy_in(src / "test.sh", "/opt/one/file.sh")
    out = tmp_path / "out"
    await sb.copy_out("/tests", out)
    assert (out / "sub" / "data.bin").read_bytes() == (src / "sub" / "data.bin").read_bytes()
    await sb.copy_out("/opt/one/file.sh", tmp_path / "single.sh")
    assert (tmp_path / "single.sh").read_text() == (src / "test.sh").read_text()
    with pytest.raises(FileNotFoundError):
        await sb.copy_out("/no/such", tmp_path / "x")
    assert "fake log" in await sb.logs()
    assert (await sb.status()).alive

    assert await provider.list("life") == [sb.name]
    await sb.destroy()
    await sb.destroy()  # idempotent
    assert sb.name not in fake_api.pods and await provider.list("life") == []


async def test_watch_events_drive_readiness(fake_api, provider):
    fake_api.schedule_delay_s = 0.6  # Pending long enough that a poller would have asked many times
    gets, watches = fake_api.pod_gets, fake_api.watches
    try:
        t0 = time.monotonic()
        sb = await provider.create(spec("watch", "e1"))
        took = time.monotonic() - t0
    finally:
        fake_api.schedule_delay_s = 0.05
    assert took >= 1.2  # it waited for the Running event ...
    assert fake_api.watches > watches and fake_api.pod_gets - gets <= 2  # ... on a watch, not by polling GETs
    seen = [(t, o["status"].get("phase")) for _, k, t, o in fake_api.events if o["metadata"]["name"] == sb.name]
    assert seen[0] == ("ADDED", "Pending") and seen[-1] == ("MODIFIED", "Running")
    await sb.destroy()


async def test_unschedulable_pod_is_a_sandbox_error_naming_the_reason(fake_api, provider):
    fake_api.unschedulable = lambda name: "unsched" in name
    try:
        with pytest.raises(SandboxError, match=r"unschedulable for 1.5s: 0/3 nodes are available: 3 Insufficient cpu"):
            await provider.create(spec("unsched", "e1"))
    finally:
        fake_api.unschedulable = lambda name: False
    assert await provider.list("unsched") == []  # nothing left behind


@pytest.mark.parametrize("how", ["evict", "delete"])
async def test_pod_lost_mid_command_is_a_sandbox_error(fake_api, provider, how):
    sb = await provider.create(spec(f"lost-{how}", "e1"))
    running = asyncio.ensure_future(sb.exec("sleep 60", timeout_s=60))
    await asyncio.sleep(0.8)
    await asyncio.to_thread(fake_api.evict if how == "evict" else fake_api.delete_pod, sb.name)
    t0 = time.monotonic()
    with pytest.raises(SandboxError) as err:
        await running
    assert time.monotonic() - t0 < 10
    expected = "evicted: The node was low on resource: memory." if how == "evict" else "deleted"
    assert expected in str(err.value)
    status = await sb.status()
    assert not status.alive and (how != "evict" or "evicted" in status.reason)
    await sb.destroy()


async def test_active_deadline_expiry_is_a_timed_out_command(fake_api, provider):
    sb = await provider.create(spec("deadline", "e1", timeout_s=2))
    assert fake_api.pods[sb.name]["spec"]["activeDeadlineSeconds"] == 2
    r = await sb.exec("sleep 60", timeout_s=60)
    assert r.timed_out and not r.ok and r.duration_s < 15
    assert "activeDeadlineSeconds" in (await sb.status()).reason
    await sb.destroy()


async def test_exec_timeout_kills_the_command(fake_api, provider):
    sb = await provider.create(spec("timeout", "e1"))
    t0 = time.monotonic()
    r = await sb.exec("sleep 100 & echo started; sleep 100", timeout_s=1.5)
    assert r.timed_out and r.stdout == "started\n" and time.monotonic() - t0 < 8
    left = await sb.exec("ps -eo args | grep -c '^sleep 100' || true", timeout_s=20)
    assert left.stdout.strip() == "0"  # the backgrounded child was killed too (marker kill)
    await sb.destroy()


async def test_creation_is_rate_limited(fake_api):
    p = get_provider(
        "kubernetes", configuration=fake_api.configuration(), namespace=NS, creation_rate=2.0, creation_burst=1
    )
    try:
        sandboxes = await asyncio.gather(*(p.create(spec("rate", f"e{i}")) for i in range(4)))
        times = sorted(fake_api.create_times[sb.name] for sb in sandboxes)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(g >= 0.4 for g in gaps), gaps  # 2 per second, one at a time
    finally:
        await p.cleanup("rate")
        await p.close()


async def test_cleanup_removes_every_pod_of_the_run_and_its_network_policy(fake_api, provider):
    a = await provider.create(spec("crashed", "e1"))
    await provider.create(spec("crashed", "e2"))
    other = await provider.create(spec("other", "e1"))
    assert "of-np-crashed-egress" in fake_api.policies
    # a second provider (a new orchestrator process after a crash) knows nothing of the first one's sandboxes
    p2 = get_provider("kubernetes", configuration=fake_api.configuration(), namespace=NS)
    try:
        assert await p2.cleanup("crashed") == 2
    finally:
        await p2.close()
    assert await provider.list("crashed") == [] and "of-np-crashed-egress" not in fake_api.policies
    assert await provider.list("other") == [other.name]  # another run's pods are untouched
    with pytest.raises(SandboxError):
        await a.exec("true", timeout_s=5)
    await other.destroy()


async def test_images_and_mounts_map_to_pods(fake_api, provider, tmp_path):
    ctx = tmp_path / "env"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    with pytest.raises(SandboxError, match=r"docker_image"):
        await provider.create(spec("img", "e1", image=None, dockerfile_dir=ctx))
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text("{}")
    with pytest.raises(SandboxError, match=r"openforge harness image --push"):
        await provider.create(spec("img", "e2", mounts=[Mount(source=bundle, target="/opt/openforge/harnesses")]))
    with pytest.raises(SandboxError, match=r"cannot bind-mount host paths"):
        await provider.create(spec("img", "e3", mounts=[Mount(source=tmp_path, target="/data")]))

    p = get_provider(
        "kubernetes",
        configuration=fake_api.configuration(),
        namespace=NS,
        harness_image="registry.example/openforge-harnesses:abc",
        image_map={"debian:bookworm-slim": "registry.example/base:1"},
    )
    try:
        sb = await p.create(spec("img", "e4", mounts=[Mount(source=bundle, target="/opt/openforge/harnesses")]))
        pod = fake_api.pods[sb.name]
        assert pod["spec"]["containers"][0]["image"] == "registry.example/base:1"
        assert pod["spec"]["initContainers"][0]["image"] == "registry.example/openforge-harnesses:abc"
        mount = pod["spec"]["containers"][0]["volumeMounts"][0]
        assert mount["mountPath"] == "/opt/openforge/harnesses" and mount["readOnly"] is True
        await sb.destroy()
    finally:
        await p.close()


async def test_no_pod_outside_the_runs_network_policy(fake_api, provider, caplog):
    with pytest.raises(SandboxError, match=r"no run label, so the run's NetworkPolicy"):
        await provider.create(SandboxSpec(name="of-unlabelled", image="debian:bookworm-slim"))
    with pytest.raises(ValueError, match=r"sandboxes get no DNS"):
        get_provider("kubernetes", configuration=fake_api.configuration(), proxy_url="http://openforge-proxy:8100")
    loose = get_provider("kubernetes", configuration=fake_api.configuration(), namespace=NS, network_policy=False)
    try:
        with caplog.at_level("WARNING", logger="openforge.sandbox.kubernetes.provider"):
            made = [await loose.create(spec("loose", f"e{i}")) for i in range(2)]
        assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
        assert (
            "WITHOUT a NetworkPolicy" in caplog.records[0].getMessage()
            and "of-np-loose-egress" not in fake_api.policies
        )
        for sb in made:
            await sb.destroy()
    finally:
        await loose.close()


async def test_grading_support_in_band(fake_api, provider):
    """Inside the pod, as a root agent would leave it: a process left behind (also one that hid its exec marker)
    is stopped, and what changed in the pod's file system is listed against its listing at start."""
    sb = await provider.create(spec("grade", "e1"))
    r = await sb.exec(
        "mkdir -p /srv/app && echo x > /srv/app/unittest.py; sleep 1001 >/dev/null 2>&1 & "
        "env -i /bin/sh -c 'sleep 1002' >/dev/null 2>&1 & echo ok",
        timeout_s=20,
    )
    assert r.ok
    await sb.stop_agent_processes()
    ps = await sb.exec("for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline; echo; done", timeout_s=20)
    assert "sleep 100" not in ps.stdout and "sleep infinity" in ps.stdout, ps.stdout
    assert (await sb.status()).alive
    found = {(c.path, c.kind) for c in await sb.changed_paths()}
    assert ("/srv/app/unittest.py", "added") in found and ("/srv/app", "added") in found
    assert await sb.existing_paths(["/srv/app/unittest.py", "/nope"]) == {"/srv/app/unittest.py"}
    assert await sb.path_kinds(["/srv/app", "/srv/app/unittest.py", "/nope"]) == {
        "/srv/app": "dir",
        "/srv/app/unittest.py": "file",
    }
    untracked = get_provider("kubernetes", configuration=fake_api.configuration(), namespace=NS, track_changes=False)
    try:
        other = await untracked.create(spec("grade", "e2"))
        with pytest.raises(NotImplementedError, match="track_changes=False"):
            await other.changed_paths()
        await other.destroy()
    finally:
        await untracked.close()
    await sb.destroy()


async def test_a_grader_pod_receives_the_state_and_reaches_nothing(fake_api, provider, tmp_path):
    """The grader of a pod: a new pod of the task's image, labelled a grader (the run's grader NetworkPolicy
    denies it every network; not enforced by the fake), without the proxy's URL; the state comes over as tar
    through the two pods' exec streams, links as links, owners and modes kept."""
    sb = await provider.create(spec("graded", "e1", proxy_uds=tmp_path / "unused.sock"))
    grader = await provider.create_grader(sb)
    pod = fake_api.pods[grader.name]
    assert pod["metadata"]["labels"]["openforge.role"] == "grader" and pod["metadata"]["labels"][LABEL_RUN] == "graded"
    assert grader.proxy_url is None and "OPENFORGE_PROXY_URL" not in str(pod["spec"]["containers"][0].get("env"))
    policy = fake_api.policies[grader_policy_name("graded")]
    assert policy["spec"]["egress"] == [] and policy["spec"]["podSelector"]["matchLabels"]["openforge.role"] == "grader"
    with pytest.raises(NotImplementedError):  # nothing judges a grader's changes: its files were not listed
        await grader.changed_paths()
    r = await sb.exec(
        "mkdir -p /app/sub /srv/state && echo hi > /app/sub/f && chown 1000:1000 /app/sub/f && chmod 640 /app/sub/f"
        " && ln -s /etc/passwd /app/link && echo s > /srv/state/x",
        timeout_s=30,
    )
    assert r.ok, r
    await grader.remove_paths(["/app", "/srv/state"])
    copied = await sb.copy_state_to(grader, ["/app", "/srv/state", "/missing"], max_bytes=1 << 20)
    assert copied.entries == 6 and copied.dropped == []
    r = await grader.exec("stat -c '%n %u:%g %a' /app/sub/f; readlink /app/link; cat /srv/state/x", timeout_s=30)
    assert r.stdout.split("\n")[:3] == ["/app/sub/f 1000:1000 640", "/etc/passwd", "s"], r
    assert await provider.cleanup("graded") == 2 and grader_policy_name("graded") not in fake_api.policies


async def test_every_created_pod_and_policy_validates(fake_api, provider):
    """Runs last in this module: every Pod and NetworkPolicy the backend sent to the fake validates against
    the pinned Kubernetes schemas (strict: unknown fields are errors)."""
    await provider.create(spec("schema", "e1", timeout_s=30, cpus=0.5, memory_mb=300, workdir=None, env={"A": "b"}))
    assert fake_api.created_bodies and fake_api.policies
    for body in fake_api.created_bodies + list(fake_api.policies.values()):
        kubernetes_validate.validate(body, K8S_VERSION, strict=True)
    kinds = {b["kind"] for b in fake_api.created_bodies}
    assert kinds == {"Pod"} and any("initContainers" in b["spec"] for b in fake_api.created_bodies)
