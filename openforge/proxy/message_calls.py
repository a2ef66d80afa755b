"""One model call served by a message-level backend (a model behind an API: `openforge.inference.upstream`).

The proxy still owns the episode: the key, the call's index, the record committed before the reply is sent
(docs/design.md, invariant 2), the reply in the harness's own dialect (JSON, or the dialect's stream of the
finished reply). What it cannot own are the tokens: the upstream model never saw the student's ids, so the
record holds none (`prompt_ids` and `output_ids` empty) and says so under `metadata["message_level"]`, with
the reply as the upstream gave it — text, tool calls, reasoning — and the upstream's own token counts. The
conversation is the request body, decoded by its dialect. SFT re-renders such records with the student's
template and tokenizer (`openforge.train.rerender`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from openforge.core import CallRecord, Episode, FinishReason, ParsedOutput
from openforge.dialects import DecodedRequest, Dialect, DialectError, Reply
from openforge.inference import MESSAGE_LEVEL, BackendError, GenerationContext, InvalidRequestError, MessageBackend
from openforge.proxy.calls import CallResponse
from openforge.proxy.reply import as_json_reply

if TYPE_CHECKING:
    from openforge.proxy.service import ProxyService


async def serve_message_call(
    service: ProxyService,
    backend: MessageBackend,
    dialect: Dialect,
    request: DecodedRequest,
    body: bytes,
    episode: Episode,
) -> CallResponse:

    conversation = request.conversation
    settings = service.settings
    update: dict[str, float] = {"max_tokens": min(conversation.sampling.max_tokens, settings.max_new_tokens)}
    update.update(settings.sampling_overrides())
    sampling = conversation.sampling.model_copy(update=update)
    images = await service.locate_images(body, request)
    index = service.registry.next_index(episode.id)
    await service.registry.running(episode)
    started = time.time()
    ctx = GenerationContext(
        episode_id=episode.id,
        call_index=index,
        side_call=request.side_call,
        conversation=conversation,
        task=service.registry.task_payload(episode),
    )
    record = CallRecord(
        episode_id=episode.id,
        index=index,
        prompt_ids=[],
        sampling=sampling,
        started_at=started,
        dialect=dialect.name,
        side_call=request.side_call,
        request_body=body,
        images=images,
    )
    try:
        result = await asyncio.wait_for(backend.complete(conversation, sampling, ctx), settings.generation_timeout_s)
    except Exception as e:  # noqa: BLE001 - any upstream failure reaches the harness in its dialect, recorded
        if isinstance(e, asyncio.TimeoutError):
            message = f"the upstream model did not answer within {settings.generation_timeout_s:.0f}s"
        elif isinstance(e, (BackendError, InvalidRequestError)):
            message = str(e)
        else:
            message = f"{type(e).__name__}: {e}"
        response = service.error_response(dialect, DialectError(529, "overloaded", f"backend failed: {message}"))
        await service.writer.add_call(
            record.model_copy(
                update={
                    "finish_reason": FinishReason.error,
                    "call_error": message,
                    "finished_at": time.time(),
                    "response_body": response.payload(),
                    "metadata": {MESSAGE_LEVEL: {"backend": backend.spec}},
                }
            )
        )
        return response

    # tool-call ids in the harness's own style: the harness sends them back, and the next call sends them on
    calls = [c.model_copy(update={"id": dialect.new_call_id()}) for c in result.output.tool_calls]
    output = ParsedOutput(reasoning=result.output.reasoning, content=result.output.content, tool_calls=calls)
    if conversation.response_format is not None:
        output = as_json_reply(output)
    reply = Reply(
        id=dialect.new_reply_id(),
        model=request.model or service.served_model,
        output=output,
        finish_reason=result.finish_reason,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        created=int(started),
    )
    if request.stream:
        response = CallResponse(200, chunks=dialect.stream(reply, request))
    else:
        response = CallResponse(200, body=dialect.encode(reply, request))
    await service.writer.add_call(
        record.model_copy(
            update={  # durable before the harness sees anything
                "finish_reason": result.finish_reason,
                "finished_at": time.time(),
                "timings": {**result.timings, "total_s": time.time() - started},
                "parse_error": output.parse_error,
                "response_body": response.payload(),
                "metadata": {
                    MESSAGE_LEVEL: {
                        "backend": backend.spec,
                        "model": result.model,
                        "prompt_tokens": result.prompt_tokens,
                        "completion_tokens": result.completion_tokens,
                        "reply": output.model_dump(mode="json"),
                    },
                    "tool_calls": [tc.model_dump(mode="json") for tc in output.tool_calls],
                },
            }
        )
    )
    return response
