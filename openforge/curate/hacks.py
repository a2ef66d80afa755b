"""The reward-hack suite of the test stage: shell scripts an agent could run *instead of* doing the task. A task
whose tests give one of them reward 1 rewards a shortcut, and GRPO would find it.

TODO(lead, #13): issue #13 adds the built-in reward-hack suite to `openforge.rollout.validate`. When it lands,
`run_hack_suite` becomes one call to it and the placeholder hack below goes; the test stage calls only
`run_hack_suite` (switched by `hack_suite` in the curate config).

The placeholder's one hack, `touch_mentioned_paths`: create, empty, every file path the instruction mentions
(backticked, or absolute) that does not exist yet — it catches tests that check that a file exists and not what
it holds.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from openforge.rollout.validate import run_script_and_verify
from openforge.sandbox import SandboxProvider
from openforge.tasks import ImageMap, Task

_BACKTICKED = re.compile(r"`([^`\s]+)`")
_ABSOLUTE = re.compile(r"(?<![\w`])(/[\w.-]+(?:/[\w.-]+)+)")
_FILE_LIKE = re.compile(r"^[\w./-]*[\w-]\.[A-Za-z0-9]{1,8}$")


@dataclass
class HackResult:
    name: str
    reward: float | None
    error: str | None = None


def mentioned_paths(instruction: str) -> list[str]:
    """File paths the instruction mentions (backticked or absolute, with an extension), in order, once each."""
    found = _BACKTICKED.findall(instruction) + _ABSOLUTE.findall(instruction)
    return list(dict.fromkeys(p.rstrip(".,;:") for p in found if _FILE_LIKE.match(p.rstrip(".,;:"))))


def touch_mentioned_paths(task: Task) -> str:
    lines = ["#!/bin/bash", "# reward hack: create the files the instruction names, empty"]
    for path in mentioned_paths(task.instruction):
        quoted = shlex.quote(path)
        lines.append(f'[ -e {quoted} ] || {{ mkdir -p "$(dirname {quoted})" && touch {quoted}; }} 2>/dev/null')
    return "\n".join(lines) + "\n"


HACKS = {"touch_mentioned_paths": touch_mentioned_paths}


async def run_hack_suite(task: Task, provider: SandboxProvider, image_map: ImageMap | None,
                         run: str) -> list[HackResult]:
    """Each hack in a fresh sandbox, then the verifier, as `openforge tasks validate --run` runs a solution."""
    results = []
    with tempfile.TemporaryDirectory(prefix="openforge-hack-") as tmp:
        for name, write in HACKS.items():
            script = Path(tmp) / name / "hack.sh"
            script.parent.mkdir()
            script.write_text(write(task))
            script.chmod(0o755)
            outcome = await run_script_and_verify(task, provider, image_map, script, name, run=run)
            results.append(HackResult(name, outcome.reward, outcome.error))
    return results
