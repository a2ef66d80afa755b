"""`openai:URL` and `anthropic:URL`: a model behind an API as a message-level backend. The OpenAI side runs
against `openforge serve-model` (in process, and the real command), the Anthropic side against OpenForge's own
proxy serving the Messages API (the key travels as x-api-key, taken from the environment)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from openforge.core import Conversation, Message, SamplingParams, ToolSpec
from openforge.inference import BackendError, GenerationContext, MessageBackend, is_message_level, make_backend
from openforge.inference.upstream import KEY_ENV, MODEL_ENV, UpstreamBackend, upstream_base
from openforge.proxy.server import ProxyConfig, running_proxy
from support.inference import ServerThread, free_port
from support.paths import POLICIES, REPO
from support.teacher import SOLUTIONS_ENV, TEACHER_POLICY, teacher_model_dir, teacher_server

BASH = ToolSpec(name="bash", parameters={"type": "object", "properties": {"command": {"type": "string"}}})
CTX = GenerationContext()


def ask(text: str, tools=(BASH,)) -> Conversation:
    return Conversation(messages=[Message(role="user", content=text)], tools=list(tools))


def test_specs():
    assert is_message_level("openai:http://x/v1") and is_message_level("anthropic:https://api.anthropic.com")
    assert not is_message_level("vllm:http://x") and not is_message_level("embedded")
    assert upstream_base("anthropic", "https://api.anthropic.com/v1/") == "https://api.anthropic.com"
    assert upstream_base("openai", "http://h:8000/v1/") == "http://h:8000/v1"
    backend = make_backend("anthropic:https://api.example", model="m")
    assert isinstance(backend, MessageBackend) and backend.spec == "anthropic:https://api.example"


async def test_openai_upstream_against_serve_model(tmp_path):
    with teacher_server({"Make a.txt": "touch a.txt"}, tmp_path) as url:
        backend = make_backend(f"openai:{url}")
        result = await backend.complete(ask("Make a.txt"), SamplingParams(max_tokens=64), CTX)
        assert backend.model == "teacher"  # the one model the server lists
        assert result.output.tool_calls[0].arguments == {"command": "touch a.txt"}
        assert result.output.reasoning == "One command does it." and result.completion_tokens > 0
        with pytest.raises(BackendError, match="whole messages"):
            await backend.generate([1, 2], SamplingParams(), CTX)
        await backend.close()


async def test_anthropic_upstream_against_the_proxys_messages_api(tmp_path, tiny_model_dir, monkeypatch):
    config = ProxyConfig(
        model=tiny_model_dir,
        backend=f"scripted:{POLICIES / 'echo_tool_loop.py'}",
        run=tmp_path / "run",
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
        served_model="upstream-claude",
    )
    async with running_proxy(config) as upstream:
        episode = upstream.create_episode(harness="teacher-client")
        monkeypatch.setenv(KEY_ENV, episode.key)  # the episode key is this API's key
        for url in (upstream.url, upstream.url + "/v1"):
            backend = make_backend(f"anthropic:{url}")
            result = await backend.complete(ask("go"), SamplingParams(max_tokens=50), CTX)
            assert result.model == "upstream-claude"
            assert result.output.tool_calls[0].name == "bash" and result.output.tool_calls[0].id.startswith("toolu_")
            await backend.close()
        monkeypatch.setenv(KEY_ENV, "wrong-key")
        backend = make_backend(f"anthropic:{upstream.url}", model="upstream-claude")
        with pytest.raises(BackendError, match="401"):
            await backend.complete(ask("go"), SamplingParams(max_tokens=50), CTX)
        await backend.close()


async def test_the_model_must_be_named_when_the_server_lists_several(monkeypatch):
    async def models(request):  # FAKE: a provider's model list, nothing else
        return JSONResponse({"object": "list", "data": [{"id": "a"}, {"id": "b"}]})

    with ServerThread(Starlette(routes=[Route("/v1/models", models)])) as server:
        monkeypatch.delenv(MODEL_ENV, raising=False)
        backend = UpstreamBackend("openai", server.url + "/v1")
        with pytest.raises(BackendError, match=MODEL_ENV) as err:
            await backend.complete(ask("hi"), SamplingParams(), CTX)
        assert "['a', 'b']" in str(err.value)
        monkeypatch.setenv(MODEL_ENV, "b")
        assert UpstreamBackend("openai", server.url + "/v1").model == "b"


def test_serve_model_command_serves_a_scripted_teacher_with_tool_calls_parsed(tmp_path):
    """The real command: `openforge serve-model --backend scripted:FILE --tool-call-parser auto`."""
    solutions = tmp_path / "solutions.json"
    solutions.write_text('{"Make b.txt": "touch b.txt"}')
    port = free_port()
    env = {**os.environ, SOLUTIONS_ENV: str(solutions), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openforge.cli",
            "serve-model",
            "--model",
            str(teacher_model_dir()),
            "--port",
            str(port),
            "--backend",
            f"scripted:{TEACHER_POLICY}",
            "--tool-call-parser",
            "auto",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        body = {
            "model": "x",
            "messages": [{"role": "user", "content": "Make b.txt"}],
            "tools": [{"type": "function", "function": {"name": "bash", "parameters": BASH.parameters}}],
        }
        deadline = time.monotonic() + 120
        while True:
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30)
                break
            except httpx.ConnectError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()[-2000:]
                time.sleep(0.3)
        message = r.json()["choices"][0]["message"]
        assert r.json()["choices"][0]["finish_reason"] == "tool_calls"
        assert message["tool_calls"][0]["function"]["arguments"] == '{"command":"touch b.txt"}'
        assert message["reasoning_content"] == "One command does it."
    finally:
        proc.terminate()
        proc.wait(30)
