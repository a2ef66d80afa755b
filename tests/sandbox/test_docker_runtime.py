"""Docker's `runtime` option against the real daemon: every container of an episode — the agent's and its
grader — runs under the named OCI runtime (crun, which scripts/prepare-sandboxes.sh installs and
scripts/start-docker.sh registers), episodes under it are graded as under the daemon's default, and a runtime
the daemon lacks is one configuration error before any episode runs, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
from typer.testing import CliRunner

from conftest import managed_containers, unavailable
from openforge.cli import app
from openforge.sandbox import SandboxSpec, get_provider, sandbox_name
from support.paths import EXAMPLES

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


async def test_the_agents_sandbox_and_its_grader_run_under_the_named_runtime(crun):
    provider = get_provider("docker", runtime=crun)
    try:
        agent = await provider.create(
            SandboxSpec(name=sandbox_name(RUN, "agent"), run=RUN, image="openforge-base:bookworm")
        )
        grader = await provider.create_grader(agent)
        assert _runtime_of(agent.id) == crun and _runtime_of(grader.id) == crun
        r = await grader.exec(["/bin/sh", "-c", "echo ok"], timeout_s=30)
        assert r.ok and r.stdout == "ok\n"
        assert await provider.setup_problem(["openforge-base:bookworm"]) is None
    finally:
        await provider.cleanup(RUN)
        await provider.close()


def _eval(tmp_path, model, *extra: str):
    return CliRunner().invoke(
        app,
        [
            "eval",
            "--tasks",
            str(EXAMPLES / "train" / "create-greeting"),
            "--tasks",
            str(EXAMPLES / "train" / "grep-errors"),
            "--harness",
            "react",
            "--sandbox",
            "docker",
            "--model",
            str(model),
            "--backend",
            "oracle",
            "--run",
            str(tmp_path / "run"),
            *extra,
        ],
    )


def test_oracle_episodes_under_crun_are_graded_as_under_the_default(crun, tmp_path, tiny_model_dir):
    result = _eval(tmp_path, tiny_model_dir, "--sandbox-option", f"runtime={crun}")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["outcomes"]["passed"] == 2 and report["tampered_episodes"] == [], report["outcomes"]


def test_a_runtime_the_daemon_lacks_is_one_error_before_any_episode(docker_ready, tmp_path, tiny_model_dir):
    before = set(managed_containers())
    result = _eval(tmp_path, tiny_model_dir, "--sandbox-option", "runtime=openforge-no-such-runtime")
    assert result.exit_code == 2, result.output
    assert "runtime='openforge-no-such-runtime'" in result.output and "runc" in result.output
    assert "--add-runtime" in result.output
    assert not (tmp_path / "run" / "trajectories.db").exists()  # nothing ran
    assert set(managed_containers()) == before
