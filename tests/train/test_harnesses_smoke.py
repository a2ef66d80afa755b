"""A reduced `harnesses` recipe (`openforge quickstart --recipe harnesses`) with the real Claude Code and Codex
binaries in Docker: the oracle teacher through Claude Code's own Bash tool, SFT, a GRPO step whose episodes are
Claude Code runs in sandboxes against the proxy, every policy evaluated in Claude Code and the trained ones (SFT,
SFT+RL) also in Codex — which this run never trained on (`transfer_harnesses`) — with pass@1 per harness in the
report (the learning itself is measured by benchmarks/harnesses.py)."""

from __future__ import annotations

import json

from conftest import unavailable
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.models import ModelDir
from openforge.store import TrajectoryStore
from openforge.train.quickstart import HARNESS_PROMPT, quickstart_config, run_quickstart


def test_harnesses_recipe_smoke(docker_ready, tmp_path):
    missing = [h for h in ("claude-code", "codex") if not bundle_status(default_bundle_dir()).get(h)]
    if missing:
        unavailable(f"{', '.join(missing)} not in the harness bundle: run `openforge harness install`")
    config = quickstart_config(
        {
            "sandbox": "docker",
            "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
            "eval_harnesses": ["claude-code"],
            "transfer_harnesses": ["codex"],
            "sft": {"demos": 4, "steps": 2, "warmup_steps": 1, "batch_size": 4},
            "rl": {"seconds": 1, "steps": 1, "prompts": 2, "group": 2, "eval_instances": 2},
        },
        seed=0,
        recipe="harnesses",
    )
    assert config.harnesses == ["claude-code"] and not config.in_process
    run = tmp_path / "run"
    report = run_quickstart(run, config)
    # the teacher: the oracle's command through Claude Code's Bash tool, then "Done."
    with TrajectoryStore.open(run / "teacher") as store:
        teacher = store.list_episodes()
        assert len(teacher) == 4 and {e.harness for e in teacher} == {"claude-code"}
        assert all(e.reward == 1.0 for e in teacher)
        calls = store.list_calls(teacher[0].id)
    assert [c.metadata["tool_calls"][0]["name"] for c in calls[:1]] == ["Bash"] and len(calls) == 2
    # Claude Code's own prompt, cut by its settings (`--system-prompt`, only Bash): a few hundred tokens
    model = ModelDir(run / "model")
    tokenizer = model.tokenizer
    # the recipe's model: the tiny model with a sliding window in every layer (learns to copy behind the prompt)
    shape = json.loads((run / "model" / "config.json").read_text())
    assert set(shape["layer_types"]) == {"sliding_attention"} and shape["sliding_window"] == 96
    first = tokenizer.decode(calls[0].prompt_ids)
    assert HARNESS_PROMPT in first and len(calls[0].prompt_ids) < 600, len(calls[0].prompt_ids)
    # GRPO: real Claude Code episodes, grouped per (step, task, harness)
    step = report["grpo_step_records"][0]
    assert step["harnesses"] == {"claude-code": 4} and step["episodes"] == 4 and 0 < step["train_s"] < step["seconds"]
    # held-out pass@1 per policy and per harness; the trained policies also in Codex (never trained on)
    by_harness = report["heldout_pass_at_1_by_harness"]
    assert {k: set(v) for k, v in by_harness.items()} == {
        "base": {"claude-code"},
        "sft": {"claude-code", "codex"},
        "rl": {"claude-code", "codex"},
    }
    assert report["eval_harnesses"] == ["claude-code"] and report["harnesses"] == ["claude-code"]
    assert report["transfer_harnesses"] == ["codex"]
    with TrajectoryStore.open(run / "eval" / "sft") as store:  # the run's own harness: pass@1 comes from here
        assert {e.harness for e in store.list_episodes()} == {"claude-code"}
    assert not (run / "eval" / "base+transfer").exists()
    with TrajectoryStore.open(run / "eval" / "sft+transfer") as store:
        codex = store.list_episodes()
        assert len(codex) == 2 and {e.harness for e in codex} == {"codex"}
        codex_prompt = store.list_calls(codex[0].id)[0].prompt_ids
    assert len(codex_prompt) < 2500, len(codex_prompt)  # Codex's 10,800-token prompt, cut by its settings
    assert " codex (not trained on) |" in (run / "report.md").read_text()
    saved = json.loads((run / "report.json").read_text())
    assert saved["heldout_pass_at_1_by_harness"] == by_harness
