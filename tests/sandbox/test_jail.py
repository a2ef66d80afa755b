"""The light jail of in-process episodes (`openforge.sandbox.local.jail`): one shell command as `nobody`, no
network, the host's system directories read-only, through the local backend's bubblewrap builder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from openforge.sandbox.local.bwrap import SYSTEM_RO, link_args
from openforge.sandbox.local.jail import JailError, jail_argv, jail_available, prepare_workdir, run_jailed
from conftest import unavailable


@pytest.fixture(autouse=True)
def _jail():
    ok, why = jail_available()
    if not ok:
        unavailable(f"the jail cannot run here: {why}")


def test_jail_confines_a_command(tmp_path):
    with pytest.raises(JailError, match="traversable"):
        prepare_workdir(tmp_path / "w", {})  # pytest's tmp_path is private (0700)
    tmp_path.chmod(0o711)
    tmp_path.parent.chmod(0o711)
    tmp_path.parent.parent.chmod(0o711)
    work = tmp_path / "w"
    prepare_workdir(work, {"a.txt": "x\n"})
    out, err, code = run_jailed(work, "id -un; echo made > b.txt; ls /sys/class/net 2>&1 | head -1; "
                                      "touch /usr/evil 2>&1; cat /etc/shadow 2>&1 | head -1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "nobody"
    assert (work / "b.txt").read_text() == "made\n"
    assert "Read-only file system" in out and "Permission denied" in out
    assert not Path("/usr/evil").exists()
    t = time.monotonic()
    _, err, code = run_jailed(work, "sleep 30", timeout_s=1)
    assert code == 124 and "timed out" in err and time.monotonic() - t < 10


def test_jail_uses_the_local_backends_system_view(tmp_path):
    """One builder: the jail sees the same read-only system directories and links as a local sandbox."""
    argv = " ".join(jail_argv(tmp_path, "true"))
    for top in SYSTEM_RO:
        assert f"--ro-bind /{top} /{top}" in argv
    assert " ".join(link_args()) in argv
    assert argv.startswith("prlimit ") and "setpriv --reuid=65534 --regid=65534 --clear-groups -- bwrap " in argv
    assert "--unshare-net" in argv and "--unshare-user-try" in argv and "--clearenv" in argv
