"""Each fault kind in the in-process react episodes (the jail): it fires, the episode records it, a policy that
reads the error and acts on it recovers — and the model calls the harness sent are recorded unchanged."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import unavailable
from openforge.core import Outcome
from openforge.dialects import DIALECTS
from openforge.faults import parse_fault_spec
from openforge.harness import react_agent
from openforge.harness.react import ReactAdapter
from openforge.proxy.server import ProxyConfig, running_proxy
from openforge.rollout.family import run_family_episodes
from openforge.sandbox import jail_available
from openforge.tasks import FamilyInstance
from support.paths import POLICIES

POLICY = POLICIES / "fault_recovery.py"

# what the agent's first command meets, per kind
FIRST_RESULT = {
    "transient": "bash: fork: Resource temporarily unavailable",
    "missing_dir": "cfg/app.ini: No such file or directory",
    "permission": "cfg/app.ini: Permission denied",
    "disk_full": "bash: cfg/app.ini: No space left on device",
    "hang": "[timed out after 2 s]",
    "flaky_service": "svc: error: failed to connect to the service: Connection refused",
}


@pytest.fixture(autouse=True)
def _jail():
    ok, why = jail_available()
    if not ok:
        unavailable(f"the jail cannot run here: {why}")


def service_task() -> FamilyInstance:
    """Append what a (local) service answers to a config file in a directory of its own."""
    setup = {"svc": "echo k=42\n", "cfg/app.ini": "", "cfg/.keep": ""}
    return FamilyInstance(
        family="svc_append",
        split="train",
        instruction="Append what `sh svc` prints to cfg/app.ini.",
        setup_files=setup,
        expected_files={**setup, "cfg/app.ini": "k=42\n"},
        solution_command="sh svc >> cfg/app.ini",
        wrong_command="sh svc > cfg/app.ini",
        combo=("svc_append", "cfg", "ini"),
        fault_targets={"missing_dir": "cfg", "permission": "cfg/app.ini", "service": "svc"},
    )


def _proxy(tmp_path, model, name):
    return running_proxy(
        ProxyConfig(
            model=model,
            backend=f"scripted:{POLICY}",
            run=tmp_path / name,
            listen="127.0.0.1:0",
            admin_listen="127.0.0.1:0",
        )
    )


@pytest.mark.parametrize("kind", list(FIRST_RESULT))
async def test_each_fault_fires_in_the_jail_and_is_recorded(tmp_path, tiny_model_dir, kind):
    react = ReactAdapter(max_steps=4, tools=("bash",), command_timeout_s=2)
    async with _proxy(tmp_path, tiny_model_dir, "run") as proxy:
        (episode,) = await run_family_episodes(
            proxy, [service_task()], react=react, step=3, fault_spec=parse_fault_spec(f"{kind}:1")
        )
        stored = proxy.store.get_episode(episode.episode_id)
        calls = [c for c in proxy.store.list_calls(episode.episode_id) if not c.side_call]
    (record,) = stored.metadata["faults"]
    assert record["kind"] == kind and record["applicable"] and record["fired"], record
    assert record["command"] == 1 and record["at_s"] >= 0
    # the second call carries the first command's result as the environment produced it
    conversation = DIALECTS["chat_completions"].decode(calls[1].request_body).conversation
    first_result = next(m.content for m in conversation.messages if m.role == "tool")
    assert FIRST_RESULT[kind] in first_result and ReactAdapter().tool_failed(first_result), first_result
    # the policy read the error, fixed its cause or retried, and passed
    assert episode.outcome == Outcome.passed, (stored.metadata["transcript"], first_result)


async def test_without_faults_nothing_is_recorded_and_the_happy_path_passes(tmp_path, tiny_model_dir):
    async with _proxy(tmp_path, tiny_model_dir, "run") as proxy:
        (episode,) = await run_family_episodes(proxy, [service_task()], react=ReactAdapter(max_steps=4))
        assert "faults" not in proxy.store.get_episode(episode.episode_id).metadata
    assert episode.outcome == Outcome.passed


async def test_a_harness_without_a_shell_cannot_meet_faults(tmp_path, tiny_model_dir):
    react = ReactAdapter(max_steps=2, tools=("read", "write"))
    async with _proxy(tmp_path, tiny_model_dir, "run") as proxy:
        (episode,) = await run_family_episodes(
            proxy, [service_task()], react=react, fault_spec=parse_fault_spec("transient:1")
        )
        (record,) = proxy.store.get_episode(episode.episode_id).metadata["faults"]
    assert not record["applicable"] and not record["fired"] and "offers no shell tool" in record["reason"]


async def test_a_fault_never_changes_a_recorded_model_call(tmp_path, tiny_model_dir, tiny_model, monkeypatch):
    """What the harness sent is what the proxy recorded, byte for byte; the prompt ids are the rendering of it."""
    sent: list[list[dict]] = []
    chat = react_agent.chat

    def spy(base_url, key, model, messages, *args, **kwargs):
        sent.append(copy.deepcopy(messages))
        return chat(base_url, key, model, messages, *args, **kwargs)

    monkeypatch.setattr(react_agent, "chat", spy)
    react = ReactAdapter(max_steps=4, tools=("bash",), command_timeout_s=2)
    async with _proxy(tmp_path, tiny_model_dir, "run") as proxy:
        (episode,) = await run_family_episodes(
            proxy, [service_task()], react=react, fault_spec=parse_fault_spec("transient:1")
        )
        calls = [c for c in proxy.store.list_calls(episode.episode_id) if not c.side_call]
    assert episode.outcome == Outcome.passed and len(calls) == len(sent) == 3
    dialect = DIALECTS["chat_completions"]
    for call, messages in zip(calls, sent):
        assert json.loads(call.request_body)["messages"] == messages
        assert tiny_model.decode(call.prompt_ids) == tiny_model.render_text(
            dialect.decode(call.request_body).conversation
        )
    assert FIRST_RESULT["transient"] in sent[1][-1]["content"]  # the fault reached the model only as a tool result
