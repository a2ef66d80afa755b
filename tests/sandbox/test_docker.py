"""Docker sandboxes against the real daemon.

A session fixture makes sure dockerd runs (scripts/start-docker.sh) and the offline base image exists
(scripts/build-base-image.sh, a one-off of ~1.5 min). With CI=true a missing daemon, missing cgroup controllers
or a missing base image FAIL these tests; locally they skip with the reason. Every container made here carries
the run label of this session, and a session finalizer asserts that none is left afterwards.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from openforge.sandbox import (
    Mount,
    SandboxError,
    SandboxSpec,
    get_provider,
    sandbox_name,
)

BASE = "openforge-base:bookworm"
RUN = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _name(episode: str) -> str:
    return sandbox_name(RUN, episode)


def _spec(episode: str, **kw) -> SandboxSpec:
    kw.setdefault("image", BASE)
    kw.setdefault("memory_mb", 512)
    kw.setdefault("pids", 256)
    return SandboxSpec(name=_name(episode), run=RUN, **kw)


def _containers_of_run(*runs: str) -> list[str]:
    names: list[str] = []
    for run in runs or (RUN,):
        out = subprocess.run(
            ["docker", "ps", "-a", "--filter", f"label=openforge.run={run}", "--format", "{{.Names}}"],
            capture_output=True,
            text=True,
        )
        names += [n for n in out.stdout.split() if n]
    return names


@pytest.fixture(scope="module", autouse=True)
def _remove_test_images(request):
    """Images this module builds carry its run label; remove them (children first) when the module is done."""
    yield
    imgs = subprocess.run(
        ["docker", "images", "-q", "--filter", f"label=openforge.test-run={RUN}"], capture_output=True, text=True
    ).stdout.split()
    for _ in range(2):
        if imgs:
            subprocess.run(["docker", "rmi", "-f", *imgs], capture_output=True)


@pytest.fixture
async def provider(docker_ready):
    p = get_provider("docker")
    yield p
    await p.cleanup(RUN)
    await p.close()


@pytest.fixture
async def sb(provider, request):
    s = await provider.create(_spec(request.node.name[:40]))
    yield s
    await s.destroy()


# -- a stand-in for the proxy: tiny HTTP servers on Unix sockets --------------------------------------------


async def _http_unix_server(path: Path, tag: str):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            n = 0
            for line in head.decode().split("\r\n"):
                if line.lower().startswith("content-length:"):
                    n = int(line.split(":", 1)[1])
            body = await reader.readexactly(n) if n else b""
            resp = f"{tag} {head.split(b' ')[1].decode()} {len(body)}".encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(resp) + resp)
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_unix_server(handle, str(path))


@pytest.fixture
async def proxy_sockets(tmp_path):
    model = tmp_path / "model.sock"
    admin = tmp_path / "admin.sock"
    s1 = await _http_unix_server(model, "model-api")
    s2 = await _http_unix_server(admin, "admin")
    yield model, admin
    s1.close()
    s2.close()


FETCH = (
    "import sys, urllib.request as u\n"
    "try:\n"
    "    print(u.urlopen(sys.argv[1], data=sys.argv[2].encode() if len(sys.argv) > 2 else None, "
    "timeout=5).read().decode())\n"
    "except Exception as e:\n"
    "    print('ERR', type(e).__name__, e); sys.exit(3)\n"
)


# -- pure functions (no daemon) -----------------------------------------------------------------------------


def test_names_and_spec_validation():
    assert sandbox_name("run1", "ep-0") == "of-run1-ep-0"
    long = sandbox_name("My Run/2026" * 5, "task_ä/claude-code/3")
    assert len(long) <= 63 and long == sandbox_name("My Run/2026" * 5, "task_ä/claude-code/3")
    assert long != sandbox_name("My Run/2026" * 5, "task_ä/claude-code/4")
    with pytest.raises(ValueError):
        SandboxSpec(name="Bad_Name")
    with pytest.raises(ValueError):
        SandboxSpec(name="ok", proxy_uds=Path("/x"), proxy_tcp="127.0.0.1:1")
    assert SandboxSpec(name="x", run="r").all_labels()["openforge.run"] == "r"


def test_unknown_provider():
    with pytest.raises(ValueError, match="docker, local"):
        get_provider("podman")


# -- exec ---------------------------------------------------------------------------------------------------


async def test_exec_exit_codes_streams_env_user_stdin(sb):
    r = await sb.exec("echo out; echo err >&2; exit 7", timeout_s=20)
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out, r.truncated) == (7, "out\n", "err\n", False, False)
    r = await sb.exec(["printenv", "A"], timeout_s=20, env={"A": "b c"})
    assert r.ok and r.stdout == "b c\n"
    r = await sb.exec(["pwd"], timeout_s=20)
    assert r.stdout == "/app\n"  # the spec's workdir
    r = await sb.exec(["pwd"], timeout_s=20, workdir="/tmp")
    assert r.stdout == "/tmp\n"
    r = await sb.exec(["id", "-u"], timeout_s=20, user="agent")
    assert r.stdout == "1000\n"
    r = await sb.exec(["sh", "-c", "wc -c; cat /dev/stdin"], timeout_s=20, stdin=b"x" * 200_000)
    assert r.stdout.startswith("200000")
    r = await sb.exec(["cat"], timeout_s=20)  # stdin is /dev/null: returns at once
    assert r.ok and r.stdout == ""
    r = await sb.exec(["/no/such/binary"], timeout_s=20)
    assert r.exit_code in (126, 127)


async def test_exec_timeout_kills_the_process_tree(sb):
    t0 = time.monotonic()
    r = await sb.exec("sleep 300 & (sleep 301 &); setsid sleep 302 & sleep 303", timeout_s=1.5)
    assert r.timed_out and time.monotonic() - t0 < 8
    ps = await sb.exec(["ps", "-eo", "args"], timeout_s=20)
    assert "sleep 30" not in ps.stdout, ps.stdout


async def test_exec_output_cap(sb):
    r = await sb.exec(
        "head -c 3000000 /dev/zero | tr '\\0' a; head -c 50 /dev/zero | tr '\\0' b >&2", timeout_s=30, output_cap=1000
    )
    assert r.truncated and len(r.stdout) == 1000 and r.stderr == "b" * 50 and r.exit_code == 0


async def test_hung_exec_does_not_block_the_event_loop(provider, sb):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    t = asyncio.create_task(ticker())
    t0 = time.monotonic()
    results = await asyncio.gather(
        *(sb.exec("sleep 1; echo $0", timeout_s=30) for _ in range(10)), sb.exec("sleep 1000", timeout_s=1)
    )
    elapsed = time.monotonic() - t0
    t.cancel()
    assert all(r.ok for r in results[:10]) and results[10].timed_out
    assert elapsed < 6, elapsed  # concurrent, not serialised (10 x 1 s)
    assert ticks >= elapsed / 0.05 * 0.5  # the loop kept running


async def test_exec_cancelled_kills_the_command(sb):
    task = asyncio.create_task(sb.exec("sleep 400", timeout_s=60))
    await asyncio.sleep(1.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.5)
    ps = await sb.exec(["ps", "-eo", "args"], timeout_s=20)
    assert "sleep 400" not in ps.stdout


# -- files --------------------------------------------------------------------------------------------------


async def test_copy_in_out_files_and_directories(sb, tmp_path):
    src = tmp_path / "src"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "a.txt").write_text("A")
    (src / "sub" / "deep" / "b.bin").write_bytes(bytes(range(256)) * 100)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("a.txt")
    await sb.copy_in(src, "/tests")
    await sb.copy_in(src / "a.txt", "/new/parent/dirs/file.txt")
    await sb.copy_in(src / "a.txt", "/app/owned.txt", owner="1000:1000")
    await sb.copy_in(src / "a.txt", "/app/named.txt", owner="agent")
    r = await sb.exec(
        "/tests/run.sh && cat /tests/link /new/parent/dirs/file.txt && stat -c %u /tests/a.txt "
        "/app/owned.txt /app/named.txt",
        timeout_s=20,
    )
    assert r.stdout == "ran\nAA0\n1000\n1000\n", r
    assert await sb.read_file("/tests/sub/deep/b.bin") == bytes(range(256)) * 100
    assert await sb.read_file("/tests/link") == b"A"
    assert await sb.read_file("/nonexistent") is None
    with pytest.raises(IsADirectoryError):
        await sb.read_file("/tests")
    with pytest.raises(ValueError):
        await sb.read_file("/tests/sub/deep/b.bin", max_bytes=100)

    await sb.exec(
        "mkdir -p /out/x && echo hi > /out/x/y && ln -s /etc/passwd /out/evil && ln -s x/y /out/ok", timeout_s=20
    )
    dest = tmp_path / "back"
    await sb.copy_out("/out", dest)
    assert (dest / "x" / "y").read_text() == "hi\n"
    assert (dest / "ok").read_text() == "hi\n"
    assert not (dest / "evil").exists() and not (dest / "evil").is_symlink()  # a link out of dest is skipped
    await sb.copy_out("/out/x/y", tmp_path / "single.txt")
    assert (tmp_path / "single.txt").read_text() == "hi\n"
    with pytest.raises(FileNotFoundError):
        await sb.copy_out("/nope", tmp_path / "nope")


async def test_readonly_mount(provider, tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "tool").write_text("#!/bin/sh\necho tool-ran\n")
    (bundle / "tool").chmod(0o755)
    s = await provider.create(_spec("mount", mounts=[Mount(source=bundle, target="/opt/openforge/harnesses")]))
    try:
        r = await s.exec("/opt/openforge/harnesses/tool; touch /opt/openforge/harnesses/x", timeout_s=20)
        assert "tool-ran" in r.stdout and "Read-only file system" in r.stderr
    finally:
        await s.destroy()


# -- limits -------------------------------------------------------------------------------------------------


async def test_memory_hog_is_oom_killed(provider):
    s = await provider.create(_spec("oom", memory_mb=96))
    try:
        assert not (await s.status()).oom_killed
        r = await s.exec(["python3", "-c", "x = bytearray(400 << 20); print('survived')"], timeout_s=60)
        assert r.exit_code == 137 and "survived" not in r.stdout
        st = await s.status()
        assert st.oom_killed and st.alive, st
        assert "OOM" in st.reason
        mem = await s.exec(
            "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
            " 2>/dev/null || cat /sys/fs/cgroup/memory.max",
            timeout_s=20,
        )
        assert str(96 << 20) in mem.stdout
    finally:
        await s.destroy()


async def test_fork_bomb_is_contained_and_the_sandbox_recovers(provider):
    s = await provider.create(_spec("forkbomb", pids=64, cpus=1))
    try:
        t0 = time.monotonic()
        r = await s.exec("bomb() { bomb | bomb & }; bomb; while :; do :; done", timeout_s=3)
        assert r.timed_out and time.monotonic() - t0 < 15
        # the host is fine, and the sandbox is usable again (the bomb was killed, from the host if need be)
        assert subprocess.run(["true"]).returncode == 0
        r = await s.exec(
            "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max; ps -e | wc -l", timeout_s=20
        )
        assert r.ok, r
        lines = r.stdout.split()
        assert lines[0] == "64" and int(lines[1]) < 10, r.stdout
        assert (await s.status()).alive
    finally:
        await s.destroy()


async def test_cpu_limit(provider):
    s = await provider.create(_spec("cpu", cpus=0.5))
    try:
        q = await s.exec(
            "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null"
            " || cat /sys/fs/cgroup/cpu.max",
            timeout_s=20,
        )
        assert q.stdout.split() in (["50000", "100000"],), q.stdout
        burn = (
            "import os, time\n"
            "def burn():\n"
            "    end = time.time() + 2\n"
            "    while time.time() < end: pass\n"
            "pids = [os.fork() for _ in range(2)]\n"
            "if 0 in pids: burn(); os._exit(0)\n"
            "for p in pids: os.waitpid(p, 0)\n"
            "t = os.times(); print(t.children_user + t.children_system)\n"
        )
        r = await s.exec(["python3", "-c", burn], timeout_s=60)
        used = float(r.stdout)
        assert used < 1.6, f"2 busy processes for 2 s used {used:.2f} CPU-s under a 0.5-CPU limit"
    finally:
        await s.destroy()


# -- network ------------------------------------------------------------------------------------------------


async def test_only_loopback_inside(sb):
    r = await sb.exec(
        "ls /sys/class/net; python3 -c 'import socket; print(socket.if_nameindex())'; "
        "ip -o link 2>/dev/null | wc -l; ip route 2>/dev/null | wc -l",
        timeout_s=20,
    )
    lines = r.stdout.split("\n")
    assert lines[0] == "lo" and lines[1] == "[(1, 'lo')]", r.stdout
    assert lines[2] == "1" and lines[3] == "0", r.stdout  # one link, no route anywhere


async def test_proxy_reachable_through_forwarder_admin_not(provider, proxy_sockets):
    model, admin = proxy_sockets
    s = await provider.create(_spec("proxy", proxy_uds=model, proxy_port=8100))
    try:
        assert s.proxy_url == "http://127.0.0.1:8100"
        r = await s.exec(
            ["python3", "-c", FETCH, "http://127.0.0.1:8100/v1/messages", "x" * 100_000], timeout_s=30, user="agent"
        )
        assert r.stdout.strip() == "model-api /v1/messages 100000", r
        r = await s.exec(
            "exec 3<>/dev/tcp/127.0.0.1/8100 && printf 'GET /v1/models HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3",
            timeout_s=30,
        )
        assert r.stdout.endswith("model-api /v1/models 0")
        # the admin listener: its socket is not in the container, and no other port is bridged
        r = await s.exec(f"ls {admin} 2>&1; ls {admin.parent} 2>&1", timeout_s=20)
        assert "No such file" in r.stdout
        for port in (8101, 8000, 80):
            r = await s.exec(["python3", "-c", FETCH, f"http://127.0.0.1:{port}/admin"], timeout_s=30)
            assert r.exit_code == 3 and "Connection refused" in r.stdout, r
        # many concurrent requests through the relay
        r = await s.exec(
            [
                "python3",
                "-c",
                "import concurrent.futures as f, urllib.request as u\n"
                "g = lambda i: u.urlopen(f'http://127.0.0.1:8100/{i}', timeout=10).read().decode()\n"
                "print(sum(1 for x in f.ThreadPoolExecutor(16).map(g, range(200)) if x.startswith('model-api')))",
            ],
            timeout_s=60,
        )
        assert r.stdout.strip() == "200", r
    finally:
        fwd = s.forwarder_pid
        await s.destroy()
    assert fwd is not None and not _pid_alive(fwd)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_forwarder_exits_when_the_container_dies(provider, proxy_sockets):
    model, _ = proxy_sockets
    s = await provider.create(_spec("fwddie", proxy_uds=model))
    try:
        fwd = s.forwarder_pid
        assert _pid_alive(fwd)
        subprocess.run(["docker", "kill", s.id], capture_output=True, check=True)
        for _ in range(50):
            if not _pid_alive(fwd):
                break
            await asyncio.sleep(0.1)
        assert not _pid_alive(fwd)
        st = await s.status()
        assert not st.alive and st.exit_code == 137, st
    finally:
        await s.destroy()


async def test_container_killed_mid_exec_is_a_sandbox_error(provider):
    s = await provider.create(_spec("killed"))
    try:
        task = asyncio.create_task(s.exec("sleep 60", timeout_s=60))
        await asyncio.sleep(1)
        subprocess.run(["docker", "kill", s.id], capture_output=True, check=True)
        with pytest.raises(SandboxError):
            await task
        with pytest.raises(SandboxError):
            await s.exec("true", timeout_s=10)
        assert not (await s.status()).alive
    finally:
        await s.destroy()


# -- images -------------------------------------------------------------------------------------------------


def _context(tmp_path: Path, content: str) -> Path:
    ctx = tmp_path / "environment"
    ctx.mkdir(exist_ok=True)
    (ctx / "Dockerfile").write_text(
        f"FROM debian:bookworm-slim\nLABEL openforge.test-run={RUN}\nCOPY data.txt /app/data.txt\nWORKDIR /srv\n"
    )
    (ctx / "data.txt").write_text(content)
    return ctx


async def test_image_built_from_dockerfile_cached_by_content_hash(docker_ready, tmp_path):
    p = get_provider("docker", image_map={"debian:bookworm-slim": BASE}, build_network="none")
    try:
        ctx = _context(tmp_path, f"payload {uuid.uuid4()}\n")
        b1 = await p.build_image(ctx)
        assert not b1.cached and b1.tag.startswith("openforge-task:") and len(b1.tag.split(":")[1]) == 16
        b2 = await p.build_image(ctx)
        assert b2.cached and b2.tag == b1.tag and p.builds == 1
        s = await p.create(_spec("built", dockerfile_dir=ctx, workdir=None))
        try:
            r = await s.exec("pwd; cat /app/data.txt", timeout_s=20)
            assert r.stdout.startswith("/srv\n")  # workdir=None keeps the image's WORKDIR
            assert "payload" in r.stdout
        finally:
            await s.destroy()
        assert p.builds == 1  # create reused the cached image
        (ctx / "data.txt").write_text("changed\n")
        b3 = await p.build_image(ctx)
        assert not b3.cached and b3.tag != b1.tag
        # the map is part of the hash: another FROM target is another image
        other = await p.build_image(ctx, image_map={"debian:bookworm-slim": b1.tag})
        assert other.tag != b3.tag
        # a digest-pinned FROM line is mapped by its repo:tag key: the same build as the unpinned one
        dockerfile = (ctx / "Dockerfile").read_text()
        (ctx / "Dockerfile").write_text(
            dockerfile.replace("FROM debian:bookworm-slim\n", f"FROM debian:bookworm-slim@sha256:{'ab' * 32}\n")
        )
        pinned = await p.build_image(ctx)
        assert pinned.cached and pinned.tag == b3.tag
    finally:
        await p.close()


async def test_unmapped_missing_images_fail_clearly_without_pulling(provider, tmp_path):
    with pytest.raises(SandboxError, match="image-map"):
        await provider.create(_spec("nopull", image="debian:bookworm-slim"))
    ctx = _context(tmp_path, "x")
    with pytest.raises(SandboxError, match="image-map"):
        await provider.create(_spec("nopull2", dockerfile_dir=ctx))
    assert _containers_of_run() == []


async def test_spec_image_is_mapped(docker_ready):
    p = get_provider("docker", image_map={"ubuntu:24.04": BASE})
    try:
        s = await p.create(_spec("mapped", image="ubuntu:24.04"))
        try:
            assert (await s.exec(["true"], timeout_s=20)).ok
        finally:
            await s.destroy()
    finally:
        await p.close()


# -- lifecycle ----------------------------------------------------------------------------------------------


async def test_destroy_leaves_nothing_and_is_idempotent(provider, proxy_sockets):
    model, _ = proxy_sockets
    t0 = time.monotonic()
    s = await provider.create(_spec("destroy", proxy_uds=model))
    t_create = time.monotonic() - t0
    t0 = time.monotonic()
    await s.exec(["true"], timeout_s=20)
    t_exec = time.monotonic() - t0
    fwd = s.forwarder_pid
    t0 = time.monotonic()
    await s.destroy()
    t_destroy = time.monotonic() - t0
    await s.destroy()
    assert _containers_of_run() == [] and not _pid_alive(fwd)
    assert not (await s.status()).alive
    with pytest.raises(SandboxError):
        await s.exec("true", timeout_s=5)
    print(
        f"\nlatency: create+forwarder {t_create * 1000:.0f} ms, exec {t_exec * 1000:.0f} ms, "
        f"destroy {t_destroy * 1000:.0f} ms"
    )


async def test_cleanup_removes_leftovers_of_a_crashed_run(docker_ready, proxy_sockets):
    model, _ = proxy_sockets
    crashed_run = f"{RUN}-crashed"
    p1 = get_provider("docker")
    for i in range(3):
        await p1.create(
            SandboxSpec(
                name=sandbox_name(crashed_run, f"ep{i}"),
                run=crashed_run,
                image=BASE,
                labels={"openforge.test-run": RUN},
            )
        )
    keep = await p1.create(_spec("keep"))
    # the "crash": the objects are dropped without destroy(); a new orchestrator cleans up by run label
    p2 = get_provider("docker")
    try:
        assert len(await p2.list(crashed_run)) == 3
        assert await p2.cleanup(crashed_run) == 3
        assert await p2.list(crashed_run) == []
        assert await p2.list(RUN) == [keep.name]  # another run is untouched
        # a leftover with the same name is replaced by a new create (resume after a crash)
        again = await p2.create(SandboxSpec(name=keep.name, run=RUN, image=BASE))
        assert again.id != keep.id and await p2.list(RUN) == [keep.name]
        await again.destroy()
    finally:
        await p2.cleanup(RUN)
        await p1.close()
        await p2.close()


async def test_foreign_container_name_is_not_touched(provider):
    name = _name("foreign")
    subprocess.run(
        ["docker", "create", "--name", name, "--label", f"openforge.run={RUN}", BASE, "true"],
        capture_output=True,
        check=True,
    )
    try:
        with pytest.raises(SandboxError, match="not created by openforge"):
            await provider.create(_spec("foreign"))
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
