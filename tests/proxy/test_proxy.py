"""The recording proxy, in process: every dialect through the official SDKs, token-exact records,
continuity, episodes and keys, pause/weights, retries, errors."""

from __future__ import annotations

import asyncio
import json

import anthropic
import openai
import pytest

from openforge.core import Conversation, Message
from openforge.dialects import DIALECTS
from support.proxy import in_process_proxy

BASH = {
    "name": "bash",
    "description": "Run a command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
BASH_OAI = {
    "type": "function",
    "function": {"name": "bash", "description": "Run a command.", "parameters": BASH["input_schema"]},
}
BASH_RESP = {"type": "function", "name": "bash", "description": "Run a command.", "parameters": BASH["input_schema"]}


@pytest.fixture()
async def proxy(tmp_path, tiny_model_dir):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir) as p:
        yield p


async def test_anthropic_tool_loop_streaming_is_recorded_token_exact(proxy, tiny_model):
    episode_id, key = await proxy.new_episode(task="t1")
    client = proxy.anthropic(key)
    messages = [{"role": "user", "content": "List files <|im_end|>"}]
    async with client.messages.stream(
        model="m",
        max_tokens=32000,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        tools=[BASH],
        messages=messages,
    ) as s:
        first = await s.get_final_message()
    assert first.stop_reason == "tool_use"
    call = next(b for b in first.content if b.type == "tool_use")
    assert call.input == {"command": "echo step-0"}
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call.id,
                    "content": "nonce-123",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]
    second = await client.messages.create(
        model="m", max_tokens=8000, system="Be brief.", tools=[BASH], messages=messages
    )
    assert second.content[0].text == "Done. The tool said: nonce-123"
    assert first.id != second.id

    calls = proxy.store.list_calls(episode_id)
    assert [c.index for c in calls] == [0, 1]
    assert all(c.dialect == "anthropic" and not c.side_call and c.call_error is None for c in calls)
    c0, c1 = calls
    assert c1.prompt_ids[: len(c0.prompt_ids) + len(c0.output_ids)] == c0.prompt_ids + c0.output_ids
    assert c1.segment == c0.segment == 0 and c1.break_reason is None
    assert c0.sampling.max_tokens <= 4096  # clamped from 32000
    assert tiny_model.decode(c0.output_ids).startswith("<tool_call>")
    assert c0.response_body.startswith(b"event: message_start")
    assert json.loads(c1.response_body)["id"] == second.id
    decoded = DIALECTS["anthropic"].decode(c1.request_body)
    assert tiny_model.decode(c1.prompt_ids) == tiny_model.render_text(decoded.conversation)
    assert proxy.store.get_episode(episode_id).state.value == "running"


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_completions_tool_loop(proxy, stream):
    episode_id, key = await proxy.new_episode()
    client = proxy.openai(key)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]

    async def ask():
        if not stream:
            return (
                (await client.chat.completions.create(model="m", messages=messages, tools=[BASH_OAI]))
                .choices[0]
                .message
            )
        async with client.chat.completions.stream(model="m", messages=messages, tools=[BASH_OAI]) as s:
            return (await s.get_final_completion()).choices[0].message

    first = await ask()
    assert first.tool_calls[0].function.name == "bash"
    messages += [
        first.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "out-7"},
    ]
    second = await ask()
    assert second.content == "Done. The tool said: out-7"
    c0, c1 = proxy.store.list_calls(episode_id)
    assert c1.prompt_ids[: len(c0.prompt_ids) + len(c0.output_ids)] == c0.prompt_ids + c0.output_ids
    assert c1.break_reason is None


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_tool_loop(proxy, stream):
    episode_id, key = await proxy.new_episode()
    client = proxy.openai(key)
    items = [{"role": "developer", "content": "sys"}, {"role": "user", "content": "go"}]

    async def ask():
        if not stream:
            return await client.responses.create(model="m", input=items, tools=[BASH_RESP])
        async with client.responses.stream(model="m", input=items, tools=[BASH_RESP]) as s:
            return await s.get_final_response()

    first = await ask()
    call = next(o for o in first.output if o.type == "function_call")
    items += [o.model_dump(exclude_none=True) for o in first.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "r-9"})
    second = await ask()
    assert second.output_text == "Done. The tool said: r-9"
    assert second.usage.input_tokens > 0
    c0, c1 = proxy.store.list_calls(episode_id)
    assert c1.prompt_ids[: len(c0.prompt_ids) + len(c0.output_ids)] == c0.prompt_ids + c0.output_ids


async def test_side_calls_are_flagged(proxy):
    episode_id, key = await proxy.new_episode()
    r = await proxy.openai(key).chat.completions.create(model="m", messages=[{"role": "user", "content": "title?"}])
    assert r.choices[0].message.content == "Side answer"
    (call,) = proxy.store.list_calls(episode_id)
    assert call.side_call and call.break_reason == "side_call"


async def test_keys_isolate_episodes(proxy):
    _, key = await proxy.new_episode()
    with pytest.raises(anthropic.AuthenticationError):
        await proxy.anthropic("ofk-not-a-key").messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    async with proxy.http() as http:  # no key at all
        r = await http.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 401 and "API key" in r.json()["error"]["message"]
    episode_id, key2 = await proxy.new_episode()
    async with proxy.admin() as admin:
        assert (await admin.post(f"/admin/episodes/{episode_id}/end")).status_code == 200
    with pytest.raises(anthropic.AuthenticationError):
        await proxy.anthropic(key2).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    # an episode key is not an admin token
    async with proxy.http(proxy.admin_app) as http:
        r = await http.post("/admin/episodes", json={}, headers={"authorization": f"Bearer {key}"})
        assert r.status_code == 401
    # the key can be a URL prefix
    async with proxy.http() as http:
        r = await http.post(
            f"/e/{key}/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert r.status_code == 200, r.text


async def test_prompt_too_long_is_the_dialects_error_and_leaves_no_row(proxy, tiny_model):
    episode_id, key = await proxy.new_episode()
    huge = "word " * (tiny_model.max_context)  # the scripted backend's context is the model's
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        await proxy.anthropic(key).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": huge}]
        )
    with pytest.raises(openai.BadRequestError) as e:
        await proxy.openai(key).chat.completions.create(model="m", messages=[{"role": "user", "content": huge}])
    assert e.value.code == "context_length_exceeded"
    assert proxy.store.count_calls(episode_id) == 0


async def test_count_tokens_models_and_root(proxy, tiny_model):
    _, key = await proxy.new_episode()
    client = proxy.anthropic(key)
    count = await client.messages.count_tokens(model="m", system="s", messages=[{"role": "user", "content": "hello"}])
    expected = tiny_model.render(Conversation(system="s", messages=[Message(role="user", content="hello")]))
    assert count.input_tokens == len(expected)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["tiny"]
    assert [m.id async for m in proxy.openai(key).models.list()] == ["tiny"]
    async with proxy.http() as http:
        assert (await http.head("/")).status_code == 200
        assert (await http.get("/")).json()["service"] == "openforge-proxy"


async def test_same_body_again_replays_instead_of_sampling(proxy):
    episode_id, key = await proxy.new_episode()
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}], "tools": [BASH_OAI]}
    async with proxy.http() as http:
        h = {"authorization": f"Bearer {key}", "x-stainless-retry-count": "1"}
        a = await http.post("/v1/chat/completions", json=body, headers=h)
        b = await http.post("/v1/chat/completions", json=body, headers=h)
    assert a.status_code == b.status_code == 200
    assert a.json() == b.json()
    assert proxy.store.count_calls(episode_id) == 1


async def test_pause_holds_calls_until_resume(proxy):
    _, key = await proxy.new_episode()
    async with proxy.admin() as admin:
        assert (await admin.post("/admin/pause")).json()["paused"] is True
        call = asyncio.create_task(
            proxy.openai(key).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        )
        await asyncio.sleep(0.3)
        assert not call.done()  # held, not failed
        await admin.post("/admin/resume")
        assert (await asyncio.wait_for(call, 10)).choices[0].message.content


async def test_backend_failure_is_overloaded_and_recorded(proxy):
    episode_id, key = await proxy.new_episode()

    async def broken(*a, **k):
        from openforge.inference import BackendError

        raise BackendError("server on fire")

    proxy.service.backend.generate = broken
    with pytest.raises(anthropic.APIStatusError) as e:
        await proxy.anthropic(key).messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert e.value.status_code == 529
    (call,) = proxy.store.list_calls(episode_id)
    assert "server on fire" in call.call_error and call.finish_reason.value == "error"


async def test_weights_swap_bumps_policy_version(tmp_path, tiny_model_dir):
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    new_dir = tmp_path / "new-weights"
    shutil.copytree(tiny_model_dir, new_dir)
    weights = load_file(new_dir / "model.safetensors")
    save_file(
        {k: v + 0.01 * torch.randn_like(v) for k, v in weights.items()},
        new_dir / "model.safetensors",
        metadata={"format": "pt"},
    )
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend="embedded", max_new_tokens=4) as proxy:
        episode_id, key = await proxy.new_episode()
        client = proxy.openai(key)
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        async with proxy.admin() as admin:
            await admin.post("/admin/pause")
            r = await admin.post("/admin/weights", json={"path": str(new_dir)})
            assert r.json() == {"policy_version": 1}
            await admin.post("/admin/resume")
            bad = await admin.post("/admin/weights", json={"path": str(tmp_path / "nope")})
            assert bad.status_code == 400 and "nope" in bad.json()["error"]
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}])
        versions = [c.policy_version for c in proxy.store.list_calls(episode_id)]
        assert versions == [0, 1]


@pytest.mark.parametrize("sampled,expected", [('{"title": "x"}', {"title": "x"}), ("A plain title", "A plain title")])
async def test_json_output_format_is_answered_with_valid_json(tmp_path, tiny_model_dir, sampled, expected):
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": [sampled], "side": sampled}))
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, backend=f"scripted:{script}") as proxy:
        episode_id, key = await proxy.new_episode()
        schema = {"type": "object", "properties": {"title": {"type": "string"}}}
        reply = await proxy.anthropic(key).messages.create(
            model="m",
            max_tokens=100,
            messages=[{"role": "user", "content": "title?"}],
            extra_body={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
        )
        assert json.loads(reply.content[0].text) == expected
        (call,) = proxy.store.list_calls(episode_id)
        assert (call.parse_error is None) == isinstance(expected, dict)
