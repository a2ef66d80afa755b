"""OpenAI Responses output: the Response object, its output items, and its SSE event stream.

A Response's `output` is [reasoning?, message?, function_call* / custom_tool_call*]; item ids derive from
the response id (`resp_X` → `rs_X`, `msg_X`, `fc_X_0`, ...). The stream always ends with `response.completed`
carrying the whole response and usage — Codex retries a stream without it, so a turn cut short by max
tokens is `response.completed` with `status: "incomplete"`.
"""

from __future__ import annotations

import base64
from typing import Any

from openforge.core import ParsedOutput, ToolCall
from openforge.dialects import wire
from openforge.dialects.base import DecodedRequest, Reply, ReplyStart, StreamEncoder, ToolRoute

REPLY_ID_PREFIX = "resp_"

# Reasoning text rides along in `encrypted_content` too, so it survives a client that keeps only that.
REASONING_PREFIX = "openforge:v1:"

CUSTOM_INPUT = "input"  # the canonical argument that carries a freeform tool's raw text


def _tool_choice_echo(request: DecodedRequest) -> Any:
    if request.tool_choice == "tool" and request.forced_tool:
        route = request.tool_routes.get(request.forced_tool)
        return {"type": "custom" if route and route.kind == "custom" else "function", "name": request.forced_tool}
    return request.tool_choice if request.tool_choice != "tool" else "auto"


def reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "encrypted_content": REASONING_PREFIX + base64.b64encode(text.encode("utf-8", "replace")).decode(),
        "status": "completed",
    }


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [output_text_part(text)] if status == "completed" else []
    return {"id": item_id, "type": "message", "role": "assistant", "status": status, "content": content}


def call_item(item_id: str, call: ToolCall, route: ToolRoute | None, status: str) -> dict[str, Any]:
    name = route.name if route else call.name
    if route and route.kind == "custom":
        raw = call.arguments.get(CUSTOM_INPUT)
        item = {
            "id": item_id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call.id,
            "name": name,
            "input": (raw if isinstance(raw, str) else wire.dumps(call.arguments)) if status == "completed" else "",
        }
    else:
        item = {
            "id": item_id,
            "type": "function_call",
            "status": status,
            "call_id": call.id,
            "name": name,
            "arguments": wire.dumps(call.arguments) if status == "completed" else "",
        }
    if route and route.namespace:
        item["namespace"] = route.namespace
    return item


def _item_ids(reply_id: str) -> tuple[str, str, str]:
    """The ids of a reply's reasoning item, message item and call items (a stem: `fc_…_0`, `fc_…_1`)."""
    stem = reply_id.removeprefix(REPLY_ID_PREFIX)
    return f"rs_{stem}", f"msg_{stem}", f"fc_{stem}"


def _output(reply: Reply, request: DecodedRequest) -> list[dict[str, Any]]:
    out = reply.output
    reasoning_id, message_id, call_stem = _item_ids(reply.id)
    items: list[dict[str, Any]] = []
    if out.reasoning is not None:
        items.append(reasoning_item(reasoning_id, out.reasoning))
    if out.content or _needs_empty_message(out):
        items.append(message_item(message_id, out.content, "completed"))
    for i, call in enumerate(out.tool_calls):
        items.append(call_item(f"{call_stem}_{i}", call, request.tool_routes.get(call.name), "completed"))
    return items


def _needs_empty_message(out: ParsedOutput) -> bool:
    """A reply without tool calls has a message item, empty if the model wrote no text."""
    return not out.tool_calls


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def completed_response(reply: Reply, request: DecodedRequest) -> dict[str, Any]:
    """The whole Response for a finished reply (the body, and the stream's `response.completed`)."""
    status = "incomplete" if reply.truncated else "completed"
    return _response(reply.start, request, status=status, output=_output(reply, request), usage=_usage(reply))


def _response(
    head: ReplyStart, request: DecodedRequest, *, status: str, output: list, usage: dict | None
) -> dict[str, Any]:
    sampling = request.conversation.sampling
    text = request.raw.get("text")
    done = status in ("completed", "incomplete")
    return {
        "id": head.id,
        "object": "response",
        "created_at": head.created,
        "status": status,
        "background": False,
        "completed_at": head.created if status == "completed" else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "max_output_tokens": request.max_tokens_requested,
        "metadata": {},
        "model": head.model,
        "output": output,
        "parallel_tool_calls": request.parallel_tool_calls,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": sampling.temperature,
        "text": text
        if isinstance(text, dict) and isinstance(text.get("format"), dict)
        else {"format": {"type": "text"}},
        "tool_choice": _tool_choice_echo(request),
        "tools": [],  # not echoed: Codex sends ~20 KB of schemas, and no client reads them back
        "top_p": sampling.top_p,
        "truncation": "disabled",
        "usage": usage if done else None,
        "user": None,
    }


class EventWriter:
    """Responses SSE events, each with its `sequence_number`."""

    def __init__(self) -> None:
        self.sent = 0

    def __call__(self, kind: str, payload: dict[str, Any]) -> bytes:
        event = wire.sse({"type": kind, "sequence_number": self.sent, **payload}, kind)
        self.sent += 1
        return event


class EventStream(StreamEncoder):
    """`response.created` and `response.in_progress`; per output item `output_item.added`, its deltas and
    `output_item.done`; then `response.completed` with the whole response and usage — Codex retries a
    stream without it."""

    def __init__(self, start: ReplyStart, request: DecodedRequest, chunk_chars: int | None):
        super().__init__(start, request, chunk_chars)
        self.event = EventWriter()
        self.reasoning_id, self.message_id, self.call_stem = _item_ids(start.id)
        self.items = 0  # output items started; the open one (if any) is the last
        self.open: str | None = None  # "reasoning" | "message"
        self.written = ""  # the open item's text so far

    def start(self) -> list[bytes]:
        in_progress = _response(self.head, self.request, status="in_progress", output=[], usage=None)
        return [
            self.event("response.created", {"response": in_progress}),
            self.event("response.in_progress", {"response": in_progress}),
        ]

    def keepalive(self) -> list[bytes]:
        # An event, not an SSE comment: Codex's stream idle timer restarts on events only (it skips the types it
        # does not act on, as it skips this one), and `response.in_progress` is the Responses API's own word
        # for "still working".
        in_progress = _response(self.head, self.request, status="in_progress", output=[], usage=None)
        return [self.event("response.in_progress", {"response": in_progress})]

    def reasoning(self, delta: str) -> list[bytes]:
        events = [] if self.open == "reasoning" else self._begin("reasoning")
        self.written += delta
        if delta:
            payload = {**self._where(), "content_index": 0, "delta": delta}
            events.append(self.event("response.reasoning_text.delta", payload))
        return events

    def text(self, delta: str) -> list[bytes]:
        events = [] if self.open == "message" else self._begin("message")
        self.written += delta
        if delta:
            payload = {**self._where(), "content_index": 0, "delta": delta, "logprobs": []}
            events.append(self.event("response.output_text.delta", payload))
        return events

    def finish(self, reply: Reply) -> list[bytes]:
        events = self._close()
        if not reply.output.content and _needs_empty_message(reply.output):
            events += self._begin("message") + self._close()
        for i, call in enumerate(reply.output.tool_calls):
            item = call_item(f"{self.call_stem}_{i}", call, self.request.tool_routes.get(call.name), "completed")
            events += self._call_events(item)
        return events + [self.event("response.completed", {"response": completed_response(reply, self.request)})]

    def _where(self) -> dict[str, Any]:
        item_id = self.reasoning_id if self.open == "reasoning" else self.message_id
        return {"item_id": item_id, "output_index": self.items - 1}

    def _begin(self, kind: str) -> list[bytes]:
        events = self._close()
        self.open, self.written = kind, ""
        self.items += 1
        index = self.items - 1
        if kind == "reasoning":
            # In progress, the item says nothing of its text yet (`encrypted_content` comes with `done`).
            item = {"id": self.reasoning_id, "type": "reasoning", "summary": [], "content": [], "status": "in_progress"}
            part = {"type": "reasoning_text", "text": ""}
        else:
            item, part = message_item(self.message_id, "", "in_progress"), output_text_part("")
        return events + [
            self.event("response.output_item.added", {"output_index": index, "item": item}),
            self.event("response.content_part.added", {**self._where(), "content_index": 0, "part": part}),
        ]

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        where, text = self._where(), self.written
        if self.open == "reasoning":
            item = reasoning_item(self.reasoning_id, text)
            events = [self.event("response.reasoning_text.done", {**where, "content_index": 0, "text": text})]
            part = item["content"][0]
        else:
            item = message_item(self.message_id, text, "completed")
            done = {**where, "content_index": 0, "text": text, "logprobs": []}
            events = [self.event("response.output_text.done", done)]
            part = output_text_part(text)
        self.open = None
        return events + [
            self.event("response.content_part.done", {**where, "content_index": 0, "part": part}),
            self.event("response.output_item.done", {"output_index": where["output_index"], "item": item}),
        ]

    def _call_events(self, item: dict[str, Any]) -> list[bytes]:
        """The added → deltas → done events of one function or custom tool call."""
        index = self.items
        self.items += 1
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "function_call":
            field, kind, done = (
                "arguments",
                "function_call_arguments",
                {"name": item["name"], "arguments": item["arguments"]},
            )
        else:
            field, kind, done = "input", "custom_tool_call_input", {"input": item["input"]}
        opening = {**item, field: "", "status": "in_progress"}
        events = [self.event("response.output_item.added", {"output_index": index, "item": opening})]
        for piece in wire.pieces(item[field], self.chunk_chars):
            events.append(self.event(f"response.{kind}.delta", {**where, "delta": piece}))
        events.append(self.event(f"response.{kind}.done", {**where, **done}))
        return events + [self.event("response.output_item.done", {"output_index": index, "item": item})]
