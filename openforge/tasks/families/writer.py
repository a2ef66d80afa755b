"""Writing generated instances as Harbor task directories: instruction.md, task.toml, environment/ (a Dockerfile
and the initial files), tests/ (the hidden verifier: the instance's expected final state and the comparison
of `openforge.tasks.state_check`) and solution/ (solve.sh, wrong.sh, and look.sh / check.sh where the family
has them).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from openforge.tasks import state_check
from openforge.tasks.families.desktop import DESKTOP_KINDS, generate_desktop_tasks
from openforge.tasks.families.language import FamilyError, FamilyInstance
from openforge.tasks.families.sampler import InstanceSampler
from openforge.tasks.families.web import WEB_KINDS, generate_web_tasks

__all__ = ["GENERATED_TEST_SH", "desktop_kinds", "generate_family_tasks", "verifier_files", "web_kinds", "write_task"]

GENERATED_TEST_SH = """#!/bin/bash
# Hidden verifier of a generated task: reward 1 iff the work directory's files equal the oracle's final state
# (expected.json; rules in check_state.py). APP_DIR / TESTS_DIR / VERIFIER_DIR override the container paths.
APP="${APP_DIR:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
TESTS="${TESTS_DIR:-$(cd "$(dirname "$0")" && pwd)}"
mkdir -p "$OUT"
python3 "$TESTS/check_state.py" "$APP" "$TESTS/expected.json" "$OUT" || echo 0 > "$OUT/reward.txt"
"""


def verifier_files(inst: FamilyInstance) -> dict[str, str]:
    """The hidden verifier of a generated task: ``test.sh`` (entry point), ``expected.json``, ``check_state.py``."""
    return {
        "test.sh": GENERATED_TEST_SH,
        "expected.json": json.dumps(inst.expected_files, indent=1, sort_keys=True) + "\n",
        "check_state.py": Path(state_check.__file__).read_text(),
    }


_TASK_TOML = """version = "1.0"

[metadata]
author_name = "OpenForge generator"
difficulty = "easy"
category = "file-operations"
tags = ["generated", "{family}"]
id = "{id}"
split = "{split}"
family = "{family}"
kind = "generated"
combo = {combo}
seed = {seed}
{fault_targets}
[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 256
pids_limit = 128
allow_internet = false
"""


def _fault_targets_toml(targets: Mapping[str, str]) -> str:
    """The `[metadata] fault_targets` line of a generated task ("" when it declares none)."""
    if not targets:
        return ""
    return "fault_targets = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in sorted(targets.items())) + " }\n"


def write_task(inst: FamilyInstance, task_dir: str | Path, seed: int | None = None, task_id: str | None = None) -> Path:
    """Write ``inst`` as a Harbor task directory (instruction.md, task.toml, environment/, tests/, solution/)."""
    d = Path(task_dir)
    if d.exists():
        shutil.rmtree(d)
    (d / "environment").mkdir(parents=True)
    tid = task_id or d.name
    (d / "instruction.md").write_text(inst.instruction + "\n")
    (d / "task.toml").write_text(
        _TASK_TOML.format(
            id=tid,
            split=inst.split,
            family=inst.family,
            combo=json.dumps(list(inst.combo)),
            seed=json.dumps(seed) if seed is not None else '"none"',
            fault_targets=_fault_targets_toml(inst.fault_targets),
        )
    )
    dockerfile = "FROM debian:bookworm-slim\nWORKDIR /app\n"
    if inst.setup_files:
        dockerfile += (
            "# the initial files belong to uid 1000 (the unprivileged `agent` user of openforge-base)\n"
            "COPY --chown=1000:1000 app/ /app/\n"
        )
        for rel, content in inst.setup_files.items():
            p = d / "environment" / "app" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content)
    (d / "environment" / "Dockerfile").write_text(dockerfile)
    tests = d / "tests"
    tests.mkdir()
    for name, content in verifier_files(inst).items():
        (tests / name).write_text(content)
    (tests / "test.sh").chmod(0o755)
    sol = d / "solution"
    sol.mkdir()
    scripts = [("solve.sh", inst.solution_command), ("wrong.sh", inst.wrong_command)]
    scripts += [(name, cmd) for name, cmd in (("look.sh", inst.look_command), ("check.sh", inst.check_command)) if cmd]
    for name, cmd in scripts:
        (sol / name).write_text(f"#!/bin/bash\n{cmd}\n")
        (sol / name).chmod(0o755)
    return d


def web_kinds(family: str | Iterable[str] | None) -> list[str] | None:
    """The web kinds `family` names (``web`` is all of them), None when it names no web kind; FamilyError when it
    mixes web kinds with other families (they need different sandboxes and harnesses)."""
    return _gui_kinds(family, "web", list(WEB_KINDS))


def desktop_kinds(family: str | Iterable[str] | None) -> list[str] | None:
    """The desktop kinds `family` names (``desktop`` is all of them), as `web_kinds`."""
    return _gui_kinds(family, "desktop", list(DESKTOP_KINDS))


def _gui_kinds(family: str | Iterable[str] | None, label: str, kinds: list[str]) -> list[str] | None:
    if family is None:
        return None
    names = [family] if isinstance(family, str) else list(family)
    names = [n.strip().replace("-", "_") for part in names for n in part.split(",") if n.strip()]
    gui = [n for n in names if n == label or n in kinds]
    if not gui:
        return None
    if len(gui) != len(names):
        raise FamilyError(f"generate the {label} family ({', '.join(gui)}) apart from the other families")
    return kinds if label in gui else gui


def generate_family_tasks(
    family: str | Iterable[str] | None,
    out_dir: str | Path,
    n: int,
    seed: int = 0,
    split: str = "train",
) -> list[Path]:
    """Write ``n`` generated tasks of ``family`` (a name, several, comma-separated names, or "all") under
    ``out_dir`` as Harbor task directories named ``<family>-<split>-<hash>``; returns their paths.

    Instances whose key repeats within the draw are skipped and redrawn, so the n tasks are distinct. The web
    family (``web``, or its kinds ``web_order``, ...: GUI tasks, `web.py`) is written by `web.generate_web_tasks`,
    the desktop family (``desktop``, ``desktop_email``, ...: `desktop.py`) by `desktop.generate_desktop_tasks`;
    "all" means the shell families.
    """
    kinds = web_kinds(family)
    if kinds is not None:
        return generate_web_tasks(out_dir, n, seed=seed, split=split, kinds=kinds)
    kinds = desktop_kinds(family)
    if kinds is not None:
        return generate_desktop_tasks(out_dir, n, seed=seed, split=split, kinds=kinds)
    out = Path(out_dir)
    if out.name in ("train", "heldout") and out.name != split:
        raise FamilyError(f"{out}: a {out.name!r} directory cannot hold {split!r} tasks")
    sampler = InstanceSampler(split=split, seed=seed, families=family)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    seen: set[str] = set()
    attempts = 0
    while len(paths) < n:
        attempts += 1
        if attempts > 50 * n + 100:
            raise FamilyError(f"could draw only {len(paths)} distinct instances of {family!r} ({split})")
        (inst,) = sampler.sample(1)
        if inst.key in seen:
            continue
        seen.add(inst.key)
        tid = inst.task_id()
        paths.append(write_task(inst, out / tid, seed=seed, task_id=tid))
    return paths
