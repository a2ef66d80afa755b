"""OpenClaw's compile cache: prepared in the bundle at install, read (never written) by every run wherever the
bundle is mounted, and invisible to the model: the requests are the same with and without it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from openforge.harness import LaunchContext, get_adapter
from openforge.harness.bundle import read_manifest
from openforge.harness.node_cache import CACHE_UIDS, COMPILE_CACHE, compile_cache_env
from openforge.harness.smoke import comparable
from support.harness_bundle import harness_bundle

MOUNT = PurePosixPath("/opt/openforge/harnesses")
MANIFEST = {
    "format": 1,
    "components": {"openclaw": {"argv": ["node", "openclaw.mjs"], "version": "x", "compile_cache": COMPILE_CACHE}},
}
# what Node prints (NODE_DEBUG_NATIVE=COMPILE_CACHE) for an entry read from the cache directory
READ_FROM_DISK = re.compile(r"reading cache from .*\.\.\. success")


def launch_env(manifest: dict, **options: object) -> dict[str, str]:
    home, work = PurePosixPath("/h"), PurePosixPath("/w")
    ctx = LaunchContext(MOUNT, home, work, "http://127.0.0.1:1", "k", "m", "hi", manifest=manifest)
    return get_adapter("openclaw", **options).launch(ctx).env


def test_a_launch_points_openclaw_at_the_cache_under_the_bundle_as_the_sandbox_mounts_it():
    env = launch_env(MANIFEST)
    assert env["NODE_COMPILE_CACHE"] == f"{MOUNT}/{COMPILE_CACHE}"
    assert env["NODE_COMPILE_CACHE_PORTABLE"] == "1"  # entries keyed relative to the cache: any mount point
    bare = {"format": 1, "components": {"openclaw": {"argv": ["node", "openclaw.mjs"], "version": "x"}}}
    assert "NODE_COMPILE_CACHE" not in launch_env(bare)  # a bundle without one: as before (cold)
    assert compile_cache_env(MOUNT, bare) == {}
    assert launch_env(MANIFEST, extra_env={"NODE_COMPILE_CACHE": "/mine"})["NODE_COMPILE_CACHE"] == "/mine"


def test_the_installed_bundle_carries_the_cache_linked_for_the_sandboxes_users():
    bundle = harness_bundle()
    entry = read_manifest(bundle)["components"]["openclaw"]
    cache = bundle / entry["compile_cache"]
    tags = [p for p in cache.iterdir() if p.name.startswith("v")]
    assert {int(p.name.rpartition("-")[2]) for p in tags} >= set(CACHE_UIDS)
    made = [p for p in tags if not p.is_symlink()]
    assert len(made) == 1
    assert sum(f.is_file() for f in cache.rglob("*")) > 100  # entries (most under OpenClaw's own subdirectory)
    assert all(os.readlink(p) == made[0].name for p in tags if p.is_symlink())  # relative: any mount point


def run_elsewhere(bundle: Path, mount: Path, env: dict[str, str]) -> dict:
    """A smoke run of OpenClaw with `bundle` bind-mounted at `mount` in a private mount namespace (as a container
    mounts it), with `env` and Node's compile-cache diagnostics on."""
    unshare = shutil.which("unshare")
    prefix = ["unshare", "-m", "--propagation", "private"] if os.geteuid() == 0 else ["unshare", "-rm"]
    if unshare is None or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("this test needs a mount namespace (`unshare -m`, root or user namespaces)")
        pytest.skip("no mount namespace here")
    mount.mkdir(exist_ok=True)
    env = {**env, "NODE_DEBUG_NATIVE": "COMPILE_CACHE"}
    script = (
        "import json, subprocess, sys\n"
        "from openforge.harness.smoke import smoke_run\n"
        f"subprocess.run(['mount', '--bind', {str(bundle)!r}, {str(mount)!r}], check=True)\n"
        f"r = smoke_run('openclaw', {str(mount)!r}, options={{'extra_env': {env!r}}})\n"
        "json.dump(r, sys.stdout)\n"
    )
    proc = subprocess.run([*prefix, sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_openclaw_reads_the_bundle_cache_at_another_mount_point_and_asks_the_same(tmp_path):
    bundle = harness_bundle()
    mount = tmp_path / "elsewhere"
    warm = run_elsewhere(bundle, mount, {})
    assert warm["returncode"] == 0, warm["stderr"][-2000:]
    hits = len(READ_FROM_DISK.findall(warm["stderr"]))

    cold_cache = tmp_path / "cold"  # as before the bundle had one: an empty cache of the run's own
    cold_cache.mkdir()
    cold = run_elsewhere(bundle, mount, {"NODE_COMPILE_CACHE": str(cold_cache)})
    assert cold["returncode"] == 0, cold["stderr"][-2000:]
    # compiled code came from the bundle, though mounted elsewhere (a cold run reads back only what it wrote
    # itself: OpenClaw starts a second Node process)
    cold_hits = len(READ_FROM_DISK.findall(cold["stderr"]))
    assert hits > 100 and hits > 3 * cold_hits, (hits, cold_hits)

    assert len(warm["requests"]) == len(cold["requests"]) >= 1
    for with_cache, without in zip(warm["requests"], cold["requests"]):
        assert comparable(with_cache) == comparable(without)  # the bundle's path too: it is the same here
