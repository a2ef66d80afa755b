"""What a run's task validation found (`openforge.rollout.task_gate`): each unit's verdict, the report a run keeps
(`GateReport.to_json`: RUN/task-validation.json and the run's report.json), and the lines that say it — the
refusal, the summary printed, the report's line. Plain data: the report modules read it without the machinery
that runs the hacks."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.markup import escape

from openforge.core.json_types import JSONObject, JSONValue

__all__ = ["GateReport", "UnitVerdict", "refusal_message", "summary_line", "validation_summary"]


@dataclass
class UnitVerdict:
    """A unit's verdict: the hacks its verifier fell to (`fell`: task id, hack, verdict) and what kept it from
    being checked (`problems`: a reference solution that did not score 1, a sandbox that failed)."""

    name: str
    kind: str
    tasks: list[str]
    key: str
    fell: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cached: bool = False

    @property
    def ok(self) -> bool:
        return not self.fell and not self.problems

    def describe(self) -> str:
        """One line: the unit and each hack it fell to, or why it could not be checked."""
        label = self.name if self.kind == "task" else f"family {self.name}"
        if self.fell:
            hacks = list(dict.fromkeys(f["hack"] for f in self.fell))
            where = "" if self.kind == "task" else f" (on {', '.join(sorted({f['task'] for f in self.fell}))})"
            return f"{label}: falls to {', '.join(hacks)}{where}"
        return f"{label}: could not be checked: {self.problems[0].splitlines()[0] if self.problems else '?'}"

    def to_json(self) -> JSONObject:
        return {
            "unit": self.name,
            "kind": self.kind,
            "tasks": list(self.tasks),
            "key": self.key,
            "ok": self.ok,
            "fell": [dict(f) for f in self.fell],
            "problems": list(self.problems),
            "cached": self.cached,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> UnitVerdict:
        return cls(
            name=str(data["unit"]),
            kind=str(data["kind"]),
            tasks=[str(t) for t in _list(data.get("tasks"))],
            key=str(data["key"]),
            fell=[{str(k): str(v) for k, v in f.items()} for f in _list(data.get("fell")) if isinstance(f, dict)],
            problems=[str(p) for p in _list(data.get("problems"))],
            cached=True,
        )


def _list(value: JSONValue | None) -> list[JSONValue]:
    return value if isinstance(value, list) else []


@dataclass
class GateReport:
    """What the validation found: every unit's verdict, and the units left out of the run (`dropped`)."""

    sandbox: str
    hacks: int
    suite: str
    verdicts: list[UnitVerdict]
    dropped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def refused(self) -> list[UnitVerdict]:
        return [v for v in self.verdicts if not v.ok]

    def dropped_tasks(self) -> set[str]:
        """The ids of the task directories left out (a dropped family's instances are not the run's tasks)."""
        return {t for v in self.verdicts if v.name in self.dropped and v.kind == "task" for t in v.tasks}

    def dropped_families(self) -> set[str]:
        return {v.name for v in self.verdicts if v.name in self.dropped and v.kind == "family"}

    def to_json(self) -> JSONObject:
        return {
            "sandbox": self.sandbox,
            "hacks": self.hacks,
            "suite": self.suite[:16],
            "units": [v.to_json() for v in self.verdicts],
            "hackable": [v.name for v in self.refused],
            "dropped": list(self.dropped),
            "seconds": round(self.seconds, 1),
        }


def summary_line(report: GateReport) -> str:
    """The printed summary of a validation that let the run go on."""
    checked = f"task validation ({report.sandbox}, {report.hacks} hacks, {report.seconds:.0f}s)"
    if not report.dropped:
        return f"{checked}: all {len(report.verdicts)} unit(s) pass"
    lines = [f"{checked}: {len(report.dropped)} of {len(report.verdicts)} left out of the run:"]
    lines += [f"  {escape(v.describe())}" for v in report.refused]
    return "\n".join(lines)


def refusal_message(report: GateReport, drop: bool) -> str:
    refused = report.refused
    lines = [
        f"{len(refused)} of {len(report.verdicts)} task(s) to run on fall to reward hacks or cannot be checked "
        f"({report.sandbox} sandbox, {report.hacks} hacks)"
        + (": every one, so nothing is left to run" if drop else "; not running on them:")
    ]
    lines += [f"  {v.describe()}" for v in refused]
    lines.append(
        "See each verdict with `openforge tasks validate TASK_DIR --run --sandbox "
        f"{report.sandbox}` and fix the verifier (README: Reward integrity); "
        + (
            "or turn the check off (validate_tasks: false, --no-validate-tasks)."
            if drop
            else "or leave these tasks out (drop_hackable_tasks: true, --drop-hackable-tasks), or turn the check "
            "off (validate_tasks: false, --no-validate-tasks)."
        )
    )
    return "\n".join(lines)


def validation_summary(data: JSONValue | None) -> str | None:
    """One line for a run's report from its `GateReport.to_json()`: what was checked and what was left out
    (None when the tasks were not validated)."""
    if not isinstance(data, dict):
        return None
    units = _list(data.get("units"))
    dropped = [str(d) for d in _list(data.get("dropped"))]
    head = f"Task validation ({data.get('sandbox')} sandbox, {data.get('hacks')} reward hacks): {len(units)} checked"
    if not dropped:
        return head + ", none hackable."
    fell = {
        str(u.get("unit")): sorted({str(f.get("hack")) for f in _list(u.get("fell")) if isinstance(f, dict)})
        for u in units
        if isinstance(u, dict)
    }
    named = "; ".join(f"{d} ({', '.join(fell.get(d) or ['not checkable'])})" for d in dropped)
    return f"{head}, {len(dropped)} left out of the run: {named}."
