"""The generated families are split by job — the family language, the families, drawing, writing — and the
modules talk through public names only: none imports another's private (`_name`) helper."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO

FAMILIES = REPO / "openforge" / "tasks" / "families"


def private_imports(path: Path) -> list[str]:
    """`module.name` for every private name `path` imports from an OpenForge module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("openforge"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_family_modules_import_no_private_names():
    modules = sorted(FAMILIES.glob("*.py"))
    assert {p.stem for p in modules} >= {"language", "files", "recovery", "sampler", "writer"}
    assert {p.name: private_imports(p) for p in modules if private_imports(p)} == {}


def test_the_check_finds_a_private_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from openforge.tasks.families.files import _lines, create_file\n")
    assert private_imports(planted) == ["openforge.tasks.families.files._lines"]
