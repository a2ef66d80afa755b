"""Tar extraction of the sandbox backends (`openforge.sandbox.archive`, copy_out of every backend) against
crafted archives: a chain of links, each harmless when made, must not walk out of the destination, and a single
file that is a link must not become an absolute link on the host."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from openforge.sandbox.archive import extract_archive


def _tar(members: list[tuple[str, str, str | bytes]]) -> tarfile.TarFile:
    """A tar of ("file" | "dir" | "link", name, content or link target) members, in that order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for kind, name, data in members:
            ti = tarfile.TarInfo(name)
            if kind == "file":
                payload = data.encode() if isinstance(data, str) else data
                ti.size = len(payload)
                tf.addfile(ti, io.BytesIO(payload))
            elif kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(ti)
            else:
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                tf.addfile(ti)
    buf.seek(0)
    return tarfile.open(fileobj=buf, mode="r")


def _outside(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if "dest" not in p.parts)


@pytest.mark.parametrize(
    "members",
    [
        # L -> p/.. is inside while p does not exist; p -> . then makes L the destination's parent
        [("dir", "top", ""), ("link", "top/L", "p/.."), ("link", "top/p", "."), ("file", "top/L/evil.txt", "x")],
        # a link to a directory made later into a link out
        [
            ("dir", "top", ""),
            ("link", "top/a", "b/c/.."),
            ("dir", "top/b", ""),
            ("link", "top/b/c", ".."),
            ("file", "top/a/../evil.txt", "x"),
            ("file", "top/a/evil.txt", "x"),
        ],
        # a directory member through a link out
        [
            ("dir", "top", ""),
            ("link", "top/L", "p/.."),
            ("link", "top/p", "."),
            ("dir", "top/L/newdir", ""),
            ("file", "top/L/newdir/evil.txt", "x"),
        ],
    ],
)
def test_a_chain_of_links_does_not_walk_out_of_the_destination(tmp_path, members):
    dest = tmp_path / "dest"
    extract_archive(_tar(members), dest, is_dir=True)
    assert _outside(tmp_path) == [], "something was written outside the destination"
    root = dest.resolve()
    for p in dest.rglob("*"):  # and no link left in it leads out
        if p.is_symlink():
            assert p.resolve() == root or root in p.resolve().parents, f"{p} -> {p.resolve()}"


def test_links_inside_and_files_are_kept(tmp_path):
    dest = tmp_path / "dest"
    extract_archive(
        _tar(
            [
                ("dir", "top", ""),
                ("dir", "top/d", ""),
                ("file", "top/d/f.txt", "hello"),
                ("link", "top/l", "d/f.txt"),
                ("link", "top/abs", "/etc/passwd"),
                ("link", "top/up", "../../x"),
            ]
        ),
        dest,
        is_dir=True,
    )
    assert (dest / "d" / "f.txt").read_text() == "hello" and (dest / "l").read_text() == "hello"
    assert not (dest / "abs").is_symlink() and not (dest / "up").is_symlink()


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../etc/passwd", "../x"])
def test_a_single_file_that_is_a_link_out_is_not_made(tmp_path, target):
    dest = tmp_path / "out" / "reward.txt"
    with pytest.raises(FileNotFoundError):
        extract_archive(_tar([("link", "reward.txt", target)]), dest, is_dir=False)
    assert not dest.is_symlink() and not dest.exists()


def test_a_single_file_is_written_without_following_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    dest = tmp_path / "out" / "file"
    dest.parent.mkdir()
    dest.symlink_to(victim)
    extract_archive(_tar([("file", "file", "new")]), dest, is_dir=False)
    assert victim.read_text() == "keep" and dest.read_text() == "new" and not dest.is_symlink()
    rel = tmp_path / "out" / "rel"
    extract_archive(_tar([("link", "rel", "file")]), rel, is_dir=False)
    assert rel.is_symlink() and rel.read_text() == "new"
