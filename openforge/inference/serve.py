"""`openforge serve-model`: the embedded backend behind the subset of vLLM's HTTP API that OpenForge uses.

- `GET /v1/models` — one model card, with vLLM's `max_model_len`;
- `POST /v1/completions` — `prompt` as token ids (or text), `max_tokens`, `temperature`, `top_p`, `top_k`,
  `seed`, `stop`, `stop_token_ids`, `logprobs`, `return_token_ids`, `return_tokens_as_token_ids`,
  `skip_special_tokens`, `stream`; answered in vLLM's shape (`choices[0].token_ids`,
  `choices[0].logprobs.token_logprobs`, `usage`; streamed: one event per sampled token with its id and logprob,
  an event with the finish reason, then `data: [DONE]`), so the `vllm` client can be tested against it; bad input
  answers 400 with vLLM's error object `{"error": {"message", "type", "param", "code": <status>}}`;
- `POST /v1/chat/completions` (and `/chat/completions`) — the OpenAI Chat Completions dialect, the proxy's own
  (`openforge.dialects`): requests decoded, replies, streams and errors encoded by it. Text in, the model's
  text out through its chat template, JSON or streamed token by token (SSE), so that peers such as LiteLLM can
  be benchmarked against the same server. Tool calls and reasoning stay in the text unless a reply parser is
  given (`--tool-call-parser auto`, as vLLM's `--tool-call-parser`: the proxy's own output parser, handed in by
  the command line): then replies carry `tool_calls` and `reasoning_content` and a stream is the dialect's
  stream of the finished reply — what a teacher behind `--backend openai:URL` needs.
  vLLM's extensions `stop_token_ids`, `logprobs` and `return_token_ids` are read too; `max_tokens` defaults
  to 1024;
- `GET /health`.

The model is served by the embedded backend, or by a scripted policy (`--backend scripted:FILE`: a teacher or
generator for tests, whose policy sees the decoded conversation). Not served: `n` > 1, `echo`, `best_of`;
`top_logprobs` holds only the sampled token.
Requests carry no episode id, so the prefix cache keeps the most recent requests and each new prompt reuses
the longest cached prefix (like vLLM's automatic prefix caching). Starlette, as the proxy.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from openforge.core import FinishReason, ParsedOutput, SamplingParams, ToolSpec
from openforge.core.json_types import JSONObject
from openforge.dialects import DIALECTS, MODELS_ROUTE, DecodedRequest, DialectError, Reply, ReplyStart, model_list, wire
from openforge.inference.base import (
    BackendError,
    BackendSpecError,
    GenerationContext,
    GenerationResult,
    InvalidRequestError,
    PromptTooLongError,
    parse_sampling,
)
from openforge.inference.embedded import EmbeddedBackend
from openforge.inference.scripted import ScriptedBackend

if TYPE_CHECKING:
    from openforge.models import ModelDir

# The backends that hold their model directory (whose tokenizer and template the server uses).
ServedBackend = EmbeddedBackend | ScriptedBackend
Body = TypeVar("Body", bound=BaseModel)

CHAT = DIALECTS["chat_completions"]
CHAT_DEFAULT_MAX_TOKENS = 1024
COMPLETION_DEFAULT_MAX_TOKENS = 16  # vLLM's
SERVABLE = "embedded | scripted:FILE"

# Sampled text → reasoning, text and tool calls, given the offered tools (the proxy's output parser).
ReplyParser = Callable[[str, list[ToolSpec]], ParsedOutput]


class CompletionBody(BaseModel):
    """A `/v1/completions` request (unknown fields are accepted and ignored, as vLLM does)."""

    model_config = ConfigDict(extra="allow")

    prompt: list[int] | str | list[str] | list[list[int]]
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
    logprobs: int | None = None
    echo: bool = False
    stream: bool = False
    return_tokens_as_token_ids: bool | None = None

    def sampling(self) -> SamplingParams:
        if self.n != 1:
            raise InvalidRequestError(f"n: {self.n} is not supported; serve-model returns one choice (n = 1)")
        max_tokens = self.max_tokens if self.max_tokens is not None else COMPLETION_DEFAULT_MAX_TOKENS
        values: dict[str, Any] = {"max_tokens": max_tokens}
        for name in ("temperature", "top_p", "seed", "stop_token_ids"):
            if getattr(self, name) is not None:
                values[name] = getattr(self, name)
        if self.top_k is not None:
            values["top_k"] = 0 if self.top_k == -1 else self.top_k  # vLLM spells "off" -1 or 0
        if self.stop is not None:
            values["stop"] = [self.stop] if isinstance(self.stop, str) else self.stop
        return parse_sampling(values)


# ---- the app ----------------------------------------------------------------------------------------------------


def create_app(
    backend: ServedBackend,
    model_name: str | None = None,
    close_backend: bool = True,
    parse_reply: ReplyParser | None = None,
) -> Starlette:
    """The app serving `backend` (one that holds its `model_dir`: embedded, scripted); `close_backend`: close it
    when the server shuts down; `parse_reply`: split chat replies into reasoning, text and tool calls."""
    model_dir = backend.model_dir
    name = model_name or Path(model_dir.path).name

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        if close_backend:
            await backend.close()

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "policy_version": backend.policy_version})

    async def models(request: Request) -> Response:
        card = model_list(
            name, anthropic=False, created=int(time.time()), root=str(model_dir.path), max_model_len=backend.max_context
        )
        return JSONResponse(card)

    async def completions(request: Request) -> Response:
        body = await _parse(request, CompletionBody)
        if body.echo:
            raise InvalidRequestError("echo: not supported by serve-model")
        prompt_ids = _prompt_ids(body.prompt, model_dir)
        sampling = body.sampling()
        if body.stream:
            backend.check_request(prompt_ids, sampling)  # a 400 before the stream starts
            events = _completion_stream(backend, name, body, prompt_ids, sampling)
            return StreamingResponse(events, media_type="text/event-stream", headers={"cache-control": "no-cache"})
        result = await backend.generate(prompt_ids, sampling, GenerationContext())
        text = _output_text(model_dir, result, sampling.stop, body.skip_special_tokens)
        choice: dict[str, object] = {
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
        return JSONResponse(
            {
                "id": f"cmpl-{uuid.uuid4().hex}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": name,
                "choices": [choice],
                "usage": _usage(prompt_ids, result),
                "policy_version": result.policy_version,
            }
        )

    async def chat_completions(request: Request) -> Response:
        try:
            decoded = CHAT.decode(await request.body())
            want_logprobs = wire.opt_bool(decoded.raw, "logprobs", "")
            want_ids = wire.opt_bool(decoded.raw, "return_token_ids", "")
            prompt_ids = model_dir.render(decoded.conversation)
            sampling = _chat_sampling(decoded)
            backend.check_request(prompt_ids, sampling)  # fail with 400 before a stream starts
        except (DialectError, InvalidRequestError) as exc:
            return _chat_error(exc)
        head = ReplyStart(id=CHAT.new_reply_id(), model=name, created=int(time.time()), prompt_tokens=len(prompt_ids))
        if decoded.stream and parse_reply is None and isinstance(backend, EmbeddedBackend):  # token by token
            events = _chat_stream(backend, head, decoded, prompt_ids, sampling)
            return StreamingResponse(events, media_type="text/event-stream", headers={"cache-control": "no-cache"})
        # a policy may read the conversation (scripted); a model ignores it. No call here is a side call: that is
        # the proxy's notion (a harness's title request), and a request without tools is this server's whole job
        ctx = GenerationContext(conversation=decoded.conversation)
        try:
            result = await backend.generate(prompt_ids, sampling, ctx)
        except (InvalidRequestError, BackendError) as exc:
            return _chat_error(exc)
        reply = _chat_reply(head, model_dir, result, sampling, parse_reply, decoded.conversation.tools)
        if decoded.stream:  # the finished reply as the dialect streams it
            return StreamingResponse(
                iter(CHAT.stream(reply, decoded)), media_type="text/event-stream", headers={"cache-control": "no-cache"}
            )
        body = CHAT.encode(reply, decoded)
        choices = body["choices"]
        assert isinstance(choices, list) and isinstance(choices[0], dict)  # the dialect writes its one choice
        choice = choices[0]  # vLLM's extensions
        if want_logprobs:
            choice["logprobs"] = _chat_logprobs(model_dir, result)
        if want_ids:
            choice["token_ids"] = [*result.output_ids]
            body["prompt_token_ids"] = [*prompt_ids]
        return JSONResponse(body)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route(MODELS_ROUTE, models, methods=["GET"]),
        Route("/v1/completions", completions, methods=["POST"]),
        *[Route(path, chat_completions, methods=["POST"]) for path in CHAT.routes],
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=_COMPLETION_ERRORS)
    app.state.backend = backend
    return app


def serve_model(
    model_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    seed: int = 0,
    backend: str = "embedded",
    parse_reply: ReplyParser | None = None,
) -> None:
    """Serve the model directory with the embedded backend (or `backend`, a scripted policy) until interrupted
    (blocking)."""
    import uvicorn

    from openforge.inference import make_backend

    kind = backend.partition(":")[0]
    if kind not in ("embedded", "scripted"):
        raise BackendSpecError(f"serve-model serves {SERVABLE}, not {backend!r}")
    served = EmbeddedBackend(model_dir, seed=seed) if kind == "embedded" else make_backend(backend, model_dir)
    assert isinstance(served, ServedBackend)  # kind is "scripted": make_backend built a ScriptedBackend
    uvicorn.run(create_app(served, parse_reply=parse_reply), host=host, port=port, log_level="info")


# ---- /v1/completions helpers (vLLM's own API) ---------------------------------------------------------------------


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> JSONResponse:
    return JSONResponse(
        status_code=status, content={"error": {"message": message, "type": kind, "param": param, "code": status}}
    )


async def _invalid(_: Request, exc: Exception) -> Response:
    return _error(400, str(exc))


async def _failed(_: Request, exc: Exception) -> Response:
    return _error(500, str(exc), kind="server_error")


_COMPLETION_ERRORS = {InvalidRequestError: _invalid, BackendError: _failed}


async def _parse(request: Request, model: type[Body]) -> Body:
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


def _describe_validation(errors: list[ErrorDetails]) -> str:
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg')}")
    return "invalid request: " + "; ".join(parts)


def _prompt_ids(prompt: list[int] | str | list[str] | list[list[int]], model_dir: ModelDir) -> list[int]:
    first = prompt[0] if isinstance(prompt, list) and len(prompt) == 1 else None
    one = first if isinstance(first, str | list) else prompt  # a batch of one is its prompt
    if isinstance(one, str):
        # Like vLLM: text prompts are tokenized with special tokens recognized (a raw ChatML prompt works).
        return model_dir.tokenizer.encode(one, add_special_tokens=False).ids
    ids = [t for t in one if isinstance(t, int)]
    if one and len(ids) == len(one):
        return ids
    if not one:
        raise InvalidRequestError("prompt: is empty; give token ids or text")
    raise InvalidRequestError("prompt: only one prompt per request is supported by serve-model")


def _output_text(model_dir: ModelDir, result: GenerationResult, stop: list[str], skip_special: bool) -> str:
    ids = result.output_ids
    if result.finish_reason is FinishReason.stop and ids and ids[-1] in model_dir.eos_token_ids:
        ids = ids[:-1]  # the end-of-turn token is markup, not text
    text = model_dir.tokenizer.decode(ids, skip_special_tokens=skip_special)
    for s in stop:  # like vLLM: a matched stop string is not part of the text (its tokens are in token_ids)
        if s and s in text:
            text = text[: text.index(s)]
    return text


def _token_strings(model_dir: ModelDir, ids: list[int]) -> list[str]:
    return [model_dir.tokenizer.decode([t], skip_special_tokens=False) for t in ids]


def _completion_logprobs(model_dir: ModelDir, result: GenerationResult, as_token_ids: bool | None) -> dict[str, object]:
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


def _chat_logprobs(model_dir: ModelDir, result: GenerationResult) -> JSONObject:
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


async def _completion_stream(
    backend: ServedBackend, name: str, body: CompletionBody, prompt_ids: list[int], sampling: SamplingParams
) -> AsyncIterator[bytes]:
    """vLLM's streamed `/v1/completions`: one event per sampled token (its id, its logprob), an event with the
    finish reason, then `[DONE]`. A failure mid-stream is a `data: {"error": ...}` event, as vLLM writes it."""
    head = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()), "model": name}
    first = True
    try:
        async for item in backend.stream(prompt_ids, sampling, GenerationContext()):
            if isinstance(item, GenerationResult):
                choice = {
                    "index": 0,
                    "text": "",
                    "logprobs": None,
                    "finish_reason": item.finish_reason.value,
                    "stop_reason": None,
                    "token_ids": [] if body.return_token_ids else None,
                }
                yield wire.sse({**head, "choices": [choice], "usage": None})
                break
            token_text = _token_text(backend, item.id, body.skip_special_tokens)
            choice = {
                "index": 0,
                "text": token_text,
                "logprobs": {
                    "text_offset": [0],
                    "token_logprobs": [item.logprob],
                    "tokens": [f"token_id:{item.id}" if body.return_tokens_as_token_ids else token_text],
                    "top_logprobs": [{token_text: item.logprob}],
                }
                if body.logprobs is not None
                else None,
                "finish_reason": None,
                "stop_reason": None,
                "token_ids": [item.id] if body.return_token_ids else None,
            }
            if first and body.return_token_ids:
                choice["prompt_token_ids"] = prompt_ids
            first = False
            yield wire.sse({**head, "choices": [choice], "usage": None})
    except (InvalidRequestError, BackendError) as exc:
        yield wire.sse({"error": {"message": str(exc), "type": "InternalServerError", "param": None, "code": 500}})
    yield wire.sse("[DONE]")


def _token_text(backend: ServedBackend, token_id: int, skip_special: bool) -> str:
    return backend.model_dir.tokenizer.decode([token_id], skip_special_tokens=skip_special)


# ---- /v1/chat/completions helpers (the Chat Completions dialect) --------------------------------------------------


def _chat_sampling(request: DecodedRequest) -> SamplingParams:
    """The dialect's sampling parameters, with serve-model's default length and vLLM's `stop_token_ids`."""
    values = request.conversation.sampling.model_dump()
    if request.max_tokens_requested is None:
        values["max_tokens"] = CHAT_DEFAULT_MAX_TOKENS
    if request.raw.get("stop_token_ids") is not None:
        values["stop_token_ids"] = request.raw["stop_token_ids"]
    return parse_sampling(values)


def _as_dialect_error(exc: DialectError | InvalidRequestError | BackendError) -> DialectError:
    if isinstance(exc, DialectError):
        return exc
    if isinstance(exc, PromptTooLongError):
        return DialectError(400, "prompt_too_long", str(exc))
    if isinstance(exc, InvalidRequestError):
        return DialectError.invalid(str(exc))
    return DialectError(500, "api_error", str(exc))


def _chat_error(exc: DialectError | InvalidRequestError | BackendError) -> Response:
    status, body = CHAT.error(_as_dialect_error(exc))
    return JSONResponse(body, status_code=status)


def _chat_reply(
    head: ReplyStart,
    model_dir: ModelDir,
    result: GenerationResult,
    sampling: SamplingParams,
    parse_reply: ReplyParser | None = None,
    tools: list[ToolSpec] | None = None,
) -> Reply:
    text = _output_text(model_dir, result, sampling.stop, skip_special=False)
    return Reply(
        id=head.id,
        model=head.model,
        output=parse_reply(text, tools or []) if parse_reply else ParsedOutput(content=text),
        finish_reason=result.finish_reason,
        prompt_tokens=head.prompt_tokens,
        completion_tokens=len(result.output_ids),
        created=head.created,
    )


async def _chat_stream(
    backend: EmbeddedBackend, head: ReplyStart, request: DecodedRequest, prompt_ids: list[int], sampling: SamplingParams
) -> AsyncIterator[bytes]:
    """The dialect's chunks, one content delta per decoded piece of text as the tokens are sampled."""
    model_dir = backend.model_dir
    encoder = CHAT.stream_encoder(head, request)
    for event in encoder.start():
        yield event
    ids: list[int] = []
    sent = ""
    try:
        async for item in backend.stream(prompt_ids, sampling, GenerationContext()):
            if isinstance(item, GenerationResult):
                reply = _chat_reply(head, model_dir, item, sampling)
                rest = reply.output.content[len(sent) :]
                for event in (encoder.text(rest) if rest else []) + encoder.finish(reply):
                    yield event
                return
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
                for event in encoder.text(ready[len(sent) :]):
                    yield event
                sent = ready
    except (InvalidRequestError, BackendError) as exc:
        yield CHAT.error_stream(_as_dialect_error(exc))
