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


# A measured figure: a decimal number with a unit of time, a ratio, a share or a rate. Whole numbers are mostly
# settings (a 60 s timeout, 4 layers) and are not checked; a target, a bound (`the target is 1.25×`, `≤ 3.5 s`)
# or a setting's value (`stream_start_s` (0.5 s), `default 0.5 s`) is not a measurement.
FIGURE = re.compile(
    r"(?<![\w.])(?P<number>\d+\.\d+)\s?(?P<unit>%|ms\b|s\b|×|episodes/min|steps/s|tokens/s|calls/s|points\b|GiB|MiB)"
)
NOT_MEASURED = re.compile(r"(?:targets?(?: is)?|≤|≥|<|>|under|at most|at least|within|default|`\s*\(|=)[\s~*(]*$")
CITED = re.compile(r"\b([\w.-]+\.json)\b")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def numbers(data: object) -> list[float]:
    if isinstance(data, dict):
        return [n for value in data.values() for n in numbers(value)]
    if isinstance(data, list):
        return [n for value in data for n in numbers(value)]
    return [float(data)] if isinstance(data, (int, float)) and not isinstance(data, bool) else []


def held(shown: str, unit: str, values: list[float], quoted: list[float]) -> bool:
    """Shown at its decimals, the figure is one of the file's values (or a fraction ×100, seconds ×1000,
    milliseconds / 1000) — or, for a ratio (×) or a difference (points), the ratio or difference of two figures
    quoted in its sentence."""
    if any(matches(shown, v) or matches(shown, v * 1000) or matches(shown, v / 1000) for v in values):
        return True
    if unit not in ("×", "points"):
        return False
    pairs = [(a, b) for a in quoted for b in quoted if a != b]
    derived = [a / b for a, b in pairs if b > 0] if unit == "×" else [a - b for a, b in pairs]
    return any(matches(shown, d) for d in derived)


QUOTED = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
SENTENCE_END = re.compile(r"[.;:!?|](?=\s)|\n\n")


CLAIM_END = re.compile(r"[.;!?|](?=\s)|\n\n")  # a sentence, or a table cell


def quoted(block: str, at: int) -> list[float]:
    """The numbers of the clause (or table cell) around position `at` of a block."""
    return [float(q.replace(",", "")) for q in QUOTED.findall(sentence(block, at, SENTENCE_END))]


def pages() -> list[Path]:
    skip = {REPO / "docs" / "results.md", REPO / "docs" / "index.md"}  # index.md is the README, generated
    found = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [page for page in found if page not in skip]


def sentence(block: str, at: int, ends: re.Pattern[str]) -> str:
    """The sentence of a block around position `at`."""
    start = max((m.end() for m in ends.finditer(block, 0, at)), default=0)
    end = next((m.start() for m in ends.finditer(block, at)), len(block))
    return block[start:end]


def cited_files(*scopes: str) -> list[Path]:
    """The results files cited in the narrowest scope that cites any: the figure's sentence, its block, its
    section."""
    for scope in scopes:
        files = [RESULTS / name for name in dict.fromkeys(CITED.findall(scope)) if (RESULTS / name).is_file()]
        if files:
            return files
    return []


def unsourced_figures(page: Path) -> list[str]:
    """The measured figures of a page that the results files cited with them do not hold. A figure's source is
    cited in its sentence, else in its block (a paragraph, a list, a table), else in its section (the blocks
    since the last heading: a table's lead paragraph)."""
    problems = []
    section: list[str] = []
    for block in re.split(r"\n\s*\n", FENCE.sub("", page.read_text())):
        if block.lstrip().startswith("#"):
            section = []
        section.append(block)
        where = " ".join(block.split())[:90]
        for m in FIGURE.finditer(block):
            if NOT_MEASURED.search(block[max(0, m.start() - 14) : m.start()]):
                continue
            files = cited_files(sentence(block, m.start(), CLAIM_END), block, "\n".join(section))
            values = [n for path in files for n in numbers(json.loads(path.read_text()))]
            if not files:
                problems.append(f"{page.name}: {m.group(0)!r} cites no results file ({where}...)")
            elif not held(m.group("number"), m.group("unit"), values, quoted(block, m.start())):
                names = ", ".join(p.name for p in files)
                problems.append(f"{page.name}: {m.group(0)!r} is in none of {names} ({where}...)")
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_figure_in_the_docs_comes_from_a_results_file(page):
    """A figure is quoted with its source: the README's and the docs pages' measured figures are values of the
    results files cited in their section (or ratios and differences of two of them)."""
    problems = unsourced_figures(page)
    assert not problems, "\n".join(problems)
