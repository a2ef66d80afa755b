"""What each Docker operation an episode makes costs the machine (CPU seconds of the whole machine, from
/proc/stat, and wall time, per call), and how many of each one episode makes: the map of where an OpenForge
Docker episode's CPU goes (issue 26: with a fast model, the episode is the cost, and on a 2-core machine its CPU
bounds the episodes per minute).

    python benchmarks/docker_costs.py --json benchmarks/results/docker-costs.json

Per call, on an idle container of the offline base image: the tamper check's read of the container's changes,
as `docker diff` and as OpenForge reads them from the overlay2 layers on the host (`overlay_read`), an exec of
`true`, a `put_archive` and a
`get_archive` of a 1 kB file (each re-executes the daemon's binary to untar / tar in the container's root), an
`inspect`, and a container's create + start + remove (network none, the daemon's init). Then 8 episodes of the
shipped tasks (react, oracle, concurrency 2) with the Docker SDK's calls counted, and the estimate: calls per
episode x cost per call, against the episode's measured CPU. Not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import io
import json
import platform
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker.api.client
from _machine import host_cpu_s
from episode_phases import TASKS

import docker
from openforge.models import build_tiny_model
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.sandbox.docker.overlay import OverlayLayers, overlay_changes

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "openforge-base:bookworm"
COUNTED = ("create_container", "start", "remove_container", "exec_create", "put_archive", "get_archive")


def per_call(fn: Callable[[], object], n: int) -> dict[str, float]:
    time.sleep(1)  # let the previous step's work settle
    c0, t0 = host_cpu_s(), time.monotonic()
    for _ in range(n):
        fn()
    return {"cpu_s": (host_cpu_s() - c0) / n, "wall_s": (time.monotonic() - t0) / n}


def call_costs(api: docker.APIClient, n: int) -> dict[str, dict[str, float]]:
    def new() -> str:
        config = api.create_host_config(network_mode="none", init=True)
        cid = api.create_container(IMAGE, command=["sleep", "infinity"], host_config=config)["Id"]
        api.start(cid)
        return cid

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("f.txt")
        info.size = 1000
        tar.addfile(info, io.BytesIO(b"x" * 1000))
    archive = buf.getvalue()
    cid = new()
    try:

        def exec_true() -> None:
            e = api.exec_create(cid, ["true"])
            api.exec_start(e["Id"])
            api.exec_inspect(e["Id"])

        def get() -> None:
            stream, _ = api.get_archive(cid, "/tmp/f.txt")
            b"".join(stream)

        exec_true()
        api.put_archive(cid, "/tmp", archive)  # a change for the tamper check to find
        layers = OverlayLayers.of(api.inspect_container(cid))
        overlay = {"overlay_read": per_call(lambda: overlay_changes(layers), n)} if layers is not None else {}
        return {
            "docker_diff": per_call(lambda: api.diff(cid), n),
            **overlay,
            "exec": per_call(exec_true, n),
            "put_archive": per_call(lambda: api.put_archive(cid, "/tmp", archive), n),
            "get_archive": per_call(get, n),
            "inspect": per_call(lambda: api.inspect_container(cid), n),
            "container": per_call(lambda: api.remove_container(new(), force=True), max(3, n // 2)),
        }
    finally:
        api.remove_container(cid, force=True)


def episode_calls(work: Path) -> tuple[dict[str, float], float]:
    """Docker SDK calls per episode over 8 episodes, and the machine's CPU seconds per episode."""
    counts: collections.Counter[str] = collections.Counter()
    client = docker.api.client.APIClient
    originals = {name: getattr(client, name) for name in COUNTED}

    def counting(name: str, f: Callable) -> Callable:
        def call(*a, **k):  # noqa: ANN002, ANN003, ANN202
            counts[name] += 1
            return f(*a, **k)

        return call

    for name, f in originals.items():
        setattr(client, name, counting(name, f))
    try:
        model = work / "model"
        build_tiny_model(model)
        config = RolloutConfig(
            tasks=[ROOT / "examples" / "tasks"],
            task_ids=TASKS,
            harnesses=["react"],
            sandbox="docker",
            concurrency=2,
            model=model,
            backend="oracle",
            run=work / "run",
            image_map={"debian:bookworm-slim": IMAGE},
        )
        asyncio.run(run_rollouts(config))  # the tasks' images built, not counted
        shutil.rmtree(work / "run")
        counts.clear()
        c0 = host_cpu_s()
        asyncio.run(run_rollouts(config))
        cpu = (host_cpu_s() - c0) / len(TASKS)
    finally:
        for name, f in originals.items():
            setattr(client, name, f)
    return {k: v / len(TASKS) for k, v in counts.items()}, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20, help="calls per operation (containers: half)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    api = docker.APIClient()
    costs = call_costs(api, args.calls)
    with tempfile.TemporaryDirectory(prefix="openforge-docker-costs-") as work:
        calls, episode_cpu = episode_calls(Path(work))
    cost = {
        "containers (create + start + remove)": calls.get("create_container", 0) * costs["container"]["cpu_s"],
        "execs": calls.get("exec_create", 0) * costs["exec"]["cpu_s"],
        "archive copies": calls.get("put_archive", 0) * costs["put_archive"]["cpu_s"]
        + calls.get("get_archive", 0) * costs["get_archive"]["cpu_s"],
    }
    for name, c in costs.items():
        print(f"{name:12s} {c['cpu_s'] * 1000:6.0f} ms CPU  {c['wall_s'] * 1000:6.0f} ms wall per call")
    print(f"per episode: {', '.join(f'{k} {v:.2f}' for k, v in sorted(calls.items()))} calls")
    for name, c in cost.items():
        print(f"  {name}: ~{c:.2f} s CPU")
    print(f"  the rest (OpenForge's process, the harness, the verifier): ~{episode_cpu - sum(cost.values()):.2f} s")
    print(f"the machine's CPU per episode: {episode_cpu:.2f} s")
    if args.json:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
        args.json.write_text(
            json.dumps(
                {
                    "command": "python benchmarks/docker_costs.py --json " + str(args.json),
                    "commit": commit.stdout.strip(),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "machine": f"{platform.machine()}, {platform.system()}",
                    "per_call": costs,
                    "calls_per_episode": calls,
                    "cpu_s_per_episode": episode_cpu,
                    "estimate_s": cost,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
