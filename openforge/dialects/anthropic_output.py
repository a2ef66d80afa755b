"""Anthropic Messages output: the `message` object of a reply, its content blocks, and its SSE event stream;
and a canonical conversation written as a Messages request (for a teacher behind the Anthropic API, and tests).

A reply's content is [thinking?, text?, tool_use*]. A thinking block carries a non-empty signature, streamed as
a `signature_delta` before its `content_block_stop` — Claude Code drops a thinking turn without one.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from openforge.core import Conversation, Message, ParsedOutput, ToolCall
from openforge.dialects import wire
from openforge.dialects.base import DecodedRequest, Reply, ReplyStart, StreamEncoder, stop_kind

__all__ = ["STOP_REASONS", "MessageStream", "message_body", "request_body", "usage_fields"]

STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use", "stop_sequence": "stop_sequence", "stop": "end_turn"}


def message_body(reply: Reply) -> dict[str, Any]:
    """The whole `message` object of a reply: [thinking?, text?, tool_use*] blocks, stop reason and usage."""
    out = reply.output
    blocks: list[dict[str, Any]] = []
    if out.reasoning is not None:
        blocks.append(thinking_block(reply.id, out.reasoning))
    if out.content or needs_empty_text(out):
        blocks.append({"type": "text", "text": out.content})
    blocks += [tool_use_block(call) for call in out.tool_calls]
    return {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": blocks,
        **stop_fields(reply),
        "usage": usage_fields(reply.prompt_tokens, reply.completion_tokens),
    }


def request_body(conversation: Conversation, *, model: str, stream: bool) -> dict[str, Any]:
    """A canonical conversation as a Messages request (tests; a teacher behind the Anthropic API)."""
    s = conversation.sampling
    body: dict[str, Any] = {"model": model, "max_tokens": s.max_tokens, "messages": wire_messages(conversation)}
    if conversation.system is not None:
        body["system"] = conversation.system
    if conversation.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in conversation.tools
        ]
    body.update(wire.sampling_fields(s, stop="stop_sequences"))
    if conversation.response_format is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": conversation.response_format}}
    if stream:
        body["stream"] = True
    return body


def needs_empty_text(out: ParsedOutput) -> bool:
    """A reply with nothing else to say still has one (empty) text block."""
    return not out.tool_calls and out.reasoning is None


def thinking_signature(reply_id: str, reasoning: str) -> str:
    # Opaque to the harness; Claude Code only needs it present. Derived, so stream and body agree.
    digest = hashlib.sha256(f"{reply_id}\0{reasoning}".encode("utf-8", "replace")).digest()
    return base64.b64encode(b"openforge:" + digest).decode()


def thinking_block(reply_id: str, reasoning: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": reasoning, "signature": thinking_signature(reply_id, reasoning)}


def tool_use_block(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}


def usage_fields(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": prompt_tokens,
        "output_tokens": completion_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def stop_fields(reply: Reply) -> dict[str, Any]:
    kind = stop_kind(reply)
    return {
        "stop_reason": STOP_REASONS[kind],
        "stop_sequence": reply.stop_sequence if kind == "stop_sequence" else None,
    }


class MessageStream(StreamEncoder):
    """message_start, ping, then per block content_block_start / deltas / content_block_stop, then
    message_delta (stop reason, usage) and message_stop."""

    def __init__(self, start: ReplyStart, request: DecodedRequest, chunk_chars: int | None):
        super().__init__(start, request, chunk_chars)
        self.blocks = 0  # blocks started so far; the open one (if any) is the last
        self.open: str | None = None  # "thinking" | "text"
        self.reasoning_text = ""

    def start(self) -> list[bytes]:
        head = self.head
        message: dict[str, object] = {
            "id": head.id,
            "type": "message",
            "role": "assistant",
            "model": head.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_fields(head.prompt_tokens, 0),
        }
        return [
            wire.sse({"type": "message_start", "message": message}, "message_start"),
            wire.sse({"type": "ping"}, "ping"),
        ]

    def reasoning(self, delta: str) -> list[bytes]:
        shell = {"type": "thinking", "thinking": "", "signature": ""}
        events = [] if self.open == "thinking" else self._begin("thinking", shell)
        self.reasoning_text += delta
        return events + ([self._delta({"type": "thinking_delta", "thinking": delta})] if delta else [])

    def text(self, delta: str) -> list[bytes]:
        events = [] if self.open == "text" else self._begin("text", {"type": "text", "text": ""})
        return events + ([self._delta({"type": "text_delta", "text": delta})] if delta else [])

    def keepalive(self) -> list[bytes]:
        return [wire.sse({"type": "ping"}, "ping")]  # the Messages API's own keep-alive event

    def finish(self, reply: Reply) -> list[bytes]:
        events = self._close()
        if self.blocks == 0 and needs_empty_text(reply.output):
            events += self._begin("text", {"type": "text", "text": ""}) + self._close()
        for call in reply.output.tool_calls:
            block = tool_use_block(call)
            events += self._begin("tool_use", {**block, "input": {}})
            events += [
                self._delta({"type": "input_json_delta", "partial_json": p})
                for p in wire.pieces(wire.dumps(block["input"]), self.chunk_chars)
            ]
            events += self._close()
        usage = usage_fields(reply.prompt_tokens, reply.completion_tokens)
        delta = {"type": "message_delta", "delta": stop_fields(reply), "usage": usage}
        return events + [wire.sse(delta, "message_delta"), wire.sse({"type": "message_stop"}, "message_stop")]

    def _begin(self, kind: str, shell: dict[str, Any]) -> list[bytes]:
        events = self._close()
        self.open = kind
        self.blocks += 1
        start = {"type": "content_block_start", "index": self.blocks - 1, "content_block": shell}
        return events + [wire.sse(start, "content_block_start")]

    def _delta(self, payload: dict[str, Any]) -> bytes:
        event = {"type": "content_block_delta", "index": self.blocks - 1, "delta": payload}
        return wire.sse(event, "content_block_delta")

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        events = []
        if self.open == "thinking":  # Claude Code drops a thinking turn without a signature
            signature = thinking_signature(self.head.id, self.reasoning_text)
            events.append(self._delta({"type": "signature_delta", "signature": signature}))
        self.open = None
        return events + [wire.sse({"type": "content_block_stop", "index": self.blocks - 1}, "content_block_stop")]


def wire_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """Canonical messages as Anthropic messages: consecutive tool results share one user message."""
    out: list[dict[str, Any]] = []
    for message in conversation.messages:
        if message.role == "tool":
            block: dict[str, object] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
            previous = out[-1] if out else None
            if previous and previous["role"] == "user" and previous.get("_results"):
                previous["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "_results": True})
        elif message.role == "assistant":
            out.append({"role": "assistant", "content": assistant_blocks(message)})
        else:
            out.append({"role": message.role, "content": [{"type": "text", "text": message.content}]})
    for entry in out:
        entry.pop("_results", None)
    return out


def assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.reasoning is not None:
        blocks.append({"type": "thinking", "thinking": message.reasoning, "signature": "openforge"})
    if message.content or (not message.tool_calls and message.reasoning is None):
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return blocks
