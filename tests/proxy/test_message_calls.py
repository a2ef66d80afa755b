"""Message-level calls: the proxy serving a teacher behind an OpenAI-compatible API (`--backend openai:URL`).
The teacher is another tiny model (another tokenizer) served by serve-model with a scripted policy and tool-call
parsing. The proxy still owns the episode and records every call, with the conversation and the teacher's reply
but no token ids, and answers each harness in its own dialect (ids in its style, JSON or stream)."""

from __future__ import annotations

import json

import openai
import pytest

from openforge.dialects import DIALECTS
from openforge.inference import MESSAGE_LEVEL
from support.inference import free_port
from support.proxy import in_process_proxy
from support.teacher import teacher_server

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
SOLUTIONS = {"Create hello.txt": "echo hi > hello.txt"}


async def test_openai_harness_gets_the_teachers_tool_call_and_the_call_is_recorded_without_ids(
    tmp_path, tiny_model_dir
):
    with teacher_server(SOLUTIONS, tmp_path) as url:
        async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend=f"openai:{url}") as proxy:
            episode_id, key = await proxy.new_episode()
            client = proxy.openai(key)
            first = [{"role": "user", "content": "Create hello.txt in the current directory."}]
            r = await client.chat.completions.create(model="tiny", messages=first, tools=[BASH])
            message = r.choices[0].message
            (call,) = message.tool_calls
            assert call.id.startswith("call_") and call.function.name == "bash"
            assert json.loads(call.function.arguments) == {"command": "echo hi > hello.txt"}
            assert message.model_extra["reasoning_content"] == "One command does it."
            history = first + [
                message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": ""},
            ]
            done = await client.chat.completions.create(model="tiny", messages=history, tools=[BASH])
            assert done.choices[0].message.content == "Done."

            calls = proxy.store.list_calls(episode_id)
            assert [c.index for c in calls] == [0, 1]
            for c in calls:
                assert c.prompt_ids == [] and c.output_ids == [] and c.call_error is None
                level = c.metadata[MESSAGE_LEVEL]
                assert level["backend"] == f"openai:{url}" and level["model"] == "teacher"
                assert level["completion_tokens"] > 0  # the teacher's own count, in its own tokenizer
            assert calls[0].metadata[MESSAGE_LEVEL]["reply"]["tool_calls"][0]["id"] == call.id
            assert calls[0].metadata["tool_calls"][0]["arguments"] == {"command": "echo hi > hello.txt"}
            # the conversation is the request body, as the dialect decodes it
            conversation = DIALECTS[calls[1].dialect].decode(calls[1].request_body).conversation
            assert conversation.messages[1].tool_calls[0].id == call.id


async def test_anthropic_harness_streams_the_teachers_reply_in_its_own_dialect(tmp_path, tiny_model_dir):
    tool = {
        "name": "bash",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
    with teacher_server(SOLUTIONS, tmp_path) as url:
        async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend=f"openai:{url}") as proxy:
            episode_id, key = await proxy.new_episode()
            async with proxy.anthropic(key).messages.stream(
                model="tiny",
                max_tokens=200,
                tools=[tool],
                messages=[{"role": "user", "content": "Create hello.txt now."}],
            ) as stream:
                final = await stream.get_final_message()
            kinds = [b.type for b in final.content]
            assert kinds == ["thinking", "tool_use"] and final.stop_reason == "tool_use"
            assert final.content[1].id.startswith("toolu_") and final.content[1].input == {
                "command": "echo hi > hello.txt"
            }
            (record,) = proxy.store.list_calls(episode_id)
            assert record.dialect == "anthropic" and record.metadata[MESSAGE_LEVEL]["reply"]["reasoning"]


async def test_a_failed_upstream_reaches_the_harness_as_its_error_and_is_recorded(tmp_path, tiny_model_dir):
    dead = f"openai:http://127.0.0.1:{free_port()}/v1"
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend=dead) as proxy:
        episode_id, key = await proxy.new_episode()
        with pytest.raises(openai.APIStatusError) as err:
            await proxy.openai(key).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
        assert err.value.status_code == 503 and "cannot connect" in str(err.value)
        (record,) = proxy.store.list_calls(episode_id)
        assert "cannot connect" in record.call_error and record.metadata[MESSAGE_LEVEL]["backend"] == dead
