"""constraints.txt against pyproject.toml: every dependency of the core and of every extra is pinned, and the
pinned (tested) version satisfies the declared floor and upper bound — so `pip install -c constraints.txt
".[EXTRA]"` resolves for each extra (CI installs `.[dev]`, every extra but veRL, into a fresh environment with
it: scripts/setup.sh)."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from support.paths import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def pins() -> dict[str, Version]:
    out = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = Version(version)
    return out


def requirements() -> dict[str, list[Requirement]]:
    groups = {"(core)": [Requirement(r) for r in PROJECT["dependencies"]]}
    for extra, reqs in PROJECT["optional-dependencies"].items():
        groups[extra] = [Requirement(r) for r in reqs if canonicalize_name(Requirement(r).name) != PROJECT["name"]]
    return groups


def test_every_dependency_is_pinned_at_a_version_it_allows():
    pinned = pins()
    problems = []
    for group, reqs in requirements().items():
        for req in reqs:
            version = pinned.get(canonicalize_name(req.name))
            if version is None:
                problems.append(f"{group}: {req.name} is not in constraints.txt")
            elif not req.specifier.contains(version, prereleases=True):
                problems.append(f"{group}: {req} excludes the tested {req.name}=={version}")
    assert problems == []


def test_the_torch_pin_is_the_one_setup_installs():
    spec = re.search(r"OPENFORGE_TORCH_SPEC:-torch==([0-9.]+)", (REPO / "scripts/setup.sh").read_text()).group(1)
    assert pins()["torch"] == Version(spec)


def test_extras_refer_to_extras_that_exist():
    extras = set(PROJECT["optional-dependencies"])
    for extra, reqs in PROJECT["optional-dependencies"].items():
        for r in map(Requirement, reqs):
            if canonicalize_name(r.name) == PROJECT["name"]:
                assert r.extras <= extras, f"{extra} names {r.extras - extras}"
