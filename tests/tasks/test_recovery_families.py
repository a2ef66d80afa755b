"""The recovery families: fresh instances whose reference solution and check pass, whose plausible wrong
solution (and a blind repeat of the right one) fails, and whose fault targets are safe to fault: removing the
missing_dir target, then the fix an agent would make, still reaches the expected state."""

from __future__ import annotations

import pytest

from openforge.faults import FaultTargets
from openforge.tasks import RECOVERY_FAMILIES, InstanceSampler, check_split_disjoint, get_families, write_task
from openforge.tasks.loader import load_task

NAMES = list(RECOVERY_FAMILIES)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_solutions_checks_and_wrong_solutions(split):
    for inst in InstanceSampler(split, seed=7, families=NAMES).sample(120):
        assert inst.score(inst.solution_command) == 1.0, inst.instruction
        if inst.look_command:
            assert inst.score(f"{inst.look_command}; {inst.solution_command}") == 1.0
        assert inst.score(inst.wrong_command) == 0.0, inst.instruction
        if ">>" in inst.solution_command:  # appending twice is wrong: recovery must depend on the error
            assert inst.score(f"{inst.solution_command}; {inst.solution_command}") == 0.0
        FaultTargets.model_validate(inst.fault_targets)


def test_a_missing_directory_can_be_recreated_to_the_expected_state():
    fixed = 0
    for inst in InstanceSampler("train", seed=8, families=NAMES).sample(120):
        d = inst.fault_targets.get("missing_dir")
        if d is None:
            continue
        fault = f"rm -rf {d} && "
        assert inst.score(fault + inst.solution_command) == 0.0  # the fault breaks the straightforward command
        assert inst.score(fault + f"mkdir -p {d} && " + inst.solution_command) == 1.0
        fixed += 1
    assert fixed > 30


def test_registered_and_split_like_the_other_families(tmp_path):
    assert [f.name for f in get_families(NAMES)] == NAMES
    train = InstanceSampler("train", seed=1, families=NAMES).sample(200)
    heldout = InstanceSampler("heldout", seed=2, families=NAMES).sample(100)
    assert check_split_disjoint(train, heldout) == []
    task = load_task(write_task(train[0], tmp_path / train[0].task_id()))
    assert (
        FaultTargets.from_metadata(task.config.metadata.model_extra).model_dump(exclude_none=True)
        == train[0].fault_targets
    )
    looked = next(i for i in train if i.look_command)
    task = load_task(write_task(looked, tmp_path / looked.task_id()))
    assert task.look_script is not None and task.look_script.read_text().strip().endswith(looked.look_command)
