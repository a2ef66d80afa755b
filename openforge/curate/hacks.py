"""The reward-hack check of the test stage: the built-in suite of `openforge tasks validate --run`
(`openforge.rollout.hacks`: module shadowing, planted rewards, lingering writers, replaced tools, ...) plus one
hack made from the candidate's own instruction. A task whose verifier falls to one of them — reward 1 without
a tampered verdict — rewards a shortcut, and GRPO would find it.

The task-specific hack, `touch-mentioned-paths`: create, empty, every file path the instruction mentions
(backticked, or absolute) that does not exist yet — it catches tests that check that a file exists and not what
it holds, which generated tasks often do.
"""

from __future__ import annotations

import re
import shlex

from openforge.rollout.hacks import HACKS, Hack
from openforge.rollout.validate import HackOutcome, run_hacks
from openforge.sandbox import SandboxProvider
from openforge.tasks import ImageMap, Task

_BACKTICKED = re.compile(r"`([^`\s]+)`")
_ABSOLUTE = re.compile(r"(?<![\w`])(/[\w.-]+(?:/[\w.-]+)+)")
_FILE_LIKE = re.compile(r"^[\w./-]*[\w-]\.[A-Za-z0-9]{1,8}$")
HACK_CONCURRENCY = 2  # sandboxes at once per candidate (candidates are tested in parallel too)


def mentioned_paths(instruction: str) -> list[str]:
    """File paths the instruction mentions (backticked or absolute, with an extension), in order, once each."""
    found = _BACKTICKED.findall(instruction) + _ABSOLUTE.findall(instruction)
    return list(dict.fromkeys(p.rstrip(".,;:") for p in found if _FILE_LIKE.match(p.rstrip(".,;:"))))


def touch_mentioned_paths(task: Task) -> Hack:
    lines = []
    for path in mentioned_paths(task.instruction):
        quoted = shlex.quote(path)
        lines.append(f'[ -e {quoted} ] || {{ mkdir -p "$(dirname {quoted})" && touch {quoted}; }} 2>/dev/null')
    return Hack("touch-mentioned-paths", "create, empty, every file the instruction names", "\n".join([*lines, "true"]))


async def run_hack_suite(
    task: Task, provider: SandboxProvider, image_map: ImageMap | None, run: str
) -> list[HackOutcome]:
    """Every hack in a fresh sandbox of the task, graded as an episode is (`openforge.rollout.validate`)."""
    return await run_hacks(
        task,
        provider,
        image_map,
        [*HACKS, touch_mentioned_paths(task)],
        run=run,
        spec_overrides=None,
        concurrency=HACK_CONCURRENCY,
    )
