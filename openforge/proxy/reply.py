"""One reply as the backend writes it: sampled ids → text → reasoning / text / tool calls → the dialect's events.

`StreamedReply` is the streamed path: each token goes through the incremental detokenizer and the output
parser (`output_parser.py`), and what they release goes out as the dialect's deltas at once. `finish` closes
the parse, and what it returns — the parsed output and the stream's last events (tool calls, stop reason,
usage, the terminator) — is what the proxy records *before* sending those last events (docs/design.md,
invariant 2). A non-streamed reply is parsed whole once generation has finished (`whole_reply`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from openforge.core import FinishReason, ParsedOutput
from openforge.dialects import DecodedRequest, Dialect, Reply, ReplyStart
from openforge.inference import GenerationResult
from openforge.models import ModelDir
from openforge.proxy.detokenizer import IncrementalDetokenizer
from openforge.proxy.output_parser import Delta, OutputParser, parse_output, prompt_opens_reasoning


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


@dataclass
class ReplyContext:
    """What every reply of a call needs to know."""

    dialect: Dialect
    request: DecodedRequest
    model: ModelDir
    head: ReplyStart

    def reply(self, parsed: ParsedOutput, finish_reason: FinishReason, completion_tokens: int) -> Reply:
        head = self.head
        return Reply(
            id=head.id,
            model=head.model,
            output=parsed,
            finish_reason=finish_reason,
            prompt_tokens=head.prompt_tokens,
            completion_tokens=completion_tokens,
            created=head.created,
        )


def text_ids(model: ModelDir, output_ids: list[int]) -> list[int]:
    """The sampled ids that are text: all but a closing end-of-turn token."""
    return output_ids[:-1] if output_ids and output_ids[-1] in model.eos_token_ids else output_ids


def whole_reply(ctx: ReplyContext, result: GenerationResult) -> tuple[Reply, dict]:
    """A non-streamed reply: the whole output parsed at once, and the response body."""
    model, request = ctx.model, ctx.request
    parsed = parse_output(
        model.decode(text_ids(model, result.output_ids)),
        tool_format=model.tool_call_format,
        tools=request.conversation.tools,
        id_prefix=ctx.dialect.call_id_prefix,
    )
    if request.conversation.response_format is not None:
        parsed = as_json_reply(parsed)
    reply = ctx.reply(parsed, result.finish_reason, len(result.output_ids))
    return reply, ctx.dialect.encode(reply, request)


class StreamedReply:
    """A streamed reply, token by token. `prompt_tail` is the end of the rendered prompt (does it open the
    reasoning?)."""

    def __init__(self, ctx: ReplyContext, prompt_tail: str):
        self.ctx = ctx
        model, request = ctx.model, ctx.request
        self.detokenizer = IncrementalDetokenizer(model.decode, skip=set(model.eos_token_ids))
        self.parser = OutputParser(
            model.tool_call_format,
            request.conversation.tools,
            ctx.dialect.call_id_prefix,
            reasoning=True if prompt_opens_reasoning(prompt_tail, model.tool_call_format) else None,
        )
        self.encoder = ctx.dialect.stream_encoder(ctx.head, request)
        # a JSON reply can only be checked whole: its text goes out at the end
        self.hold_text = request.conversation.response_format is not None
        self.started = False

    def start(self) -> list[bytes]:
        self.started = True
        return self.encoder.start()

    def keepalive(self) -> list[bytes]:
        return self.encoder.keepalive() if self.started else self.start()

    def token(self, token_id: int) -> list[bytes]:
        """The events this token releases (often none: a partial character, held whitespace, tool markup)."""
        events = [] if self.started else self.start()
        text = self.detokenizer.add(token_id)
        return events + (self._encode(self.parser.feed(text)) if text else [])

    def finish(self, result: GenerationResult) -> tuple[Reply, list[bytes]]:
        """The finished reply and the stream's remaining events, terminator included. The parse is the one
        whose deltas went out; the decode of all the ids is compared with the deltas' text."""
        events = [] if self.started else self.start()
        events += self._encode(self.parser.feed(self.detokenizer.flush()) + self.parser.close())
        parsed = self.parser.output()
        if self.hold_text:
            parsed = as_json_reply(parsed)
            events += self.encoder.text(parsed.content) if parsed.content else []
        whole = self.ctx.model.decode(text_ids(self.ctx.model, result.output_ids))
        if whole != self.detokenizer.text:  # never seen; the ids stay the truth, the record says so
            note = "the streamed text differs from the decode of the sampled ids"
            parsed = parsed.model_copy(
                update={"parse_error": f"{parsed.parse_error}; {note}" if parsed.parse_error else note}
            )
        reply = self.ctx.reply(parsed, result.finish_reason, len(result.output_ids))
        return reply, events + self.encoder.finish(reply)

    def _encode(self, deltas: list[Delta]) -> list[bytes]:
        events: list[bytes] = []
        for kind, delta in deltas:
            if kind == "reasoning":
                events += self.encoder.reasoning(delta)
            elif not self.hold_text:
                events += self.encoder.text(delta)
        return events
