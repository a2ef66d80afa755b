"""A reduced recovery recipe (`openforge quickstart --recipe recovery`): the pipeline completes — a teacher
without faults, SFT, GRPO with faults injected, held-out evaluation of every policy without and with faults —
and the report carries pass@1 with faults and recovery rates beside the rest (the learning itself is measured
by benchmarks/recovery.py)."""

from __future__ import annotations

import json

from openforge.store import TrajectoryStore
from openforge.train.quickstart import quickstart_config, run_quickstart


def test_recovery_recipe_smoke(docker_ready, tmp_path):
    config = quickstart_config(
        {
            "sandbox": "docker",
            "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
            "sft": {"demos": 6, "steps": 2, "warmup_steps": 1, "control": True},
            "rl": {"seconds": 10, "steps": 2, "prompts": 2, "group": 2, "eval_instances": 8},
        },
        seed=0,
        recipe="recovery",
    )
    run = tmp_path / "run"
    report = run_quickstart(run, config)
    saved = json.loads((run / "report.json").read_text())
    assert report["heldout_pass_at_1_with_faults"] == saved["heldout_pass_at_1_with_faults"]
    assert set(saved["heldout_pass_at_1_with_faults"]) == {"base", "sft", "rl", "sft_more"}
    assert set(saved["recovery_rate_with_faults"]) == {"base", "sft", "rl", "sft_more"}
    assert saved["faults"] == {
        "rl": "transient:0.35,missing_dir:0.35,exclusive",
        "eval": "transient:0.5,missing_dir:0.5,exclusive",
    }
    assert saved["behaviour"]["sft"]["graded"] == 8
    # the teacher's happy path: no faults; its demonstrations run (a look and) the solution, then "Done."
    with TrajectoryStore.open(run / "teacher") as store:
        teacher = store.list_episodes()
    assert teacher and all("faults" not in e.metadata for e in teacher)
    # GRPO and the evaluation with faults met them (the same draw for every sample of a group)
    with TrajectoryStore.open(run / "rl") as store:
        rl = store.list_episodes()
    assert any(f["applicable"] for e in rl for f in e.metadata.get("faults", []))
    for step in {e.metadata["step"] for e in rl}:
        groups = {}
        for e in rl:
            if e.metadata["step"] == step:
                groups.setdefault(e.task, set()).add(json.dumps([f["kind"] for f in e.metadata.get("faults", [])]))
        assert all(len(kinds) == 1 for kinds in groups.values())
    with TrajectoryStore.open(run / "eval" / "sft+faults") as store:
        assert any(f["applicable"] for e in store.list_episodes() for f in e.metadata.get("faults", []))
    md = (run / "report.md").read_text()
    assert "| sft | faults |" in md
