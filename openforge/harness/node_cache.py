"""OpenClaw's Node compile cache, prepared once per bundle and shared read-only by every episode.

OpenClaw runs on Node and spends most of its ~12 s start compiling its JavaScript; Node's compile cache
(`NODE_COMPILE_CACHE`) keeps the compiled code. Each episode has its own TMPDIR (the default cache's home), so
every run started cold. Here the bundle carries the cache: `openforge harness install` runs OpenClaw once against
the loopback stub (`smoke.smoke_run`) with the cache pointed into the bundle, in Node's portable mode
(`NODE_COMPILE_CACHE_PORTABLE=1`: entries are keyed by paths relative to the cache, so the cache is valid
wherever the bundle is mounted: a container's `/opt/openforge/harnesses`, a Kubernetes image, the host).

Episodes get it read-only (the bundle is mounted read-only): an episode cannot plant compiled code for the
next one. Node checks each entry against the source it compiles and its own version and flags, so a stale
entry is recompiled, never run. Node files its entries under a directory named for the uid (`...-<uid>`):
the cache is written as the installer's uid and linked for root (containers) and nobody (the local sandbox's
jail user), so those find it; another uid starts cold, as before.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from openforge.harness.bundle import BundleError

COMPILE_CACHE = "openclaw/compile-cache"  # relative to the bundle, inside OpenClaw's component directory
CACHE_UIDS = (0, 65534)  # root (Docker and Kubernetes sandboxes) and nobody (the local sandbox's jail)


class CompileCacheError(BundleError):
    """The warm-up run of OpenClaw failed: the bundle is kept, without a cache (OpenClaw starts cold)."""


def compile_cache_env(bundle_root: PurePosixPath, manifest: dict[str, Any]) -> dict[str, str]:
    """The environment that points OpenClaw at the bundle's compile cache, as the harness sees the bundle at
    `bundle_root`; empty when the bundle has none."""
    cache = (manifest.get("components", {}).get("openclaw") or {}).get("compile_cache")
    if not cache:
        return {}
    return {"NODE_COMPILE_CACHE": str(bundle_root / cache), "NODE_COMPILE_CACHE_PORTABLE": "1"}


def prepare_compile_cache(bundle: Path) -> str:
    """Fill `bundle`'s compile cache with one OpenClaw run against the stub; returns its path relative to the
    bundle (for the manifest). CompileCacheError when the run fails."""
    from openforge.harness.smoke import smoke_run

    cache = bundle / COMPILE_CACHE
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    env = {"NODE_COMPILE_CACHE": str(cache.resolve())}
    result = smoke_run("openclaw", bundle, options={"extra_env": env})
    if result["returncode"] != 0 or not result["requests"]:
        shutil.rmtree(cache, ignore_errors=True)
        raise CompileCacheError(
            f"OpenClaw's warm-up run exited {result['returncode']} after {len(result['requests'])} model call(s):\n"
            + result["stderr"][-2000:]
        )
    _link_uids(cache)
    return COMPILE_CACHE


def _link_uids(cache: Path) -> None:
    """Node's entries sit under `<node version>-<arch>-<flags hash>-<uid>` (at the top, and under OpenClaw's
    own subdirectories): link each such directory for the uids sandboxes run OpenClaw as."""
    for made in [p for p in cache.rglob("v*-*-*-*") if p.is_dir() and not p.is_symlink()]:
        stem, _, uid = made.name.rpartition("-")
        if not uid.isdigit():
            continue
        for other in CACHE_UIDS:
            link = made.with_name(f"{stem}-{other}")
            if not link.exists():
                os.symlink(made.name, link)  # relative: valid wherever the bundle is mounted
