"""Who runs a local sandbox's commands: the agent's unprivileged user (created on first use when root)."""

from __future__ import annotations

import os
import pwd
import subprocess

from ..base import SandboxError

__all__ = ["ensure_user", "is_root"]


def is_root() -> bool:
    return os.geteuid() == 0


def ensure_user(name: str) -> tuple[int, int, str]:
    """(uid, gid, home) of `name`, creating it (system user, own group, no login) when root and missing."""
    try:
        pw = pwd.getpwnam(name)
        return pw.pw_uid, pw.pw_gid, pw.pw_dir
    except KeyError:
        pass
    if not is_root():
        raise SandboxError(f"user {name} does not exist and only root can create it")
    r = subprocess.run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            f"/home/{name}",
            "--shell",
            "/bin/bash",
            name,
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode not in (0, 9):  # 9: exists (a concurrent creation)
        raise SandboxError(f"cannot create user {name}: {r.stderr.strip()}")
    pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid, pw.pw_dir
