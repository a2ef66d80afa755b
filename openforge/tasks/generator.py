"""Parameterised task families: fresh, verifiable instances on demand.

The quickstart's RL stage trains on new instances at every step, so families are generators, not fixed
lists. Each instance is a one-command shell task in a small work directory:

    instruction      "Create the file notes/a7.txt containing 'blue 42'."
    setup_files      the initial state ({relative path: content}); varied, so shortcuts are not always valid
                     (the target of a "create" sometimes exists already, so ``>>`` is wrong there)
    expected_files   the oracle's final state; reward 1 iff the final state equals it (any equivalent command
                     counts; see openforge.tasks.state_check for the comparison rules)
    solution_command the oracle: one shell command; wrong_command: a plausible one that fails

Splits. Each family's (template, directory, extension) combinations are divided once, deterministically,
into train and held-out combinations (about a quarter held out, every directory and extension still seen in
training), and numeric parameters copied from the instruction are divided by value (``n % 9 == 4`` is
held out: 4, 13, 22, ... 94; every digit still appears in every position in training). A train instance
uses only train combinations and values; a held-out instance only held-out ones. Every parameter a solver
needs is in the instruction, so held-out instances are solvable by copying from it.

Deterministic: the same (seed, split, families, n) gives the same instances.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforge.core.errors import ConfigurationError
from openforge.tasks import state_check

WORDS = [
    "blue", "red", "green", "amber", "gold", "silver", "lime", "teal", "plum", "rose",
    "fox", "owl", "cat", "bee", "elk", "yak", "emu", "ant", "cod", "eel",
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
    """One task instance, held in memory; ``write_task`` turns it into a Harbor task directory."""

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

    def tests_files(self) -> dict[str, str]:
        """The hidden verifier: ``test.sh`` (entry point), ``expected.json``, ``check_state.py``."""
        return {
            "test.sh": GENERATED_TEST_SH,
            "expected.json": json.dumps(self.expected_files, indent=1, sort_keys=True) + "\n",
            "check_state.py": Path(state_check.__file__).read_text(),
        }

    @property
    def test_sh(self) -> str:
        return GENERATED_TEST_SH

    def task_id(self) -> str:
        return f"{self.family.replace('_', '-')}-{self.split}-{self.key[:10]}"


GENERATED_TEST_SH = """#!/bin/bash
# Hidden verifier of a generated task: reward 1 iff the work directory's files equal the oracle's final state
# (expected.json; rules in check_state.py). APP_DIR / TESTS_DIR / VERIFIER_DIR override the container paths.
APP="${APP_DIR:-/app}"
OUT="${VERIFIER_DIR:-/logs/verifier}"
TESTS="${TESTS_DIR:-$(cd "$(dirname "$0")" && pwd)}"
mkdir -p "$OUT"
python3 "$TESTS/check_state.py" "$APP" "$TESTS/expected.json" "$OUT" || echo 0 > "$OUT/reward.txt"
"""


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
            ["bash", "-c", command], cwd=root, env=env, capture_output=True, timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        return state_check.read_state(str(root))


# ---------------------------------------------------------------------------------------------------------
# families


@dataclass
class _Ctx:
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
    name: str
    template: str  # the instruction pattern, for documentation
    dirs: list[str]
    exts: list[str]
    make: Callable[[_Ctx], FamilyInstance]
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
        inst = self.make(_Ctx(rng=rng, split=split, d=d, ext=ext))
        inst.split = split
        inst.family = self.name
        inst.combo = (self.name, d, ext)
        return inst


def _inst(instruction, setup, expected, sol, wrong, **params) -> FamilyInstance:
    return FamilyInstance(
        family="", split="", instruction=instruction, setup_files=setup, expected_files=expected,
        solution_command=sol, wrong_command=wrong, combo=("", "", ""), params=params,
    )


FILE_DIRS = ["notes", "data", "cfg", "docs", "logs", "src", "work", "tmp"]


def _create_file(c: _Ctx) -> FamilyInstance:
    name = c.name()
    path = f"{c.d}/{name}.{c.ext}"
    word, nn = c.rng.choice(WORDS), c.number(10, 99)
    setup: dict[str, str] = {}
    state = c.rng.choice(["no_dir", "dir_exists", "target_exists"])
    if state != "no_dir":
        setup[f"{c.d}/{c.name(avoid=[name])}.{c.ext}"] = f"{c.rng.choice(WORDS)} {c.rng.randrange(10, 100)}\n"
    if state == "target_exists":
        setup[path] = f"{c.rng.choice(WORDS)} {c.rng.randrange(10, 100)}\n"
    c.distractor(setup, FILE_DIRS)
    expected = {**setup, path: f"{word} {nn}\n"}
    sol = f"mkdir -p {c.d} && echo '{word} {nn}' > {path}"
    wrong = (
        f"echo '{word} {nn}' >> {path}" if state != "dir_exists" else f"mkdir -p {c.d} && echo '{word}' > {path}"
    )
    return _inst(f"Create the file {path} containing '{word} {nn}'.", setup, expected, sol, wrong,
                 path=path, word=word, number=nn, state=state)


def _append_line(c: _Ctx) -> FamilyInstance:
    name = c.name()
    path = f"{c.d}/{name}.{c.ext}"
    key, n = c.rng.choice(KEYS), c.number(1, 99)
    setup: dict[str, str] = {}
    state = c.rng.choice(["file_exists", "file_exists", "no_file", "no_dir"])
    if state == "file_exists":
        keys = c.rng.sample([k for k in KEYS if k != key], c.rng.randint(1, 3))
        setup[path] = "".join(f"{k}={c.rng.randrange(1, 100)}\n" for k in keys)
    elif state == "no_file":
        setup[f"{c.d}/{c.name(avoid=[name])}.{c.ext}"] = f"{c.rng.choice(KEYS)}={c.rng.randrange(1, 100)}\n"
    c.distractor(setup, FILE_DIRS)
    expected = {**setup, path: setup.get(path, "") + f"{key}={n}\n"}
    sol = f"mkdir -p {c.d} && echo '{key}={n}' >> {path}"
    wrong = (
        f"echo '{key}={n}' > {path}" if state == "file_exists" else f"mkdir -p {c.d} && echo '{key} = {n}' >> {path}"
    )
    return _inst(f"Append the line '{key}={n}' to {path}.", setup, expected, sol, wrong,
                 path=path, key=key, number=n, state=state)


def _lines(c: _Ctx, n: int) -> list[str]:
    if c.ext == "csv":
        return [f"{c.rng.choice(WORDS)},{c.rng.randrange(100)}" for _ in range(n)]
    return [" ".join(c.words(c.rng.randint(1, 3))) for _ in range(n)]


def _out_path(c: _Ctx, setup: dict[str, str]) -> tuple[str, str]:
    od = c.rng.choice(OUT_DIRS)
    oname = c.name()
    if c.rng.random() < 0.5:
        setup[f"{od}/{c.name(avoid=[oname])}.txt"] = f"{c.rng.randrange(100)}\n"
    return od, f"{od}/{oname}.txt"


def _count_lines(c: _Ctx) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    n = c.rng.randint(2, 30)
    setup = {src: "\n".join(_lines(c, n)) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: f"{n}\n"}
    return _inst(
        f"Count the lines of {src} and write the count to {dst}.", setup, expected,
        f"mkdir -p {od} && wc -l < {src} > {dst}", f"mkdir -p {od} && wc -l {src} > {dst}",
        src=src, dst=dst, count=n,
    )


def _copy_file(c: _Ctx) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    d2 = c.other_dir(FILE_DIRS)
    dst = f"{d2}/{c.name()}.{c.ext}"
    setup = {src: "\n".join(_lines(c, c.rng.randint(1, 4))) + "\n"}
    if c.rng.random() < 0.5:
        setup[f"{d2}/{c.name(avoid=[dst.split('/')[1].split('.')[0]])}.{c.ext}"] = "x\n"
    expected = {**setup, dst: setup[src]}
    return _inst(f"Copy {src} to {dst}.", setup, expected, f"mkdir -p {d2} && cp {src} {dst}",
                 f"mkdir -p {d2} && mv {src} {dst}", src=src, dst=dst)


def _rename_file(c: _Ctx) -> FamilyInstance:
    a = c.name()
    b = c.name(avoid=[a])
    src, dst = f"{c.d}/{a}.{c.ext}", f"{c.d}/{b}.{c.ext}"
    setup = {src: "\n".join(_lines(c, c.rng.randint(1, 4))) + "\n"}
    c.distractor(setup, FILE_DIRS)
    expected = {k: v for k, v in setup.items() if k != src}
    expected[dst] = setup[src]
    return _inst(f"Rename {src} to {dst}.", setup, expected, f"mv {src} {dst}", f"cp {src} {dst}", src=src, dst=dst)


def _delete_file(c: _Ctx) -> FamilyInstance:
    a = c.name()
    path = f"{c.d}/{a}.{c.ext}"
    setup = {path: " ".join(c.words(2)) + "\n", f"{c.d}/{c.name(avoid=[a])}.{c.ext}": " ".join(c.words(2)) + "\n"}
    c.distractor(setup, FILE_DIRS)
    expected = {k: v for k, v in setup.items() if k != path}
    return _inst(f"Delete the file {path}.", setup, expected, f"rm {path}", f"rm -r {c.d}", path=path)


def _replace_word(c: _Ctx) -> FamilyInstance:
    path = f"{c.d}/{c.name()}.{c.ext}"
    old, new = c.rng.sample(WORDS, 2)
    others = [w for w in WORDS if w not in (old, new) and old not in w and new not in w]
    lines = [" ".join(c.rng.choice(others) for _ in range(c.rng.randint(1, 3))) for _ in range(c.rng.randint(1, 3))]
    lines.insert(c.rng.randrange(len(lines) + 1), f"{old} {c.rng.choice(others)} {old}")
    if c.rng.random() < 0.5:
        lines.insert(c.rng.randrange(len(lines) + 1), f"{c.rng.choice(others)} {old}")
    setup = {path: "\n".join(lines) + "\n"}
    expected = {path: setup[path].replace(old, new)}
    return _inst(
        f"Replace every '{old}' with '{new}' in {path}.", setup, expected,
        f"sed -i 's/{old}/{new}/g' {path}", f"sed -i 's/{old}/{new}/' {path}", path=path, old=old, new=new,
    )


def _head_lines(c: _Ctx) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    k = c.number(2, 15)
    n = c.rng.randint(k + 2, k + 12)
    lines = [f"{i + 1} " + " ".join(c.words(1)) for i in range(n)] if c.ext != "csv" else _lines(c, n)
    setup = {src: "\n".join(lines) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: "\n".join(lines[:k]) + "\n"}
    return _inst(
        f"Write the first {k} lines of {src} to {dst}.", setup, expected,
        f"mkdir -p {od} && head -n {k} {src} > {dst}", f"mkdir -p {od} && tail -n {k} {src} > {dst}",
        src=src, dst=dst, number=k,
    )


def _grep_lines(c: _Ctx) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    word = c.rng.choice(WORDS)
    others = [w for w in WORDS if word not in w]
    n = c.rng.randint(4, 10)
    lines = [" ".join(c.rng.choice(others) for _ in range(c.rng.randint(1, 3))) for _ in range(n)]
    hits = sorted(c.rng.sample(range(n), c.rng.randint(1, n - 2)))
    for i in hits:
        ws = lines[i].split(" ")
        ws.insert(c.rng.randrange(len(ws) + 1), word)
        lines[i] = " ".join(ws)
    setup = {src: "\n".join(lines) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: "\n".join(lines[i] for i in hits) + "\n"}
    return _inst(
        f"Write the lines of {src} that contain '{word}' to {dst}.", setup, expected,
        f"mkdir -p {od} && grep '{word}' {src} > {dst}", f"mkdir -p {od} && grep -v '{word}' {src} > {dst}",
        src=src, dst=dst, word=word,
    )


def _sum_numbers(c: _Ctx) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    nums = [c.rng.randint(1, 99) for _ in range(c.rng.randint(2, 8))]
    nums[0] = max(nums[0], 2)  # the sum always differs from the count
    setup = {src: "\n".join(map(str, nums)) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: f"{sum(nums)}\n"}
    return _inst(
        f"Write the sum of the numbers in {src} (one per line) to {dst}.", setup, expected,
        f"mkdir -p {od} && awk '{{s += $1}} END {{print s}}' {src} > {dst}",
        f"mkdir -p {od} && wc -l < {src} > {dst}",
        src=src, dst=dst, total=sum(nums),
    )


TEXT_EXTS = ["txt", "md", "log", "ini", "cfg"]
DATA_EXTS = ["csv", "txt", "log", "dat"]

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("create_file", "Create the file D/NAME.EXT containing 'WORD NN'.", FILE_DIRS, TEXT_EXTS,
               _create_file, "create (or overwrite) a file with a word and a two-digit number"),
        Family("append_line", "Append the line 'KEY=N' to D/NAME.EXT.", FILE_DIRS, ["ini", "cfg", "conf", "env", "txt"],
               _append_line, "append a key=value line; the file or its directory may not exist yet"),
        Family("count_lines", "Count the lines of D/NAME.EXT and write the count to OUT/NAME.txt.",
               ["data", "logs", "notes", "docs", "src", "work"], DATA_EXTS, _count_lines, "wc -l into a file"),
        Family("copy_file", "Copy D/NAME.EXT to D2/NAME2.EXT.", FILE_DIRS, TEXT_EXTS, _copy_file,
               "copy a file into another (maybe missing) directory"),
        Family("rename_file", "Rename D/A.EXT to D/B.EXT.", FILE_DIRS, TEXT_EXTS, _rename_file, "rename in place"),
        Family("delete_file", "Delete the file D/NAME.EXT.", FILE_DIRS, TEXT_EXTS, _delete_file,
               "delete one file, keeping its siblings"),
        Family("replace_word", "Replace every 'OLD' with 'NEW' in D/NAME.EXT.", FILE_DIRS, TEXT_EXTS, _replace_word,
               "global substitution (some lines hold the word twice)"),
        Family("head_lines", "Write the first K lines of D/NAME.EXT to OUT/NAME.txt.",
               ["data", "logs", "notes", "docs", "src", "work"], DATA_EXTS, _head_lines, "head -n K into a file"),
        Family("grep_lines", "Write the lines of D/NAME.EXT that contain 'WORD' to OUT/NAME.txt.",
               ["data", "logs", "notes", "docs", "src", "work"], DATA_EXTS, _grep_lines, "grep into a file"),
        Family("sum_numbers", "Write the sum of the numbers in D/NAME.EXT (one per line) to OUT/NAME.txt.",
               ["data", "logs", "notes", "docs", "src", "work"], DATA_EXTS, _sum_numbers, "awk sum into a file"),
    ]
}

# The three families of the quickstart notes (create / append / count), plus the others.
QUICKSTART_FAMILIES = ["create_file", "append_line", "count_lines", "copy_file", "rename_file", "replace_word"]


class FamilyError(ConfigurationError, ValueError):
    """Generated tasks that cannot be had as asked (an unknown family or split, a directory of the other split,
    more distinct instances than the families hold); the message names what is allowed."""


def get_families(families: str | Iterable[str] | None = None) -> list[Family]:
    """Families by name; None or "all" means every family. Unknown names raise FamilyError listing the known."""
    if families is None or families == "all":
        return list(FAMILIES.values())
    names = [families] if isinstance(families, str) else list(families)
    names = [n.strip().replace("-", "_") for part in names for n in part.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise FamilyError(f"unknown task famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                         f"known: {', '.join(FAMILIES)}")
    return [FAMILIES[n] for n in names]


class InstanceSampler:
    """A deterministic stream of fresh instances (for drawing new training instances at every RL step)."""

    def __init__(self, split: str = "train", seed: int = 0, families: str | Iterable[str] | None = None):
        if split not in ("train", "heldout"):
            raise FamilyError(f"unknown split {split!r}: expected 'train' or 'heldout'")
        self.split = split
        self.families = get_families(families)
        self.rng = random.Random(f"openforge-families:{seed}:{split}")
        self._order: list[Family] = []

    def sample(self, n: int) -> list[FamilyInstance]:
        """The next ``n`` instances; families are balanced (round-robin over a shuffled order)."""
        out = []
        for _ in range(n):
            if not self._order:
                self._order = list(self.families)
                self.rng.shuffle(self._order)
            out.append(self._order.pop().sample(self.rng, self.split))
        return out


def generate_instances(
    n: int, seed: int = 0, split: str = "train", families: str | Iterable[str] | None = None
) -> list[FamilyInstance]:
    """``n`` instances of the given families (all by default), deterministic under ``seed``."""
    return InstanceSampler(split=split, seed=seed, families=families).sample(n)


def check_split_disjoint(train: Iterable[FamilyInstance], heldout: Iterable[FamilyInstance]) -> list[str]:
    """Problems if any held-out instance (by ``instance_key``) or (template, directory, extension) combination
    also occurs among the training instances, or an instance is labelled with the other split; [] if clean."""
    train, heldout = list(train), list(heldout)
    problems = []
    tkeys = {instance_key(i): i for i in train}
    tcombos = {i.combo for i in train}
    problems += [f"train instance labelled {i.split!r}: {i.instruction}" for i in train if i.split != "train"]
    problems += [f"held-out instance labelled {i.split!r}: {i.instruction}" for i in heldout if i.split != "heldout"]
    for i in heldout:
        if instance_key(i) in tkeys:
            problems.append(f"held-out instance also in training: {i.instruction}")
        if i.combo in tcombos:
            problems.append(f"held-out combination {i.combo} also in training: {i.instruction}")
    return problems


# ---------------------------------------------------------------------------------------------------------
# Harbor layout

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
            id=tid, split=inst.split, family=inst.family, combo=json.dumps(list(inst.combo)),
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
    for name, content in inst.tests_files().items():
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


def generate_family_tasks(
    family: str | Iterable[str] | None,
    out_dir: str | Path,
    n: int,
    seed: int = 0,
    split: str = "train",
) -> list[Path]:
    """Write ``n`` generated tasks of ``family`` (a name, several, comma-separated names, or "all") under
    ``out_dir`` as Harbor task directories named ``<family>-<split>-<hash>``; returns their paths.

    Instances whose key repeats within the draw are skipped and redrawn, so the n tasks are distinct.
    """
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


# The recovery families (appends that can meet environment faults) register themselves in FAMILIES.
from openforge.tasks import recovery_families  # noqa: E402,F401
