"""The local (bubblewrap + unprivileged user) sandbox.

Needs bubblewrap (apt-get install bubblewrap); the isolation tests need root (user switch, cgroups). With
CI=true a missing bubblewrap fails these tests; locally they skip with the reason.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from pathlib import Path

import pytest

from openforge.sandbox import Mount, SandboxError, SandboxSpec, get_provider, local_available, sandbox_name

RUN = f"pytest-local-{os.getpid()}-{uuid.uuid4().hex[:6]}"
IN_CI = os.environ.get("CI", "").lower() == "true"
IS_ROOT = os.geteuid() == 0


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def bwrap_ready():
    ok, why = local_available()
    if not ok:
        _unavailable(why)


@pytest.fixture
def needs_root():
    if not IS_ROOT:
        _unavailable("the local sandbox's user switch and cgroup limits need root")


@pytest.fixture
async def provider(bwrap_ready, tmp_path_factory):
    root = tmp_path_factory.mktemp("sandboxes")
    p = get_provider("local", root=root)
    yield p
    await p.cleanup(None)
    assert await p.list() == []
    assert [d for d in root.iterdir()] == []


def _spec(episode: str, **kw) -> SandboxSpec:
    kw.setdefault("memory_mb", 256)
    kw.setdefault("pids", 128)
    return SandboxSpec(name=sandbox_name(RUN, episode), run=RUN, **kw)


@pytest.fixture
async def sb(provider, request):
    s = await provider.create(_spec(request.node.name[:40]))
    yield s
    await s.destroy()


def _task_dir(tmp_path: Path) -> Path:
    """A task directory as the task loader holds it: tests/ and solution/ readable by root only."""
    task = tmp_path / "task"
    for sub, fname, text in (
        ("tests", "test.sh", "#!/bin/sh\necho graded > /logs/verifier/reward.txt\n"),
        ("solution", "solve.sh", "echo secret-solution\n"),
    ):
        d = task / sub
        d.mkdir(parents=True)
        (d / fname).write_text(text)
        (d / fname).chmod(0o755)
        d.chmod(0o700)
    return task


async def test_exec_basics(sb):
    r = await sb.exec("echo out; echo err >&2; exit 5", timeout_s=20)
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (5, "out\n", "err\n", False)
    r = await sb.exec(["pwd"], timeout_s=20)
    assert r.stdout == "/app\n"
    r = await sb.exec(["sh", "-c", "echo $A; cat"], timeout_s=20, env={"A": "x"}, stdin=b"in")
    assert r.stdout == "x\nin"
    r = await sb.exec(["cat"], timeout_s=20)
    assert r.ok and r.stdout == ""
    r = await sb.exec("head -c 100000 /dev/zero | tr '\\0' a", timeout_s=20, output_cap=10)
    assert r.truncated and r.stdout == "a" * 10


def _status_fields(text: str) -> dict[str, str]:
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)


async def test_no_exec_keeps_a_capability(needs_root, sb):
    """The agent's commands and the verifier's (`user="root"`) alike run with every capability dropped and
    no_new_privs: root in the local sandbox cannot mount, mknod or regain privileges through a setuid file."""
    probe = (
        "cat /proc/self/status; mknod /tmp/null c 1 3 && echo MKNOD-OK; "
        "mount -t sysfs sysfs /tmp && echo MOUNT-OK; chown 0:0 /app && echo CHOWN-OK"
    )
    for user in (None, "root"):
        r = await sb.exec(probe, timeout_s=20, user=user)
        status = _status_fields(r.stdout)
        assert status["Uid"].split()[0] == ("0" if user == "root" else str(os.stat(sb.fs / "app").st_uid))
        for field in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"):
            assert int(status[field], 16) == 0, (user, field, status[field])
        assert status["NoNewPrivs"] == "1"
        assert "MKNOD-OK" not in r.stdout and "MOUNT-OK" not in r.stdout, r
        assert "Operation not permitted" in r.stderr
    # the backend's own file operations still work (they keep only the file capabilities, never for a command)
    await sb.copy_in(Path(__file__), "/app/copied.py", owner="0:0")
    assert (await sb.exec("stat -c %u /app/copied.py", timeout_s=20)).stdout == "0\n"


async def test_file_system_persists_across_commands(needs_root, sb):
    r = await sb.exec("mkdir -p /srv/data && echo kept > /srv/data/f", timeout_s=20, user="root")
    assert r.ok, r
    r = await sb.exec("cat f; mkdir /mine", timeout_s=20, workdir="/srv/data")
    assert r.stdout == "kept\n" and "Permission denied" in r.stderr  # the agent cannot write to /, as in Docker
    assert await sb.read_file("/srv/data/f") == b"kept\n"


async def test_exec_timeout_kills_everything(sb):
    t0 = time.monotonic()
    r = await sb.exec("sleep 300 & setsid sleep 301 & sleep 302", timeout_s=1)
    assert r.timed_out and time.monotonic() - t0 < 8
    out = os.popen("ps -eo args").read()
    assert "sleep 30" not in out


async def test_a_command_cancelled_while_it_starts_never_hangs_its_caller(sb):
    """Grading cancels the state's copy the moment the tamper check convicts: a cancellation that lands while
    bubblewrap is starting must end at once. It hung for good about one time in ten (asyncio waited for pipes
    that bwrap's pid 1, outliving a killed bwrap, held open), so the test cancels 60 starts at random instants."""
    hangs = 0
    for _ in range(60):
        command = asyncio.ensure_future(sb.exec(["sh", "-c", "echo hi"], timeout_s=30))
        await asyncio.sleep(random.uniform(0, 0.004))
        command.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(command), 5)
        except asyncio.CancelledError:
            pass
        except TimeoutError:
            hangs += 1
    assert hangs == 0
    assert (await sb.exec(["echo", "still usable"], timeout_s=20)).stdout == "still usable\n"


async def test_agent_cannot_read_tests_before_grading(needs_root, provider, tmp_path):
    task = _task_dir(tmp_path)
    s = await provider.create(_spec("grading"))
    try:
        r = await s.exec(["id", "-un"], timeout_s=20)
        assert r.stdout.strip() == provider.agent_user
        # the task directory is not in the sandbox at all, and /tests does not exist yet
        r = await s.exec(f"ls {task} {task}/tests; cat {task}/solution/solve.sh; ls /tests", timeout_s=20)
        assert r.exit_code != 0 and "secret-solution" not in r.stdout
        assert r.stderr.count("No such file or directory") >= 3, r.stderr
        # the agent works in /app, cannot write the host's system directories
        r = await s.exec("echo work > /app/out.txt && cat /app/out.txt; touch /usr/x; touch /etc/x", timeout_s=20)
        assert r.stdout == "work\n" and r.stderr.count("Read-only file system") == 2
        # grading: the tests are copied in (root-only), the verifier runs as root
        await s.copy_in(task / "tests", "/tests")
        r = await s.exec("cat /tests/test.sh", timeout_s=20)
        assert r.exit_code != 0 and "Permission denied" in r.stderr
        r = await s.exec(["/tests/test.sh"], timeout_s=20, user="root")
        assert r.ok, r
        assert await s.read_file("/logs/verifier/reward.txt") == b"graded\n"
    finally:
        await s.destroy()
    assert not s.dir.exists()


async def test_copy_in_out(sb, tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "a").write_text("A")
    (src / "d" / "b").write_text("B")
    await sb.copy_in(src, "/tests")
    await sb.copy_in(src / "a", "/app/sub/a.txt", owner="0:0")
    assert await sb.read_file("/tests/d/b") == b"B"
    assert await sb.read_file("/app/sub/a.txt") == b"A"
    assert await sb.read_file("/missing") is None
    with pytest.raises(IsADirectoryError):
        await sb.read_file("/tests")
    await sb.exec("mkdir -p /app/out && echo hi > /app/out/x && ln -s /etc/passwd /app/out/evil", timeout_s=20)
    await sb.copy_out("/app/out", tmp_path / "back")
    assert (tmp_path / "back" / "x").read_text() == "hi\n"
    assert not (tmp_path / "back" / "evil").exists()
    await sb.copy_out("/app/out/x", tmp_path / "one")
    assert (tmp_path / "one").read_text() == "hi\n"
    with pytest.raises(FileNotFoundError):
        await sb.copy_out("/nope", tmp_path / "nope")
    with pytest.raises(SandboxError, match="read-only"):
        await sb.copy_in(src / "a", "/usr/local/bin/a")


async def test_symlink_planted_by_agent_cannot_redirect_host_writes(needs_root, sb, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    # inside the sandbox the host path does not exist; the link resolves inside, not on the host
    await sb.exec(f"ln -s {victim} /app/link", timeout_s=20)
    src = tmp_path / "payload"
    src.write_text("overwritten")
    with pytest.raises(SandboxError):
        await sb.copy_in(src, "/app/link/x")
    assert victim.read_text() == "untouched"
    assert await sb.read_file("/app/link") is None  # dangling inside: not the host's file


async def test_readonly_mount(sb, provider, tmp_path):
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "tool").write_text("#!/bin/sh\necho tool-ran\n")
    (b / "tool").chmod(0o755)
    s = await provider.create(_spec("mount", mounts=[Mount(source=b, target="/opt/openforge/harnesses")]))
    try:
        r = await s.exec("/opt/openforge/harnesses/tool; touch /opt/openforge/harnesses/x", timeout_s=20)
        assert "tool-ran" in r.stdout and "Read-only" in r.stderr
    finally:
        await s.destroy()


async def _unix_http(path: Path, tag: str):
    async def handle(reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            body = f"{tag} {head.split(b' ')[1].decode()}".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_unix_server(handle, str(path))


async def test_network_only_loopback_and_proxy_bridge(needs_root, provider, tmp_path):
    model, admin = tmp_path / "model.sock", tmp_path / "admin.sock"
    s1, s2 = await _unix_http(model, "model-api"), await _unix_http(admin, "admin")
    s = await provider.create(_spec("proxy", proxy_uds=model, proxy_port=8123))
    try:
        assert s.proxy_url == "http://127.0.0.1:8123"
        fetch = (
            "import sys, urllib.request as u\n"
            "try: print(u.urlopen(sys.argv[1], timeout=5).read().decode())\n"
            "except Exception as e: print('ERR', e)\n"
        )
        r = await s.exec(["python3", "-c", "import socket; print(socket.if_nameindex())"], timeout_s=20)
        assert r.stdout.strip() == "[(1, 'lo')]"
        r = await s.exec(["python3", "-c", fetch, "http://127.0.0.1:8123/v1/models"], timeout_s=20)
        assert r.stdout.strip() == "model-api /v1/models", r
        r = await s.exec(["python3", "-c", fetch, "http://127.0.0.1:8124/admin"], timeout_s=20)
        assert "Connection refused" in r.stdout
        r = await s.exec(f"ls {admin}", timeout_s=20)
        assert r.exit_code != 0
        # the relay runs as root inside: the agent cannot kill it
        r = await s.exec("pkill -f forwarder.py; echo $?", timeout_s=20)
        r = await s.exec(["python3", "-c", fetch, "http://127.0.0.1:8123/again"], timeout_s=20)
        assert r.stdout.strip() == "model-api /again"
    finally:
        await s.destroy()
        s1.close()
        s2.close()


async def test_limits_with_cgroups(needs_root, provider):
    s = await provider.create(_spec("limits", memory_mb=96, pids=48))
    try:
        if s.limits == "rlimit":
            _unavailable("no writable cgroup hierarchy here")
        r = await s.exec(["python3", "-c", "x = bytearray(400 << 20); print('survived')"], timeout_s=60)
        assert r.exit_code == 137 and "survived" not in r.stdout
        st = await s.status()
        assert st.alive and st.oom_killed
        t0 = time.monotonic()
        r = await s.exec("bomb() { bomb | bomb & }; bomb; while :; do :; done", timeout_s=3)
        assert r.timed_out and time.monotonic() - t0 < 15
        assert (await s.exec(["true"], timeout_s=20)).ok  # the bomb is gone, the sandbox works
    finally:
        await s.destroy()


async def test_cleanup_after_crash(bwrap_ready, tmp_path):
    root = tmp_path / "root"
    p1 = get_provider("local", root=root)
    crashed = f"{RUN}-crashed"
    for i in range(3):
        await p1.create(SandboxSpec(name=sandbox_name(crashed, f"e{i}"), run=crashed))
    other = await p1.create(_spec("other"))
    p2 = get_provider("local", root=root)
    assert len(await p2.list(crashed)) == 3
    assert await p2.cleanup(crashed) == 3
    assert await p2.list(crashed) == [] and await p2.list(RUN) == [other.name]
    assert await p2.cleanup(None) == 1
    assert list(root.iterdir()) == []
