"""`--faults SPEC`: the text and YAML forms, errors that name the fix, and deterministic draws at the rates."""

from __future__ import annotations

import pytest

from openforge.faults import FaultKind, FaultSpec, FaultSpecError, FaultTargets, draw_kinds, parse_fault_spec
from openforge.faults.plan import FaultPlan


def test_text_and_mapping_forms_agree():
    text = parse_fault_spec("transient:0.3, missing_dir:0.2,seed=3,hang_s=5")
    mapping = parse_fault_spec({"transient": 0.3, "missing-dir": "0.2", "seed": 3, "hang_s": 5})
    assert text == mapping
    assert text.rates == {FaultKind.transient: 0.3, FaultKind.missing_dir: 0.2} and text.seed == 3
    assert parse_fault_spec(text.text()) == text
    assert set(parse_fault_spec("all:0.1").rates) == set(FaultKind)
    assert parse_fault_spec("transient:0.5,hang:0.5,exclusive").exclusive
    assert parse_fault_spec("") is None and parse_fault_spec("none") is None and parse_fault_spec(None) is None


@pytest.mark.parametrize(
    "bad, says",
    [
        ("transient:1.5", "between 0 and 1"),
        ("flood:0.2", "unknown fault kind 'flood'; known: transient, missing_dir"),
        ("transient", "expected KIND:RATE"),
        ("transient:x", "give a number between 0 and 1"),
        ("transient:0.7,hang:0.7,exclusive", "must sum to at most 1"),
        ("transient:0.2,sead=3", "unknown fault kind 'sead'"),
    ],
)
def test_bad_specs_say_what_is_wrong(bad, says):
    with pytest.raises(FaultSpecError, match=says.replace("(", r"\(")):
        parse_fault_spec(bad)


def test_draws_are_deterministic_and_follow_the_rates():
    spec = FaultSpec(rates={FaultKind.transient: 0.3, FaultKind.hang: 0.6}, seed=1)
    draws = [draw_kinds(spec, f"task-{i}|0") for i in range(2000)]
    assert draws == [draw_kinds(spec, f"task-{i}|0") for i in range(2000)]
    assert abs(sum(FaultKind.transient in d for d in draws) / 2000 - 0.3) < 0.04
    assert abs(sum(FaultKind.hang in d for d in draws) / 2000 - 0.6) < 0.04
    exclusive = FaultSpec(rates={FaultKind.transient: 0.5, FaultKind.missing_dir: 0.5}, exclusive=True)
    one = [draw_kinds(exclusive, str(i)) for i in range(1000)]
    assert all(len(d) == 1 for d in one)
    assert 400 < sum(d == [FaultKind.transient] for d in one) < 600


def test_a_fault_the_task_cannot_meet_is_recorded_as_not_applicable():
    plan = FaultPlan.arm(parse_fault_spec("missing_dir:1,flaky_service:1,transient:1"), FaultTargets(), "k")
    records = {r.kind: r for r in plan.records}
    assert records["transient"].applicable
    assert not records["missing_dir"].applicable and "fault_targets.missing_dir" in records["missing_dir"].reason
    assert not records["flaky_service"].applicable and "no service" in records["flaky_service"].reason
    no_shell = FaultPlan.arm(parse_fault_spec("transient:1"), FaultTargets(), "k", shell="no shell tool")
    assert [(r.applicable, r.reason) for r in no_shell.records] == [(False, "no shell tool")]


def test_targets_must_stay_inside_the_working_directory():
    with pytest.raises(ValueError, match="relative to the working directory"):
        FaultTargets(missing_dir="../etc")
    with pytest.raises(ValueError, match="relative to the working directory"):
        FaultTargets(permission="/etc/passwd")
    assert FaultTargets.from_metadata({"fault_targets": {"service": "svc"}}).service == "svc"
