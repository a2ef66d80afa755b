"""The HTTP side: the vllm client against a real `serve-model` (uvicorn on loopback) and against recorded vLLM
bodies; the sglang client against recorded SGLang bodies served by a small in-test server; serve-model's chat
endpoint (JSON and SSE) and its errors."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from openforge.core import FinishReason, SamplingParams
from openforge.dialects import DIALECTS
from openforge.inference import (
    BackendError,
    GenerationContext,
    InvalidRequestError,
    PromptTooLongError,
    make_backend,
)
from openforge.inference.embedded import EmbeddedBackend
from openforge.inference.serve import create_app
from openforge.inference.sglang import SGLangBackend, generate_request, parse_generate
from openforge.inference.vllm import VLLMBackend, completion_request, parse_completion
from support.dialects import accumulate, validate_body
from support.inference import ServerThread, free_port, max_abs_diff, reference_logprobs, tiny_model_dir
from support.paths import FIXTURES

CTX = GenerationContext()


def fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(scope="module")
def served():
    """(embedded backend, server URL): the tiny model behind serve-model's app."""
    backend = EmbeddedBackend(tiny_model_dir(), seed=0)
    with ServerThread(create_app(backend, model_name="tiny")) as server:
        yield backend, server.url


# ---- the vllm client against serve-model --------------------------------------------------------------------


async def test_vllm_client_against_serve_model(served):
    backend, url = served
    client = make_backend(f"vllm:{url}", tiny_model_dir())
    assert isinstance(client, VLLMBackend)
    prompt = backend.model_dir.encode_text("Served over HTTP, the same tokens come back.")
    sampling = SamplingParams(temperature=0.7, max_tokens=20, seed=42)
    result = await client.generate(prompt, sampling, CTX)
    assert client.model == "tiny" and client.max_context == backend.max_context
    assert len(result.output_ids) == len(result.logprobs) > 0
    assert max_abs_diff(result.logprobs, reference_logprobs(backend.model, prompt, result.output_ids, 0.7)) < 1e-4
    again = await client.generate(prompt, sampling, CTX)
    assert again.output_ids == result.output_ids  # seeded, over HTTP too
    in_process = await backend.generate(prompt, sampling, CTX)
    assert in_process.output_ids == result.output_ids

    stop_id = result.output_ids[2]
    stopped = await client.generate(prompt, sampling.model_copy(update={"stop_token_ids": [stop_id]}), CTX)
    assert stopped.finish_reason is FinishReason.stop and stopped.output_ids[-1] == stop_id
    short = await client.generate(prompt, sampling.model_copy(update={"max_tokens": 3}), CTX)
    assert short.finish_reason is FinishReason.length and len(short.output_ids) == 3

    with pytest.raises(PromptTooLongError):
        await client.generate([5] * backend.max_context, sampling, CTX)
    with pytest.raises(NotImplementedError, match="weight"):
        await client.load_weights(str(tiny_model_dir()))
    await client.close()


async def test_serve_model_answers_in_vllm_shape_and_refuses_bad_input(served):
    backend, url = served
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        models = (await http.get("/v1/models")).json()
        assert models["data"][0]["id"] == "tiny" and models["data"][0]["max_model_len"] == backend.max_context

        body = {
            "model": "tiny",
            "prompt": [5, 6, 7, 8],
            "max_tokens": 5,
            "temperature": 1.0,
            "seed": 1,
            "logprobs": 1,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        answer = (await http.post("/v1/completions", json=body)).json()
        choice = answer["choices"][0]
        assert (
            len(choice["token_ids"])
            == len(choice["logprobs"]["token_logprobs"])
            == answer["usage"]["completion_tokens"]
        )
        assert choice["prompt_token_ids"] == [5, 6, 7, 8]
        ids, logprobs, finish = parse_completion(answer)  # our own answer parses like vLLM's
        assert ids == choice["token_ids"] and finish is FinishReason(choice["finish_reason"])

        text_prompt = (await http.post("/v1/completions", json={"prompt": "hello", "max_tokens": 2})).json()
        assert text_prompt["usage"]["prompt_tokens"] == len(backend.model_dir.encode_text("hello"))

        for bad, words in [
            ({"prompt": [5, 6], "temperature": -1}, "temperature"),
            ({"prompt": [5, 6], "top_p": 0}, "top_p"),
            ({"prompt": [], "max_tokens": 3}, "prompt"),
            ({"prompt": [5] * backend.max_context}, "too long"),
            ({"prompt": [5, 10**9]}, "vocabulary"),
            ({"prompt": [5, 6], "n": 2}, "n"),
            ({"max_tokens": 3}, "prompt"),
        ]:
            response = await http.post("/v1/completions", json=bad)
            assert response.status_code == 400, bad
            error = response.json()["error"]
            assert error["type"] == "invalid_request_error" and error["code"] == 400
            assert words in error["message"], (bad, error["message"])
        not_json = await http.post("/v1/completions", content=b"{nope", headers={"content-type": "application/json"})
        assert not_json.status_code == 400 and "JSON" in not_json.json()["error"]["message"]


async def test_chat_completions_json_and_stream(served):
    backend, url = served
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say something."}]
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        body = {"model": "tiny", "messages": messages, "max_tokens": 12, "temperature": 1.0, "seed": 3}
        answer = (await http.post("/v1/chat/completions", json=body)).json()
        message = answer["choices"][0]["message"]
        assert message["role"] == "assistant" and isinstance(message["content"], str)
        assert answer["usage"]["prompt_tokens"] > 0

        events = []
        async with http.stream(
            "POST", "/v1/chat/completions", json={**body, "stream": True, "stream_options": {"include_usage": True}}
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    events.append(line[len("data: ") :])
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        assert streamed == message["content"]  # same seed, same text, streamed or not
        finishes = [
            c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
        ]
        assert finishes == [answer["choices"][0]["finish_reason"]]
        assert chunks[-1]["usage"]["completion_tokens"] == answer["usage"]["completion_tokens"]

        bad = await http.post(
            "/v1/chat/completions", json={"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]}
        )
        assert bad.status_code == 400 and "role" in bad.json()["error"]["message"]
        empty = await http.post("/v1/chat/completions", json={"model": "tiny", "messages": []})
        assert empty.status_code == 400


async def test_chat_completions_speak_the_proxys_dialect(served):
    """serve-model's chat path is the proxy's Chat Completions dialect: its routes, ids, chunks and error
    shapes; vLLM's `logprobs` and `return_token_ids` ride along."""
    backend, url = served
    messages = [{"role": "user", "content": "Count."}]
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        body = {
            "model": "tiny",
            "messages": messages,
            "max_tokens": 6,
            "seed": 2,
            "logprobs": True,
            "return_token_ids": True,
        }
        answer = (await http.post("/chat/completions", json=body)).json()  # the dialect's second route
        (choice,) = answer["choices"]
        assert answer["id"].startswith("chatcmpl-") and answer["model"] == "tiny"
        assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) == answer["usage"]["completion_tokens"]
        assert answer["prompt_token_ids"] == backend.model_dir.render(
            DIALECTS["chat_completions"].decode(json.dumps(body).encode()).conversation
        )
        validate_body("chat_completions", answer)

        stream = {**body, "stream": True, "stream_options": {"include_usage": True}}
        raw = (await http.post("/v1/chat/completions", json=stream)).content
        chunks = [block + b"\n\n" for block in raw.split(b"\n\n") if block]
        streamed = accumulate("chat_completions", chunks)
        assert streamed["choices"][0]["message"]["content"] == choice["message"]["content"]  # same seed
        assert chunks[-1] == b"data: [DONE]\n\n"

        long = {"model": "tiny", "messages": [{"role": "user", "content": "word " * backend.max_context}]}
        refused = await http.post("/v1/chat/completions", json=long)
        assert refused.status_code == 400
        assert (
            refused.json()["error"]["code"] == "context_length_exceeded"
            and refused.json()["error"]["param"] == "messages"
        )
        nameless = await http.post("/v1/chat/completions", json={"messages": messages})
        assert nameless.status_code == 400 and nameless.json()["error"]["param"] == "model"
        bad_flag = await http.post("/v1/chat/completions", json={**body, "return_token_ids": "yes"})
        assert bad_flag.status_code == 400 and bad_flag.json()["error"]["param"] == "return_token_ids"


async def test_openai_sdk_can_talk_to_serve_model(served):
    openai = pytest.importorskip("openai")
    _, url = served
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused")
    reply = await client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=5
    )
    assert reply.choices[0].finish_reason in ("stop", "length")
    stream = await client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=5, stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices[0].finish_reason in ("stop", "length") and chunks[0].id.startswith("chatcmpl-")
    await client.close()


# ---- the vllm client against recorded vLLM bodies -----------------------------------------------------------


def test_vllm_parser_reads_recorded_bodies():
    ids, logprobs, finish = parse_completion(fixture("vllm/completions_token_ids.json"))
    assert ids == [12095, 13, 1084, 374, 7407, 304]
    assert logprobs[0] == pytest.approx(-0.73046875) and finish is FinishReason.length

    body = fixture("vllm/completions_stop_eos.json")
    ids, logprobs, finish = parse_completion(body)
    assert ids == [9707, 0, 151645] and finish is FinishReason.stop and len(logprobs) == 3
    del body["choices"][0]["token_ids"]  # an older server: ids only as "token_id:<id>" strings
    assert parse_completion(body)[0] == [9707, 0, 151645]


def test_vllm_parser_refuses_bodies_without_token_ids():
    # A real vLLM 0.16 answer to a text prompt with echo: no token_ids, and the echoed prompt has a null logprob.
    with pytest.raises(BackendError, match="token_ids"):
        parse_completion(fixture("vllm/completions_echo_logprobs_v0.16.json"))
    aborted = fixture("vllm/completions_token_ids.json")
    aborted["choices"][0]["finish_reason"] = "abort"
    with pytest.raises(BackendError, match="abort"):
        parse_completion(aborted)
    with pytest.raises(BackendError, match="choices"):
        parse_completion({"object": "error"})


def test_vllm_request_body_asks_for_ids_and_neutral_sampling():
    """The sampled ids come as `token_id:<id>` tokens; `return_token_ids` is not asked for, since vLLM would
    echo the whole prompt's ids with them on every call."""
    body = completion_request("m", [1, 2, 3], SamplingParams(temperature=0.5, top_p=0.9, seed=4, stop_token_ids=[9]), 7)
    assert body["prompt"] == [1, 2, 3] and body["max_tokens"] == 7 and body["seed"] == 4
    assert "return_token_ids" not in body and body["return_tokens_as_token_ids"] is True
    assert body["logprobs"] == 1 and body["skip_special_tokens"] is False
    assert body["top_k"] == -1 and body["repetition_penalty"] == 1.0 and body["stop_token_ids"] == [9]


def recorded_server(routes: dict[str, tuple[int, object]], seen: list | None = None, delay: float = 0.0) -> Starlette:
    """A stand-in vLLM/SGLang server answering recorded bodies (path -> (status, body))."""

    async def answer(request: Request):
        path = request.path_params["path"]
        if seen is not None and request.method == "POST":
            seen.append((path, await request.json()))
        await asyncio.sleep(delay)
        status, body = routes[f"/{path}"]
        if isinstance(body, str):  # vLLM's admin routes answer plain text
            return PlainTextResponse(body, status_code=status)
        return JSONResponse(body, status_code=status)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


async def test_vllm_client_against_recorded_server_and_errors():
    seen: list = []
    routes = {
        "/v1/models": (200, fixture("vllm/models.json")),
        "/v1/completions": (200, fixture("vllm/completions_token_ids.json")),
    }
    with ServerThread(recorded_server(routes, seen)) as server:
        client = VLLMBackend(server.url)
        result = await client.generate([1782, 6722, 315, 9625, 374], SamplingParams(max_tokens=6), CTX)
        assert result.output_ids == [12095, 13, 1084, 374, 7407, 304] and result.finish_reason is FinishReason.length
        assert client.model == "Qwen/Qwen3-0.6B" and client.max_context == 2048
        assert seen[0][1]["model"] == "Qwen/Qwen3-0.6B" and seen[0][1]["prompt"] == [1782, 6722, 315, 9625, 374]

    refused = {
        "/v1/models": (200, fixture("vllm/models.json")),
        "/v1/completions": (400, fixture("vllm/error_context_length.json")),
    }
    with ServerThread(recorded_server(refused)) as server:
        with pytest.raises(InvalidRequestError, match="maximum context length is 2048"):
            await VLLMBackend(server.url).generate([1, 2], SamplingParams(max_tokens=2), CTX)

    with ServerThread(recorded_server({"/v1/models": (200, fixture("vllm/models.json"))}, delay=2.0)) as server:
        with pytest.raises(BackendError, match="did not answer within 0.3 s"):
            await VLLMBackend(server.url, timeout=0.3).generate([1, 2], SamplingParams(), CTX)

    with pytest.raises(BackendError, match="cannot connect to vLLM"):
        await VLLMBackend(f"http://127.0.0.1:{free_port()}", connect_timeout=2).generate([1, 2], SamplingParams(), CTX)


# ---- the sglang client against recorded SGLang bodies ----------------------------------------------------------


def test_sglang_parser_reads_recorded_bodies():
    ids, logprobs, finish = parse_generate(fixture("sglang/generate_logprobs_length.json"))
    assert ids == [12095, 13, 1084, 374, 7407, 304] and finish is FinishReason.length
    assert logprobs == pytest.approx([-0.73046875, -0.9765625, -1.3984375, -0.171875, -0.42578125, -0.060546875])
    ids, _, finish = parse_generate(fixture("sglang/generate_stop_matched.json"))
    assert ids == [9707, 0, 151645] and finish is FinishReason.stop
    with pytest.raises(BackendError, match="abort"):
        parse_generate(fixture("sglang/generate_abort.json"))
    with pytest.raises(BackendError, match="meta_info"):
        parse_generate({"text": "x"})


async def test_sglang_client_against_recorded_server():
    seen: list = []
    routes = {
        "/get_server_info": (200, fixture("sglang/server_info.json")),
        "/generate": (200, fixture("sglang/generate_logprobs_length.json")),
        "/update_weights_from_disk": (200, {"success": True, "message": "Succeeded to update model weights."}),
    }
    with ServerThread(recorded_server(routes, seen)) as server:
        client = make_backend(f"sglang:{server.url}")
        assert isinstance(client, SGLangBackend)
        sampling = SamplingParams(temperature=0.6, max_tokens=6, seed=8, stop_token_ids=[151645])
        result = await client.generate([785, 6722, 315, 9625, 374], sampling, CTX)
        assert result.output_ids == [12095, 13, 1084, 374, 7407, 304] and client.max_context == 40960
        path, body = seen[0]
        assert path == "generate" and body == generate_request([785, 6722, 315, 9625, 374], sampling, 6)
        assert body["return_logprob"] is True and body["sampling_params"]["stop_token_ids"] == [151645]
        assert body["sampling_params"]["skip_special_tokens"] is False and body["sampling_params"]["sampling_seed"] == 8
        assert await client.load_weights("/models/step-10") == 1 and seen[-1][1] == {"model_path": "/models/step-10"}
        await client.close()


# ---- LoRA adapters through vLLM's and SGLang's LoRA-loading APIs -----------------------------------------------


async def test_vllm_loads_each_adapter_under_a_new_name_and_requests_name_it():
    seen: list = []
    routes = {
        "/v1/models": (200, fixture("vllm/models.json")),
        "/v1/completions": (200, fixture("vllm/completions_token_ids.json")),
        # vLLM's answers (vllm/entrypoints/openai/api_server.py): plain text, status 200
        "/v1/load_lora_adapter": (200, "Success: LoRA adapter 'openforge-policy-1' added successfully."),
        "/v1/unload_lora_adapter": (200, "Success: LoRA adapter 'openforge-policy-1' removed successfully."),
    }
    with ServerThread(recorded_server(routes, seen)) as server:
        client = VLLMBackend(server.url)
        assert await client.load_adapter("/ckpt/rl/adapter") == 1
        assert seen[-1] == (
            "v1/load_lora_adapter",
            {"lora_name": "openforge-policy-1", "lora_path": "/ckpt/rl/adapter"},
        )
        await client.generate([1, 2, 3], SamplingParams(max_tokens=6), CTX)
        assert seen[-1][0] == "v1/completions" and seen[-1][1]["model"] == "openforge-policy-1"
        assert await client.load_adapter("/ckpt/rl/adapter") == 2
        assert seen[-2:] == [
            ("v1/load_lora_adapter", {"lora_name": "openforge-policy-2", "lora_path": "/ckpt/rl/adapter"}),
            ("v1/unload_lora_adapter", {"lora_name": "openforge-policy-1"}),
        ]
        await client.generate([1, 2, 3], SamplingParams(max_tokens=6), CTX)
        assert seen[-1][1]["model"] == "openforge-policy-2"
        await client.close()
    routes["/v1/load_lora_adapter"] = (400, {"error": {"message": "LoRA is not enabled: start with --enable-lora"}})
    with ServerThread(recorded_server(routes)) as server:
        client = VLLMBackend(server.url)
        with pytest.raises(InvalidRequestError, match="--enable-lora"):
            await client.load_adapter("/ckpt/rl/adapter")
        assert client.policy_version == 0 and client.adapter is None
        await client.close()


async def test_sglang_loads_each_adapter_under_a_new_name_and_requests_name_it():
    seen: list = []
    routes = {
        "/get_server_info": (200, fixture("sglang/server_info.json")),
        "/generate": (200, fixture("sglang/generate_logprobs_length.json")),
        # SGLang's LoadLoRAAdapterReqOutput / UnloadLoRAAdapterReqOutput
        "/load_lora_adapter": (200, {"success": True, "error_message": "", "loaded_adapters": {}}),
        "/unload_lora_adapter": (200, {"success": True, "error_message": "", "loaded_adapters": {}}),
    }
    with ServerThread(recorded_server(routes, seen)) as server:
        client = SGLangBackend(server.url)
        sampling = SamplingParams(max_tokens=6)
        await client.generate([1, 2, 3], sampling, CTX)
        assert "lora_path" not in seen[-1][1]  # the base weights until an adapter is loaded
        assert await client.load_adapter("/ckpt/rl/adapter") == 1
        assert seen[-1] == ("load_lora_adapter", {"lora_name": "openforge-policy-1", "lora_path": "/ckpt/rl/adapter"})
        await client.generate([1, 2, 3], sampling, CTX)
        assert seen[-1] == ("generate", generate_request([1, 2, 3], sampling, 6, adapter="openforge-policy-1"))
        assert seen[-1][1]["lora_path"] == "openforge-policy-1"
        assert await client.load_adapter("/ckpt/rl/adapter") == 2
        assert seen[-1] == ("unload_lora_adapter", {"lora_name": "openforge-policy-1"})
        await client.close()
    routes["/load_lora_adapter"] = (200, {"success": False, "error_message": "LoRA is not enabled"})
    with ServerThread(recorded_server(routes)) as server:
        client = SGLangBackend(server.url)
        with pytest.raises(BackendError, match="LoRA adapter /a: LoRA is not enabled"):
            await client.load_adapter("/a")
        assert client.policy_version == 0 and client.adapter is None
        await client.close()


# ---- streaming: tokens as they come -------------------------------------------------------------------------

import threading  # noqa: E402

from starlette.responses import StreamingResponse  # noqa: E402

from openforge.inference import SampledToken  # noqa: E402

RECORDED_IDS = [12095, 13, 1084, 374, 7407, 304]


def streamed_server(
    routes: dict[str, tuple[int, object]], streams: dict[str, str], gate: threading.Event, seen: list | None = None
) -> Starlette:
    """A stand-in vLLM/SGLang server: `routes` answer JSON, `streams` answer a recorded SSE stream whose first
    event is sent at once and the rest only once `gate` is set (the test sets it after it has the first token)."""

    async def answer(request: Request):
        path = "/" + request.path_params["path"]
        if path in streams:
            if seen is not None:
                seen.append(await request.json())
            events = [e + "\n\n" for e in streams[path].split("\n\n") if e.strip()]

            async def body():
                yield events[0]
                await asyncio.to_thread(gate.wait, 30)
                for event in events[1:]:
                    yield event

            return StreamingResponse(body(), media_type="text/event-stream")
        status, payload = routes[path]
        return JSONResponse(payload, status_code=status)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


async def _first_then_rest(client, prompt, gate: threading.Event):
    stream = client.stream(prompt, SamplingParams(max_tokens=6), CTX)
    first = await stream.__anext__()
    held = not gate.is_set()  # the server has sent only its first event so far
    gate.set()
    rest = [event async for event in stream]
    return first, held, rest


async def test_vllm_client_streams_ids_and_logprobs_as_they_come():
    gate, seen = threading.Event(), []
    stream = (FIXTURES / "vllm/completions_stream_token_ids.sse").read_text()
    with ServerThread(
        streamed_server({"/v1/models": (200, fixture("vllm/models.json"))}, {"/v1/completions": stream}, gate, seen)
    ) as server:
        client = VLLMBackend(server.url)
        first, held, rest = await _first_then_rest(client, [1782, 6722, 315, 9625, 374], gate)
        await client.close()
    assert first == SampledToken(12095, -0.73046875) and held
    result = rest[-1]
    assert [t.id for t in [first, *rest[:-1]]] == RECORDED_IDS == result.output_ids
    assert result.finish_reason is FinishReason.length and result.logprobs[5] == pytest.approx(-0.060546875)
    assert seen[0]["stream"] is True and seen[0]["return_tokens_as_token_ids"] is True and seen[0]["logprobs"] == 1


async def test_vllm_stream_failing_mid_way_is_a_backend_error_after_the_first_tokens():
    gate = threading.Event()
    gate.set()
    stream = (FIXTURES / "vllm/completions_stream_error.sse").read_text()
    with ServerThread(
        streamed_server({"/v1/models": (200, fixture("vllm/models.json"))}, {"/v1/completions": stream}, gate)
    ) as server:
        client = VLLMBackend(server.url)
        got = []
        with pytest.raises(BackendError, match="shut down while the request was running"):
            async for event in client.stream([1, 2], SamplingParams(max_tokens=6), CTX):
                got.append(event)
        await client.close()
    assert got == [SampledToken(12095, -0.73046875)]


@pytest.mark.parametrize("form", ["cumulative", "incremental"])
async def test_sglang_client_streams_ids_and_logprobs_as_they_come(form):
    gate, seen = threading.Event(), []
    info = {**fixture("sglang/server_info.json"), "incremental_streaming_output": form == "incremental"}
    stream = (FIXTURES / f"sglang/generate_stream_{form}.sse").read_text()
    with ServerThread(streamed_server({"/get_server_info": (200, info)}, {"/generate": stream}, gate, seen)) as server:
        client = SGLangBackend(server.url)
        first, held, rest = await _first_then_rest(client, [785, 6722, 315, 9625, 374], gate)
        await client.close()
    assert first == SampledToken(12095, -0.73046875) and held
    assert [t.id for t in [first, *rest[:-1]]] == RECORDED_IDS == rest[-1].output_ids
    assert rest[-1].finish_reason is FinishReason.length and seen[0]["stream"] is True


async def test_vllm_client_streams_from_serve_model_token_by_token(served):
    """The real engine behind serve-model's streamed /v1/completions: the same tokens as generating at once."""
    backend, url = served
    client = make_backend(f"vllm:{url}", tiny_model_dir())
    prompt = backend.model_dir.encode_text("Streamed over HTTP, token by token.")
    sampling = SamplingParams(temperature=0.7, max_tokens=12, seed=3)
    events = [event async for event in client.stream(prompt, sampling, CTX)]
    result = events[-1]
    assert [e.id for e in events[:-1]] == result.output_ids == (await client.generate(prompt, sampling, CTX)).output_ids
    assert max_abs_diff(result.logprobs, reference_logprobs(backend.model, prompt, result.output_ids, 0.7)) < 1e-4
    await client.close()


async def test_streamed_calls_in_a_row_share_one_connection():
    """After `[DONE]` the client reads the stream to its end in the background, so the connection goes back to
    the pool: calls one after another reuse it (a connection per call cost each call a connect, and the server an
    accept, on the one-stream path). Closing the client mid-stream still aborts the request (tested above)."""
    backend = EmbeddedBackend(tiny_model_dir(), seed=0)
    inner = create_app(backend, model_name="tiny")
    ports: list[int] = []

    async def counting(scope, receive, send):  # the client's port of every streamed completion request
        if scope["type"] == "http" and scope["path"] == "/v1/completions":
            ports.append(scope["client"][1])
        await inner(scope, receive, send)

    with ServerThread(counting) as server:
        client = make_backend(f"vllm:{server.url}", tiny_model_dir())
        prompt = backend.model_dir.encode_text("One connection for every call.")
        for seed in range(3):
            events = [e async for e in client.stream(prompt, SamplingParams(max_tokens=4, seed=seed), CTX)]
            assert events[-1].output_ids
            await asyncio.sleep(0.2)  # the background read of the stream's end
        await client.close()
    assert len(ports) == 3 and len(set(ports)) == 1, ports
