"""The tamper policy (`openforge.rollout.tamper`) as a pure function of a sandbox's changes and of what its
lookups find: what a legitimate Harbor task does to the system passes, what replaces or shadows what the
verifier runs, loads or imports is named, by the area it lies in; a task's `[verifier] allowed_changes` relaxes
it. The same policy judges every backend's changes (Docker's `docker diff`, the local sandbox's and
Kubernetes' listings); tests/rollout/test_grading_docker.py and test_tamper_areas.py run it on real sandboxes."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from openforge.rollout.tamper import TamperPolicy, module_name, python_area, tamper_reason
from openforge.sandbox import PathChange
from openforge.tasks.loader import parse_task_toml


def changes(*items: str) -> list[PathChange]:
    """ "A /path", "C /path", "D /path" as docker diff prints them; the parent directories' C entries added."""
    kinds = {"A": "added", "C": "changed", "D": "deleted"}
    out: dict[str, PathChange] = {}
    for item in items:
        k, path = item.split(" ", 1)
        for parent in PurePosixPath(path).parents:
            if str(parent) != "/":
                out.setdefault(str(parent), PathChange(path=str(parent), kind="changed"))
        out[path] = PathChange(path=path, kind=kinds[k])
    return list(out.values())


def judge(items: list[str], existing=frozenset(), links=frozenset(), **kw) -> dict[str, str]:
    """The tampering found in `items`; `existing` paths are files now, `links` links (what the lookups find)."""
    policy = TamperPolicy.for_verifier(kw.pop("path", None), kw.pop("workdir", "/app"), kw.pop("allowed", []))
    kinds = {**{p: "file" for p in existing}, **{p: "link" for p in links}}
    found = policy.judge(changes(*items), kinds)
    return {t.path: t.why for t in found}


LEGITIMATE = [
    # pip install of a new package, its console script and its data
    "A /usr/local/lib/python3.11/dist-packages/requests/__init__.py",
    "A /usr/local/lib/python3.11/dist-packages/requests-2.32.dist-info/METADATA",
    "A /usr/local/bin/normalizer",
    # apt-get install of new files, the loader cache and the package database rewritten
    "A /usr/bin/jq2",
    "A /usr/lib/x86_64-linux-gnu/libjq2.so.1",
    "A /usr/share/doc/jq2/copyright",
    "C /etc/ld.so.cache",
    "C /var/lib/dpkg/status",
    "A /etc/alternatives/jq2",
    # the task's own work: code, tests of its own project, scratch files
    "C /app/mathutil.py",
    "A /app/src/pkg/types.py",
    "A /app/test.py",
    "A /app/notes.md",
    "D /app/old.txt",
    "A /tmp/sitecustomize-notes.txt",
    "A /root/.bash_history",
    "C /etc/hosts.allow",
    "A /etc/myapp.conf",
    # what grading recreates anyway
    "A /tests/conftest.py",
    "A /logs/verifier/reward.json",
]


def test_what_a_legitimate_task_changes_is_not_tampering():
    assert judge(LEGITIMATE, existing=set()) == {}


@pytest.mark.parametrize(
    "item, existing, why",
    [
        ("C /usr/bin/python3.11", (), "changed in the verifier's PATH"),
        ("D /usr/bin/bash", (), "deleted in the verifier's PATH"),
        ("A /usr/local/bin/python3", ("/usr/bin/python3",), "shadows /usr/bin/python3"),
        ("A /bin/bash", ("/usr/bin/bash",), "shadows /usr/bin/bash"),  # /bin replaced by a directory
        ("A /lib64/ld-linux-x86-64.so.2", (), "dynamic loader added"),
        ("A /etc/ld.so.preload", (), "loader configuration added"),
        ("A /etc/ld.so.conf.d/evil.conf", (), "loader configuration added"),
        ("C /etc/python3.11/sitecustomize.py", (), "interpreter start-up hook changed"),
        ("A /app/sitecustomize.py", (), "interpreter start-up hook added"),
        ("A /usr/local/lib/python3.11/dist-packages/usercustomize/__init__.py", (), "interpreter start-up hook added"),
        ("A /usr/local/lib/python3.11/dist-packages/zz.pth", (), "new .pth file on the import path"),
        ("C /usr/lib/python3.11/json/__init__.py", (), "standard library changed"),
        ("C /usr/lib/python3/dist-packages/pytest/__init__.py", (), "changed on the interpreter's import path"),
        (
            "A /usr/local/lib/python3.11/dist-packages/pytest/__init__.py",
            (),
            "new module 'pytest' on the import path shadows the test framework's",
        ),
        ("C /usr/lib/x86_64-linux-gnu/libc.so.6", (), "library changed"),
        ("C /etc/alternatives/python3", (), "library changed"),
        (
            "A /app/unittest.py",
            (),
            "new module 'unittest' in the work area shadows the standard library or a test framework",
        ),
        (
            "A /app/json/__init__.py",
            (),
            "new module 'json' in the work area shadows the standard library or a test framework",
        ),
        (
            "A /app/_pytest.cpython-311-x86_64-linux-gnu.so",
            (),
            "new module '_pytest' in the work area shadows the standard library or a test framework",
        ),
        ("A /app/sub/dir/conftest.py", (), "new conftest.py in the work area"),
        ("A /conftest.py", (), "new conftest.py at / (pytest configuration)"),
        ("A /pyproject.toml", (), "new pyproject.toml at / (pytest configuration)"),
        ("A /venv/lib/python3.12/site-packages/x.pth", (), "new .pth file on the import path"),
    ],
)
def test_tampering_is_named(item, existing, why):
    found = judge([item], existing=set(existing))
    assert found == {item.split(" ", 1)[1]: why}


# What else a real install, an agent's own work or Python itself does, under the area rules.
LEGITIMATE_BY_AREA = [
    # pip creating the packages directory; the bytecode caches Python writes where the image ships none
    "A /usr/local/lib/python3.12/site-packages/attrs/__init__.py",
    "A /usr/local/lib/python3.12/__pycache__/json.cpython-312.pyc",
    "A /usr/local/lib/python3.12/json/__pycache__/decoder.cpython-312.pyc",
    # another interpreter installed (uv, conda): its standard library is new, not the verifier's
    "A /root/.local/share/uv/python/cpython-3.12",
    "A /root/.local/share/uv/python/cpython-3.12/lib/python3.12/json/__init__.py",
    # the agent's own virtual environment and directories named like standard modules, in the work area
    "A /app/venv/pyvenv.cfg",
    "A /app/venv/lib/python3.11/site-packages/six.py",
    "A /app/code/main.py",
    "A /app/logging/app.log",
    # a new tool in a real /bin directory (an image without merged /usr): nothing of that name under /usr
    "A /bin/newtool",
    "A /lib/x86_64-linux-gnu/libnew.so.1",
]


def test_what_a_legitimate_task_changes_is_not_tampering_under_the_area_rules():
    policy = TamperPolicy.for_verifier(None, "/app", [])
    ch = changes(*LEGITIMATE, *LEGITIMATE_BY_AREA)
    assert "/app" in policy.lookups(ch)  # the work area changed: is it still a directory?
    assert policy.judge(ch, {"/app": "dir"}) == []
    # the work area itself changed alone: its mode (the agent's chmod), or a file made and removed in it
    assert policy.judge(changes("C /app"), {"/app": "dir"}) == []
    # a system directory that changed and still is one (Docker's init binary mounted in /usr/sbin, a chmod)
    assert policy.judge(changes("C /usr/sbin"), {"/usr/sbin": "dir"}) == []


# (the changes, what the lookups find: files and links, the verdict expected) for every area class of issue 25
AREA_CLASSES = {
    "/bin replaced by a link": (["C /bin"], (), ("/bin",), {"/bin": "system directory itself replaced by a link"}),
    "empty PATH dir replaced by a link": (
        ["C /usr/local/sbin"],
        (),
        ("/usr/local/sbin",),
        {"/usr/local/sbin": "system directory itself replaced by a link"},
    ),
    "a PATH directory removed": (["D /usr/local/sbin"], (), (), {"/usr/local/sbin": "system directory itself deleted"}),
    "/bin replaced by a directory of look-alikes": (
        ["C /bin", "A /bin/sh"],
        ("/usr/bin/sh",),
        (),
        {"/bin/sh": "shadows /usr/bin/sh"},
    ),
    "/lib replaced by a directory with a doctored libc": (
        ["C /lib", "A /lib/x86_64-linux-gnu", "A /lib/x86_64-linux-gnu/libc.so.6"],
        ("/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        (),
        {
            "/lib/x86_64-linux-gnu": "shadows /usr/lib/x86_64-linux-gnu",
            "/lib/x86_64-linux-gnu/libc.so.6": "shadows /usr/lib/x86_64-linux-gnu/libc.so.6",
        },
    ),
    "a PATH directory created": (["A /usr/local/sbin"], (), (), {"/usr/local/sbin": "system directory itself added"}),
    "package directory beside a stdlib module": (
        ["A /usr/lib/python3.11/csv", "A /usr/lib/python3.11/csv/__init__.py"],
        (),
        (),
        {
            "/usr/lib/python3.11/csv": "standard library added",
            "/usr/lib/python3.11/csv/__init__.py": "standard library added",
        },
    ),
    "python3XY.zip": (
        ["A /usr/lib/python311.zip"],
        (),
        (),
        {"/usr/lib/python311.zip": "interpreter's zipped standard library added"},
    ),
    "pyvenv.cfg": (
        ["A /usr/pyvenv.cfg"],
        (),
        (),
        {"/usr/pyvenv.cfg": "pyvenv.cfg added where the verifier's interpreters read it"},
    ),
    "pyvenv.cfg beside the interpreter": (
        ["A /usr/local/bin/pyvenv.cfg"],
        (),
        (),
        {"/usr/local/bin/pyvenv.cfg": "pyvenv.cfg added where the verifier's interpreters read it"},
    ),
    "module-named suffixless link in the work area": (
        ["A /app/json"],
        (),
        ("/app/json",),
        {"/app/json": "new module 'json' in the work area shadows the standard library or a test framework"},
    ),
    "a work-area directory named like a module replaced by a link": (
        ["C /app/unittest"],
        (),
        ("/app/unittest",),
        {"/app/unittest": "new module 'unittest' in the work area shadows the standard library or a test framework"},
    ),
    "test framework as a link among the packages": (
        ["A /usr/local/lib/python3.11/dist-packages/pytest"],
        (),
        ("/usr/local/lib/python3.11/dist-packages/pytest",),
        {
            "/usr/local/lib/python3.11/dist-packages/pytest": (
                "new module 'pytest' on the import path shadows the test framework's"
            )
        },
    ),
    "work area replaced by a link": (["C /app"], (), ("/app",), {"/app": "the work area replaced by a link"}),
    "work area replaced, its old entries listed (local, Kubernetes)": (
        ["C /app", "D /app/mathutil.py"],
        (),
        ("/app",),
        {"/app": "the work area replaced by a link"},
    ),
    "work area removed": (["D /app"], (), (), {"/app": "the work area removed"}),
}


@pytest.mark.parametrize("case", sorted(AREA_CLASSES))
def test_each_area_class_is_tampering(case):
    items, existing, links, expected = AREA_CLASSES[case]
    policy = TamperPolicy.for_verifier(None, "/app", [])
    needed = set(policy.lookups(changes(*items)))
    assert set(existing) | set(links) <= needed, needed  # the judgement asks for what it needs
    assert judge(items, existing=existing, links=links) == expected


def test_a_directory_above_the_work_area_replaced_by_a_link_is_tampering():
    policy = TamperPolicy.for_verifier(None, "/home/agent/app", [])
    ch = changes("C /home")
    assert "/home" in policy.lookups(ch)
    assert [(t.path, t.why) for t in policy.judge(ch, {"/home": "link"})] == [
        ("/home", "the work area replaced by a link")
    ]
    assert policy.judge(ch, {"/home": "dir"}) == []


def test_new_tool_without_a_namesake_is_not_shadowing_and_lookups_name_the_other_path_dirs():
    policy = TamperPolicy.for_verifier(None, "/app", [])
    ch = changes("A /usr/local/bin/newtool")
    assert "/usr/bin/newtool" in policy.lookups(ch) and "/usr/local/bin/newtool" not in policy.lookups(ch)
    assert policy.judge(ch, {}) == []


def test_a_task_path_replaces_the_default_path_dirs():
    assert judge(["C /opt/conda/bin/python"], path="/opt/conda/bin:/usr/bin") == {
        "/opt/conda/bin/python": "changed in the verifier's PATH"
    }
    assert judge(["C /opt/conda/bin/python"]) == {}


def test_allowed_changes_relax_the_policy():
    items = ["A /usr/local/lib/python3.11/dist-packages/pytest/__init__.py", "A /etc/ld.so.preload"]
    assert len(judge(items)) == 2
    assert judge(items, allowed=["/usr/local/lib/python3*/dist-packages/*"]) == {
        "/etc/ld.so.preload": "loader configuration added"
    }


def test_the_reason_names_the_first_paths():
    policy = TamperPolicy.for_verifier(None, "/app", [])
    found = policy.judge(changes("C /usr/bin/a", "C /usr/bin/b", "C /usr/bin/c", "C /usr/bin/d"), {})
    assert tamper_reason(found) == (
        "tampered: /usr/bin/a (changed in the verifier's PATH); /usr/bin/b (changed in "
        "the verifier's PATH); /usr/bin/c (changed in the verifier's PATH); and 1 more"
    )


def test_module_names_and_python_areas():
    assert module_name(PurePosixPath("json.py")) == "json"
    assert module_name(PurePosixPath("json/__init__.pyc")) == "json"
    assert module_name(PurePosixPath("a/b.py")) is None and module_name(PurePosixPath("x.txt")) is None
    assert module_name(PurePosixPath("json")) is None  # a link named json: judged with the lookups
    assert python_area("/usr/lib/python3/dist-packages/pytest/x.py") == ("packages", "/usr/lib/python3/dist-packages")
    assert python_area("/usr/lib/python3.11/json/x.py") == ("stdlib", "/usr/lib/python3.11")
    assert python_area("/usr/local/lib/python3.11/dist-packages/x/y.py") == (
        "packages",
        "/usr/local/lib/python3.11/dist-packages",
    )
    assert python_area("/usr/local/lib/python3.11/dist-packages") == (
        "packages",
        "/usr/local/lib/python3.11/dist-packages",
    )
    assert python_area("/usr/lib/python3.11") is None and python_area("/app/lib.py") is None


def test_allowed_changes_in_task_toml_must_be_absolute_globs():
    config, errors = parse_task_toml('[verifier]\nallowed_changes = ["/usr/local/lib/*"]\n[agent]\nuser = "agent"\n')
    assert errors == [] and config.verifier.allowed_changes == ["/usr/local/lib/*"] and config.agent.user == "agent"
    _, errors = parse_task_toml('[verifier]\nallowed_changes = ["usr/lib/*"]\n')
    assert len(errors) == 1 and "verifier.allowed_changes" in errors[0] and "absolute path glob" in errors[0]
    _, errors = parse_task_toml('[agent]\nuser = "nobody"\n')
    assert len(errors) == 1 and "agent.user" in errors[0]
