"""Harbor's own ATIF validator (`harbor.utils.trajectory_validator`), run in its own Python >= 3.12 environment
that scripts/prepare-test-env.sh makes at .venv/harbor (or OPENFORGE_HARBOR_PYTHON). No tests here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from support.paths import REPO

_SCRIPT = """
import json, sys
from harbor.utils.trajectory_validator import TrajectoryValidator
out = {}
for path in sys.argv[1:]:
    v = TrajectoryValidator()
    out[path] = [] if v.validate(path) else v.get_errors()
print(json.dumps(out))
"""


def harbor_python() -> Path | None:
    configured = os.environ.get("OPENFORGE_HARBOR_PYTHON")
    path = Path(configured) if configured else REPO / ".venv" / "harbor" / "bin" / "python"
    return path if path.is_file() else None


def harbor_version(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('harbor'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def validate(python: Path, paths: list[Path]) -> dict[str, list[str]]:
    """{path: Harbor's errors} for every file (an empty list: valid)."""
    result = subprocess.run([str(python), "-c", _SCRIPT, *map(str, paths)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)
