"""The curation run's ledger (OUT/ledger.json): every candidate, the stages it passed, where and why it was
rejected, its pass rate, and what it cost. Written after every step, atomically, so a run cut short goes on
where it stopped (`openforge tasks curate` again with the same OUT)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

# The stages a candidate passes, in order ("difficulty" is the second half of the test stage: the solver's
# attempts; "select" accepts or rejects by the pass rate).
STAGES = ("propose", "prune", "build", "test", "difficulty", "select")
Status = Literal["pending", "rejected", "refined", "accepted"]
Split = Literal["train", "heldout"]


class Tokens(BaseModel):
    input: int = 0
    output: int = 0

    def add(self, other: Tokens) -> Tokens:
        return Tokens(input=self.input + other.input, output=self.output + other.output)


class Candidate(BaseModel):
    """One version of one proposed task. A refined version is a new candidate of the same `lineage` (its first
    version's id), one `round` later; the version it replaces is `refined`."""

    id: str
    lineage: str
    round: int = 0
    topic: str | None = None
    passed: list[str] = Field(default_factory=list)
    status: Status = "pending"
    stage: str | None = None  # where it was rejected
    reason: str | None = None  # a short code: build_failed, oracle_failed, duplicate, ...
    detail: str = ""  # the evidence: build log, verifier output, the task it duplicates
    pass_rate: float | None = None
    graded: int = 0
    split: Split | None = None
    seconds: dict[str, float] = Field(default_factory=dict)
    generator_tokens: Tokens = Field(default_factory=Tokens)
    solver_tokens: Tokens = Field(default_factory=Tokens)
    refine_declined: bool = False  # the generator was sent its failure and gave up

    @property
    def last(self) -> str | None:
        return self.passed[-1] if self.passed else None

    def waiting_for(self, stage: str) -> bool:
        """Pending, and `stage` is the next one it has to pass."""
        return self.status == "pending" and self.last == STAGES[STAGES.index(stage) - 1]

    def passes(self, stage: str, seconds: float = 0.0) -> None:
        self.passed.append(stage)
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + seconds, 3)

    def rejected_at(self, stage: str, reason: str, detail: str = "", seconds: float = 0.0) -> None:
        self.status, self.stage, self.reason, self.detail = "rejected", stage, reason, detail[-4000:]
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + seconds, 3)


class Ledger(BaseModel):
    candidates: dict[str, Candidate] = Field(default_factory=dict)
    elapsed_s: float = 0.0  # wall time of every session of this run, summed
    generator: str = ""

    @classmethod
    def load(cls, out: Path) -> Ledger:
        path = out / "ledger.json"
        return cls.model_validate_json(path.read_text()) if path.is_file() else cls()

    def save(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out, prefix=".ledger-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(self.model_dump_json(indent=1))
        os.replace(tmp, out / "ledger.json")

    def waiting_for(self, stage: str) -> list[Candidate]:
        return [c for c in self.candidates.values() if c.waiting_for(stage)]

    def lineages(self) -> dict[str, list[Candidate]]:
        """Each lineage's versions, oldest first."""
        out: dict[str, list[Candidate]] = {}
        for c in sorted(self.candidates.values(), key=lambda c: (c.lineage, c.round)):
            out.setdefault(c.lineage, []).append(c)
        return out

    def final(self) -> list[Candidate]:
        """The latest version of every lineage."""
        return [versions[-1] for versions in self.lineages().values()]

    def dump(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=1)
