"""The light jail of in-process episodes (`openforge.sandbox.local.jail`): one shell command as `nobody`, no
network, the host's system directories read-only, through the local backend's bubblewrap builder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import unavailable
from openforge.sandbox.local.bwrap import SYSTEM_RO, link_args
from openforge.sandbox.local.jail import JailError, jail_argv, jail_available, prepare_workdir, run_jailed


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
    out, err, code = run_jailed(
        work,
        "id -un; echo made > b.txt; ls /sys/class/net 2>&1 | head -1; "
        "touch /usr/evil 2>&1; cat /etc/shadow 2>&1 | head -1",
    )
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


@pytest.fixture
def jail_root():
    """A directory the jail's users can pass through, outside pytest's base directory (which a concurrent
    pytest session makes private again at its start)."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="openforge-jail-test-", dir="/var/tmp"))
    root.chmod(0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_output_is_read_with_a_cap(jail_root):
    """A `yes` costs a bounded buffer; the model's view (the tail) ends with what was cut."""
    work = jail_root / "w"
    prepare_workdir(work, {})
    out, err, code = run_jailed(work, "head -c 50000000 /dev/zero | tr '\\0' z")
    assert code == 0 and len(out) <= 64 << 10 and out == "z" * len(out) and "[output truncated: " in err
    out, err, code = run_jailed(work, "yes", timeout_s=2, output_cap=4096)
    assert code == 124 and len(out) <= 4096
    assert out.startswith("y\ny\n") and "[output truncated: " in err and "bytes dropped]" in err
    out, err, code = run_jailed(work, "seq 1 100000", output_cap=1000)
    assert code == 0 and out.startswith("1\n2\n3\n") and out.endswith("99999\n100000\n") and len(out) <= 1000
    assert err.strip().startswith("[output truncated: ")
    out, err, code = run_jailed(work, "seq 1 10")
    assert (out, err, code) == ("".join(f"{i}\n" for i in range(1, 11)), "", 0)  # small output: untouched


def _processes_of(uid: int) -> int:
    return sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _uid_of(p) == uid)


def _uid_of(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except OSError:
        return None


def test_one_jails_fork_bomb_leaves_the_others_alone(jail_root):
    """Each jail has its own process allowance (a cgroup, else its own uid's RLIMIT_NPROC): a flood of
    processes in one stops at its own limit while other jails run normally."""
    import threading

    bomb_dir = jail_root / "bomb"
    prepare_workdir(bomb_dir, {})
    bomber = bomb_dir.stat().st_uid
    done: dict[str, tuple] = {}

    def flood() -> None:
        done["flood"] = run_jailed(
            bomb_dir, "for i in $(seq 600); do sleep 30 & done 2>/dev/null; sleep 4", timeout_s=6
        )
        done["bomb"] = run_jailed(bomb_dir, "bomb() { bomb | bomb & }; bomb; sleep 3", timeout_s=4)

    t = threading.Thread(target=flood)
    t.start()
    try:
        peak = 0
        others = []
        deadline = time.monotonic() + 8
        i = 0
        while t.is_alive() and time.monotonic() < deadline:
            peak = max(peak, _processes_of(bomber))
            work = jail_root / f"other-{i}"
            prepare_workdir(work, {"in.txt": "x\n"})
            others.append(run_jailed(work, "cat in.txt; echo done > out.txt; echo ok", timeout_s=20))
            assert others[-1] == ("x\nok\n", "", 0) and (work / "out.txt").read_text() == "done\n", others[-1]
            i += 1
    finally:
        t.join()
    assert others
    assert 0 < peak <= 256 + 8, f"the flooding jail reached {peak} processes"
    assert "flood" in done and "bomb" in done
    deadline = time.monotonic() + 10
    while _processes_of(bomber) and time.monotonic() < deadline:  # the kernel reaps a pid namespace's last ones
        time.sleep(0.1)
    assert _processes_of(bomber) == 0  # nothing outlives its jail
