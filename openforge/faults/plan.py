"""One episode's faults: which kinds are armed (drawn from the spec's rates, deterministically per key), what
each acts on, how the environment is changed before the harness starts, and the record written on the
episode (`episode.metadata["faults"]`, read by the behaviour analytics).

A record: `{"kind", "applicable", "reason", "target", "fired", "command", "at_s", "times"}` — `fired`: the
fault met one of the agent's commands; `command`: which (1 = the agent's first command); `at_s`: seconds
after the environment was prepared; `times`: how many commands it met. A fault drawn but impossible here
(`applicable` false) says why in `reason` instead of being skipped silently.
"""

from __future__ import annotations

import random
import shlex
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, cast

from pydantic import BaseModel, ConfigDict, field_validator

from openforge.core.json_types import JSONObject
from openforge.faults.spec import FaultKind, FaultSpec

if TYPE_CHECKING:
    from openforge.faults.rules import FaultEntry, FaultState

BALLAST = ".cache/ballast.bin"  # disk_full: a large (sparse) file filling the work directory's disk
BALLAST_SIZE = "512M"


class FaultTargets(BaseModel):
    """What a task's environment faults act on, relative to its working directory. Declared by the task
    (`[metadata.fault_targets]` in task.toml); generated instances declare their own.

    - `missing_dir`: a directory the straightforward solution expects, removed before the harness starts (it
      must hold nothing the grading needs: hidden placeholder files only);
    - `permission`: the file (or directory) made read-only (default: the working directory itself);
    - `service`: the program the task talks to its service with (flaky_service fails its first call).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    missing_dir: str | None = None
    permission: str | None = None
    service: str | None = None

    @field_validator("missing_dir", "permission")
    @classmethod
    def _relative(cls, v: str | None) -> str | None:
        if v is None:
            return v
        p = PurePosixPath(v)
        if p.is_absolute() or ".." in p.parts or not v.strip():
            raise ValueError(f"{v!r} must be a path relative to the working directory, without '..'")
        return str(p)

    @field_validator("service")
    @classmethod
    def _program(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or "/" in v or any(c.isspace() for c in v)):
            raise ValueError(f"service {v!r} must be a program name (no path, no spaces)")
        return v

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, object] | None) -> FaultTargets:
        """From a task's metadata (`fault_targets` table); empty when it declares none."""
        declared = (metadata or {}).get("fault_targets")
        return cls.model_validate(declared) if isinstance(declared, dict) else cls()


@dataclass
class FaultRecord:
    kind: str
    applicable: bool
    reason: str | None = None
    target: str | None = None
    seconds: float | None = None  # hang: how long the command sleeps
    fired: bool = False
    command: int | None = None
    at_s: float | None = None
    times: int = 0


def draw_kinds(spec: FaultSpec, key: str) -> list[FaultKind]:
    """The kinds armed for the episode (or GRPO group) `key`: the same key always draws the same kinds."""
    rng = random.Random(f"openforge-faults:{spec.seed}:{key}")
    kinds = [k for k in FaultKind if spec.rates.get(k, 0.0) > 0]
    if spec.exclusive:
        u, total = rng.random(), 0.0
        for kind in kinds:
            total += spec.rates[kind]
            if u < total:
                return [kind]
        return []
    return [k for k in kinds if rng.random() < spec.rates[k]]


class FaultPlan:
    """The armed faults of one episode and their state as it runs."""

    def __init__(self, records: list[FaultRecord], spec: FaultSpec):
        self.records = records
        self.spec = spec
        self.started = time.time()
        self.commands = 0

    @classmethod
    def arm(cls, spec: FaultSpec, targets: FaultTargets, key: str, *, shell: str | None = None) -> FaultPlan:
        """Draw the faults for `key`. `shell`: why the harness cannot meet shell faults (None: it can)."""
        records = []
        for kind in draw_kinds(spec, key):
            target, reason = _target(kind, targets)
            if shell is not None:
                reason = shell
            records.append(
                FaultRecord(
                    kind.value, reason is None, reason, target, seconds=spec.hang_s if kind is FaultKind.hang else None
                )
            )
        return cls(records, spec)

    @property
    def active(self) -> list[FaultRecord]:
        return [r for r in self.records if r.applicable]

    def not_applicable(self, reason: str) -> None:
        """Every armed fault cannot be met here (e.g. no python3 in the sandbox for the hook)."""
        for r in self.records:
            if r.applicable:
                r.applicable, r.reason = False, reason

    def setup_script(self) -> str:
        """Shell commands (run as root in the working directory, before the harness starts) that put the
        environment faults in place; "" when there are none."""
        lines = []
        for r in self.active:
            t = shlex.quote(r.target or ".")
            if r.kind == FaultKind.missing_dir.value:
                lines.append(f"rm -rf -- {t}")
            elif r.kind == FaultKind.permission.value:
                lines.append(f"if [ -e {t} ]; then chmod a-w -- {t}; fi")
            elif r.kind == FaultKind.disk_full.value:
                parent = shlex.quote(str(PurePosixPath(r.target or BALLAST).parent))
                lines.append(f"mkdir -p {parent} && truncate -s {BALLAST_SIZE} {t} && chown --reference=. {parent} {t}")
        return "\n".join(lines)

    def state(
        self, root: str, views: tuple[str, ...] = (), internal: tuple[str, ...] = (), command_pattern: str | None = None
    ) -> FaultState:
        """What `rules.decide` reads: the work directory as the deciding process sees it (`root`) and as the
        agent's commands may name it (`views`), the harness's own command lines to leave alone, where the
        agent's command sits in a wrapped line, and the faults."""
        return {
            "root": root,
            "views": list(views),
            "started": self.started,
            "commands": self.commands,
            "internal": list(internal),
            "command_pattern": command_pattern,
            "faults": [cast("FaultEntry", asdict(r)) for r in self.records],  # asdict is typed dict[str, Any]
        }

    def update(self, state: FaultState) -> None:
        """Take back what `rules.decide` recorded (fired, command, at_s, times)."""
        self.commands = int(state.get("commands", self.commands))
        by_kind = {f["kind"]: f for f in state.get("faults", []) if isinstance(f, dict) and "kind" in f}
        for r in self.records:
            seen = by_kind.get(r.kind)
            if seen is not None:
                r.fired = bool(seen.get("fired"))
                r.command = seen.get("command")
                r.at_s = seen.get("at_s")
                r.times = int(seen.get("times") or 0)

    def to_json(self) -> list[JSONObject]:
        return [asdict(r) for r in self.records]


def _target(kind: FaultKind, targets: FaultTargets) -> tuple[str | None, str | None]:
    """(what the fault acts on, why it cannot be applied)."""
    if kind is FaultKind.missing_dir:
        if targets.missing_dir is None:
            return None, "the task declares no fault_targets.missing_dir (a directory its solution expects)"
        return targets.missing_dir, None
    if kind is FaultKind.permission:
        return targets.permission or ".", None
    if kind is FaultKind.flaky_service:
        if targets.service is None:
            return None, "the task talks to no service (no fault_targets.service)"
        return targets.service, None
    if kind is FaultKind.disk_full:
        return BALLAST, None
    return None, None


__all__ = ["BALLAST", "FaultPlan", "FaultRecord", "FaultTargets", "draw_kinds"]
