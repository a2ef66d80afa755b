"""Drawing instances: every family by name, a deterministic stream of fresh instances (`InstanceSampler`), and
the check that a train draw and a held-out draw share nothing.

Deterministic: the same (seed, split, families, n) gives the same instances.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from openforge.tasks.families.files import FILE_FAMILIES
from openforge.tasks.families.language import Family, FamilyError, FamilyInstance, instance_key
from openforge.tasks.families.recovery import RECOVERY_FAMILIES

__all__ = [
    "FAMILIES",
    "QUICKSTART_FAMILIES",
    "InstanceSampler",
    "check_split_disjoint",
    "generate_instances",
    "get_families",
]

# Every family by name: the file families, then the recovery families (`get_families` and `--family` know them).
FAMILIES: dict[str, Family] = {**FILE_FAMILIES, **RECOVERY_FAMILIES}

# The three families of the quickstart notes (create / append / count), plus the others.
QUICKSTART_FAMILIES = ["create_file", "append_line", "count_lines", "copy_file", "rename_file", "replace_word"]


def get_families(families: str | Iterable[str] | None = None) -> list[Family]:
    """Families by name; None or "all" means every family. Unknown names raise FamilyError listing the known."""
    if families is None or families == "all":
        return list(FAMILIES.values())
    names = [families] if isinstance(families, str) else list(families)
    names = [n.strip().replace("-", "_") for part in names for n in part.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise FamilyError(
            f"unknown task famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
            f"known: {', '.join(FAMILIES)}"
        )
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
