"""One model call, end to end: key → decode → render → generate → parse → record → encode.

The order matters for the invariants of docs/design.md:
- the prompt is rendered by the continuity renderer, so earlier sampled ids are reused, never re-tokenized;
- a call is committed to the store before the harness can see it complete (invariant 2): a JSON reply before
  its first byte, a streamed reply before its last events (stop reason, usage and the terminator
  `message_stop` / `response.completed` / `[DONE]`) — its text streams out as it is sampled;
- a request rejected before sampling (bad body, unknown key, prompt too long) leaves no row behind;
- a backend failure is recorded with its error and reaches the harness in the dialect's own error shape.

Nothing here may hold up the event loop, which serves every episode: large bodies are decoded, and prompts
rendered, in worker threads; a prompt that cannot fit the context is refused from its character count before
anything is tokenized; each call runs as its own task (`calls.py`), followed by the connections that want it.
A message-level backend (a model behind an API) takes the one other path, `message_calls.py`: no token ids.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from openforge.core import CallImage, CallRecord, Conversation, Episode, FinishReason, SamplingParams
from openforge.dialects import DecodedRequest, Dialect, DialectError, ReplyStart
from openforge.inference import (
    Backend,
    BackendError,
    GenerationContext,
    GenerationResult,
    InvalidRequestError,
    MessageBackend,
    PromptTooLongError,
    SampledToken,
)
from openforge.models import ModelDir, ModelDirError
from openforge.proxy.calls import CallJob, CallJobs, CallResponse
from openforge.proxy.continuity import ContinuityRenderer, RenderedPrompt
from openforge.proxy.episodes import EpisodeRegistry
from openforge.proxy.images import call_images, oversized
from openforge.proxy.message_calls import serve_message_call
from openforge.proxy.reply import ReplyContext, StreamedReply, whole_reply
from openforge.proxy.settings import (  # re-exported: the proxy's settings were declared here before
    DEFAULT_MAX_NEW_TOKENS,
    RUN_OWNED_SETTINGS,
    ProxyOptions,
    ProxySettings,
    RunProxyOptions,
    check_proxy_options,
)
from openforge.store.writer import AsyncCallWriter

# Bodies above this are decoded in a worker thread (parsing 10 MB of JSON takes the loop ~0.1 s).
_DECODE_IN_THREAD_BYTES = 256 * 1024
# Requests up to this size render on the loop (~1 ms for a few thousand tokens); larger ones in a worker thread.
_RENDER_ON_LOOP_BYTES = 16 * 1024


class PauseGate:
    """New calls wait while the gate is closed (weights are changing); `close()` waits for calls in flight."""

    def __init__(self) -> None:
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


@dataclass
class PreparedCall:
    """A call ready to generate: its request, rendered prompt, sampling and the record started for it."""

    dialect: Dialect
    request: DecodedRequest
    episode: Episode
    rendered: RenderedPrompt
    sampling: SamplingParams
    record: CallRecord
    context: GenerationContext


class _Idle:
    """What `_paced` yields when the backend has said nothing for a while."""


IDLE = _Idle()


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
        # the model name reported to harnesses (and sent back by them): the model directory's by default
        self.served_model: str = model.path.name if settings.served_model is None else settings.served_model
        self.settings = settings.model_copy(update={"served_model": self.served_model})
        self.renderer = ContinuityRenderer(model)
        self.gate = PauseGate()
        self.calls = CallJobs(keep=settings.replay_cache_per_episode)
        self._render_locks: dict[str, asyncio.Lock] = {}
        self._large_decodes = asyncio.Semaphore(1)

    # ---- the call -----------------------------------------------------------------------------------
    async def handle(self, dialect: Dialect, body: bytes, episode: Episode) -> CallResponse:
        try:
            request = await self.decode(dialect, body)
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
        too_large = oversized(request.images, self.settings.max_image_bytes)
        if too_large is not None:
            return self.error_response(dialect, too_large)
        if len(body) > _DECODE_IN_THREAD_BYTES:  # hashing releases the interpreter's lock: off the loop
            digest = await asyncio.to_thread(lambda: hashlib.sha256(body).hexdigest())
        else:
            digest = hashlib.sha256(body).hexdigest()
        job = self.calls.find(episode.id, digest)
        if job is not None:  # the same body again: a retry; it shares the call's reply
            return await self._respond(job, replayed=True)
        if self.calls.in_flight(episode.id) >= self.settings.max_calls_in_flight_per_episode:
            limit = self.settings.max_calls_in_flight_per_episode
            response = self.error_response(
                dialect,
                DialectError(
                    429, "rate_limit", f"this episode already has {limit} calls in flight; retry when one has finished"
                ),
            )
            response.headers["retry-after"] = "1"
            return response
        job = self.calls.start(
            CallJob(episode.id, digest, request.stream), lambda job: self._call(job, dialect, request, body, episode)
        )
        return await self._respond(job)

    async def decode(self, dialect: Dialect, body: bytes, *, for_count: bool = False) -> DecodedRequest:
        """The request, decoded. A large body is decoded in a worker thread, one at a time: parsing JSON holds
        the interpreter's lock while it runs, so several 16 MB bodies at once would still stall the loop."""
        if len(body) > _DECODE_IN_THREAD_BYTES:
            async with self._large_decodes:
                return await asyncio.to_thread(dialect.decode, body, for_count=for_count)
        return dialect.decode(body, for_count=for_count)

    async def _respond(self, job: CallJob, replayed: bool = False) -> CallResponse:
        """What a connection sends for `job`: its JSON outcome, or (streamed) its events followed live."""
        if not job.streamed:
            response = await job.outcome()
        else:
            await job.until_started()
            if not job.started:  # over before its first event: an error with its own HTTP status
                response = await job.outcome()
            else:
                response = CallResponse(200, stream=job.follow())
        if replayed:
            response = CallResponse(
                response.status,
                response.body,
                response.chunks,
                dict(response.headers),
                replayed=True,
                stream=response.stream,
            )
        return response

    async def _call(
        self, job: CallJob, dialect: Dialect, request: DecodedRequest, body: bytes, episode: Episode
    ) -> None:
        await self.gate.enter()
        try:
            if isinstance(self.backend, MessageBackend):  # a model behind an API: messages, no token ids
                response = await serve_message_call(self, self.backend, dialect, request, body, episode)
                job.finish(response, failed=response.status != 200)
                return
            prepared = await self._prepare(dialect, request, body, episode)
            if isinstance(prepared, CallResponse):
                job.finish(prepared, failed=True)
                return
            await self._serve(job, prepared)
        except asyncio.CancelledError:
            if not job.done:  # the episode ended: the harness never sees this call complete; nothing is recorded
                if job.started:
                    job.emit([dialect.error_stream(DialectError(529, "overloaded", "the episode ended"))])
                job.finish(
                    self.error_response(dialect, DialectError(529, "overloaded", "the episode ended")), failed=True
                )
            raise
        finally:
            self.gate.leave()

    async def _prepare(
        self, dialect: Dialect, request: DecodedRequest, body: bytes, episode: Episode
    ) -> PreparedCall | CallResponse:
        """Render the prompt and check the request; a CallResponse when the request is refused (no row)."""
        conversation = request.conversation
        floor = self.token_floor(conversation)
        if floor >= self.backend.max_context:
            return self.error_response(
                dialect,
                DialectError(
                    400,
                    "prompt_too_long",
                    f"prompt is too long: at least {floor} tokens > {self.backend.max_context} maximum",
                ),
            )
        try:
            rendered = await self._render(episode, conversation, request.side_call, len(body))
        except ModelDirError as e:  # the template refused the conversation, or cut a string in it
            return self.error_response(
                dialect, DialectError.invalid(f"the model's chat template cannot render this conversation: {e}")
            )
        sampling = self._sampling(conversation.sampling, len(rendered.prompt_ids))
        try:
            self.backend.check_request(rendered.prompt_ids, sampling)
        except PromptTooLongError as e:
            return self.error_response(dialect, DialectError(400, "prompt_too_long", str(e)))
        except InvalidRequestError as e:
            return self.error_response(dialect, DialectError(400, "invalid_request", str(e)))

        images = await self.locate_images(body, request)
        index = self.registry.next_index(episode.id)
        await self.registry.running(episode)
        started = time.time()
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
            images=images,
            metadata={"reused_prompt_tokens": rendered.reused_tokens, "extends_call": rendered.extends_call},
        )
        context = GenerationContext(
            episode_id=episode.id,
            call_index=index,
            side_call=request.side_call,
            conversation=conversation,
            task=self.registry.task_payload(episode),
        )
        return PreparedCall(dialect, request, episode, rendered, sampling, record, context)

    async def _serve(self, job: CallJob, call: PreparedCall) -> None:
        """Generate, stream, record, finish."""
        dialect, request = call.dialect, call.request
        head = ReplyStart(
            id=dialect.new_reply_id(),
            model=request.model or self.served_model,
            created=int(call.record.started_at),
            prompt_tokens=len(call.rendered.prompt_ids),
        )
        context = ReplyContext(dialect, request, self.model, head)
        streamed = StreamedReply(context, self.model.decode(call.rendered.prompt_ids[-8:])) if request.stream else None
        result: GenerationResult | None = None
        first_token_s: float | None = None
        try:
            async with asyncio.timeout(self.settings.generation_timeout_s):
                async for item in self._generation(call):  # the one place where generation happens
                    if isinstance(item, GenerationResult):
                        result = item
                    elif isinstance(item, _Idle):
                        if streamed is not None:  # (always: the backend is paced only for a streamed reply)
                            job.emit(streamed.keepalive())
                    else:
                        if first_token_s is None:
                            first_token_s = time.time() - call.record.started_at
                        if streamed is not None:
                            job.emit(streamed.token(item.id))
            if result is None:
                raise BackendError("the backend finished without a result")
        except Exception as e:  # noqa: BLE001 - any backend failure reaches the harness in its dialect, recorded
            await self._fail(job, call, e, head.id)
            return

        if streamed is None:
            reply, body = whole_reply(context, result)
            final: list[bytes] = []
            response = CallResponse(200, body=body)
        else:
            reply, final = streamed.finish(result)
            response = CallResponse(200, chunks=[b"".join(job.events + final)])  # the whole stream, one blob
        timings = {**result.timings, "total_s": time.time() - call.record.started_at}
        if first_token_s is not None and streamed is not None:
            timings["first_token_s"] = first_token_s
        record = call.record.model_copy(
            update={
                "output_ids": result.output_ids,
                "output_logprobs": result.logprobs,
                "finish_reason": result.finish_reason,
                "policy_version": result.policy_version,
                "finished_at": time.time(),
                "timings": timings,
                "parse_error": reply.output.parse_error,
                "response_body": response.payload(),
                # the reply's tool calls as parsed (behaviour analytics read them without the tokenizer)
                "metadata": {
                    **call.record.metadata,
                    "streamed": streamed is not None,
                    "tool_calls": [tc.model_dump(mode="json") for tc in reply.output.tool_calls],
                },
            }
        )
        # durable before the harness can see the call complete
        await self.writer.add_call(record, alone=self.calls.running == 1)
        async with self._render_lock(call.episode.id):
            self.renderer.record(
                call.episode.id,
                record.index,
                call.rendered,
                result.output_ids,
                reply.output,
                side_call=request.side_call,
            )
        job.emit(final)
        job.finish(response)

    async def _generation(self, call: PreparedCall) -> AsyncIterator[SampledToken | GenerationResult | _Idle]:
        """The backend's output for the call: for a JSON reply, its result once generated; for a stream, each
        token as it is sampled, with `IDLE` whenever the backend has been quiet (first after `stream_start_s`,
        then every `stream_keepalive_s`)."""
        if not call.request.stream:
            yield await self.backend.generate(call.rendered.prompt_ids, call.sampling, call.context)
            return
        source = self.backend.stream(call.rendered.prompt_ids, call.sampling, call.context)
        async for item in _paced(source, self.settings.stream_start_s, self.settings.stream_keepalive_s):
            yield item

    async def _fail(self, job: CallJob, call: PreparedCall, error: Exception, reply_id: str) -> None:
        """Record a failed generation and end the call in the dialect's error shape: an error status when
        nothing was streamed yet, else an error event ending the stream."""
        if isinstance(error, TimeoutError):
            message = f"generation timed out after {self.settings.generation_timeout_s:.0f}s"
        elif isinstance(error, (BackendError, InvalidRequestError)):
            message = str(error)
        else:
            message = f"{type(error).__name__}: {error}"
        err = DialectError(529, "overloaded", f"backend failed: {message}")
        if job.started:
            final = [call.dialect.error_stream(err, response_id=reply_id)]
            response = CallResponse(200, chunks=[b"".join(job.events + final)])
        else:
            final, response = [], self.error_response(call.dialect, err)
        record = call.record.model_copy(
            update={
                "finish_reason": FinishReason.error,
                "call_error": message,
                "finished_at": time.time(),
                "policy_version": self.backend.policy_version,
                "response_body": response.payload(),
            }
        )
        await self.writer.add_call(record)
        job.emit(final)
        job.finish(response, failed=True)

    # ---- helpers ------------------------------------------------------------------------------------
    async def locate_images(self, body: bytes, request: DecodedRequest) -> list[CallImage]:
        """The request's images for its record (`images.call_images`), off the loop for a large body."""
        if not request.images:
            return []
        if len(body) > _DECODE_IN_THREAD_BYTES:
            return await asyncio.to_thread(call_images, body, request.images)
        return call_images(body, request.images)

    def token_floor(self, conversation: Conversation) -> int:
        """A lower bound on the prompt's length in tokens, from character counts alone: each token of the
        conversation's text covers at most `ModelDir.max_token_chars` characters. Cheap enough for any body."""
        chars = len(conversation.system or "")
        for message in conversation.messages:
            chars += len(message.content) + len(message.reasoning or "")
        return chars // self.model.max_token_chars

    async def _render(
        self, episode: Episode, conversation: Conversation, side_call: bool, body_bytes: int
    ) -> RenderedPrompt:
        """The continuity renderer; one render per episode at a time, since it reads and updates the episode's
        threads. A long prompt takes seconds to render and tokenize, so it goes to a worker thread; a short one
        renders here, in less time than the hop to a thread and back costs."""
        async with self._render_lock(episode.id):
            if self.registry.calls_before_this_process(episode.id):
                used = await asyncio.to_thread(self._segments_used, episode.id)
                self.renderer.mark_unknown(episode.id, next_segment=used)
            if body_bytes <= _RENDER_ON_LOOP_BYTES:
                return self.renderer.render(episode.id, conversation, side_call)
            return await asyncio.to_thread(self.renderer.render, episode.id, conversation, side_call)

    def _render_lock(self, episode_id: str) -> asyncio.Lock:
        return self._render_locks.setdefault(episode_id, asyncio.Lock())

    def _sampling(self, requested: SamplingParams, prompt_len: int) -> SamplingParams:
        room = self.backend.max_context - prompt_len
        update: dict[str, float] = {"max_tokens": max(1, min(requested.max_tokens, self.settings.max_new_tokens, room))}
        update.update(self.settings.sampling_overrides())
        return requested.model_copy(update=update)

    def _segments_used(self, episode_id: str) -> int:
        calls = self.registry.store.list_calls(episode_id)
        return 1 + max((c.segment for c in calls), default=-1)

    def forget(self, episode_id: str) -> None:
        """The episode ended: its calls still generating are stopped (the harness will not see them complete,
        so nothing of them is recorded), and its per-episode state is dropped."""
        for job in self.calls.forget(episode_id):
            if job.task is not None:
                job.task.cancel()
        self.renderer.forget(episode_id)
        self._render_locks.pop(episode_id, None)

    @staticmethod
    def error_response(dialect: Dialect, err: DialectError) -> CallResponse:
        status, body = dialect.error(err)
        return CallResponse(status, body=body)


async def _paced(source: AsyncIterator, first_wait: float, interval: float) -> AsyncIterator:
    """`source`'s items, with `IDLE` after `first_wait` seconds without one, then every `interval` seconds.
    Closing this closes `source` (which stops the generation).

    One task reads `source` for the whole call and hands its items over through a queue; the reader waits on a
    future with one timer only when nothing is queued. (A task and an `asyncio.wait` per item cost about a
    tenth of a short call's CPU in the proxy.)"""
    loop = asyncio.get_running_loop()
    queued: deque[tuple[bool, object]] = deque()  # (True, item) | (False, None): the end | (False, error)
    waiter: asyncio.Future[None] | None = None

    def put(entry: tuple[bool, object]) -> None:
        queued.append(entry)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def pump() -> None:
        try:
            async for item in source:
                put((True, item))
        except BaseException as e:  # handed to the reader, which raises it (so a reader never waits on a dead pump)
            put((False, e))
            if not isinstance(e, Exception):
                raise
        else:
            put((False, None))

    producer = asyncio.ensure_future(pump())
    wait = first_wait
    try:
        while True:
            if not queued:
                waiter = loop.create_future()
                timer = loop.call_later(wait, _wake, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
                    waiter = None
                if not queued:
                    wait = interval
                    yield IDLE
                    continue
            more, value = queued.popleft()
            if more:
                yield value
            elif value is None:
                return
            else:
                assert isinstance(value, BaseException)
                raise value
    finally:
        if not producer.done():
            producer.cancel()
            try:
                await producer
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - it is being stopped
                pass
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "IDLE",
    "RUN_OWNED_SETTINGS",
    "PauseGate",
    "PreparedCall",
    "ProxyOptions",
    "ProxyService",
    "ProxySettings",
    "RunProxyOptions",
    "check_proxy_options",
]
