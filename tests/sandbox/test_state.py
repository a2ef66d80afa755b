"""The state archive a grader receives (`openforge.sandbox.state`): whatever tar the agent's sandbox produced —
a Kubernetes pod's own `tar`, which a root agent can replace, included — only members safe to extract at the
grader's `/` pass: names under the state's paths, links as links and nothing below them, no devices, owners and
modes kept, extended attributes dropped, and a cap in bytes that is the agent's failure."""

from __future__ import annotations

import io
import tarfile

import pytest

from openforge.sandbox import StateTooLargeError, state_roots
from openforge.sandbox.state import CappedSink, StateArchive


def raw_tar(*members: tuple[str, str, object]) -> tarfile.TarFile:
    """A tar stream of (name, kind, content/linkname) members, as an adversarial source could write it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, kind, arg in members:
            ti = tarfile.TarInfo(name)
            ti.uid, ti.gid, ti.mode, ti.uname = 1000, 1001, 0o640, "agent"
            data = None
            if kind == "file":
                data = io.BytesIO(arg)
                ti.size = len(data.getvalue())
                ti.pax_headers = {"SCHILY.xattr.security.capability": "x"}
            elif kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o750
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, str(arg)
            elif kind == "hard":
                ti.type, ti.linkname = tarfile.LNKTYPE, str(arg)
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            elif kind == "chr":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            tf.addfile(ti, data)
    buf.seek(0)
    return tarfile.open(fileobj=buf, mode="r|")


def sanitized(roots: list[str], source: tarfile.TarFile, max_bytes: int = 1 << 20, rename=None):
    out = io.BytesIO()
    archive = StateArchive(out, roots, max_bytes)
    archive.add(source, rename=rename)
    copied = archive.finish()
    out.seek(0)
    with tarfile.open(fileobj=out, mode="r:") as tf:
        return copied, {m.name: m for m in tf.getmembers()}


def test_only_safe_members_under_the_state_paths_pass():
    copied, members = sanitized(
        ["/app", "/var/lib/ledger"],
        raw_tar(
            ("app", "dir", None),
            ("app/main.py", "file", b"print(1)\n"),
            ("app/link", "sym", "/usr/bin"),  # a link is copied as the link, never followed
            ("app/link/python3", "file", b"planted"),  # ... and nothing below it is written through it
            ("app/up", "sym", "../../etc/passwd"),
            ("app/same", "hard", "app/main.py"),
            ("app/outside", "hard", "etc/shadow"),  # a hard link to what was not copied
            ("app/main.py", "file", b"second copy"),  # the first entry of a name wins
            ("/etc/passwd", "file", b"root::0:0"),  # absolute: read relative, outside the paths
            ("usr/bin/python3", "file", b"planted"),
            ("app/../usr/bin/env", "file", b"planted"),
            ("app/fifo", "fifo", None),
            ("app/null", "chr", None),
            ("./var/lib/ledger/ledger.json", "file", b"{}"),
            ("var/lib/ledgerx", "file", b"not the state"),
        ),
    )
    assert sorted(members) == ["app", "app/link", "app/main.py", "app/same", "app/up", "var/lib/ledger/ledger.json"]
    main = members["app/main.py"]
    assert (main.uid, main.gid, main.mode, main.uname) == (1000, 1001, 0o640, "")
    assert "SCHILY.xattr.security.capability" not in main.pax_headers  # no file capability travels
    assert members["app/link"].issym() and members["app/link"].linkname == "/usr/bin"
    assert members["app/up"].linkname == "../../etc/passwd"
    assert members["app/same"].islnk() and members["app/same"].linkname == "app/main.py"
    assert members["app"].isdir() and members["app"].mode == 0o750
    assert copied.entries == 6 and copied.bytes > 0
    assert {d.split(" (")[0] for d in copied.dropped} == {
        "app/link/python3",
        "app/outside",
        "app/main.py",
        "/etc/passwd",
        "usr/bin/python3",
        "app/../usr/bin/env",
        "app/fifo",
        "app/null",
        "var/lib/ledgerx",
    }


def test_a_root_replaced_by_a_link_is_the_link_and_nothing_below_it():
    _, members = sanitized(["/app"], raw_tar(("app", "sym", "/tmp/doctored"), ("app/answer.txt", "file", b"42")))
    assert list(members) == ["app"] and members["app"].linkname == "/tmp/doctored"


def test_dockers_archive_names_are_renamed_to_the_full_path():
    # the daemon names the top entry after the path's last component: /var/lib/ledger -> ledger
    _, members = sanitized(
        ["/var/lib/ledger"],
        raw_tar(("ledger", "dir", None), ("ledger/a", "file", b"x"), ("ledger/b", "hard", "ledger/a")),
        rename=("ledger", "var/lib/ledger"),
    )
    assert sorted(members) == ["var/lib/ledger", "var/lib/ledger/a", "var/lib/ledger/b"]
    assert members["var/lib/ledger/b"].linkname == "var/lib/ledger/a"


def test_a_state_over_the_cap_is_too_large():
    with pytest.raises(StateTooLargeError, match="larger than 4096 bytes"):
        sanitized(["/app"], raw_tar(("app", "dir", None), ("app/big", "file", b"x" * 5000)), max_bytes=4096)
    sink = CappedSink(io.BytesIO(), 10)
    sink.write(b"12345")
    sink.write(b"678901234")
    assert sink.over and sink.written == 10


def test_state_roots_are_absolute_and_not_nested():
    assert state_roots(["/app/", "/app/sub", "/etc/x", "/etc/x/y", "/etcetera"]) == ["/app", "/etc/x", "/etcetera"]
    for bad in ("app", "/", "/app/../etc"):
        with pytest.raises(ValueError, match="absolute path other than /"):
            state_roots([bad])


def test_the_tests_travel_with_the_state_owned_by_root_and_outside_the_cap(tmp_path):
    tests = tmp_path / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "test.sh").write_text("#!/bin/bash\n" + "#" * 6000)  # larger than the cap below
    (tests / "test.sh").chmod(0o755)
    (tests / "sub" / "data.txt").write_text("d")
    (tests / "link").symlink_to("/etc/passwd")
    out = io.BytesIO()
    archive = StateArchive(out, ["/app"], 4096)
    archive.add_trusted_tree(tests, "/tests")
    archive.add(raw_tar(("app", "dir", None), ("app/f", "file", b"agent")))
    copied = archive.finish()
    out.seek(0)
    with tarfile.open(fileobj=out, mode="r:") as tf:
        members = {m.name: m for m in tf.getmembers()}
    assert set(members) == {"tests/sub", "tests/sub/data.txt", "tests/test.sh", "tests/link", "app", "app/f"}
    assert all(members[n].uid == 0 == members[n].gid for n in members if n.startswith("tests"))
    assert members["tests/test.sh"].mode & 0o777 == 0o755 and members["tests/link"].issym()
    assert copied.entries == 2  # the agent's entries only
    sink = io.BytesIO()
    archive = StateArchive(sink, ["/app"], 4096)
    archive.add_trusted_tree(tests, "/tests")
    with pytest.raises(StateTooLargeError):  # the agent's own bytes still count
        archive.add(raw_tar(("app", "dir", None), ("app/big", "file", b"x" * 5000)))
    archive.finish()
