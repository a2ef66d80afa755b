"""The oracle teacher: the task's reference solution through the harness's own shell tool, then done."""

from __future__ import annotations

import json

import pytest

from support.proxy import in_process_proxy

SOLUTION = "mkdir -p out\nprintf 'blue 42\\n' > out/a.txt\n"
BASH = {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}
EXEC = {"type": "function", "function": {"name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}


@pytest.mark.parametrize("tool,shell_tool", [(BASH, ["Bash", "command"]), (EXEC, None)])
async def test_oracle_sends_the_solution_through_the_shell_tool(tmp_path, tiny_model_dir, tool, shell_tool):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="oracle") as proxy:
        task = {"id": "t", "solution": SOLUTION, **({"shell_tool": shell_tool} if shell_tool else {})}
        _, key = await proxy.new_episode(task=task)
        client = proxy.openai(key)
        messages = [{"role": "user", "content": "make out/a.txt"}]
        first = (await client.chat.completions.create(model="m", messages=messages, tools=[tool])).choices[0].message
        (call,) = first.tool_calls
        assert call.function.name == tool["function"]["name"]
        argument = "command" if tool is BASH else "cmd"
        assert json.loads(call.function.arguments) == {argument: SOLUTION}
        messages += [first.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": ""}]
        second = (await client.chat.completions.create(model="m", messages=messages, tools=[tool])).choices[0].message
        assert second.content == "Done." and not second.tool_calls


async def test_oracle_without_a_solution_fails_clearly_and_is_recorded(tmp_path, tiny_model_dir):
    import openai

    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="oracle") as proxy:
        episode_id, key = await proxy.new_episode(task="plain-name")
        with pytest.raises(openai.APIStatusError) as e:
            await proxy.openai(key).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tools=[BASH])
        assert e.value.status_code == 503
        (call,) = proxy.store.list_calls(episode_id)
        assert "reference solution" in call.call_error
