"""The order in which a run fills its slots: harness by harness (episodes running together share their harness's
prompt, which the embedded engine reads and attends to once), a task's samples next to each other."""

from __future__ import annotations

from openforge.rollout.orchestrator import plan
from openforge.tasks import load_task
from support.rollout import make_task


def test_slots_go_harness_by_harness_with_a_tasks_samples_together(tmp_path):
    tasks = [load_task(make_task(tmp_path, f"t{i}")) for i in range(3)]
    slots = plan(tasks, ["codex", "react"], 2)
    assert [s.key for s in slots] == [f"t{t}|{h}|{s}" for h in ("codex", "react") for t in range(3) for s in range(2)]
    # any run of consecutive slots (what a run's concurrency slots start together) crosses harnesses at most once
    harnesses = [s.harness for s in slots]
    assert sum(a != b for a, b in zip(harnesses, harnesses[1:])) == 1
