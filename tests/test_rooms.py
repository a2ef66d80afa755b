"""The rooms table of docs/design.md holds: no module imports a room its row does not allow, nor another room's
private names (scripts/check_rooms.py says how the table is read and what counts as an import)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
from check_rooms import ALL, TableError, check, read_rooms_table  # noqa: E402
from package_imports import load_package  # noqa: E402

DESIGN = REPO / "docs/design.md"


def violations(root: Path) -> list[str]:
    return [str(v) for v in check(load_package(root), read_rooms_table(DESIGN), root)]


@pytest.fixture(scope="module")
def real() -> list[str]:
    """The real tree's violations (none once the tree follows the table)."""
    return violations(REPO)


def test_the_package_follows_the_rooms_table(real):
    found = real
    assert not found, "imports the rooms table of docs/design.md does not allow:\n" + "\n".join(found)


def test_the_real_table_is_read_as_written():
    allowed = read_rooms_table(DESIGN)
    assert allowed["core"] == set()  # "nothing of OpenForge"
    assert allowed["sandbox"] == {"core", "tasks"}  # "`tasks` (the image map)": the parenthesis is not a room
    assert {"core", "store", "rollout", "eval"} <= allowed["train"]  # "everything above (...)"
    assert not {"curate", "view", "cli"} & allowed["train"]  # the rows below it
    assert allowed["cli"] == {ALL}
    rooms = {p.name for p in (REPO / "openforge").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms <= set(allowed), f"packages missing from the rooms table: {sorted(rooms - set(allowed))}"


def test_everything_above_except(tmp_path):
    """The table's "everything above except `a`" form, on a table of its own (the real one no longer uses it)."""
    design = tmp_path / "design.md"
    design.write_text(
        "## Rooms\n\n| package | owns | may import |\n|---|---|---|\n"
        "| `core` | types | nothing of OpenForge |\n| `store` | records | `core` |\n"
        "| `eval` | pass@k | `core`, `store` |\n"
        "| `train` | training | everything above except `eval` |\n"
    )
    assert read_rooms_table(design)["train"] == {"core", "store"}


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the real package to plant imports into."""
    shutil.copytree(REPO / "openforge", tmp_path / "openforge", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


# case: (the planted file, its source, what the violation must say). Each case plants its own file.
PLANTED = {
    "a top-level import": (
        "openforge/store/planted.py",
        "from openforge.train import assemble_run\n",
        "room 'store' imports openforge.train (assemble_run)",
    ),
    "an import inside a function": (
        "openforge/core/planted.py",
        "def f():\n    import openforge.sandbox.base\n",
        "room 'core' imports openforge.sandbox.base inside a function",
    ),
    "a TYPE_CHECKING import": (
        "openforge/dialects/planted.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from openforge.proxy import RunningProxy\n",
        "room 'dialects' imports openforge.proxy (RunningProxy) under TYPE_CHECKING",
    ),
    "a relative import": (
        "openforge/tasks/planted.py",
        "from ..rollout import orchestrator\n",
        "room 'tasks' imports openforge.rollout.orchestrator",
    ),
    "import_module of a literal": (
        "openforge/faults/planted.py",
        "import importlib\nm = importlib.import_module('openforge.store.queries')\n",
        "room 'faults' imports openforge.store.queries",
    ),
    "a private name of an allowed room": (
        "openforge/eval/planted_name.py",
        "from openforge.store.queries import _private_helper\n",
        "room 'eval' imports the private _private_helper of room 'store'",
    ),
    "a private module of an allowed room": (
        "openforge/eval/planted_module.py",
        "from openforge.store import _hidden\n",
        "room 'eval' imports the private _hidden of room 'store'",
    ),
    "a private attribute of an imported module": (
        "openforge/eval/planted_attribute.py",
        "from openforge.store import queries\nqueries._where(1)\n",
        "room 'eval' uses the private openforge.store.queries._where",
    ),
    "a room missing from the table": (
        "openforge/newroom/__init__.py",
        "",
        "openforge.newroom is in room 'newroom', which the rooms table",
    ),
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory, real) -> list[str]:
    """The violations of a copy of the package with every case of PLANTED planted, less the real tree's."""
    root = tmp_path_factory.mktemp("planted")
    shutil.copytree(REPO / "openforge", root / "openforge", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "openforge/store/_hidden.py").write_text("")
    for path, source, _ in PLANTED.values():
        (root / path).parent.mkdir(exist_ok=True)
        (root / path).write_text(source)
    return [v for v in violations(root) if v not in real]


@pytest.mark.parametrize("case", PLANTED)
def test_a_planted_violation_is_found(planted, case):
    path, _, expected = PLANTED[case]
    mine = [v for v in planted if v.startswith(f"{path}:")]
    assert len(mine) == 1 and expected in mine[0], planted


def test_nothing_but_the_planted_violations_is_found(planted):
    assert len(planted) == len(PLANTED), planted


def test_allowed_imports_are_not_violations(tree, real):
    (tree / "openforge/eval/planted.py").write_text(
        "import openforge\nfrom openforge import __version__\nfrom openforge.store import TrajectoryStore\n"
        "from openforge.eval.report import final_episodes\nfrom . import report\nfrom openforge.core import records\n"
    )
    (tree / "openforge/cli/__init__.py").write_text(
        (tree / "openforge/cli/__init__.py").read_text() + "\nfrom openforge.view import atif\n"
    )
    assert violations(tree) == real


def test_the_command_exits_1_on_a_violation(tree, real):
    shutil.copytree(REPO / "docs", tree / "docs")
    run = [sys.executable, str(REPO / "scripts/check_rooms.py"), "--root", str(tree)]
    clean = subprocess.run(run, capture_output=True, text=True)
    assert clean.returncode == (1 if real else 0), clean.stdout + clean.stderr
    (tree / "openforge/core/planted.py").write_text("from openforge.store import TrajectoryStore\n")
    r = subprocess.run(run, capture_output=True, text=True)
    assert r.returncode == 1 and "openforge/core/planted.py:1: room 'core' imports openforge.store" in r.stdout


@pytest.mark.parametrize("cell", ["`core` and more", "most of them", "everything above but `eval`", "`nosuchroom`"])
def test_an_unreadable_table_cell_is_an_error(tmp_path, cell):
    design = tmp_path / "design.md"
    design.write_text(
        "## Rooms\n\n| package | owns | may import |\n|---|---|---|\n"
        "| `core` | types | nothing of OpenForge |\n"
        f"| `store` | the store | {cell} |\n\n## Next\n"
    )
    with pytest.raises(TableError, match="store"):
        read_rooms_table(design)
