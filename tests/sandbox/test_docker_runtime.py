"""The OCI runtime of Docker sandboxes, against the real daemon: by default (`runtime: auto`) every container of
an episode — the agent's and its grader — runs under crun where the daemon has it (scripts/prepare-sandboxes.sh
installs it, scripts/start-docker.sh registers it), and under the daemon's default where crun cannot start one
(said once; the daemon's refusal is faked, see `crun_refuses`); episodes under crun are graded as under runc; a
runtime named by the `runtime` option is used, and one the daemon lacks, or cannot start a container with, is
one configuration error before any episode runs, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from conftest import managed_containers, unavailable
from openforge.sandbox import SandboxSpec, get_provider, sandbox_name
from support.paths import EXAMPLES
from support.rollout import eval_cli

RUN = f"pytest-runtime-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def crun(docker_ready) -> str:
    runtimes = subprocess.run(
        ["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True, check=True
    ).stdout
    if "crun" not in json.loads(runtimes):
        unavailable("the Docker daemon has no crun runtime (scripts/prepare-sandboxes.sh installs and registers it)")
    return "crun"


def _runtime_of(container_id: str) -> str:
    out = subprocess.run(
        ["docker", "inspect", "--format", "{{.HostConfig.Runtime}}", container_id],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


# What crun answers on a host that mounts cgroup v1 and v2 together with a controller on the v2 side (as this
# machine did before scripts/start-docker.sh moved hugetlb): no registered runtime fails like that on a host the
# script prepared, so the daemon's refusal is faked — only for containers created with crun; the rest is real.
CRUN_REFUSAL = "OCI runtime create failed: cgroups in hybrid mode not supported, drop all controllers from cgroupv2"


@pytest.fixture
def crun_refuses(monkeypatch, crun):
    """FAKE: the daemon refuses to start any container whose HostConfig names crun, as crun does on a hybrid host."""
    import docker.api.container
    import docker.errors

    start = docker.api.container.ContainerApiMixin.start

    def refusing_start(self, container, *args, **kwargs):
        if self.inspect_container(container)["HostConfig"].get("Runtime") == crun:
            raise docker.errors.APIError(f"500 Server Error: failed to create shim task: {CRUN_REFUSAL}: unknown")
        return start(self, container, *args, **kwargs)

    monkeypatch.setattr(docker.api.container.ContainerApiMixin, "start", refusing_start)


async def _agent_and_grader_runtimes(provider) -> tuple[str, str]:
    try:
        agent = await provider.create(
            SandboxSpec(name=sandbox_name(RUN, "agent"), run=RUN, image="openforge-base:bookworm")
        )
        grader = await provider.create_grader(agent)
        r = await grader.exec(["/bin/sh", "-c", "echo ok"], timeout_s=30)
        assert r.ok and r.stdout == "ok\n"
        return _runtime_of(agent.id), _runtime_of(grader.id)
    finally:
        await provider.cleanup(RUN)
        await provider.close()


async def test_by_default_the_agents_sandbox_and_its_grader_run_under_crun(crun):
    assert await _agent_and_grader_runtimes(get_provider("docker")) == (crun, crun)


async def test_a_named_runtime_is_used_for_both(crun):
    assert await _agent_and_grader_runtimes(get_provider("docker", runtime="runc")) == ("runc", "runc")


async def test_where_crun_cannot_start_a_container_the_daemons_default_does_once_said(crun_refuses, caplog):
    assert await _agent_and_grader_runtimes(get_provider("docker")) == ("runc", "runc")
    said = [r for r in caplog.records if "cannot start containers on this Docker daemon" in r.getMessage()]
    assert len(said) == 1 and "crun" in said[0].getMessage() and "hybrid" in said[0].getMessage()


async def test_the_named_runtime_is_checked_before_a_run(crun):
    provider = get_provider("docker", runtime=crun)
    try:
        assert await provider.setup_problem(["openforge-base:bookworm"]) is None
    finally:
        await provider.cleanup(RUN)
        await provider.close()


TWO_TASKS = [EXAMPLES / "train" / "create-greeting", EXAMPLES / "train" / "grep-errors"]


@pytest.mark.parametrize("runtime", ["crun", "runc"])
def test_oracle_episodes_pass_under_either_runtime(crun, tmp_path, tiny_model_dir, runtime):
    result = eval_cli(TWO_TASKS, tmp_path / "run", tiny_model_dir, "--sandbox-option", f"runtime={runtime}")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["outcomes"]["passed"] == 2 and report["tampered_episodes"] == [], report["outcomes"]


def test_a_runtime_the_daemon_lacks_is_one_error_before_any_episode(docker_ready, tmp_path, tiny_model_dir):
    before = set(managed_containers())
    result = eval_cli(
        TWO_TASKS, tmp_path / "run", tiny_model_dir, "--sandbox-option", "runtime=openforge-no-such-runtime"
    )
    assert result.exit_code == 2, result.output
    assert "runtime='openforge-no-such-runtime'" in result.output and "runc" in result.output
    assert "--add-runtime" in result.output
    assert not (tmp_path / "run" / "trajectories.db").exists()  # nothing ran
    assert set(managed_containers()) == before


def test_a_runtime_that_cannot_start_a_container_is_one_error_before_any_episode(
    crun_refuses, tmp_path, tiny_model_dir
):
    before = set(managed_containers())
    result = eval_cli(TWO_TASKS, tmp_path / "run", tiny_model_dir, "--sandbox-option", "runtime=crun")
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "runtime='crun': a container does not start" in said and "scripts/start-docker.sh" in said
    assert not (tmp_path / "run" / "trajectories.db").exists()
    assert set(managed_containers()) == before
