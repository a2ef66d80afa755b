"""The orchestrator with the `kubernetes` sandbox backend against `FakeKubernetesAPI` (a FAKE API server,
tests/support/k8s_fake.py; no real cluster): the react harness + oracle policy solve a task in fake pods, a pod
evicted mid-episode is a `sandbox_error` that is retried, and after the orchestrator is SIGKILLed
`openforge k8s cleanup` removes every pod of the run and its NetworkPolicy.

The fake's pods share the host's network here so the harness reaches the run's proxy on loopback; in a
cluster it reaches the proxy's Service (that part, and NetworkPolicy enforcement, is unverified)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openforge.cli import app
from openforge.core import Outcome
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.rollout.orchestrator import run_label
from openforge.sandbox import local_available
from openforge.store import TrajectoryStore

pytest.importorskip("kubernetes")

from support.k8s_fake import FakeKubernetesAPI
from support.paths import REPO


@pytest.fixture
def fake_api(tmp_path):
    ok, why = local_available()
    if not ok:
        pytest.skip(f"the fake API server's kubelet runs commands with bubblewrap: {why}")
    with FakeKubernetesAPI(tmp_path / "fake-k8s", host_network=True) as api:
        yield api


def image_task(root: Path, task_id: str) -> Path:
    """A task that names a pre-built image (Kubernetes builds nothing)."""
    d = root / task_id
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "instruction.md").write_text(f"Task {task_id}: create done.txt in /app.\n")
    (d / "task.toml").write_text(
        f'version = "1.0"\n[metadata]\nid = "{task_id}"\n[verifier]\ntimeout_sec = 30.0\n[agent]\ntimeout_sec = 60\n'
        '[environment]\ndocker_image = "registry.example/openforge-base:bookworm"\ncpus = 1\nmemory_mb = 512\n'
        'workdir = "/app"\n'
    )
    (d / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if [ -f /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\ntouch /app/done.txt\n")
    return d


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_evicted_pod_is_a_sandbox_error_and_is_retried(fake_api, tmp_path, tiny_model_dir):
    image_task(tmp_path / "tasks", "touch")
    port = free_port()
    evicted: list[str] = []

    def evict_first_harness(name: str, argv: list[str]) -> float | None:
        if "react_agent.py" in " ".join(argv) and not evicted:
            evicted.append(name)
            return 0.0  # mid-episode: as soon as the harness runs (a fast harness must not finish first)
        return None

    fake_api.on_exec = evict_first_harness
    run = tmp_path / "run"
    config = RolloutConfig(
        tasks=[tmp_path / "tasks"],
        model=tiny_model_dir,
        backend="oracle",
        run=run,
        sandbox="kubernetes",
        concurrency=1,
        max_attempts=2,
        proxy_listen=f"127.0.0.1:{port}",
        harness_options={"react": {"max_steps": 4}},
        sandbox_options={
            "kubeconfig": str(fake_api.write_kubeconfig(tmp_path / "kubeconfig")),
            "namespace": "openforge",
            "proxy_url": f"http://127.0.0.1:{port}",
        },
    )
    summary = await run_rollouts(config)
    assert summary.outcomes == {"passed": 1}, summary.outcomes
    # the first attempt's pod (and its grader) started ahead of it (warm_sandboxes); the retry made its own
    assert (summary.warm.hits, summary.warm.misses) == (1, 1)
    with TrajectoryStore.open(run) as store:
        attempts = sorted(store.list_episodes(), key=lambda e: e.attempt)
    assert [(e.outcome, e.metadata["final"]) for e in attempts] == [
        (Outcome.sandbox_error, False),
        (Outcome.passed, True),
    ]
    assert "evicted: The node was low on resource: memory." in attempts[0].outcome_reason
    assert evicted and not fake_api.pods  # every pod was removed
    assert not fake_api.policies  # and the run's NetworkPolicy, at the end of the run
    created = [b["metadata"]["labels"]["openforge.run"] for b in fake_api.created_bodies]
    assert created == [run_label(run)] * 4  # each attempt's pod and its grader (made while the agent works)
    roles = [b["metadata"]["labels"].get("openforge.role") for b in fake_api.created_bodies]
    assert roles.count("grader") == 2 and roles.count(None) == 2


def test_cleanup_after_the_orchestrator_is_killed(fake_api, tmp_path, tiny_model_dir):
    image_task(tmp_path / "tasks", "a")
    image_task(tmp_path / "tasks", "b")
    fake_api.unschedulable = lambda name: True  # pods stay Pending while the orchestrator waits for them
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'tests'}"}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openforge.cli",
            "rollout",
            "--tasks",
            str(tmp_path / "tasks"),
            "--model",
            str(tiny_model_dir),
            "--backend",
            "oracle",
            "--run",
            str(run),
            "--sandbox",
            "kubernetes",
            "--concurrency",
            "2",
            "--sandbox-option",
            f"kubeconfig={kubeconfig}",
            "--sandbox-option",
            "namespace=openforge",
            "--sandbox-option",
            "unschedulable_timeout_s=600",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 120
        while len(fake_api.pods) < 2 and time.monotonic() < end and child.poll() is None:
            time.sleep(0.2)
        assert len(fake_api.pods) == 2, child.stderr.read().decode()[-2000:] if child.poll() is not None else ""
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    label = run_label(run)
    assert len(fake_api.pods) == 2 and fake_api.policies  # the killed orchestrator left them behind
    assert all(p["metadata"]["labels"]["openforge.run"] == label for p in fake_api.pods.values())
    r = CliRunner().invoke(
        app, ["k8s", "cleanup", "--run", str(run), "--namespace", "openforge", "--kubeconfig", str(kubeconfig)]
    )
    assert r.exit_code == 0, r.output
    assert f"removed 2 pod(s) of run {label}" in r.output
    assert not fake_api.pods and not fake_api.policies
