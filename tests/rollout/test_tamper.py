"""The tamper policy (`openforge.rollout.tamper`) as a pure function of a sandbox's changes: what a legitimate
Harbor task does to the system passes, what replaces or shadows what the verifier runs is named; a task's
`[verifier] allowed_changes` relaxes it. The same policy judges every backend's changes (Docker's
`docker diff`, Kubernetes' listings); tests/rollout/test_grading_docker.py runs it on real sandboxes."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from openforge.rollout.tamper import TamperPolicy, import_dir, module_name, tamper_reason
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


def judge(items: list[str], existing: set[str] = frozenset(), **kw) -> dict[str, str]:
    policy = TamperPolicy.for_verifier(kw.pop("path", None), kw.pop("workdir", "/app"), kw.pop("allowed", []))
    found = policy.judge(changes(*items), set(existing))
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
        ("C /usr/lib/python3.11/json/__init__.py", (), "changed on the interpreter's import path"),
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


def test_new_tool_without_a_namesake_is_not_shadowing_and_lookups_name_the_other_path_dirs():
    policy = TamperPolicy.for_verifier(None, "/app", [])
    ch = changes("A /usr/local/bin/newtool")
    assert "/usr/bin/newtool" in policy.lookups(ch) and "/usr/local/bin/newtool" not in policy.lookups(ch)
    assert policy.judge(ch, set()) == []


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
    found = policy.judge(changes("C /usr/bin/a", "C /usr/bin/b", "C /usr/bin/c", "C /usr/bin/d"), set())
    assert tamper_reason(found) == (
        "tampered: /usr/bin/a (changed in the verifier's PATH); /usr/bin/b (changed in "
        "the verifier's PATH); /usr/bin/c (changed in the verifier's PATH); and 1 more"
    )


def test_module_names_and_import_dirs():
    assert module_name(PurePosixPath("json.py")) == "json"
    assert module_name(PurePosixPath("json/__init__.pyc")) == "json"
    assert module_name(PurePosixPath("a/b.py")) is None and module_name(PurePosixPath("x.txt")) is None
    assert import_dir("/usr/lib/python3/dist-packages/pytest/x.py") == "/usr/lib/python3/dist-packages"
    assert import_dir("/usr/lib/python3.11/json/x.py") == "/usr/lib/python3.11"
    assert import_dir("/usr/lib/python3.11") is None and import_dir("/app/lib.py") is None


def test_allowed_changes_in_task_toml_must_be_absolute_globs():
    config, errors = parse_task_toml('[verifier]\nallowed_changes = ["/usr/local/lib/*"]\n[agent]\nuser = "agent"\n')
    assert errors == [] and config.verifier.allowed_changes == ["/usr/local/lib/*"] and config.agent.user == "agent"
    _, errors = parse_task_toml('[verifier]\nallowed_changes = ["usr/lib/*"]\n')
    assert len(errors) == 1 and "verifier.allowed_changes" in errors[0] and "absolute path glob" in errors[0]
    _, errors = parse_task_toml('[agent]\nuser = "nobody"\n')
    assert len(errors) == 1 and "agent.user" in errors[0]
