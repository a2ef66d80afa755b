"""Install hints name the distribution OpenForge is published as, `openforge-rl[EXTRA]`: `openforge` on PyPI is an
unrelated project, so a hint naming `openforge[...]` would install someone else's code."""

from __future__ import annotations

from support.paths import REPO

SCANNED = ["openforge", "docs", "scripts", "examples", "benchmarks", "docker"]


def test_every_install_hint_names_openforge_rl():
    files = [REPO / "README.md", REPO / "pyproject.toml"]
    for top in SCANNED:
        files += [
            p
            for p in (REPO / top).rglob("*")
            if p.is_file() and p.suffix in {".py", ".md", ".sh", ".toml", ".yaml", ".txt", ""}
        ]
    wrong = [
        f"{p.relative_to(REPO)}:{n}"
        for p in files
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if "openforge[" in line
    ]
    assert not wrong, f"install hints naming openforge[...] instead of openforge-rl[...]: {wrong}"
