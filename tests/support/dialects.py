"""Shared helpers for the dialect tests (no tests here): canned replies, SSE parsing, SDK type lookups,
and stream accumulation with the official SDKs' own accumulators."""

from __future__ import annotations

import json
import typing
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import openai.types.responses as orr
from anthropic.lib.streaming._messages import accumulate_event
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState

from openforge.core import FinishReason, ParsedOutput, ToolCall
from openforge.dialects import DIALECTS, DecodedRequest, Reply
from support import paths

FIXTURES = paths.FIXTURES / "wire"

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"type": "array", "items": {"type": "string"}}},
        "required": ["city"],
    },
}
EXEC_TOOL = {
    "name": "exec",
    "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}

SCENARIOS: dict[str, tuple[ParsedOutput, FinishReason]] = {
    "text": (ParsedOutput(content='Hello there! Ünïcode ✓ and "quotes"\nnew line.'), FinishReason.stop),
    "reasoning": (
        ParsedOutput(reasoning="Two plus two.\nThat is four.", content="The answer is 4."),
        FinishReason.stop,
    ),
    "tools": (
        ParsedOutput(
            reasoning="I need the weather and a listing.",
            content="Checking both.",
            tool_calls=[
                ToolCall(
                    id="call_w1",
                    name="get_weather",
                    arguments={"city": "Paris", "units": ["c", "f"], "x": {"y": None, "z": 1.5}},
                ),
                ToolCall(id="call_e2", name="exec", arguments={"cmd": "ls -la | grep '\"'"}),
            ],
        ),
        FinishReason.stop,
    ),
    "tools_only": (ParsedOutput(tool_calls=[ToolCall(id="call_o1", name="exec", arguments={})]), FinishReason.stop),
    "length": (ParsedOutput(content="This answer was cut sho"), FinishReason.length),
    "empty": (ParsedOutput(content=""), FinishReason.stop),
}


def canned_reply(dialect: str, scenario: str, model: str = "test-model") -> Reply:
    output, finish = SCENARIOS[scenario]
    d = DIALECTS[dialect]  # ids in the dialect's style: Anthropic tool ids look like toolu_...
    calls = [c.model_copy(update={"id": c.id.replace("call_", d.call_id_prefix)}) for c in output.tool_calls]
    output = output.model_copy(update={"tool_calls": calls})
    return Reply(
        id=f"{d.reply_id_prefix}test{scenario}",
        model=model,
        output=output,
        finish_reason=finish,
        prompt_tokens=123,
        completion_tokens=45,
        created=1_700_000_000,
    )


def request_for(
    dialect: str, *, stream: bool = False, tools: bool = True, include_usage: bool = True
) -> DecodedRequest:
    """A decoded request offering the canned replies' tools."""
    d = DIALECTS[dialect]
    if dialect == "anthropic":
        body: dict[str, Any] = {
            "model": "test-model",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [
                {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
                for t in (WEATHER_TOOL, EXEC_TOOL)
            ],
        }
    elif dialect == "responses":
        body = {
            "model": "test-model",
            "input": "hi",
            "tools": [{"type": "function", **t} for t in (WEATHER_TOOL, EXEC_TOOL)],
        }
    else:
        body = {
            "model": "test-model",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": t} for t in (WEATHER_TOOL, EXEC_TOOL)],
        }
        if stream and include_usage:
            body["stream_options"] = {"include_usage": True}
    if not tools:
        body.pop("tools")
    if stream:
        body["stream"] = True
    return d.decode(json.dumps(body).encode())


# ---- SSE --------------------------------------------------------------------------------------------------


def parse_sse(data: bytes | list[bytes]) -> list[tuple[str | None, str]]:
    """(event name, data) for each event; every chunk must be a complete event."""
    if isinstance(data, list):
        for chunk in data:
            assert chunk.endswith(b"\n\n") and chunk.count(b"\n\n") == 1, chunk
        data = b"".join(data)
    events = []
    for block in data.decode("utf-8").split("\n\n"):
        if not block:
            continue
        event, lines = None, []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue  # an SSE comment (a keep-alive): every client skips it
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                lines.append(line[len("data: ") :])
            else:
                raise AssertionError(f"unexpected SSE line {line!r}")
        if lines:
            events.append((event, "\n".join(lines)))
    return events


def json_events(chunks: list[bytes]) -> list[dict[str, Any]]:
    """The JSON payloads of a stream, checking that `event:` names match the payload type where given."""
    out = []
    for event, data in parse_sse(chunks):
        if data == "[DONE]":
            continue
        payload = json.loads(data)
        if event is not None:
            assert payload.get("type") == event, (event, payload)
        out.append(payload)
    return out


# ---- the SDKs' own types ------------------------------------------------------------------------------


def _classes_by_type(union: Any) -> dict[str, type]:
    classes: dict[str, type] = {}
    stack = [union]
    while stack:
        item = stack.pop()
        args = typing.get_args(item)
        if args:
            stack.extend(args)
        elif isinstance(item, type) and "type" in getattr(item, "model_fields", {}):
            literal = item.model_fields["type"].annotation
            for value in typing.get_args(literal):
                classes[value] = item
    return classes


ANTHROPIC_EVENTS = _classes_by_type(at.RawMessageStreamEvent)
RESPONSES_EVENTS = _classes_by_type(orr.ResponseStreamEvent)


def validate_body(dialect: str, body: dict) -> Any:
    """Strict pydantic validation against the SDK's response type (not the SDKs' lenient construct)."""
    cls = {"anthropic": at.Message, "responses": orr.Response, "chat_completions": oc.ChatCompletion}[dialect]
    return cls.model_validate(body)


def validate_events(dialect: str, chunks: list[bytes]) -> list[Any]:
    events = json_events(chunks)
    if dialect == "anthropic":
        # `ping` is keep-alive traffic the SDK skips; it is not a message event type.
        return [ANTHROPIC_EVENTS[e["type"]].model_validate(e) for e in events if e["type"] != "ping"]
    if dialect == "responses":
        return [RESPONSES_EVENTS[e["type"]].model_validate(e) for e in events]
    return [oc.ChatCompletionChunk.model_validate(e) for e in events]


# ---- accumulation with the SDKs' accumulators, projected onto comparable shapes -----------------------


def accumulate(dialect: str, chunks: list[bytes], request_tools: list | None = None) -> dict:
    """The final message the SDK's own stream accumulator builds, as a plain dict."""
    events = validate_events(dialect, chunks)
    if dialect == "anthropic":
        snapshot = None
        bufs: dict[int, bytes] = {}
        for event in events:
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
        return snapshot.to_dict()
    if dialect == "responses":
        state = ResponseStreamState(input_tools=request_tools or [], text_format=openai_omit())
        for event in events:
            state.handle_event(event)
        assert state._completed_response is not None, "no response.completed"
        return state._completed_response.to_dict()
    state = ChatCompletionStreamState()
    for event in events:
        state.handle_chunk(event)
    return state.current_completion_snapshot.to_dict()


def openai_omit():
    from openai import omit

    return omit


def project(dialect: str, body: dict) -> dict:
    """What a reply says, independent of wire details: the same for a body and an accumulated stream."""
    if dialect == "anthropic":
        blocks = []
        for b in body["content"]:
            if b["type"] == "text":
                blocks.append(("text", b["text"]))
            elif b["type"] == "thinking":
                blocks.append(("thinking", b["thinking"], b["signature"]))
            else:
                blocks.append(("tool_use", b["id"], b["name"], b["input"]))
        return {
            "id": body["id"],
            "blocks": blocks,
            "stop": body["stop_reason"],
            "usage": (body["usage"]["input_tokens"], body["usage"]["output_tokens"]),
        }
    if dialect == "responses":
        items = []
        for item in body["output"]:
            if item["type"] == "reasoning":
                items.append(
                    ("reasoning", [c["text"] for c in item.get("content") or []], item.get("encrypted_content"))
                )
            elif item["type"] == "message":
                items.append(("message", [c["text"] for c in item["content"]]))
            elif item["type"] == "function_call":
                items.append(
                    (
                        "function_call",
                        item["call_id"],
                        item["name"],
                        item.get("namespace"),
                        json.loads(item["arguments"]),
                    )
                )
            else:
                items.append((item["type"], item["call_id"], item["name"], item.get("input")))
        usage = body["usage"]
        return {
            "id": body["id"],
            "status": body["status"],
            "items": items,
            "usage": (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]),
        }
    choice = body["choices"][0]
    message = choice["message"]
    calls = [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    return {
        "id": body["id"],
        "content": message.get("content") or "",
        "reasoning": message.get("reasoning_content"),
        "calls": calls,
        "finish": choice["finish_reason"],
    }
