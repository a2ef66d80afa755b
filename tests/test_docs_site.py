"""The documentation site: `mkdocs build --strict` passes (broken links and anchors fail it); every command has
its page and the generated pages match their sources; the README stays short; every figure in docs/results.md
is what its results file holds; every results file the docs cite exists and records where it came from."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import unavailable
from support.paths import REPO

RESULTS = REPO / "benchmarks" / "results"
ROW = re.compile(r"^\| (?P<figure>[^|]+) \| (?P<value>[^|]+) \| (?P<file>[\w.-]+\.json) \| `(?P<field>[^`]+)` \|$")


def test_the_site_builds_strict(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        unavailable("mkdocs is not installed (the docs extra; scripts/setup.sh installs it)")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "cli" / "rollout" / "index.html").is_file()


def test_generated_pages_match_the_commands_and_the_readme():
    done = subprocess.run([sys.executable, "scripts/docs_site.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_readme_is_read_in_five_minutes():
    assert len((REPO / "README.md").read_text().splitlines()) <= 300


def resolve(data: object, pointer: str) -> object:
    """RFC 6901: /a/b~1c/0 -> data["a"]["b/c"][0]."""
    for token in pointer.lstrip("/").split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        data = data[int(token)] if isinstance(data, list) else data[token]  # type: ignore[index]
    return data


def matches(shown: str, value: object) -> bool:
    """The figure as shown equals the field rounded to the shown decimals (or ×100, a percentage of a fraction)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return shown == str(value)
    number = shown.replace(",", "")
    decimals = len(number.split(".")[1]) if "." in number else 0
    return any(f"{v:.{decimals}f}" == number for v in (value, value * 100))


def rows() -> list[dict[str, str]]:
    found = [m.groupdict() for line in (REPO / "docs/results.md").read_text().splitlines() if (m := ROW.match(line))]
    assert len(found) >= 30, "docs/results.md lost its table"
    return found


@pytest.mark.parametrize("row", rows(), ids=lambda r: r["figure"][:60])
def test_every_published_figure_is_what_its_results_file_holds(row):
    path = RESULTS / row["file"]
    assert path.is_file(), f"{row['figure']}: {row['file']} is not in benchmarks/results/"
    value = resolve(json.loads(path.read_text()), row["field"])
    assert matches(row["value"].strip(), value), f"{row['figure']}: shown {row['value']}, the file holds {value}"


def test_every_results_file_the_docs_cite_exists_and_says_where_it_came_from():
    cited = set()
    for page in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]:
        cited |= set(re.findall(r"benchmarks/results/([\w.-]+\.json)", page.read_text()))
    missing = sorted(name for name in cited if not (RESULTS / name).is_file())
    assert not missing, f"cited but not committed: {missing}"
    done = subprocess.run(
        [sys.executable, "scripts/results_provenance.py", "--check"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
