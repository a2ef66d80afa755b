"""The container's changes read from its overlay layers on the host (`openforge/sandbox/docker/overlay.py`) are
exactly what `docker diff` says, against the real daemon, for every kind of change an agent can make — and the
sandbox reads them that way, not through the daemon's `diff` (~0.45 s of its CPU a call)."""

from __future__ import annotations

import os
import uuid

import pytest

from openforge.sandbox import SandboxSpec, get_provider, sandbox_name
from openforge.sandbox.docker.overlay import OverlayLayers, overlay_changes

RUN = f"pytest-overlay-{os.getpid()}-{uuid.uuid4().hex[:6]}"

# Each: what an agent (root, the agent's capabilities) does; together every way a layer records a change.
CHANGES = [
    "echo x >> /etc/debian_version",  # a lower file changed (copied up)
    "mkdir -p /app/new/deep && echo y > /app/new/deep/f",  # added, nested
    "rm /usr/bin/yes",  # a lower file deleted (whiteout)
    "rm -rf /usr/share/doc",  # a lower tree deleted
    "rm -rf /etc/apt && mkdir /etc/apt && echo z > /etc/apt/mine",  # opaque directory
    "rm /bin && ln -s /tmp /bin2 && mv /bin2 /bin",  # the /bin link itself replaced
    "rm -rf /usr/local/sbin && ln -s /app /usr/local/sbin",  # a PATH directory replaced by a link
    "chmod 700 /var/log && chown 1000 /etc/motd",  # metadata only
    "mkfifo /app/fifo && ln /app/new/deep/f /app/hard && ln -s /etc/passwd /app/soft",
    "mv /usr/share/man /usr/share/man2",  # a lower directory renamed
    "rm /etc/issue && mkdir /etc/issue && touch /etc/issue/x",  # a file replaced by a directory
    "rm -rf /opt && echo gone > /opt",  # a directory replaced by a file
    "touch /tmp/t && rm /tmp/t",  # created and removed: only the directory copied up
    "rm /etc/issue.net && echo back > /etc/issue.net",  # deleted, then written again
    "d=/app/nest; for i in $(seq 200); do d=$d/n; done; mkdir -p $d && touch $d/leaf",  # deeper than recursion
]


def _spec(episode: str) -> SandboxSpec:
    return SandboxSpec(name=sandbox_name(RUN, episode), run=RUN, image="openforge-base:bookworm", memory_mb=512)


@pytest.fixture
async def provider(docker_ready):
    p = get_provider("docker")
    yield p
    await p.cleanup(RUN)
    await p.close()


async def test_overlay_changes_are_docker_diffs(provider):
    sb = await provider.create(_spec("all"))
    try:
        for cmd in CHANGES:
            r = await sb.exec(["/usr/bin/sh", "-c", cmd], timeout_s=60)
            assert r.ok, (cmd, r)
        api = provider.conn.api
        layers = OverlayLayers.of(api.inspect_container(sb.id))
        assert layers is not None, "the daemon is local with overlay2 here: its layers must be readable"
        ours = {(row["Path"], row["Kind"]) for row in overlay_changes(layers)}
        docker = {(row["Path"], row["Kind"]) for row in api.diff(sb.id)}
        assert ours == docker, {"only ours": sorted(ours - docker)[:20], "only docker's": sorted(docker - ours)[:20]}
        assert ("/usr/bin/yes", 2) in ours and ("/etc/apt/sources.list", 2) in ours and ("/bin", 0) in ours
    finally:
        await sb.destroy()


async def test_the_sandbox_reads_its_changes_without_the_daemons_diff(provider, monkeypatch):
    sb = await provider.create(_spec("fast"))
    try:
        assert (await sb.exec(["/usr/bin/sh", "-c", "rm /usr/bin/yes && touch /app/x.py"], timeout_s=60)).ok

        def refuse(*_a, **_k):
            raise AssertionError("docker diff was asked although the overlay layers are readable here")

        monkeypatch.setattr(provider.conn.api, "diff", refuse)
        changes = {(c.path, c.kind) for c in await sb.changed_paths()}
        assert {("/usr/bin/yes", "deleted"), ("/app/x.py", "added")} <= changes
    finally:
        await sb.destroy()
