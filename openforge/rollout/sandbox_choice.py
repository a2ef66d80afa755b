"""`sandbox: auto`: Docker when a daemon can be started and the offline base image built, else the local
(bubblewrap) sandbox."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rich.console import Console

from openforge.sandbox import docker_available

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def choose_sandbox(requested: str, console: Console) -> str:
    """`requested`, or for `auto` the backend this machine can run."""
    if requested != "auto":
        return requested
    ok, _ = docker_available()
    if not ok:
        start = SCRIPTS / "start-docker.sh"
        if start.is_file():
            subprocess.run(["bash", str(start)], capture_output=True)
        ok, _ = docker_available()
    if ok:
        base = SCRIPTS / "build-base-image.sh"
        if base.is_file() and subprocess.run(["bash", str(base)], capture_output=True).returncode == 0:
            return "docker"
    console.print("[yellow]no Docker daemon could be started: using the local (bubblewrap) sandbox[/]")
    return "local"
