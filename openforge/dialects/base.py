"""The contract every dialect module implements: wire bytes ⇄ canonical types, and nothing about tokens.

A dialect turns a harness's request body into a `DecodedRequest` (a canonical `Conversation` plus the few
wire facts the reply needs), and turns the proxy's `Reply` back into that harness's response body, SSE
event stream, or error shape. Each dialect also declares what belongs to its wire format and nowhere else:
the paths it is served on (`routes`, `count_routes`) and the prefixes of the ids it mints. The proxy
(routing, episodes, rendering, recording), `openforge serve-model` and the harness tests' stub model API
sit on top; this room depends on `openforge.core` only.
"""

from __future__ import annotations

import abc
import secrets
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from openforge.core import Conversation, FinishReason, Message, ParsedOutput
from openforge.core.json_types import JSONObject
from openforge.dialects import wire
from openforge.dialects.errors import DialectError
from openforge.dialects.images import IMAGE_PLACEHOLDER as IMAGE_PLACEHOLDER  # named with the others here
from openforge.dialects.images import RequestImage

# How several text blocks / content parts of one wire message become one canonical `content` string.
# One separator for every dialect, so the same conversation reads the same whichever API carried it.
BLOCK_SEPARATOR = "\n\n"

# What a file or audio input becomes: the policy reads text only, and refusing the whole request would end a
# harness's episode over one attachment. Images are decoded and kept (`images.py`, IMAGE_PLACEHOLDER).
FILE_PLACEHOLDER = "[file omitted: this model reads text only]"
AUDIO_PLACEHOLDER = "[audio omitted: this model reads text only]"


def new_id(prefix: str) -> str:
    """A fresh id in the API's style: the dialect's prefix and 24 random hex digits."""
    return f"{prefix}{secrets.token_hex(12)}"


@dataclass(frozen=True)
class ToolRoute:
    """How a call to one canonical tool goes back on the wire (OpenAI Responses only).

    Responses `namespace` tools are flattened into canonical tools named `namespace.name`; a call to one
    must come back as `{"namespace": ..., "name": ...}`. Freeform `custom` tools take a raw string, which
    the canonical call carries as `arguments["input"]`.
    """

    name: str
    namespace: str | None = None
    kind: Literal["function", "custom"] = "function"


@dataclass
class DecodedRequest:
    """A harness request in canonical form, plus the wire facts the reply needs.

    - `side_call`: no tools were offered (title generation, summaries, small-model calls).
    - `max_tokens_requested`: the harness's own limit (`max_tokens`, `max_output_tokens`,
      `max_completion_tokens`), None when it set none; `conversation.sampling.max_tokens` holds it too
      (or the canonical default) — the proxy clamps it to what the context allows.
    - `include_usage`: Chat Completions `stream_options.include_usage` (the other dialects always report usage).
    - `tool_choice`: "auto" | "none" | "required" | "tool" (then `forced_tool` names the tool).
    - `reasoning_requested`: the harness asked for thinking (True), asked for none (False), or did not say.
    - `dropped_tools`: server-side / built-in tools the request offered that OpenForge cannot run
      (web search, hosted shells): they are not in `conversation.tools`.
    - `tool_routes`: Responses only, canonical tool name → how to encode a call to it.
    - `images`: the request's images in body order (decoded bytes of inline ones, `images.RequestImage`); each
      message holds references to its own (`Message.images`).
    - `raw`: the parsed JSON body.
    """

    conversation: Conversation
    model: str
    dialect: str
    stream: bool = False
    include_usage: bool = False
    side_call: bool = False
    max_tokens_requested: int | None = None
    tool_choice: Literal["auto", "none", "required", "tool"] = "auto"
    forced_tool: str | None = None
    parallel_tool_calls: bool = True
    reasoning_requested: bool | None = None
    dropped_tools: list[str] = field(default_factory=list)
    tool_routes: dict[str, ToolRoute] = field(default_factory=dict)
    images: list[RequestImage] = field(default_factory=list, repr=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Reply:
    """What the proxy hands a dialect to encode: one finished model turn.

    `id` is unique per reply (Claude Code merges replies that share an id); tool-call ids inside `output`
    are the proxy's too. `stop_sequence` names the stop string that ended the turn, if one did;
    `reasoning_tokens` is how many of `completion_tokens` were reasoning (0 when unknown).
    """

    id: str
    model: str
    output: ParsedOutput
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    created: int
    stop_sequence: str | None = None
    reasoning_tokens: int = 0

    @property
    def truncated(self) -> bool:
        """The turn ended because it ran out of tokens, not because the model finished it."""
        return self.finish_reason == FinishReason.length

    @property
    def start(self) -> ReplyStart:
        return ReplyStart(id=self.id, model=self.model, created=self.created, prompt_tokens=self.prompt_tokens)


@dataclass
class DecodedReply:
    """A model API's reply read back into canonical form: what a model behind that API said (a teacher or a
    generator behind an upstream API, `openforge.inference.upstream`). `output`'s tool-call ids are the
    API's own; token counts are the API's `usage` (0 when it gave none); `model` is the model that answered."""

    output: ParsedOutput
    finish_reason: FinishReason
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


@dataclass(frozen=True)
class ReplyStart:
    """What a stream's opening events say about a reply, known before the model has written anything."""

    id: str
    model: str
    created: int
    prompt_tokens: int


class StreamEncoder(abc.ABC):
    """One reply's SSE events, written while the reply is produced.

    Call `start()` once; then `reasoning(delta)` and `text(delta)` in the order the model wrote them
    (reasoning first; an empty reasoning delta opens the reasoning part of a reply whose reasoning is empty),
    and `keepalive()` whenever nothing else has been sent for a while; then `finish(reply)` with the finished
    reply, whose output says what the deltas said: it adds the tool calls, the stop reason, usage and the
    stream's terminator. Each call returns complete events.
    """

    def __init__(self, start: ReplyStart, request: DecodedRequest, chunk_chars: int | None):
        self.head = start
        self.request = request
        self.chunk_chars = chunk_chars

    @abc.abstractmethod
    def start(self) -> list[bytes]: ...

    @abc.abstractmethod
    def reasoning(self, delta: str) -> list[bytes]: ...

    @abc.abstractmethod
    def text(self, delta: str) -> list[bytes]: ...

    @abc.abstractmethod
    def finish(self, reply: Reply) -> list[bytes]: ...

    def keepalive(self) -> list[bytes]:
        """Events that say "still working" while nothing else is sent (a long prefill, a tool call being
        written), so that a client's idle timeout does not fire. This default is an SSE comment, which every
        SSE client skips; dialects with an event for it override it."""
        return [wire.sse_comment("keep-alive")]


class Dialect(abc.ABC):
    """One wire format. Instances are stateless; `DIALECTS` holds one of each."""

    name: ClassVar[str]
    # The paths this format is served on (one declaration: the proxy, serve-model and the stub read it).
    # A server may mount them under a prefix (the proxy's `/e/{key}`).
    routes: ClassVar[tuple[str, ...]]  # model calls
    count_routes: ClassVar[tuple[str, ...]] = ()  # token counts (`encode_count` answers them)
    reply_id_prefix: ClassVar[str]  # `msg_`, `resp_`, `chatcmpl-`
    call_id_prefix: ClassVar[str]  # tool-call ids: `toolu_`, `call_`

    def new_reply_id(self) -> str:
        return new_id(self.reply_id_prefix)

    def new_call_id(self) -> str:
        return new_id(self.call_id_prefix)

    @abc.abstractmethod
    def decode(self, body: bytes, *, for_count: bool = False) -> DecodedRequest:
        """Parse and check a request body. Raises `DialectError` (400) naming the field at fault.

        `for_count`: the body is a token-count request (Anthropic `count_tokens`), so generation-only
        fields such as `max_tokens` are not required.
        """

    @abc.abstractmethod
    def encode(self, reply: Reply, request: DecodedRequest) -> JSONObject:
        """The non-streaming response body."""

    @abc.abstractmethod
    def stream_encoder(
        self, start: ReplyStart, request: DecodedRequest, *, chunk_chars: int | None = None
    ) -> StreamEncoder:
        """An encoder for one streamed reply. `chunk_chars` splits the tool arguments it writes into deltas of
        at most that many characters (None: one delta each)."""

    def stream(self, reply: Reply, request: DecodedRequest, *, chunk_chars: int | None = None) -> list[bytes]:
        """The complete SSE stream for a finished reply, terminator included, one event per item.

        `chunk_chars` splits text, reasoning and tool arguments into deltas of at most that many
        characters (None: one delta each) — the content is the same either way.
        """
        encoder = self.stream_encoder(reply.start, request, chunk_chars=chunk_chars)
        events = encoder.start()
        out = reply.output
        if out.reasoning is not None:
            for delta in list(wire.pieces(out.reasoning, chunk_chars)) or [""]:
                events += encoder.reasoning(delta)
        for delta in wire.pieces(out.content, chunk_chars):
            events += encoder.text(delta)
        return events + encoder.finish(reply)

    @abc.abstractmethod
    def error(self, err: DialectError) -> tuple[int, JSONObject]:
        """HTTP status and body of an error, in this dialect's own error shape."""

    @abc.abstractmethod
    def error_stream(self, err: DialectError, *, response_id: str | None = None) -> bytes:
        """An error as SSE, for a stream whose 200 status is already sent. `response_id` is used by
        dialects whose in-stream error carries a response object (Responses)."""

    def decode_reply(self, body: bytes | JSONObject) -> DecodedReply:
        """A non-streaming response body of this API (what `encode` writes) back in canonical form, for a client
        of an upstream model. The reply is read as the assistant turn a client sends back in its history, by
        the request decoder: one reading of the format. Raises `DialectError` naming the field at fault."""
        raise NotImplementedError(f"the {self.name} dialect cannot read replies yet")

    @staticmethod
    def _decoded_reply(
        turn: Message, *, cut: bool, usage: dict[str, Any], counts: tuple[str, str], model: str | None
    ) -> DecodedReply:
        """A `DecodedReply` from the assistant turn a reply decoded to; `counts` names the usage fields of the
        prompt and completion token counts."""
        return DecodedReply(
            output=ParsedOutput(reasoning=turn.reasoning, content=turn.content, tool_calls=turn.tool_calls),
            finish_reason=FinishReason.length if cut else FinishReason.stop,
            prompt_tokens=wire.opt_int(usage, counts[0], "usage", minimum=0) or 0,
            completion_tokens=wire.opt_int(usage, counts[1], "usage", minimum=0) or 0,
            model=model or "",
        )

    def encode_count(self, input_tokens: int) -> JSONObject:
        """The answer to a token-count request (served on `count_routes`)."""
        raise NotImplementedError(f"the {self.name} dialect has no token-count endpoint")

    @abc.abstractmethod
    def encode_request(
        self, conversation: Conversation, *, model: str = "openforge", stream: bool = False
    ) -> JSONObject:
        """The request body a client of this dialect would send for `conversation` (tests, teachers)."""

    def _decoded(self, data: dict[str, Any], conversation: Conversation, **facts: Any) -> DecodedRequest:
        """A `DecodedRequest` for `conversation`, with the facts every dialect reads the same way filled in."""
        stream = wire.opt_bool(data, "stream", "")
        return DecodedRequest(
            conversation=conversation,
            dialect=self.name,
            stream=stream,
            side_call=not conversation.tools,
            raw=data,
            **facts,
        )

    def __repr__(self) -> str:
        return f"<dialect {self.name}>"


def stop_kind(reply: Reply) -> Literal["length", "tool_calls", "stop_sequence", "stop"]:
    """Why the turn ended, in the terms every dialect maps from."""
    if reply.truncated:
        return "length"
    if reply.output.tool_calls:
        return "tool_calls"
    if reply.stop_sequence:
        return "stop_sequence"
    return "stop"
