"""OpenAI Chat Completions (`POST /v1/chat/completions`): OpenClaw's `openai-completions`, mini-swe-agent,
OpenHands (LiteLLM), opencode, Qwen Code and most other harnesses.

Decoding:
- messages: system / developer (a leading one becomes `Conversation.system`, later ones stay in place),
  user, assistant (`content` string, parts or null; `tool_calls` with JSON-string arguments;
  `reasoning_content` or `reasoning`), tool (`tool_call_id`). Content parts: text (and refusal);
  image_url (a base64 data URL or bare base64: decoded, `images.py`; an http(s) URL: by reference) → the
  image with its placeholder text; input_audio / file → placeholders. Legacy `functions` / `function_call` are refused.
- tools (`function`), `tool_choice`, `max_completion_tokens` (or `max_tokens`), temperature, top_p,
  top_k (vLLM's extension), stop (string or list), seed, `n` (1 only), `stream`,
  `stream_options.include_usage`, `response_format` (json_schema / json_object).

Encoding: `chat.completion` (content, tool_calls with JSON-string arguments, `reasoning_content`), and
as a stream: a role chunk, reasoning / content / tool-call deltas, the finish chunk, a usage chunk with
empty `choices` when `include_usage` was asked for, then `data: [DONE]`.
"""

from __future__ import annotations

from typing import Any

from openforge.core import Conversation, ImageRef, Message, ToolCall, ToolSpec
from openforge.core.json_types import JSONObject
from openforge.dialects import images, openai_common, wire
from openforge.dialects.base import (
    AUDIO_PLACEHOLDER,
    BLOCK_SEPARATOR,
    FILE_PLACEHOLDER,
    IMAGE_PLACEHOLDER,
    DecodedReply,
    DecodedRequest,
    Dialect,
    Reply,
    ReplyStart,
    StreamEncoder,
    stop_kind,
)
from openforge.dialects.errors import DialectError
from openforge.dialects.history import ConversationBuilder, ToolSet
from openforge.dialects.images import RequestImage

_FINISH = {"length": "length", "tool_calls": "tool_calls", "stop_sequence": "stop", "stop": "stop"}
_TEXT_PARTS = ("text",)
_MEDIA_PARTS = {"input_audio": AUDIO_PLACEHOLDER, "file": FILE_PLACEHOLDER}
# An assistant turn holds no images in this API: a part that claims one is only its placeholder.
_ASSISTANT_MEDIA_PARTS = {**_MEDIA_PARTS, "image_url": IMAGE_PLACEHOLDER}


class ChatCompletions(Dialect):
    name = "chat_completions"
    routes = ("/v1/chat/completions", "/chat/completions")
    reply_id_prefix = "chatcmpl-"
    call_id_prefix = "call_"

    # ---- request → canonical -----------------------------------------------------------------------
    def decode(self, body: bytes, *, for_count: bool = False) -> DecodedRequest:
        data = wire.parse_body(body)
        model = wire.req_str(data, "model", "", nonempty=True)
        for legacy in ("functions", "function_call"):
            if data.get(legacy) is not None:
                raise wire.bad(legacy, "legacy function calling is not supported; use `tools` and `tool_choice`")
        n = wire.opt_int(data, "n", "", minimum=1)
        if n is not None and n > 1:
            raise wire.bad("n", f"only one choice per request is supported, got {n}")

        tools, dropped = self._tools(data)
        messages = wire.req_list(data, "messages", "")
        if not messages:
            raise wire.bad("messages", "must contain at least one message")
        builder = ConversationBuilder()
        for i, message in enumerate(messages):
            self._message(builder, message, wire.at("messages", i))
        system = None
        canonical = builder.messages
        if canonical[0].role == "system":
            # The leading system message is the system prompt; later ones stay where the harness put them.
            system, canonical = canonical[0].content, canonical[1:]

        max_tokens = wire.opt_int(data, "max_completion_tokens", "", minimum=1)
        names = {"max_tokens": "max_completion_tokens"}
        if max_tokens is None:
            max_tokens = wire.opt_int(data, "max_tokens", "", minimum=1)
            names = {"max_tokens": "max_tokens"}
        sampling = wire.sampling_params(
            max_tokens=max_tokens,
            # "between 0 and 2" / a probability (the API reference, as the SDK's create-params carry it)
            temperature=wire.opt_number(data, "temperature", "", minimum=0.0, maximum=2.0),
            top_p=wire.opt_number(data, "top_p", "", minimum=0.0, maximum=1.0),
            top_k=self._top_k(data),
            stop=wire.str_list(data.get("stop"), "stop"),
            seed=wire.opt_int(data, "seed", ""),
            names=names,
        )
        stream = wire.opt_bool(data, "stream", "")
        stream_options = wire.opt_object(data, "stream_options", "") or {}
        tool_choice, forced = self._tool_choice(data, tools)
        effort = wire.opt_choice(data, "reasoning_effort", "", openai_common.REASONING_EFFORTS)
        openai_common.check_ranges(data, penalties=True)
        conversation = Conversation(
            system=system,
            messages=canonical,
            tools=tools,
            sampling=sampling,
            response_format=self._response_format(data),
            model=model,
        )
        return self._decoded(
            data,
            conversation,
            model=model,
            max_tokens_requested=max_tokens,
            tool_choice=tool_choice,
            forced_tool=forced,
            include_usage=stream and wire.opt_bool(stream_options, "include_usage", "stream_options"),
            parallel_tool_calls=wire.opt_bool(data, "parallel_tool_calls", "", default=True),
            reasoning_requested=None if effort is None else effort != "none",
            dropped_tools=dropped,
            images=builder.images,
        )

    @staticmethod
    def _top_k(data: dict) -> int | None:
        # vLLM's extension; -1 there means "no top-k", canonically 0.
        value = wire.opt_int(data, "top_k", "", minimum=-1)
        return None if value is None else max(value, 0)

    def _message(self, builder: ConversationBuilder, message: Any, path: str) -> None:
        message = wire.need_object(message, path)
        role = wire.req_str(message, "role", path)
        cpath = wire.at(path, "content")
        if role in ("system", "developer"):
            builder.system(*self._content(builder, message.get("content"), cpath, required=True))
        elif role == "user":
            builder.user(*self._content(builder, message.get("content"), cpath, required=True))
        elif role == "assistant":
            if message.get("function_call") is not None:
                raise wire.bad(
                    wire.at(path, "function_call"), "legacy function calling is not supported; use `tool_calls`"
                )
            reasoning = wire.opt_str(message, "reasoning_content", path)
            if reasoning is None:
                reasoning = wire.opt_str(message, "reasoning", path)
            text, _ = self._content(builder, message.get("content"), cpath, required=False, assistant=True)
            turn = builder.assistant(content=text, reasoning=reasoning, param=path)
            for i, call in enumerate(wire.opt_list(message, "tool_calls", path)):
                cpath_i = wire.at(wire.at(path, "tool_calls"), i)
                builder.add_call(turn, self._call(call, cpath_i), wire.at(cpath_i, "id"))
        elif role == "tool":
            call_id = wire.req_str(message, "tool_call_id", path, nonempty=True)
            text, refs = self._content(builder, message.get("content"), cpath, required=True)
            builder.tool_result(call_id, text, param=wire.at(path, "tool_call_id"), images=refs)
        elif role == "function":
            raise wire.bad(wire.at(path, "role"), "legacy 'function' messages are not supported; use 'tool'")
        else:
            raise wire.bad(
                wire.at(path, "role"), f"must be 'system', 'developer', 'user', 'assistant' or 'tool', got {role!r}"
            )

    def _call(self, call: Any, path: str) -> ToolCall:
        call = wire.need_object(call, path)
        kind = wire.opt_str(call, "type", path)
        if kind not in (None, "function"):
            raise wire.bad(wire.at(path, "type"), f"only 'function' tool calls are supported, got {kind!r}")
        function = wire.need_object(call.get("function"), wire.at(path, "function"))
        fpath = wire.at(path, "function")
        arguments = function.get("arguments", "")
        if isinstance(arguments, dict):
            wire.check_depth(arguments, wire.at(fpath, "arguments"))  # some clients send the object itself
        elif isinstance(arguments, str):
            arguments = wire.parse_arguments(arguments, wire.at(fpath, "arguments"))
        else:
            raise wire.bad(wire.at(fpath, "arguments"), f"expected a JSON string, got {wire.type_name(arguments)}")
        return ToolCall(
            id=wire.req_str(call, "id", path, nonempty=True),
            name=wire.req_str(function, "name", fpath, nonempty=True),
            arguments=arguments,
        )

    def _content(
        self, builder: ConversationBuilder, content: Any, path: str, *, required: bool, assistant: bool = False
    ) -> tuple[str, list[ImageRef]]:
        """A message's content (a string or parts) as text, and the images in it."""
        if content is None:
            if required:
                raise wire.bad(path, "is required")
            return "", []
        if isinstance(content, str):
            return content, []
        if not isinstance(content, list):
            raise wire.bad(path, f"expected a string or an array of content parts, got {wire.type_name(content)}")
        parts = builder.parts(BLOCK_SEPARATOR)
        media, image_kind = (_ASSISTANT_MEDIA_PARTS, "") if assistant else (_MEDIA_PARTS, "image_url")
        for i, part in enumerate(content):
            openai_common.add_part(parts, part, wire.at(path, i), _TEXT_PARTS, media, image_kind, self._image)
        return parts.build()

    @staticmethod
    def _image(part: dict[str, Any], path: str) -> RequestImage:
        """An `image_url` part: `image_url.url` (or `image_url` itself, as some clients send it) is a data URL,
        bare base64, or an http(s) URL kept by reference."""
        value = part.get("image_url")
        if isinstance(value, str):
            return images.from_url(value, wire.at(path, "image_url"), bare_base64=True)
        ipath = wire.at(path, "image_url")
        image = wire.need_object(value, ipath)
        return images.from_url(
            wire.req_str(image, "url", ipath, nonempty=True), wire.at(ipath, "url"), bare_base64=True
        )

    def _tools(self, data: dict) -> tuple[list[ToolSpec], list[str]]:
        offered = ToolSet()
        for tool, path in wire.each_object(data, "tools"):
            kind = wire.req_str(tool, "type", path)
            if kind != "function":
                offered.dropped.append(kind)
                continue
            fpath = wire.at(path, "function")
            function = wire.need_object(tool.get("function"), fpath)
            name = offered.claim(wire.req_str(function, "name", fpath, nonempty=True), wire.at(fpath, "name"))
            parameters = wire.opt_object(function, "parameters", fpath) or {"type": "object", "properties": {}}
            wire.check_depth(parameters, wire.at(fpath, "parameters"))
            offered.specs.append(
                ToolSpec(
                    name=name, description=wire.opt_str(function, "description", fpath) or "", parameters=parameters
                )
            )
        return offered.specs, offered.dropped

    def _tool_choice(self, data: dict, tools: list[ToolSpec]) -> tuple[str, str | None]:
        choice = openai_common.tool_choice(data)
        if isinstance(choice, str):
            return choice, None
        if choice.get("type") == "allowed_tools":
            return "auto", None
        function = wire.need_object(choice.get("function"), "tool_choice.function")
        name = wire.req_str(function, "name", "tool_choice.function", nonempty=True)
        if name not in {t.name for t in tools}:
            raise wire.bad("tool_choice.function.name", f"names no tool in `tools`: {name!r}")
        return "tool", name

    def _response_format(self, data: dict) -> dict | None:
        def json_schema(fmt: dict) -> dict:
            spec = wire.need_object(fmt.get("json_schema"), "response_format.json_schema")
            schema = wire.opt_object(spec, "schema", "response_format.json_schema") or {"type": "object"}
            wire.check_depth(schema, "response_format.json_schema.schema")
            return schema

        return openai_common.response_format(
            wire.opt_object(data, "response_format", ""), "response_format", json_schema
        )

    # ---- canonical → response -----------------------------------------------------------------------
    def encode(self, reply: Reply, request: DecodedRequest) -> JSONObject:
        out = reply.output
        message: dict[str, Any] = {
            "role": "assistant",
            # OpenAI's convention: null content beside tool calls when the model wrote no text.
            "content": out.content if (out.content or not out.tool_calls) else None,
            "refusal": None,
        }
        if out.reasoning is not None:
            message["reasoning_content"] = out.reasoning
        if out.tool_calls:
            message["tool_calls"] = _wire_calls(out.tool_calls)
        return {
            "id": reply.id,
            "object": "chat.completion",
            "created": reply.created,
            "model": reply.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _FINISH[stop_kind(reply)], "logprobs": None}],
            "usage": _usage(reply),
            "system_fingerprint": None,
        }

    def stream_encoder(
        self, start: ReplyStart, request: DecodedRequest, *, chunk_chars: int | None = None
    ) -> StreamEncoder:
        return _ChunkStream(start, request, chunk_chars)

    def error(self, err: DialectError) -> tuple[int, JSONObject]:
        return openai_common.openai_error(err, context_param="messages")

    def error_stream(self, err: DialectError, *, response_id: str | None = None) -> bytes:
        # A data line carrying "error" is what the OpenAI SDKs (and LiteLLM) raise on mid-stream.
        _, body = self.error(err)
        return wire.sse(body)

    # ---- response → canonical (a client of an upstream model) -----------------------------------------
    def decode_reply(self, body: bytes | JSONObject) -> DecodedReply:
        data = body if isinstance(body, dict) else wire.parse_body(body)
        choices = wire.req_list(data, "choices", "")
        if not choices:
            raise wire.bad("choices", "must hold one choice")
        choice = wire.need_object(choices[0], wire.at("choices", 0))
        path = wire.at(wire.at("choices", 0), "message")
        message = wire.need_object(choice.get("message"), path)
        builder = ConversationBuilder()  # the reply, read as the assistant turn of a history
        self._message(builder, {**message, "role": "assistant"}, path)
        return self._decoded_reply(
            builder.messages[-1],
            cut=choice.get("finish_reason") == "length",
            usage=wire.opt_object(data, "usage", "") or {},
            counts=("prompt_tokens", "completion_tokens"),
            model=wire.opt_str(data, "model", ""),
        )

    # ---- canonical → request (tests, teachers) ------------------------------------------------------
    def encode_request(
        self, conversation: Conversation, *, model: str = "openforge", stream: bool = False
    ) -> JSONObject:
        s = conversation.sampling
        messages: list[dict[str, Any]] = []
        if conversation.system is not None:
            messages.append({"role": "system", "content": conversation.system})
        messages += [_wire_message(m) for m in conversation.messages]
        body: dict[str, Any] = {"model": model, "messages": messages}
        if conversation.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in conversation.tools
            ]
        body["max_completion_tokens"] = s.max_tokens
        body.update(wire.sampling_fields(s, stop="stop", seed=True))
        if conversation.response_format is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": conversation.response_format},
            }
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body


def _wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role != "assistant":
        return {"role": message.role, "content": message.content}
    wire_message: dict[str, Any] = {
        "role": "assistant",
        "content": message.content if (message.content or not message.tool_calls) else None,
    }
    if message.reasoning is not None:
        wire_message["reasoning_content"] = message.reasoning
    if message.tool_calls:
        wire_message["tool_calls"] = _wire_calls(message.tool_calls)
    return wire_message


def _wire_calls(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": wire.dumps(c.arguments)}}
        for c in calls
    ]


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        "prompt_tokens_details": {"cached_tokens": 0},
    }


class _ChunkStream(StreamEncoder):
    """`chat.completion.chunk`s: the role, reasoning / content / tool-call deltas, the finish reason, usage
    (with empty `choices`) when `include_usage` was asked for, then `data: [DONE]`."""

    def start(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def reasoning(self, delta: str) -> list[bytes]:
        # Empty reasoning still gets one delta, so the stream says what the body says.
        return [self._chunk({"reasoning_content": delta})]

    def text(self, delta: str) -> list[bytes]:
        return [self._chunk({"content": delta})]

    def finish(self, reply: Reply) -> list[bytes]:
        chunks = []
        for index, call in enumerate(_wire_calls(reply.output.tool_calls)):
            function = call["function"]
            opening = {"name": function["name"], "arguments": ""}
            first = {"index": index, "id": call["id"], "type": "function", "function": opening}
            chunks.append(self._chunk({"tool_calls": [first]}))
            for p in wire.pieces(function["arguments"], self.chunk_chars):
                chunks.append(self._chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}))
        chunks.append(self._chunk({}, _FINISH[stop_kind(reply)]))
        if self.request.include_usage:
            chunks.append(wire.sse({**self._head(), "choices": [], "usage": _usage(reply)}))
        chunks.append(wire.sse("[DONE]"))
        return chunks

    def _head(self) -> dict[str, Any]:
        head = self.head
        return {"id": head.id, "object": "chat.completion.chunk", "created": head.created, "model": head.model}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return wire.sse({**self._head(), "choices": [choice]})
