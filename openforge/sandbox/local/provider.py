"""The local backend's provider: sandboxes as directories under `root`, each with its cgroup when root, found
again by their metadata file after a crash (`cleanup`)."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any

from openforge.tasks.model import AgentUser

from ..base import SandboxError, SandboxProvider, SandboxSpec
from ..common import run_selector
from .bwrap import RESERVED_TOPS, make_links
from .cgroups import Cgroup
from .sandbox import LocalSandbox, remove_sandbox_dir
from .users import ensure_user, is_root

__all__ = ["LocalProvider"]

META = "openforge-sandbox.json"  # a sandbox's metadata (name, labels), beside its root


class LocalProvider(SandboxProvider):
    """Local backend. Options: `root` (where sandbox directories live; default
    `$OPENFORGE_SANDBOX_ROOT` or `/var/tmp/openforge-sandboxes`), `agent_user` (default `openforge-agent`),
    `bwrap` (the bubblewrap binary), `cgroups` (use per-sandbox cgroups when possible, default True),
    `rlimit_memory` (RLIMIT_AS as the memory fallback without cgroups, default False)."""

    name = "local"

    def __init__(
        self,
        *,
        root: Path | str | None = None,
        agent_user: str = "openforge-agent",
        bwrap: str = "bwrap",
        cgroups: bool = True,
        rlimit_memory: bool = False,
        **_ignored: Any,
    ):
        self.root = Path(root or os.environ.get("OPENFORGE_SANDBOX_ROOT") or "/var/tmp/openforge-sandboxes")
        self.agent_user = agent_user
        self.bwrap = shutil.which(bwrap) or bwrap
        self.cgroups = cgroups and is_root()
        self.rlimit_memory = rlimit_memory
        self._live: dict[str, LocalSandbox] = {}
        self._agent: tuple[int, int, str] | None = None
        self.python, self.python_prefix = self._find_python()

    @staticmethod
    def _find_python() -> tuple[str, str | None]:
        """An interpreter visible inside the sandbox for the launcher: /usr/bin/python3, else this one's base
        installation (bound read-only)."""
        if Path("/usr/bin/python3").exists():
            return "/usr/bin/python3", None
        base = Path(sys.base_prefix)
        exe = Path(getattr(sys, "_base_executable", sys.executable))
        if str(base).startswith("/usr/"):
            return str(exe), None
        return str(exe), str(base)

    def spec_user(self, agent: AgentUser) -> str | None:
        """The agent always runs as this backend's own unprivileged user (`agent_user`), root or not."""
        return None

    def forget(self, name: str) -> None:
        """A destroyed sandbox leaves the provider's live set."""
        self._live.pop(name, None)

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        if not Path(self.bwrap).exists():
            raise SandboxError("the local sandbox needs bubblewrap: apt-get install bubblewrap")
        if spec.name in self._live:
            raise SandboxError(f"sandbox {spec.name} already exists in this process; names must be unique")
        if spec.proxy_uds is not None and not Path(spec.proxy_uds).exists():
            raise SandboxError(f"sandbox {spec.name}: the proxy socket {spec.proxy_uds} does not exist")
        for m in spec.mounts:
            if not Path(m.source).exists():
                raise SandboxError(f"sandbox {spec.name}: mount source {m.source} does not exist")
        return await asyncio.to_thread(self._create_blocking, spec)

    def _create_blocking(self, spec: SandboxSpec) -> LocalSandbox:
        if self._agent is None:
            if is_root():
                self._agent = ensure_user(self.agent_user)
            else:
                pw = pwd.getpwuid(os.getuid())
                self._agent = (pw.pw_uid, pw.pw_gid, pw.pw_dir)
        uid, gid, home = self._agent
        if not is_root():
            home = "/home/" + pwd.getpwuid(uid).pw_name
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(self.root, 0o711)
        except OSError:
            pass
        d = self.root / spec.name
        if d.exists():  # a leftover of a crashed earlier attempt
            remove_sandbox_dir(d, Cgroup.existing(spec.name))
        d.mkdir(mode=0o700)
        fs = d / "fs"
        fs.mkdir(mode=0o755)
        os.chmod(fs, 0o755)
        make_links(fs)
        try:
            workdir = PurePosixPath(spec.workdir or "/app")
            if workdir.parts[1] in RESERVED_TOPS:
                raise SandboxError(f"sandbox {spec.name}: workdir {workdir} is inside the host's read-only system dirs")
            for sub, mode, owner in (
                ("tmp", 0o1777, None),
                ("root", 0o700, None),
                ("logs/verifier", 0o755, None),
                (home.lstrip("/"), 0o755, (uid, gid)),
                (str(workdir).lstrip("/"), 0o755, (uid, gid)),
            ):
                p = fs / sub
                p.mkdir(parents=True, exist_ok=True)
                os.chmod(p, mode)
                if owner is not None and is_root():
                    os.chown(p, *owner)
            cg = Cgroup(spec.name)
            if self.cgroups:
                cg.create(spec.memory_mb, spec.pids, spec.cpus)
            meta = {"name": spec.name, "labels": spec.all_labels(), "created": time.time(), "pid": os.getpid()}
            (d / META).write_text(json.dumps(meta))
        except BaseException:
            remove_sandbox_dir(d, Cgroup.existing(spec.name))
            raise
        sb = LocalSandbox(self, spec, d, cg, (uid, gid, home))
        self._live[spec.name] = sb
        return sb

    def _scan(self, run_label: str | None) -> list[Path]:
        out: list[Path] = []
        if not self.root.is_dir():
            return out
        want = run_selector(run_label)
        for d in sorted(self.root.iterdir()):
            try:
                labels = json.loads((d / META).read_text()).get("labels", {})
            except (OSError, ValueError):
                continue
            if all(labels.get(k) == v for k, v in want.items()):
                out.append(d)
        return out

    async def list(self, run_label: str | None = None) -> list[str]:
        return [d.name for d in await asyncio.to_thread(self._scan, run_label)]

    async def cleanup(self, run_label: str | None) -> int:
        dirs = await asyncio.to_thread(self._scan, run_label)
        for d in dirs:
            sb = self._live.get(d.name)
            if sb is not None:
                await sb.destroy()
            else:
                await asyncio.to_thread(remove_sandbox_dir, d, Cgroup.existing(d.name))
        return len(dirs)
