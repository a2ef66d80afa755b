"""One model call, end to end: key → decode → render → generate → parse → record → encode.

The order matters for the invariants of docs/design.md:
- the prompt is rendered by the continuity renderer, so earlier sampled ids are reused, never re-tokenized;
- the call is committed to the store *before* any byte of its reply is handed back (invariant 2);
- a request rejected before sampling (bad body, unknown key, prompt too long) leaves no row behind;
- a backend failure is recorded with its error and reaches the harness in the dialect's own error shape.
A message-level backend (a model behind an API) takes the one other path, `message_calls.py`: no token ids.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from openforge.core import CallRecord, Episode, FinishReason, ParsedOutput, SamplingParams
from openforge.inference import Backend, BackendError, GenerationContext, InvalidRequestError, MessageBackend, \
    PromptTooLongError
from openforge.models import ModelDir
from openforge.proxy.continuity import ContinuityRenderer
from openforge.dialects import Dialect, DialectError, Reply
from openforge.proxy.episodes import EpisodeRegistry
from openforge.proxy.message_calls import serve_message_call
from openforge.proxy.output_parser import parse_output
from openforge.store.writer import AsyncCallWriter


class ProxySettings(BaseModel):
    """How the proxy serves calls. The one declaration of these options: `ProxyConfig` (the CLI's and every
    in-process proxy's configuration) extends it with where to listen and what to serve."""

    model_config = ConfigDict(extra="forbid")

    served_model: str | None = None  # the model name reported to harnesses; None: the model directory's name
    max_new_tokens: int = Field(default=4096, ge=1)  # harnesses ask for 32000; a cap keeps a rambling policy bounded
    generation_timeout_s: float = Field(default=600.0, gt=0)
    temperature: float | None = Field(default=None, ge=0.0)  # sample every call at this temperature (training)
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    # No harness session comes near this; a request past it is hostile or broken, and rendering it would
    # only burn CPU before failing on the context length.
    max_messages: int = Field(default=4096, ge=1)
    replay_cache_per_episode: int = Field(default=4, ge=0)


@dataclass
class CallResponse:
    """What the HTTP layer sends: a JSON body, or a list of SSE chunks."""

    status: int
    body: dict | None = None
    chunks: list[bytes] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    replayed: bool = False

    def payload(self) -> bytes:
        if self.chunks is not None:
            return b"".join(self.chunks)
        return json.dumps(self.body).encode()


def as_json_reply(parsed: ParsedOutput) -> ParsedOutput:
    """A JSON output format was requested (Anthropic `output_config`, OpenAI `response_format`): the reply
    text must be valid JSON. The policy's own JSON is returned as sampled; anything else is returned as a JSON
    string (valid JSON, the text kept) and flagged, since nothing here constrains decoding."""
    try:
        json.loads(parsed.content)
        return parsed
    except ValueError:
        note = "the requested JSON output format was not followed; the text was returned as a JSON string"
        error = f"{parsed.parse_error}; {note}" if parsed.parse_error else note
        return parsed.model_copy(update={"content": json.dumps(parsed.content), "parse_error": error})


class PauseGate:
    """New calls wait while the gate is closed (weights are changing); `close()` waits for calls in flight."""

    def __init__(self):
        self._open = asyncio.Event()
        self._open.set()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    async def enter(self) -> None:
        await self._open.wait()
        self._in_flight += 1
        self._idle.clear()

    def leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()

    async def close(self) -> int:
        self._open.clear()
        await self._idle.wait()
        return self._in_flight

    def open(self) -> None:
        self._open.set()


class ProxyService:
    def __init__(
        self,
        model: ModelDir,
        backend: Backend,
        registry: EpisodeRegistry,
        writer: AsyncCallWriter,
        settings: ProxySettings | None = None,
    ):
        self.model = model
        self.backend = backend
        self.registry = registry
        self.writer = writer
        settings = settings or ProxySettings()
        if settings.served_model is None:
            settings = settings.model_copy(update={"served_model": model.path.name})
        self.settings = settings
        self.renderer = ContinuityRenderer(model)
        self.gate = PauseGate()
        self._eos = set(model.eos_token_ids)
        # (episode id) → {request digest: response}: a client retry of a completed call is replayed.
        self._replays: dict[str, OrderedDict[str, CallResponse]] = {}

    # ---- the call -----------------------------------------------------------------------------------
    async def handle(self, dialect: Dialect, body: bytes, episode: Episode) -> CallResponse:
        try:
            request = dialect.decode(body)
        except DialectError as err:
            return self.error_response(dialect, err)
        if len(request.conversation.messages) > self.settings.max_messages:
            return self.error_response(
                dialect,
                DialectError.invalid(
                    f"too many messages: {len(request.conversation.messages)} > {self.settings.max_messages}",
                    param="messages",
                ),
            )

        digest = hashlib.sha256(body).hexdigest()
        cached = self._replays.get(episode.id, {}).get(digest)
        if cached is not None:  # same body again: a retry of a call whose reply the client did not get
            return CallResponse(cached.status, cached.body, cached.chunks, cached.headers, replayed=True)

        await self.gate.enter()
        try:
            return await self._serve(dialect, request, body, digest, episode)
        finally:
            self.gate.leave()

    async def _serve(self, dialect, request, body: bytes, digest: str, episode: Episode) -> CallResponse:
        if isinstance(self.backend, MessageBackend):  # a model behind an API: messages, no token ids
            response = await serve_message_call(self, self.backend, dialect, request, body, episode)
            if response.status == 200:
                self._remember(episode.id, digest, response)
            return response
        conversation = request.conversation
        if self.registry.calls_before_this_process(episode.id):
            self.renderer.mark_unknown(episode.id, next_segment=self._segments_used(episode.id))
        rendered = self.renderer.render(episode.id, conversation, side_call=request.side_call)
        sampling = self._sampling(conversation.sampling, len(rendered.prompt_ids))
        try:
            self.backend.check_request(rendered.prompt_ids, sampling)
        except PromptTooLongError as e:
            return self.error_response(dialect, DialectError(400, "prompt_too_long", str(e)))
        except InvalidRequestError as e:
            return self.error_response(dialect, DialectError(400, "invalid_request", str(e)))

        index = self.registry.next_index(episode.id)
        self.registry.mark_running(episode)
        started = time.time()
        ctx = GenerationContext(
            episode_id=episode.id,
            call_index=index,
            side_call=request.side_call,
            conversation=conversation,
            task=self.registry.task_payload(episode),
        )
        # model_construct: the ids are ours, already checked; validating a 100k-id list would cost more
        # than the rest of the call (docs/design.md, "One model call": cost grows with the new tokens)
        record = CallRecord.model_construct(
            episode_id=episode.id,
            index=index,
            prompt_ids=rendered.prompt_ids,
            sampling=sampling,
            started_at=started,
            dialect=dialect.name,
            side_call=request.side_call,
            segment=rendered.segment,
            break_reason=rendered.break_reason,
            request_body=body,
            metadata={"reused_prompt_tokens": rendered.reused_tokens, "extends_call": rendered.extends_call},
        )
        try:
            result = await asyncio.wait_for(
                self.backend.generate(rendered.prompt_ids, sampling, ctx), self.settings.generation_timeout_s
            )
        except Exception as e:  # noqa: BLE001 - any backend failure reaches the harness in its dialect, recorded
            if isinstance(e, asyncio.TimeoutError):
                message = f"generation timed out after {self.settings.generation_timeout_s:.0f}s"
            elif isinstance(e, (BackendError, InvalidRequestError)):
                message = str(e)
            else:
                message = f"{type(e).__name__}: {e}"
            response = self.error_response(dialect, DialectError(529, "overloaded", f"backend failed: {message}"))
            record = record.model_copy(
                update={
                    "finish_reason": FinishReason.error,
                    "call_error": message,
                    "finished_at": time.time(),
                    "policy_version": self.backend.policy_version,
                    "response_body": response.payload(),
                }
            )
            await self.writer.add_call(record)
            return response

        output_ids = result.output_ids
        text_ids = output_ids[:-1] if output_ids and output_ids[-1] in self._eos else output_ids
        parsed = parse_output(
            self.model.decode(text_ids),
            tool_format=self.model.tool_call_format,
            tools=conversation.tools,
            id_prefix=dialect.call_id_prefix,
        )
        if conversation.response_format is not None:
            parsed = as_json_reply(parsed)
        reply = Reply(
            id=dialect.new_reply_id(),
            model=request.model or self.settings.served_model,
            output=parsed,
            finish_reason=result.finish_reason,
            prompt_tokens=len(rendered.prompt_ids),
            completion_tokens=len(output_ids),
            created=int(started),
        )
        if request.stream:
            response = CallResponse(200, chunks=dialect.stream(reply, request))
        else:
            response = CallResponse(200, body=dialect.encode(reply, request))
        record = record.model_copy(
            update={
                "output_ids": output_ids,
                "output_logprobs": result.logprobs,
                "finish_reason": result.finish_reason,
                "policy_version": result.policy_version,
                "finished_at": time.time(),
                "timings": {**result.timings, "total_s": time.time() - started},
                "parse_error": parsed.parse_error,
                "response_body": response.payload(),
                # the reply's tool calls as parsed (behaviour analytics read them without the tokenizer)
                "metadata": {**record.metadata,
                             "tool_calls": [tc.model_dump(mode="json") for tc in parsed.tool_calls]},
            }
        )
        await self.writer.add_call(record)  # durable before the harness sees anything
        self.renderer.record(episode.id, index, rendered, output_ids, parsed, side_call=request.side_call)
        self._remember(episode.id, digest, response)
        return response

    # ---- helpers ------------------------------------------------------------------------------------
    def _sampling(self, requested: SamplingParams, prompt_len: int) -> SamplingParams:
        room = self.backend.max_context - prompt_len
        update = {"max_tokens": max(1, min(requested.max_tokens, self.settings.max_new_tokens, room))}
        if self.settings.temperature is not None:
            update["temperature"] = self.settings.temperature
        return requested.model_copy(update=update)

    def _remember(self, episode_id: str, digest: str, response: CallResponse) -> None:
        cache = self._replays.setdefault(episode_id, OrderedDict())
        cache[digest] = response
        while len(cache) > self.settings.replay_cache_per_episode:
            cache.popitem(last=False)

    def _segments_used(self, episode_id: str) -> int:
        calls = self.registry.store.list_calls(episode_id)
        return 1 + max((c.segment for c in calls), default=-1)

    def forget(self, episode_id: str) -> None:
        self.renderer.forget(episode_id)
        self._replays.pop(episode_id, None)

    @staticmethod
    def error_response(dialect: Dialect, err: DialectError) -> CallResponse:
        status, body = dialect.error(err)
        return CallResponse(status, body=body)
