"""The light core: `pip install .` with no extras, in a fresh virtual environment, with constraints.txt.

It builds and installs without a warning, brings none of the heavy optional packages (torch, transformers,
matplotlib, the Docker SDK, pyarrow, ...), `openforge --version` prints the version, and `openforge proxy
--backend vllm:URL` serves a harness's call from a FAKE vLLM server (a stand-in speaking the subset of vLLM's
HTTP API the vllm client uses: no vLLM, and no torch for `openforge serve-model`, in this environment) and
records it token-exactly. Slow (a fresh environment: about a minute or two)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import httpx
import pytest

from openforge import __version__
from openforge.models import ModelDir
from openforge.store import TrajectoryStore
from support.fake_vllm import BASH, FakeVLLM
from support.inference import ServerThread
from support.paths import REPO
from support.proxy_process import start_proxy

pytestmark = pytest.mark.slow

HEAVY = [
    "torch",
    "transformers",
    "safetensors",
    "matplotlib",
    "docker",
    "pyarrow",
    "kubernetes",
    "wandb",
    "mlflow",
    "tensorboard",
    "trackio",
]


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=600, **kw)


def warnings_in(log: str) -> list[str]:
    """Warning lines of a pip/setuptools log, without this machine's notes about its extra package indexes and
    setuptools' routine note that it does not byte-compile into a wheel."""
    return [
        line
        for line in log.splitlines()
        if re.search(r"warning", line, re.IGNORECASE)
        and "is ignored: it is neither a file nor a directory" not in line
        and "byte-compiling is disabled" not in line
    ]


@pytest.fixture(scope="module")
def light(tmp_path_factory):
    root = tmp_path_factory.mktemp("light-core")
    src = root / "src"  # a copy: setuptools writes build/ and *.egg-info into the tree it builds
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "openforge", src / "openforge", ignore=shutil.ignore_patterns("__pycache__"))
    venv = root / "venv"
    assert run([sys.executable, "-m", "venv", venv]).returncode == 0
    pip = venv / "bin" / "pip"
    built = run([pip, "wheel", "-v", "--no-deps", "-c", src / "constraints.txt", "-w", root / "wheels", src])
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = next((root / "wheels").glob("openforge_rl-*.whl"))
    installed = run([pip, "install", "-c", src / "constraints.txt", wheel])
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv, built.stdout + built.stderr, installed.stdout + installed.stderr


def test_installs_cleanly_without_heavy_packages(light):
    venv, build_log, install_log = light
    assert warnings_in(build_log) == []  # e.g. setuptools' license-table deprecation
    assert warnings_in(install_log) == []
    listed = run(
        [
            venv / "bin" / "python",
            "-c",
            "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'].lower() for d in m.distributions()))",
        ]
    ).stdout.split()
    assert "openforge-rl" in listed
    assert [h for h in HEAVY if h in listed] == []
    version = run([venv / "bin" / "openforge", "--version"])
    assert version.returncode == 0 and version.stdout.strip() == f"openforge {__version__}"


def test_a_command_that_needs_an_extra_names_it(light, tmp_path):
    venv, _, _ = light
    r = run([venv / "bin" / "openforge", "model", "tiny", tmp_path / "m"])
    assert r.returncode == 2
    assert "pip install 'openforge-rl[engine]'" in r.stderr and "Traceback" not in r.stderr


def test_proxy_serves_a_call_from_a_remote_backend(light, tmp_path, tiny_model_dir):
    venv, _, _ = light
    fake = FakeVLLM(ModelDir(tiny_model_dir))
    with ServerThread(fake.app) as server:
        proxy = start_proxy(
            tmp_path / "run", tiny_model_dir, f"vllm:{server.url}", command=[str(venv / "bin" / "openforge")]
        )
        try:
            episode = proxy.new_episode(task="t", harness="openclaw")
            r = httpx.post(
                f"{proxy.url}/v1/chat/completions",
                timeout=60,
                headers={"authorization": f"Bearer {episode['key']}"},
                json={"model": "m", "tools": [BASH], "messages": [{"role": "user", "content": "List /app."}]},
            )
            assert r.status_code == 200, r.text
            (call,) = r.json()["choices"][0]["message"]["tool_calls"]
            assert call["function"]["name"] == "bash" and '"ls /app"' in call["function"]["arguments"]
            proxy.end_episode(episode["episode_id"])
        finally:
            proxy.stop()
    assert len(fake.prompts) == 1
    with TrajectoryStore.open(tmp_path / "run") as store:
        (recorded,) = store.list_episodes()
        (stored,) = store.list_calls(recorded.id)
    assert stored.prompt_ids == fake.prompts[0] and stored.output_ids == fake.output
