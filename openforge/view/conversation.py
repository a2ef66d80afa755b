"""An episode's calls read back as a conversation, call by call: what the harness sent (its request decoded by
its own dialect) and what the policy sampled. The episode page and the ATIF export both read episodes this way.

A harness sends its whole conversation on every call, so each call shows only what is new since the previous
call of its continuity segment: the messages after the previous request and the reply the harness echoed back.
The first call of a segment (after a break: a sub-agent, a compaction, ...) shows its whole request. A request
whose earlier messages differ from what the segment's previous call sent is marked `rewritten`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openforge.core import CallRecord, Conversation, Message, ParsedOutput, ToolSpec
from openforge.dialects import DIALECTS
from openforge.dialects.base import AUDIO_PLACEHOLDER, FILE_PLACEHOLDER, IMAGE_PLACEHOLDER
from openforge.view.tokentext import TokenText

# What a dialect put where the harness sent an image, a file or audio (the policy reads text only): shown marked.
MEDIA_PLACEHOLDERS = (IMAGE_PLACEHOLDER, FILE_PLACEHOLDER, AUDIO_PLACEHOLDER)


@dataclass
class Turn:
    """One call of an episode, read back."""

    call: CallRecord
    request: Conversation | None  # the request as the harness sent it; None when it cannot be decoded
    decode_error: str | None = None
    opens_segment: bool = False  # the first call of its segment (or a side call): its whole request is new
    new_messages: list[Message] = field(default_factory=list)  # what this call added to its segment
    repeated: int = 0  # messages of the request already shown with an earlier call of the segment
    rewritten: bool = False  # the harness changed messages the segment's previous call had sent
    system: str | None = None  # set when it differs from the segment's previous call (or opens the segment)
    tools: list[ToolSpec] | None = None  # likewise
    reply: ParsedOutput | None = None  # the sampled output, parsed as the proxy parsed it (needs the tokenizer)
    reply_text: str | None = None  # the sampled output decoded, control tokens kept
    echoed: Message | None = None  # the reply as the harness sent it back with the segment's next call


def _same(a: Message, b: Message) -> bool:
    # harnesses may rewrite tool-call ids and cache markers; the proxy ignores both, and so does this view
    return (
        a.role == b.role
        and a.content == b.content
        and a.reasoning == b.reasoning
        and [(t.name, t.arguments) for t in a.tool_calls] == [(t.name, t.arguments) for t in b.tool_calls]
    )


def _common_prefix(a: list[Message], b: list[Message]) -> int:
    n = 0
    for x, y in zip(a, b):
        if not _same(x, y):
            break
        n += 1
    return n


def decode_request(call: CallRecord) -> tuple[Conversation | None, str | None]:
    dialect = DIALECTS.get(call.dialect)
    if dialect is None:
        return None, f"unknown dialect {call.dialect!r}"
    if not call.request_body:
        return None, "no request body recorded"
    try:
        return dialect.decode(call.request_body).conversation, None
    except Exception as e:  # noqa: BLE001 - any body that does not decode is shown as such, not a 500
        return None, f"{type(e).__name__}: {e}"


def read_turns(calls: list[CallRecord], tokens: TokenText | None = None) -> list[Turn]:
    """The episode's calls (any order) as turns, in call order."""
    turns = []
    last_in_segment: dict[int, Turn] = {}
    for call in sorted(calls, key=lambda c: c.index):
        request, error = decode_request(call)
        turn = Turn(call, request, error)
        turns.append(turn)
        if tokens is not None and call.output_ids:
            turn.reply_text = tokens.decode(call.output_ids)
            turn.reply = tokens.parse_reply(call.output_ids, request.tools if request else [])
        if request is None:
            continue
        previous = None if call.side_call else last_in_segment.get(call.segment)
        if previous is None or previous.request is None:
            turn.new_messages = list(request.messages)
            turn.system, turn.tools = request.system, list(request.tools)
            turn.opens_segment = True
        else:
            _continue(previous, previous.request, turn, request)
        if not call.side_call:
            last_in_segment[call.segment] = turn
    return turns


def _continue(previous: Turn, asked_before: Conversation, turn: Turn, asked: Conversation) -> None:
    """What `turn` (asking `asked`) adds to `previous`, the turn before it in its segment (asking `asked_before`)."""
    before, now = asked_before.messages, asked.messages
    common = _common_prefix(before, now)
    start = common
    if common == len(before):
        if start < len(now) and now[start].role == "assistant":
            previous.echoed = now[start]  # the previous reply, as the harness kept it
            start += 1
    else:
        turn.rewritten = True
    turn.new_messages = list(now[start:])
    turn.repeated = start
    if asked.system != asked_before.system:
        turn.system = asked.system
    if [t.name for t in asked.tools] != [t.name for t in asked_before.tools]:
        turn.tools = list(asked.tools)


def reply_of(turn: Turn) -> ParsedOutput | None:
    """What the policy answered: the parsed sample (with the tool-call ids the harness saw, when it echoed the
    reply back), else the reply as the harness echoed it."""
    if turn.reply is not None:
        echoed = turn.echoed.tool_calls if turn.echoed is not None else []
        mine = turn.reply.tool_calls
        if echoed and [t.name for t in echoed] == [t.name for t in mine]:
            calls = [t.model_copy(update={"id": e.id}) for t, e in zip(mine, echoed)]
            return turn.reply.model_copy(update={"tool_calls": calls})
        return turn.reply
    if turn.echoed is not None:
        return ParsedOutput(
            reasoning=turn.echoed.reasoning, content=turn.echoed.content, tool_calls=list(turn.echoed.tool_calls)
        )
    return None
