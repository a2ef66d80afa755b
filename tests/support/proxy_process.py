"""Run `openforge proxy` as a real process on loopback (port 0) and talk to its admin API. No tests here."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass
class ProxyProcess:
    proc: subprocess.Popen
    run: Path
    url: str
    admin_url: str
    admin_token: str

    def admin(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.admin_url, headers={"authorization": f"Bearer {self.admin_token}"}, timeout=30
        )

    def new_episode(self, task=None, harness=None) -> dict:
        with self.admin() as admin:
            r = admin.post("/admin/episodes", json={"task": task, "harness": harness})
            r.raise_for_status()
            return r.json()

    def end_episode(self, episode_id: str) -> None:
        with self.admin() as admin:
            admin.post(f"/admin/episodes/{episode_id}/end").raise_for_status()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start_proxy(
    run: Path, model_dir: Path, backend: str, *extra: str, command: list[str] | None = None
) -> ProxyProcess:
    """`command`: the `openforge` command to run (default: this interpreter's `python -m openforge.cli`)."""
    run.mkdir(parents=True, exist_ok=True)
    info_path = run / "proxy.json"
    info_path.unlink(missing_ok=True)
    log = open(run / "proxy.log", "ab")
    proc = subprocess.Popen(
        [
            *(command or [sys.executable, "-m", "openforge.cli"]),
            "proxy",
            "--model",
            str(model_dir),
            "--backend",
            backend,
            "--run",
            str(run),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            *extra,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while not info_path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"proxy did not start:\n{(run / 'proxy.log').read_text()}")
        time.sleep(0.05)
    info = json.loads(info_path.read_text())
    return ProxyProcess(proc, run, info["url"], info["admin_url"], info["admin_token"])
