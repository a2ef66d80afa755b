"""A local sandbox's own cgroup (v1: a directory per controller; v2: one directory): memory (no swap on top),
pids and CPU quota enforced by the kernel, every process of the sandbox killable at once, and the OOM-kill
counter behind `status().oom_killed`. Needs root and a writable hierarchy; without, the sandbox falls back to
rlimits."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["Cgroup"]


class Cgroup:
    """One sandbox's cgroup(s): v1 (a directory per controller) or v2 (one directory). Best effort: `ok` is
    False when the hierarchy is not writable, and the sandbox falls back to rlimits."""

    def __init__(self, name: str):
        self.name = name
        self.dirs: dict[str, Path] = {}  # controller -> directory ("unified" for v2)
        self.version = 0
        self.error = ""

    @staticmethod
    def _own_paths() -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, ctrls, path = line.split(":", 2)
                for c in ctrls.split(",") if ctrls else [""]:
                    out[c] = path
        except OSError:
            pass
        return out

    def create(self, memory_mb: int, pids: int, cpus: float) -> bool:
        own = self._own_paths()
        base = Path("/sys/fs/cgroup")
        mem = memory_mb * 1024 * 1024
        try:
            if (base / "memory").is_dir() and (base / "pids").is_dir():  # v1
                self.version = 1
                for ctrl in ("memory", "pids", "cpu"):
                    root = base / ctrl
                    if not root.is_dir():
                        continue
                    parent = root / own.get(ctrl, "/").lstrip("/")
                    if not parent.is_dir():
                        parent = root
                    d = parent / "openforge" / self.name
                    d.mkdir(parents=True, exist_ok=True)
                    self.dirs[ctrl] = d
                m = self.dirs["memory"]
                (m / "memory.limit_in_bytes").write_text(str(mem))
                if (m / "memory.memsw.limit_in_bytes").exists():
                    (m / "memory.memsw.limit_in_bytes").write_text(str(mem))
                (self.dirs["pids"] / "pids.max").write_text(str(pids))
                if "cpu" in self.dirs:
                    (self.dirs["cpu"] / "cpu.cfs_period_us").write_text("100000")
                    (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(max(1000, int(cpus * 100000))))
                return True
            if (base / "cgroup.controllers").exists():  # v2
                self.version = 2
                parent = base / own.get("", "/").lstrip("/")
                top = parent / "openforge"
                top.mkdir(exist_ok=True)
                for p in (parent, top):
                    try:
                        (p / "cgroup.subtree_control").write_text("+memory +pids +cpu")
                    except OSError:
                        pass
                d = top / self.name
                d.mkdir(exist_ok=True)
                self.dirs["unified"] = d
                (d / "memory.max").write_text(str(mem))
                if (d / "memory.swap.max").exists():
                    (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(pids))
                if (d / "cpu.max").exists():
                    (d / "cpu.max").write_text(f"{max(1000, int(cpus * 100000))} 100000")
                return True
            self.error = "no cgroup hierarchy found"
        except OSError as e:
            self.error = f"cgroups not usable: {e}"
        self.remove()
        return False

    @property
    def ok(self) -> bool:
        return bool(self.dirs)

    def attach_self(self) -> None:
        """Called in the child between fork and exec (preexec_fn): move it into every controller's group."""
        pid = str(os.getpid())
        for d in self.dirs.values():
            with open(d / "cgroup.procs", "w") as f:
                f.write(pid)

    def oom_kills(self) -> int:
        try:
            if self.version == 1 and "memory" in self.dirs:
                text = (self.dirs["memory"] / "memory.oom_control").read_text()
            elif self.version == 2:
                text = (self.dirs["unified"] / "memory.events").read_text()
            else:
                return 0
        except OSError:
            return 0
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def pids(self) -> list[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(out)

    def kill_all(self) -> None:
        """SIGKILL whatever is in the cgroup until it is empty, for at most about half a second. Usually the
        command's processes are leaving on their own: the first looks come a millisecond apart, doubling up to
        50 ms (a flat 50 ms wait cost every such command that much)."""
        delay, deadline = 0.001, time.monotonic() + 0.5
        while pids := self.pids():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if time.monotonic() >= deadline:
                return
            time.sleep(delay)
            delay = min(2 * delay, 0.05)

    def remove(self) -> None:
        for d in list(self.dirs.values()):
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        self.dirs.clear()

    @classmethod
    def existing(cls, name: str) -> Cgroup:
        """The cgroup directories of a (possibly leftover) sandbox `name`, for cleanup."""
        cg = cls(name)
        own = cls._own_paths()
        base = Path("/sys/fs/cgroup")
        for ctrl in ("memory", "pids", "cpu"):
            for parent in (base / ctrl / own.get(ctrl, "/").lstrip("/"), base / ctrl):
                d = parent / "openforge" / name
                if d.is_dir():
                    cg.dirs[ctrl] = d
                    cg.version = 1
                    break
        d = base / own.get("", "/").lstrip("/") / "openforge" / name
        if (base / "cgroup.controllers").exists() and d.is_dir():
            cg.dirs["unified"] = d
            cg.version = 2
        return cg
