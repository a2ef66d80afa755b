"""`openforge serve-model`: the embedded backend behind the subset of vLLM's HTTP API that OpenForge uses.

- `GET /v1/models` — one model card, with vLLM's `max_model_len`;
- `POST /v1/completions` — `prompt` as token ids (or text), `max_tokens`, `temperature`, `top_p`, `top_k`,
  `seed`, `stop`, `stop_token_ids`, `logprobs`, `return_token_ids`, `return_tokens_as_token_ids`,
  `skip_special_tokens`; answered in vLLM's shape (`choices[0].token_ids`, `choices[0].logprobs.token_logprobs`,
  `usage`), so the `vllm` client can be tested against it;
- `POST /v1/chat/completions` — text in, text out through the model's chat template, JSON or streamed (SSE),
  so that peers such as LiteLLM can be benchmarked against the same server;
- `GET /health`.

Bad input answers 400 with an OpenAI-style error object: `{"error": {"message", "type", "param", "code"}}`.
Not served: `n` > 1, `echo`, `best_of`, streamed `/v1/completions`; `top_logprobs` holds only the sampled token.
Requests carry no episode id, so the prefix cache keeps the most recent requests and each new prompt reuses
the longest cached prefix (like vLLM's automatic prefix caching).
"""

from __future__ import annotations

import json
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openforge.core import Conversation, FinishReason, Message, ToolCall, ToolSpec
from openforge.inference.base import (
    BackendError,
    GenerationContext,
    GenerationResult,
    InvalidRequestError,
    parse_sampling,
)
from openforge.inference.embedded import EmbeddedBackend

# ---- request bodies (unknown fields are accepted and ignored, as vLLM does) ------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    n: int = 1
    return_token_ids: bool | None = None
    skip_special_tokens: bool = True

    def sampling(self, default_max_tokens: int):
        if self.n != 1:
            raise InvalidRequestError(f"n: {self.n} is not supported; serve-model returns one choice (n = 1)")
        values: dict[str, Any] = {"max_tokens": self.max_tokens if self.max_tokens is not None else default_max_tokens}
        for name in ("temperature", "top_p", "seed", "stop_token_ids"):
            if getattr(self, name) is not None:
                values[name] = getattr(self, name)
        if self.top_k is not None:
            values["top_k"] = 0 if self.top_k == -1 else self.top_k  # vLLM spells "off" -1 or 0
        if self.stop is not None:
            values["stop"] = [self.stop] if isinstance(self.stop, str) else self.stop
        return parse_sampling(values)


class CompletionBody(_Body):
    prompt: list[int] | str | list[str] | list[list[int]]
    logprobs: int | None = None
    echo: bool = False
    stream: bool = False
    return_tokens_as_token_ids: bool | None = None


class ChatBody(_Body):
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    stream: bool = False
    stream_options: dict[str, Any] | None = None


# ---- the app ----------------------------------------------------------------------------------------------------


def create_app(backend: EmbeddedBackend, model_name: str | None = None, close_backend: bool = True) -> FastAPI:
    """The app serving `backend`; `close_backend`: close it when the server shuts down."""
    model_dir = backend.model_dir
    name = model_name or Path(model_dir.path).name

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        if close_backend:
            await backend.close()

    app = FastAPI(title="openforge serve-model", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.backend = backend

    @app.exception_handler(InvalidRequestError)
    async def _invalid(_: Request, exc: InvalidRequestError):
        return _error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _unparsable(_: Request, exc: RequestValidationError):
        return _error(400, _describe_validation(exc.errors()))

    @app.exception_handler(BackendError)
    async def _failed(_: Request, exc: BackendError):
        return _error(500, str(exc), kind="server_error")

    @app.get("/health")
    async def health():
        return {"status": "ok", "policy_version": backend.policy_version}

    @app.get("/v1/models")
    async def models():
        return {
            "object": "list",
            "data": [
                {
                    "id": name,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "openforge",
                    "root": str(model_dir.path),
                    "max_model_len": backend.max_context,
                }
            ],
        }

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await _parse(request, CompletionBody)
        if body.stream:
            raise InvalidRequestError("stream: streamed /v1/completions is not supported by serve-model")
        if body.echo:
            raise InvalidRequestError("echo: not supported by serve-model")
        prompt_ids = _prompt_ids(body.prompt, model_dir)
        sampling = body.sampling(default_max_tokens=16)  # vLLM's default for completions
        result = await backend.generate(prompt_ids, sampling, GenerationContext())
        text = _output_text(model_dir, result, sampling.stop, body.skip_special_tokens)
        choice: dict[str, Any] = {
            "index": 0,
            "text": text,
            "logprobs": _completion_logprobs(model_dir, result, body.return_tokens_as_token_ids)
            if body.logprobs is not None
            else None,
            "finish_reason": result.finish_reason.value,
            "stop_reason": None,
        }
        if body.return_token_ids:
            choice["token_ids"] = result.output_ids
            choice["prompt_token_ids"] = prompt_ids
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": name,
            "choices": [choice],
            "usage": _usage(prompt_ids, result),
            "policy_version": result.policy_version,
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await _parse(request, ChatBody)
        conversation = _conversation(body)
        prompt_ids = model_dir.render(conversation)
        if body.max_completion_tokens is not None and body.max_tokens is None:
            body.max_tokens = body.max_completion_tokens
        sampling = body.sampling(default_max_tokens=1024)
        backend.check_request(prompt_ids, sampling)  # fail with 400 before a stream starts
        if body.stream:
            include_usage = bool((body.stream_options or {}).get("include_usage"))
            return StreamingResponse(
                _chat_stream(backend, name, prompt_ids, sampling, include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        result = await backend.generate(prompt_ids, sampling, GenerationContext())
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": _output_text(model_dir, result, sampling.stop, skip_special=False),
            },
            "logprobs": _chat_logprobs(model_dir, result) if body.logprobs else None,
            "finish_reason": result.finish_reason.value,
        }
        if body.return_token_ids:
            choice["token_ids"] = result.output_ids
        response = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [choice],
            "usage": _usage(prompt_ids, result),
        }
        if body.return_token_ids:
            response["prompt_token_ids"] = prompt_ids
        return response

    return app


def serve_model(model_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, seed: int = 0) -> None:
    """Serve the model directory with the embedded backend until interrupted (blocking)."""
    import uvicorn

    backend = EmbeddedBackend(model_dir, seed=seed)
    uvicorn.run(create_app(backend), host=host, port=port, log_level="info")


# ---- helpers ------------------------------------------------------------------------------------------------------


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"error": {"message": message, "type": kind, "param": param, "code": status}}
    )


async def _parse(request: Request, model: type[BaseModel]):
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidRequestError("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise InvalidRequestError("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequestError(_describe_validation(exc.errors())) from None


def _describe_validation(errors) -> str:
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg')}")
    return "invalid request: " + "; ".join(parts)


def _prompt_ids(prompt, model_dir) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        # Like vLLM: text prompts are tokenized with special tokens recognized (a raw ChatML prompt works).
        return model_dir.tokenizer.encode(prompt, add_special_tokens=False).ids
    if prompt and all(isinstance(t, int) for t in prompt):
        return list(prompt)
    if not prompt:
        raise InvalidRequestError("prompt: is empty; give token ids or text")
    raise InvalidRequestError("prompt: only one prompt per request is supported by serve-model")


def _output_text(model_dir, result: GenerationResult, stop: list[str], skip_special: bool) -> str:
    ids = result.output_ids
    if result.finish_reason is FinishReason.stop and ids and ids[-1] in model_dir.eos_token_ids:
        ids = ids[:-1]  # the end-of-turn token is markup, not text
    text = model_dir.tokenizer.decode(ids, skip_special_tokens=skip_special)
    for s in stop:  # like vLLM: a matched stop string is not part of the text (its tokens are in token_ids)
        if s and s in text:
            text = text[: text.index(s)]
    return text


def _token_strings(model_dir, ids: list[int]) -> list[str]:
    return [model_dir.tokenizer.decode([t], skip_special_tokens=False) for t in ids]


def _completion_logprobs(model_dir, result: GenerationResult, as_token_ids: bool | None) -> dict[str, Any]:
    tokens = (
        [f"token_id:{t}" for t in result.output_ids] if as_token_ids else _token_strings(model_dir, result.output_ids)
    )
    offsets, at = [], 0
    for piece in _token_strings(model_dir, result.output_ids):
        offsets.append(at)
        at += len(piece)
    return {
        "text_offset": offsets,
        "token_logprobs": result.logprobs,
        "tokens": tokens,
        "top_logprobs": [{tok: lp} for tok, lp in zip(tokens, result.logprobs)],
    }


def _chat_logprobs(model_dir, result: GenerationResult) -> dict[str, Any]:
    pieces = _token_strings(model_dir, result.output_ids)
    return {
        "content": [
            {"token": p, "logprob": lp, "bytes": list(p.encode()), "top_logprobs": []}
            for p, lp in zip(pieces, result.logprobs)
        ]
    }


def _usage(prompt_ids: list[int], result: GenerationResult) -> dict[str, int]:
    n = len(result.output_ids)
    return {"prompt_tokens": len(prompt_ids), "completion_tokens": n, "total_tokens": len(prompt_ids) + n}


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")
        )
    raise InvalidRequestError("messages[].content must be a string or a list of text parts")


def _conversation(body: ChatBody) -> Conversation:
    """OpenAI chat messages → the canonical conversation (system messages join the system prompt)."""
    system: list[str] = []
    messages: list[Message] = []
    try:
        for i, m in enumerate(body.messages):
            role = m.get("role")
            if role in ("system", "developer"):
                system.append(_text_of(m.get("content")))
            elif role == "user":
                messages.append(Message(role="user", content=_text_of(m.get("content"))))
            elif role == "assistant":
                calls = [
                    ToolCall(
                        id=c.get("id") or f"call_{i}_{j}",
                        name=c["function"]["name"],
                        arguments=_arguments(c["function"].get("arguments")),
                    )
                    for j, c in enumerate(m.get("tool_calls") or [])
                ]
                messages.append(
                    Message(
                        role="assistant",
                        content=_text_of(m.get("content")),
                        tool_calls=calls,
                        reasoning=m.get("reasoning_content"),
                    )
                )
            elif role == "tool":
                messages.append(
                    Message(
                        role="tool",
                        content=_text_of(m.get("content")),
                        tool_call_id=m.get("tool_call_id") or "call",
                        name=m.get("name"),
                    )
                )
            else:
                raise InvalidRequestError(
                    f"messages[{i}].role: {role!r} is not one of system, developer, user, assistant, tool"
                )
        tools = [
            ToolSpec(
                name=t["function"]["name"],
                description=t["function"].get("description") or "",
                parameters=t["function"].get("parameters") or {"type": "object", "properties": {}},
            )
            for t in body.tools or []
            if t.get("type", "function") == "function"
        ]
    except (KeyError, TypeError, ValidationError) as exc:
        raise InvalidRequestError(f"messages or tools are malformed: {exc}") from None
    return Conversation(system="\n\n".join(system) if system else None, messages=messages, tools=tools)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


async def _chat_stream(backend: EmbeddedBackend, name: str, prompt_ids: list[int], sampling, include_usage: bool):
    """Server-sent events in OpenAI's chunk format, one content delta per decoded piece of text."""
    model_dir = backend.model_dir
    stream_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra) -> str:
        body = {
            "id": stream_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    ids: list[int] = []
    sent = ""
    try:
        async for item in backend.stream(prompt_ids, sampling, GenerationContext()):
            if isinstance(item, GenerationResult):
                text = _output_text(model_dir, item, sampling.stop, skip_special=False)
                if len(text) > len(sent):
                    yield chunk({"content": text[len(sent) :]})
                yield chunk({}, item.finish_reason.value)
                if include_usage:
                    usage = _usage(prompt_ids, item)
                    body = {
                        "id": stream_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": name,
                        "choices": [],
                        "usage": usage,
                    }
                    yield f"data: {json.dumps(body)}\n\n"
                break
            ids.append(item[0])
            if ids[-1] in model_dir.eos_token_ids:
                continue
            text = model_dir.tokenizer.decode(ids, skip_special_tokens=False)
            # Hold back a partial UTF-8 character and anything a stop string might still claim.
            hold = max((len(s) for s in sampling.stop), default=0)
            ready = text[: len(text) - hold] if hold else text
            if ready.endswith("\ufffd"):
                continue
            if len(ready) > len(sent) and ready.startswith(sent):
                yield chunk({"content": ready[len(sent) :]})
                sent = ready
    except (InvalidRequestError, BackendError) as exc:
        kind = "invalid_request_error" if isinstance(exc, InvalidRequestError) else "server_error"
        yield f"data: {json.dumps({'error': {'message': str(exc), 'type': kind, 'param': None, 'code': 500}})}\n\n"
    yield "data: [DONE]\n\n"
