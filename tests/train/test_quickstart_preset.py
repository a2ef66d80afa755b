"""`openforge quickstart` is the training pipeline on a preset: the preset holds the quickstart's documented
sizes, `--config` / `--seed` / `--smoke` lay fields over it, and GRPO's fresh instances come from one stream
that a resumed run draws again exactly."""

from __future__ import annotations

import pytest

from openforge.config import ConfigError
from openforge.tasks import DEFAULT_IMAGE_MAP, QUICKSTART_FAMILIES, InstanceSampler
from openforge.train.data import RL_SEED, InstanceStream
from openforge.train.quickstart import quickstart_config


def test_the_preset_is_the_documented_quickstart():
    c = quickstart_config()
    assert c.tasks.families == QUICKSTART_FAMILIES and c.harnesses == ["react"] and c.in_process
    assert c.sandbox == "auto" and c.episode_image_map() == DEFAULT_IMAGE_MAP and c.evaluation == "policies"
    s = c.sft
    assert (s.teacher, s.demos, s.steps, s.lr, s.warmup_steps, s.schedule, s.batch_size, s.control) == (
        "oracle",
        200,
        800,
        1e-3,
        30,
        "cosine",
        16,
        False,
    )
    r = c.rl
    assert (r.seconds, r.prompts, r.group, r.lr, r.temperature, c.max_new_tokens, r.eval_instances) == (
        240,
        16,
        8,
        2e-4,
        1.0,
        64,
        200,
    )
    react = c.react()  # one command per episode, only bash, no system prompt, react's cap = the run's
    assert (react.max_steps, list(react.tools), react.system_prompt, react.max_tokens) == (1, ["bash"], "", 64)


def test_config_seed_and_smoke_lay_over_the_preset():
    c = quickstart_config({"sft": {"control": True}, "rl": {"lr": 1e-4}}, seed=3, smoke=True)
    assert c.seed == 3 and c.sft.control and c.rl.lr == 1e-4
    assert (c.sft.demos, c.sft.steps, c.sft.lr, c.rl.seconds, c.rl.prompts) == (24, 6, 1e-3, 20, 4)
    dirs = quickstart_config({"tasks": {"dirs": ["examples/tasks"]}})  # tasks replace: dirs and families exclude
    assert dirs.tasks.families is None and not dirs.in_process
    with pytest.raises(ConfigError, match=r"sft.stepz: unknown field"):
        quickstart_config({"sft": {"stepz": 3}})


def test_grpo_instances_are_one_stream_and_a_resumed_run_draws_the_same():
    drawn = InstanceSampler("train", seed=RL_SEED + 5, families=QUICKSTART_FAMILIES).sample(12)
    stream = InstanceStream(QUICKSTART_FAMILIES, seed=5, per_step=4)
    assert [stream.for_step(k) for k in range(3)] == [drawn[0:4], drawn[4:8], drawn[8:12]]
    resumed = InstanceStream(QUICKSTART_FAMILIES, seed=5, per_step=4)
    assert resumed.for_step(2) == drawn[8:12] and resumed.for_step(0) == drawn[0:4]


def test_the_harnesses_recipe_trains_through_claude_code_and_evaluates_in_three_harnesses():
    c = quickstart_config(recipe="harnesses")
    assert c.harnesses == ["claude-code"] and c.heldout_harnesses == ["react", "claude-code", "codex"]
    assert not c.in_process and not c.in_process_eval  # sandboxed episodes, held-out tasks written as directories
    options = {h: c.adapter_options(h) for h in c.heldout_harnesses}
    assert "--system-prompt" in options["claude-code"]["extra_args"] and options["claude-code"]["tools"] == ["Bash"]
    assert options["codex"]["instructions"] and options["react"]["max_steps"] == 2
    assert c.tiny_model_spec().sliding_window == 96 and quickstart_config().tiny_model is None  # only this recipe
    with pytest.raises(ConfigError, match="tiny_model.seed"):
        quickstart_config({"tiny_model": {"seed": 1}}, recipe="harnesses")
    with pytest.raises(ConfigError, match="drop tiny_model"):
        quickstart_config({"model": "org/name"}, recipe="harnesses")
    react_only = quickstart_config({"harnesses": ["react"]}, recipe="harnesses")
    assert react_only.in_process and not react_only.in_process_eval  # trained in process, evaluated in sandboxes
    plain = quickstart_config()
    assert plain.heldout_harnesses == ["react"] and plain.in_process_eval


def test_the_real_model_recipe_trains_a_packaged_model_with_lora_through_claude_code():
    from openforge.tasks import RECOVERY_FAMILIES

    c = quickstart_config(recipe="real-model")
    assert c.model == "smollm2-135m" and c.lora is not None and c.tiny_model is None
    assert c.harnesses == ["claude-code"] and c.heldout_harnesses == ["claude-code"]
    assert c.transfer_harnesses == ["react", "codex"]  # the trained policies only
    assert c.tasks.families == list(RECOVERY_FAMILIES) and c.faults is not None and c.sft.control
    assert c.rl.eval_instances >= 100  # the held-out size
    assert "--system-prompt" in c.adapter_options("claude-code")["extra_args"]
    with pytest.raises(ConfigError, match="packaged model"):
        quickstart_config({"model": "no-such-dir"}, recipe="real-model")
