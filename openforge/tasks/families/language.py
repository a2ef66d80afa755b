"""The family language: what a generated task is and how a family draws one.

Parameterised task families give fresh, verifiable instances on demand (the quickstart's RL stage trains on
new instances at every step, so families are generators, not fixed lists). Each instance is a one-command
shell task in a small work directory:

    instruction      "Create the file notes/a7.txt containing 'blue 42'."
    setup_files      the initial state ({relative path: content}); varied, so shortcuts are not always valid
                     (the target of a "create" sometimes exists already, so ``>>`` is wrong there)
    expected_files   the oracle's final state; reward 1 iff the final state equals it (any equivalent command
                     counts; see openforge.tasks.state_check for the comparison rules)
    solution_command the oracle: one shell command; wrong_command: a plausible one that fails

A family (`Family`) is a name, its (directory, extension) choices and a `make(ctx) -> FamilyInstance`
function; `FamilyContext` gives `make` its random draws (names, numbers, words, a distractor file) within
the split, and `instance(...)` builds the result.

Splits. Each family's (template, directory, extension) combinations are divided once, deterministically,
into train and held-out combinations (about a quarter held out, every directory and extension still seen in
training), and numeric parameters copied from the instruction are divided by value (``n % 9 == 4`` is
held out: 4, 13, 22, ... 94; every digit still appears in every position in training). A train instance
uses only train combinations and values; a held-out instance only held-out ones. Every parameter a solver
needs is in the instruction, so held-out instances are solvable by copying from it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforge.core.errors import ConfigurationError
from openforge.tasks import state_check


class FamilyError(ConfigurationError, ValueError):
    """Generated tasks that cannot be had as asked (an unknown family or split, a directory of the other split,
    more distinct instances than the families hold); the message names what is allowed."""


__all__ = [
    "HELDOUT_FRACTION",
    "KEYS",
    "LETTERS",
    "OUT_DIRS",
    "WORDS",
    "Family",
    "FamilyContext",
    "FamilyInstance",
    "combo_key",
    "instance",
    "instance_key",
    "is_heldout_number",
    "run_in_tempdir",
]

WORDS = [
    "blue",
    "red",
    "green",
    "amber",
    "gold",
    "silver",
    "lime",
    "teal",
    "plum",
    "rose",
    "fox",
    "owl",
    "cat",
    "bee",
    "elk",
    "yak",
    "emu",
    "ant",
    "cod",
    "eel",
]
KEYS = ["port", "retries", "level", "limit", "size", "depth", "workers", "timeout", "mode", "rate"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"
OUT_DIRS = ["out", "res", "stats", "report"]

HELDOUT_FRACTION = 0.25


def is_heldout_number(n: int) -> bool:
    """The held-out numeric values: n % 9 == 4 (4, 13, 22, 31, 40, 49, 58, 67, 76, 85, 94, ...)."""
    return n % 9 == 4


def _numbers(lo: int, hi: int, split: str) -> list[int]:
    held = split == "heldout"
    return [n for n in range(lo, hi + 1) if is_heldout_number(n) == held]


def _h(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


@dataclass
class FamilyInstance:
    """One task instance, held in memory; ``write_task`` (`writer.py`) turns it into a Harbor task directory."""

    family: str
    split: str
    instruction: str
    setup_files: dict[str, str]
    expected_files: dict[str, str]
    solution_command: str
    wrong_command: str
    combo: tuple[str, str, str]  # (template, directory, extension)
    params: dict[str, Any] = field(default_factory=dict)
    # what environment faults act on (`openforge.faults.FaultTargets` fields), for families built to meet them
    fault_targets: dict[str, str] = field(default_factory=dict)
    # read-only commands the oracle runs before its solution (solution/look.sh) and after it (solution/check.sh)
    look_command: str | None = None
    check_command: str | None = None

    @property
    def key(self) -> str:
        return instance_key(self)

    def problems(self, files: Mapping[str, str | bytes]) -> list[str]:
        """Why the final state ``files`` ({relative path: content}) is not the expected one; [] when it is."""
        return state_check.compare_states(dict(files), self.expected_files)

    def check(self, files: Mapping[str, str | bytes]) -> bool:
        return not self.problems(files)

    def run(self, command: str, timeout_s: float = 10.0) -> dict[str, str]:
        """Run ``command`` with bash in a fresh temporary copy of the initial state; the final state.

        Not isolated: for commands from this module's oracles or tests, or inside a sandbox.
        """
        return run_in_tempdir(self.setup_files, command, timeout_s=timeout_s)

    def score(self, command: str, timeout_s: float = 10.0) -> float:
        try:
            return 1.0 if self.check(self.run(command, timeout_s=timeout_s)) else 0.0
        except subprocess.TimeoutExpired:
            return 0.0

    def task_id(self) -> str:
        return f"{self.family.replace('_', '-')}-{self.split}-{self.key[:10]}"


def instance_key(inst: FamilyInstance) -> str:
    """Identity of an instance: its family, instruction and initial state (what a model is shown and starts from)."""
    blob = json.dumps([inst.family, inst.instruction, sorted(inst.setup_files.items())], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def combo_key(inst: FamilyInstance) -> tuple[str, str, str]:
    return inst.combo


def run_in_tempdir(setup_files: Mapping[str, str], command: str, timeout_s: float = 10.0) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="openforge-inst-") as tmp:
        root = Path(tmp)
        for rel, content in setup_files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LC_ALL": "C"}
        subprocess.run(
            ["bash", "-c", command],
            cwd=root,
            env=env,
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        return state_check.read_state(str(root))


@dataclass
class FamilyContext:
    """What a family's `make` draws from: the random source, the split, and the (directory, extension) drawn."""

    rng: random.Random
    split: str
    d: str
    ext: str

    def name(self, avoid: Iterable[str] = ()) -> str:
        avoid = set(avoid)
        while True:
            n = self.rng.choice(LETTERS) + str(self.rng.randrange(10))
            if n not in avoid:
                return n

    def number(self, lo: int, hi: int) -> int:
        return self.rng.choice(_numbers(lo, hi, self.split))

    def words(self, k: int) -> list[str]:
        return [self.rng.choice(WORDS) for _ in range(k)]

    def other_dir(self, dirs: Sequence[str]) -> str:
        return self.rng.choice([x for x in dirs if x != self.d])

    def distractor(self, files: dict[str, str], dirs: Sequence[str]) -> None:
        """Sometimes an unrelated file elsewhere, so the work directory is not always empty."""
        if self.rng.random() < 0.5:
            od = self.other_dir(dirs)
            files[f"{od}/{self.name()}.{self.rng.choice(['txt', 'md', 'log'])}"] = " ".join(self.words(2)) + "\n"


@dataclass
class Family:
    """A task family: `make` draws one instance from a context; `sample` picks the split's combination."""

    name: str
    template: str  # the instruction pattern, for documentation
    dirs: list[str]
    exts: list[str]
    make: Callable[[FamilyContext], FamilyInstance]
    description: str = ""

    def combos(self) -> list[tuple[str, str, str]]:
        return [(self.name, d, e) for d in self.dirs for e in self.exts]

    def heldout_combos(self) -> set[tuple[str, str, str]]:
        """About a quarter of the (template, directory, extension) combinations, chosen by a fixed hash,
        never taking the last train combination of any directory or extension."""
        combos = sorted(self.combos(), key=lambda c: _h(*c))
        target = max(1, round(len(combos) * HELDOUT_FRACTION))
        held: set[tuple[str, str, str]] = set()
        for c in combos:
            if len(held) >= target:
                break
            rest = [x for x in combos if x not in held and x != c]
            if any(x[1] == c[1] for x in rest) and any(x[2] == c[2] for x in rest):
                held.add(c)
        return held

    def split_combos(self, split: str) -> list[tuple[str, str, str]]:
        held = self.heldout_combos()
        return [c for c in self.combos() if (c in held) == (split == "heldout")]

    def sample(self, rng: random.Random, split: str) -> FamilyInstance:
        if split not in ("train", "heldout"):
            raise ValueError(f"unknown split {split!r}: expected 'train' or 'heldout'")
        _, d, ext = rng.choice(self.split_combos(split))
        inst = self.make(FamilyContext(rng=rng, split=split, d=d, ext=ext))
        inst.split = split
        inst.family = self.name
        inst.combo = (self.name, d, ext)
        return inst


def instance(
    instruction: str, setup: dict[str, str], expected: dict[str, str], sol: str, wrong: str, **params: object
) -> FamilyInstance:
    """A family's instance; `Family.sample` fills in its family, split and combination."""
    return FamilyInstance(
        family="",
        split="",
        instruction=instruction,
        setup_files=setup,
        expected_files=expected,
        solution_command=sol,
        wrong_command=wrong,
        combo=("", "", ""),
        params=params,
    )
