"""The proxy/CLI image (docker/Dockerfile, built by scripts/build-image.sh FROM the offline base image: nothing
downloaded or pulled during the build): `openforge --version` in it, the proxy in it serving a harness's call
from a FAKE vLLM server (a stand-in: no vLLM here) with compose.yaml's proxy command, and `openforge k8s
manifests` naming the image by default. Slow: collects the wheels and builds the image (about a minute)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from openforge import __version__
from openforge.cli import app
from openforge.models import ModelDir
from openforge.sandbox.kubernetes.manifests import PROXY_IMAGE
from openforge.store import TrajectoryStore
from support.fake_vllm import BASH, FakeVLLM
from support.inference import ServerThread, free_port
from support.paths import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def image(docker_ready):
    tag = f"openforge-test-{secrets.token_hex(4)}:dev"
    r = subprocess.run(
        ["bash", str(REPO / "scripts/build-image.sh"), "--tag", tag],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == tag
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_version_in_the_image(image):
    r = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image, "--version"], capture_output=True, text=True
    )
    assert r.returncode == 0 and r.stdout.strip() == f"openforge {__version__}"


def test_k8s_manifests_name_the_image_by_default():
    result = CliRunner().invoke(app, ["k8s", "manifests", "--run", "exp1"])
    assert result.exit_code == 0, result.output
    images = {
        c["image"]
        for doc in yaml.safe_load_all(result.output)
        if doc and doc["kind"] == "Deployment"
        for c in doc["spec"]["template"]["spec"]["containers"]
    }
    assert images == {PROXY_IMAGE} == {f"openforge:{__version__}"}
    assert "TAG=openforge:$VERSION" in (REPO / "scripts/build-image.sh").read_text()  # what the script builds
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    assert compose["services"]["proxy"]["image"] == "${OPENFORGE_IMAGE:-" + PROXY_IMAGE + "}"


def test_the_proxy_in_the_image_serves_and_records(image, tmp_path, tiny_model_dir):
    fake = FakeVLLM(ModelDir(tiny_model_dir))
    model = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    model.chmod(0o755)  # the image runs as its user `agent`: the model readable, the run directory writable
    runs = tmp_path / "runs"
    runs.mkdir()
    runs.chmod(0o777)
    port, admin_port, token = free_port(), free_port(), secrets.token_hex(8)
    with ServerThread(fake.app) as server:
        command = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["proxy"]["command"]
        command = [
            a.replace("http://${MODEL_SERVER:-vllm}:8000", server.url)
            .replace("0.0.0.0:8100", f"127.0.0.1:{port}")
            .replace("0.0.0.0:8101", f"127.0.0.1:{admin_port}")
            for a in command
        ]
        name = f"openforge-test-proxy-{secrets.token_hex(4)}"
        subprocess.run(
            [
                "docker",
                "run",
                "-d",
                "--name",
                name,
                "--network",
                "host",
                "-e",
                f"OPENFORGE_ADMIN_TOKEN={token}",
                "-v",
                f"{model}:/models/policy:ro",
                "-v",
                f"{runs}:/runs",
                image,
                *command,
            ],
            check=True,
            capture_output=True,
        )
        try:
            admin = httpx.Client(
                base_url=f"http://127.0.0.1:{admin_port}", timeout=30, headers={"authorization": f"Bearer {token}"}
            )
            deadline = time.monotonic() + 60
            while True:
                try:
                    if admin.get("/admin/status").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, subprocess.run(
                    ["docker", "logs", name], capture_output=True, text=True
                ).stderr[-2000:]
                time.sleep(0.3)
            episode = admin.post("/admin/episodes", json={"task": "t", "harness": "openclaw"}).json()
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                timeout=60,
                headers={"authorization": f"Bearer {episode['key']}"},
                json={"model": "m", "tools": [BASH], "messages": [{"role": "user", "content": "List /app."}]},
            )
            assert r.status_code == 200, r.text
            (call,) = r.json()["choices"][0]["message"]["tool_calls"]
            assert call["function"]["name"] == "bash" and json.loads(call["function"]["arguments"]) == {
                "command": "ls /app"
            }
        finally:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    with TrajectoryStore.open(runs / "compose") as store:
        (episode_row,) = store.list_episodes()
        (stored,) = store.list_calls(episode_row.id)
    assert stored.prompt_ids == fake.prompts[0] and stored.output_ids == fake.output
