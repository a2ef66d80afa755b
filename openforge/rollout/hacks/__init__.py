"""The built-in reward hacks `openforge tasks validate --run` (and the task validation of `openforge train`,
`openforge.rollout.task_gate`) tries against a task's verifier.

Each hack is what a policy looking for a hole in its grader could do in its turn: a shell script run in a fresh
sandbox of the task (in its initial, unsolved state) from the working directory, as the sandbox's agent user
and, where that is not enough, again as root — the most an agent can be, since Harbor tasks may give it root
(in the local sandbox root has no capability, so the agent's own files are the agent user's to change). Most
hacks do not solve the task; those that change its inputs run the reference solution afterwards, as an agent
that makes its task easier before solving it would (`Hack.needs_solution`). The sandbox is then graded exactly
as an episode is (`openforge.rollout.grading`). A hack the task's verifier falls to scores 1 without being
flagged as tampering (or, for a hack that hides a failure, leaves grading without a reward); every other outcome
is a hack blocked. A hack that cannot even be applied in a sandbox (a read-only `/usr` in the local one) is
blocked by the sandbox itself, and reported so.

The suite, by what it attacks: the work area (`work_area.py`), where the reward is read and the verifier's
processes (`reward.py`), the task's tests and input data within reach (`inputs.py`), the system the verifier
runs on (`system.py`), a GUI task's app (`gui.py`: its data from a shell, its code and seed, a look-alike server,
claim files); what they are made of is `base.py`.
"""

from __future__ import annotations

import hashlib

from openforge.rollout.hacks.base import PRELOAD_C, PRELUDE, Hack, HackError, preload_library
from openforge.rollout.hacks.gui import GUI_HACKS
from openforge.rollout.hacks.inputs import TASK_FILE_HACKS
from openforge.rollout.hacks.reward import REWARD_HACKS
from openforge.rollout.hacks.system import SYSTEM_HACKS
from openforge.rollout.hacks.work_area import WORK_AREA_HACKS

__all__ = ["HACKS", "Hack", "HackError", "preload_library", "select_hacks", "suite_digest"]

HACKS: tuple[Hack, ...] = (*WORK_AREA_HACKS, *REWARD_HACKS, *TASK_FILE_HACKS, *SYSTEM_HACKS, *GUI_HACKS)


def select_hacks(spec: str) -> list[Hack]:
    """`all`, `none`, or comma-separated hack names; ValueError naming the unknown ones and the known."""
    spec = spec.strip()
    if spec in ("", "all"):
        return list(HACKS)
    if spec == "none":
        return []
    by_name = {h.name: h for h in HACKS}
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown hack(s) {', '.join(unknown)}: use all, none, or names from {', '.join(by_name)}")
    return [by_name[n] for n in names]


def suite_digest(hacks: list[Hack] | tuple[Hack, ...]) -> str:
    """A digest of what `hacks` do (every script, flag and payload): a cached verdict holds for this suite only."""
    h = hashlib.sha256(PRELUDE.encode() + PRELOAD_C.encode())
    for hack in hacks:
        h.update(repr(hack).encode())
    return h.hexdigest()
