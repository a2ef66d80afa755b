"""Docker sandboxes hardened against the agent, and the grading support of the docker backend, against the real
daemon (docs/design.md, invariant 7): the container's capabilities, `no-new-privileges` and open-files limit;
every process the agent left stopped from outside (a fork bomb, a process that hid its exec marker); the
container's changes (`docker diff`) and path lookups made without running anything inside; and a task's build
context that cannot read or write host files, a build that cannot run forever or reach the network unasked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid

import pytest

from openforge.sandbox import Mount, SandboxError, SandboxSpec, get_provider, sandbox_name
from openforge.sandbox.common import AGENT_CAPABILITIES, NOFILE_LIMIT

RUN = f"pytest-hard-{os.getpid()}-{uuid.uuid4().hex[:6]}"
# Linux capability numbers (include/uapi/linux/capability.h)
CAP_NUMBERS = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "SETPCAP": 8,
    "NET_BIND_SERVICE": 10,
    "NET_RAW": 13,
    "MKNOD": 27,
    "AUDIT_WRITE": 29,
    "SETFCAP": 31,
    "SYS_CHROOT": 18,
}


def _spec(episode: str, **kw) -> SandboxSpec:
    kw.setdefault("image", "openforge-base:bookworm")
    kw.setdefault("memory_mb", 512)
    kw.setdefault("pids", 256)
    return SandboxSpec(name=sandbox_name(RUN, episode), run=RUN, **kw)


@pytest.fixture
async def provider(docker_ready):
    p = get_provider("docker")
    yield p
    await p.cleanup(RUN)
    await p.close()


@pytest.fixture
async def sb(provider, request):
    s = await provider.create(_spec(request.node.name[:40].lower().replace("_", "-")))
    yield s
    await s.destroy()


async def test_capabilities_no_new_privileges_and_open_files(sb):
    r = await sb.exec("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; ulimit -n", timeout_s=30)
    fields = dict(line.split(":\t") for line in r.stdout.splitlines() if ":\t" in line)
    want = sum(1 << CAP_NUMBERS[c] for c in AGENT_CAPABILITIES)
    assert int(fields["CapEff"], 16) == want == int(fields["CapBnd"], 16), r.stdout
    assert not int(fields["CapEff"], 16) & (1 << CAP_NUMBERS["NET_RAW"] | 1 << CAP_NUMBERS["MKNOD"])
    assert fields["NoNewPrivs"] == "1"
    assert r.stdout.split()[-1] == str(NOFILE_LIMIT)
    r = await sb.exec("mknod /tmp/null c 1 3", timeout_s=30)
    assert r.exit_code != 0 and "Operation not permitted" in r.stderr
    # what a Harbor task's root agent does still works: own files, chown to another user, switch user
    r = await sb.exec(
        "touch /etc/x && chown 1000:1000 /etc/x && setpriv --reuid=1000 --regid=1000 --clear-groups id -u", timeout_s=30
    )
    assert r.ok and r.stdout.strip() == "1000", r


async def test_every_process_the_agent_left_is_stopped_and_the_sandbox_lives_on(provider):
    sb = await provider.create(_spec("leftovers", pids=200))
    try:
        r = await sb.exec(
            "sleep 1001 & setsid sleep 1002 & env -i /bin/sh -c 'sleep 1003' & "
            "nohup sh -c 'while :; do echo x > /tmp/f; done' >/dev/null 2>&1 & "
            "(f(){ sleep 0.5; f & f & }; f) >/dev/null 2>&1 & echo started",
            timeout_s=30,
        )
        assert r.ok
        await asyncio.sleep(2)  # the bomb fills the pids limit
        await sb.stop_agent_processes()
        ps = await sb.exec(["ps", "-eo", "pid,stat,args"], timeout_s=30)
        alive = [line for line in ps.stdout.splitlines()[1:] if " Z" not in line and "ps -eo" not in line]
        assert len(alive) == 2 and "docker-init" in alive[0] and "sleep infinity" in alive[1], ps.stdout
        assert (await sb.status()).alive
        await sb.stop_agent_processes()  # nothing left: returns at once
    finally:
        await sb.destroy()


async def test_changes_and_lookups_are_read_from_outside(provider, tmp_path):
    (tmp_path / "bundle").mkdir()
    sb = await provider.create(_spec("changes", mounts=[Mount(source=tmp_path / "bundle", target="/opt/of/h")]))
    try:
        r = await sb.exec(
            "echo x >> /usr/bin/pytest; rm /usr/bin/yes; touch /app/unittest.py; rm /usr/bin/dash", timeout_s=30
        )  # no /bin/sh any more: nothing in band could run
        assert r.ok, r
        changes = {(c.path, c.kind) for c in await sb.changed_paths()}
        assert {
            ("/usr/bin/pytest", "changed"),
            ("/usr/bin/yes", "deleted"),
            ("/app/unittest.py", "added"),
            ("/usr/bin/dash", "deleted"),
        } <= changes
        assert not {p for p, _ in changes if p.startswith("/opt") or p == "/usr/sbin/docker-init"}, changes
        found = await sb.existing_paths(["/usr/bin/python3", "/usr/bin/dash", "/bin/python3", "/nope"])
        assert found == {"/usr/bin/python3", "/bin/python3"}
        kinds = await sb.path_kinds(["/bin", "/bin/python3", "/app", "/app/unittest.py", "/usr/bin/dash"])
        assert kinds == {"/bin": "link", "/bin/python3": "link", "/app": "dir", "/app/unittest.py": "file"}
    finally:
        await sb.destroy()


def test_storage_quota_is_used_where_supported_and_said_once_where_not(docker_ready, caplog):
    async def main():
        p = get_provider("docker")
        try:
            made = [await p.create(_spec(f"disk-{i}", storage_mb=64)) for i in range(2)]
            for s in made:
                await s.destroy()
            return p.storage_quota
        finally:
            await p.cleanup(RUN)
            await p.close()

    with caplog.at_level(logging.WARNING, logger="openforge.sandbox.docker.provider"):
        quota = asyncio.run(main())
    said = [r for r in caplog.records if "storage_mb" in r.getMessage()]
    assert (quota, len(said)) in ((True, 0), (False, 1)), (quota, said)


# -- building a task's image -----------------------------------------------------------------------------------


def _context(tmp_path, dockerfile: str = "FROM debian:bookworm-slim\n"):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(dockerfile)
    return ctx


MAP = {"debian:bookworm-slim": "openforge-base:bookworm"}


async def test_a_build_context_cannot_read_or_write_host_files(provider, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("secret")
    (outside / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    ctx = _context(tmp_path, "FROM debian:bookworm-slim\nCOPY leak /leak\n")
    (ctx / "leak").symlink_to(outside / "id_rsa")
    with pytest.raises(SandboxError, match=r"ctx/leak: a symbolic link to .*outside the build context"):
        await provider.build_image(ctx, image_map=MAP)
    (ctx / "leak").unlink()
    (ctx / "Dockerfile").unlink()
    (ctx / "Dockerfile").symlink_to(outside / "Dockerfile")  # the build must not rewrite a host file through it
    with pytest.raises(SandboxError, match=r"ctx/Dockerfile: a symbolic link"):
        await provider.build_image(ctx, image_map=MAP)
    assert (outside / "Dockerfile").read_text() == "FROM debian:bookworm-slim\n"
    (ctx / "Dockerfile").unlink()
    (ctx / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    os.mkfifo(ctx / "pipe")  # copying would block on it
    with pytest.raises(SandboxError, match=r"ctx/pipe: not a regular file"):
        await provider.build_image(ctx, image_map=MAP)


async def test_the_build_context_size_is_capped_naming_the_largest_files(docker_ready, tmp_path):
    ctx = _context(tmp_path)
    (ctx / "big.bin").write_bytes(b"\0" * (3 << 20))
    (ctx / "small.txt").write_text("x")
    p = get_provider("docker", max_context_mb=1)
    try:
        with pytest.raises(
            SandboxError, match=r"more than the 1\.0 MiB allowed; the largest files: big\.bin \(3\.0 MiB\)"
        ):
            await p.build_image(ctx, image_map=MAP)
    finally:
        await p.close()


async def test_a_build_is_stopped_at_its_time_limit(provider, tmp_path):
    ctx = _context(tmp_path, f"FROM debian:bookworm-slim\nRUN echo {uuid.uuid4().hex} && sleep 120\n")
    t0 = time.monotonic()
    with pytest.raises(SandboxError, match=r"ran past its 3s limit \(\[environment\] build_timeout_sec\)"):
        await provider.build_image(ctx, image_map=MAP, timeout_s=3)
    assert time.monotonic() - t0 < 60


async def test_builds_are_offline_unless_the_task_allows_the_network(provider, tmp_path):
    def dockerfile() -> str:  # a fresh RUN line each time: the builder's cache ignores the network
        return (
            "FROM debian:bookworm-slim\nLABEL openforge.test-run=" + RUN + "\n"
            f"RUN echo {uuid.uuid4().hex} && ip -o link | grep -vc ': lo:' > /links || true\n"
        )

    ctx = _context(tmp_path, dockerfile())
    offline = await provider.build_image(ctx, image_map=MAP)
    (ctx / "Dockerfile").write_text(dockerfile())
    online = await provider.build_image(ctx, image_map=MAP, allow_network=True)
    links = {}
    for name, image in (("offline", offline.tag), ("online", online.tag)):
        sb = await provider.create(_spec(f"{name}-build", image=image))
        try:
            links[name] = int((await sb.exec(["cat", "/links"], timeout_s=30)).stdout.strip())
        finally:
            await sb.destroy()
    assert links["offline"] == 0 and links["online"] >= 1, links
