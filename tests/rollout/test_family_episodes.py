"""Fast episodes on generated task families: the react loop in process, commands jailed, graded in memory."""

from __future__ import annotations

import pytest

from conftest import unavailable
from openforge.core import Outcome
from openforge.core.errors import ConfigurationError
from openforge.harness.react import ReactAdapter
from openforge.proxy.server import ProxyConfig, running_proxy
from openforge.rollout.family import run_family_episodes
from openforge.sandbox import jail_available
from openforge.tasks import QUICKSTART_FAMILIES, InstanceSampler


@pytest.fixture(autouse=True)
def _jail():
    ok, why = jail_available()
    if not ok:
        unavailable(f"the jail cannot run here: {why}")


async def test_a_proxy_without_tcp_is_refused_before_any_episode(tmp_path, tiny_model_dir):
    """The react loop calls the model API over TCP: a proxy that serves it on a Unix socket only is a
    configuration error, said before an episode is created (it was an AttributeError in each episode's thread)."""
    config = ProxyConfig(
        model=tiny_model_dir,
        backend="oracle",
        run=tmp_path / "run",
        listen=None,
        uds=tmp_path / "model.sock",
        admin_listen="127.0.0.1:0",
    )
    instances = InstanceSampler("train", seed=3, families=QUICKSTART_FAMILIES).sample(1)
    async with running_proxy(config) as proxy:
        with pytest.raises(ConfigurationError, match="over TCP"):
            await run_family_episodes(proxy, instances)
        assert proxy.store.list_episodes() == []


async def test_oracle_passes_every_instance_and_records_calls(tmp_path, tiny_model_dir):
    config = ProxyConfig(
        model=tiny_model_dir, backend="oracle", run=tmp_path / "run", listen="127.0.0.1:0", admin_listen="127.0.0.1:0"
    )
    instances = InstanceSampler("train", seed=3, families=QUICKSTART_FAMILIES).sample(12)
    async with running_proxy(config) as proxy:
        episodes = await run_family_episodes(proxy, instances, samples=2, step=5)
        assert len(episodes) == 24
        assert all(e.outcome == Outcome.passed and e.reward == 1.0 for e in episodes), [
            (e.instance.instruction, e.transcript) for e in episodes if e.reward != 1.0
        ]
        stored = proxy.store.list_episodes()
        assert len(stored) == 24 and all(e.metadata["step"] == 5 and e.metadata["final"] for e in stored)
        calls = proxy.store.list_calls(stored[0].id)
        assert len(calls) == 2 and calls[1].break_reason is None  # the second call continues the first
        # where the episode's time went: its run, the model calls within it, grading
        timings = stored[0].metadata["timings"]
        assert 0 < timings["model_s"] <= timings["agent_s"] and timings["verify_s"] > 0
        assert timings["model_s"] == pytest.approx(sum(c.finished_at - c.started_at for c in calls))


async def test_wrong_commands_fail(tmp_path, tiny_model_dir):
    instances = InstanceSampler("heldout", seed=4, families=QUICKSTART_FAMILIES).sample(6)
    policy = tmp_path / "wrong.py"
    policy.write_text(
        "import json\n"
        "WRONG = " + repr({i.instruction: i.wrong_command for i in instances}) + "\n"
        "def respond(conversation, call_index):\n"
        "    if any(m.role == 'tool' for m in conversation.messages):\n"
        "        return 'Done.'\n"
        "    command = WRONG[conversation.messages[-1].content]\n"
        "    call = json.dumps({'name': 'bash', 'arguments': {'command': command}})\n"
        "    return '<tool_call>\\n' + call + '\\n</tool_call>'\n"
    )
    config = ProxyConfig(
        model=tiny_model_dir,
        backend=f"scripted:{policy}",
        run=tmp_path / "run",
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
    )
    async with running_proxy(config) as proxy:
        episodes = await run_family_episodes(proxy, instances)
    assert all(e.outcome == Outcome.failed and e.reward == 0.0 for e in episodes)


async def test_system_prompt_and_tools_shape_the_recorded_prompt(tmp_path, tiny_model_dir):
    """The quickstart's react options (one tool, no system prompt) reach the model as a short prompt: the tool as
    one `name(params)` line, then the task; the default options send the system prompt and all four tools."""
    from openforge.harness.react_agent import SYSTEM_PROMPT
    from openforge.models import ModelDir

    instance = InstanceSampler("train", seed=5, families=QUICKSTART_FAMILIES).sample(1)[0]
    config = ProxyConfig(
        model=tiny_model_dir, backend="oracle", run=tmp_path / "run", listen="127.0.0.1:0", admin_listen="127.0.0.1:0"
    )
    model = ModelDir(tiny_model_dir)
    async with running_proxy(config) as proxy:
        (short,) = await run_family_episodes(
            proxy, [instance], react=ReactAdapter(max_steps=1, tools=("bash",), system_prompt="")
        )
        (default,) = await run_family_episodes(proxy, [instance], react=ReactAdapter(max_steps=1))
        prompts = {
            e.episode_id: model.decode(proxy.store.list_calls(e.episode_id)[0].prompt_ids) for e in (short, default)
        }
    assert short.reward == default.reward == 1.0
    assert prompts[short.episode_id] == (
        f"<|im_start|>system\n# Tools\nbash(command)<|im_end|>\n"
        f"<|im_start|>user\n{instance.instruction}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert prompts[default.episode_id].startswith(f"<|im_start|>system\n{SYSTEM_PROMPT}\n\n# Tools\nbash(command)\n")
    assert "submit(" in prompts[default.episode_id]
