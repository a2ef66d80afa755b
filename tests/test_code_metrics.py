"""scripts/code_metrics.py counts what its docstring says, on a small package written here, and the committed
measurement of 7607107 is what the script says of that commit's counts."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from support.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
from code_metrics import measure, summary  # noqa: E402

FILES = {
    "openforge/__init__.py": "",
    "openforge/cli.py": """
        from openforge.store import find_rows
        from openforge.train.api import Trainer

        def main(argv):
            from openforge.eval import report
            import json
            return report.score(argv)
    """,
    "openforge/core/__init__.py": "",
    "openforge/core/errors.py": """
        class Base(Exception): ...
        class Bad(Base, KeyError): ...
        class _Stop(Exception): ...
    """,
    "openforge/store/__init__.py": "from openforge.store.rows import find_rows\n",
    "openforge/store/rows.py": """
        from typing import Any
        FINAL = "coalesce(json_extract(metadata, '$.final'), 1)"

        def find_rows(where: Any, *args: Any) -> dict[str, Any]: ...
        def local(x: Any) -> None: ...
    """,
    "openforge/eval/__init__.py": "",
    "openforge/eval/report.py": """
        import typing
        from openforge.core.errors import Base

        class ReportError(Base): ...
        class Other(ValueError): ...

        def score(episodes) -> typing.Any:
            return [e for e in episodes if e.metadata.get("final")]

        def export(e):
            return {"final": e.metadata.get("final"), "n": len(e.metadata["final"])}  # copies: not a definition

        def pass_at_1(x): ...
    """,
    "openforge/train/__init__.py": "",
    "openforge/train/api.py": """
        from typing import Any
        from pydantic import BaseModel

        class Settings(BaseModel):
            harness: str
            sandbox: str
            max_attempts: int

        class More(Settings):
            image_map: dict
            sandbox: str
            temperature: float

        class Records(BaseModel):  # one episode field: a record, not a config
            harness: str

        class Trainer:
            def __init__(self, config: Any): ...
            def step(self, batch: Any, **kw: Any) -> Any: ...
            def _private(self, x: Any): ...

        def is_final(e) -> bool:
            return bool(e.metadata.get("final", True))

        def pass_at_1(x): ...
    """,
}


def write(root: Path) -> None:
    for path, text in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text).lstrip("\n"))


def test_counts_on_a_small_package(tmp_path):
    write(tmp_path)
    m = measure(tmp_path)
    configs = m["episode_configs"]
    assert [c["class"] for c in configs["classes"]] == ["Settings", "More"] and configs["episode_field_repeats"] == 1
    assert [(d["module"], d["definition"]) for d in m["final_definitions"]["definitions"]] == [
        ("openforge.eval.report", "score"),
        ("openforge.store.rows", "FINAL"),
        ("openforge.train.api", "is_final"),
    ]
    anys = m["any_in_signatures"]
    assert anys["all_signatures"] == 3 + 1 + 1 + 4 + 1  # find_rows, local, score, Trainer's public, _private
    # cross-room: find_rows (3, imported by cli through the store's re-export), Trainer.__init__ + step (4),
    # report.score (1, read as an attribute of the imported module by cli)
    assert anys["cross_room"] == 8 and anys["cross_room_imported_names_only"] == 7
    exc = m["exceptions"]
    assert exc["classes"] == 4 and exc["exception_roots"] == 2  # Base (Bad, ReportError under it) and Other
    assert exc["outside_bases"] == ["Exception", "ValueError"]
    assert exc["private_classes"] == ["openforge.core.errors._Stop"]
    cli = m["cli_and_size"]
    assert cli["cli_lines"] == 7 and cli["cli_imports_in_functions"] == 2
    assert cli["cli_imports_of_openforge_in_functions"] == 1 and cli["definitions"]["pass_at_1"] == 2


def test_the_committed_measurement_matches_its_counts():
    before = json.loads((REPO / "benchmarks/results/code_metrics-before.json").read_text())
    assert before["commit"].startswith("7607107")
    assert before["summary"] == {k: v for k, v in summary(before)}
    assert before["exceptions"]["classes"] == 46 and before["exceptions"]["exception_roots"] == 36
