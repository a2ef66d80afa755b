"""OpenAI Responses (`POST /v1/responses`): Codex CLI's only dialect, and OpenClaw's `openai-responses`.

Decoding:
- `instructions` → `Conversation.system`; `input` as a string (one user message) or items:
  messages (user / assistant / system / developer; content a string or input_text / output_text parts;
  input_image: a data URL decoded, an http(s) URL or file_id by reference, with its placeholder text
  (`images.py`); files → placeholders), `function_call` (+ `namespace`), `function_call_output`,
  `custom_tool_call(_output)`, `reasoning` (reasoning_text content, else OpenForge's own
  `encrypted_content`, else the summary). Consecutive reasoning / assistant message / call items form
  one assistant turn — the shape a Response's `output` has.
- tools: `function` and `custom` tools kept; `namespace` tools flattened into canonical tools named
  `namespace.name` (a call to one goes back with `namespace` set); built-in tools (`web_search`,
  `local_shell`, `file_search`, `image_generation`, ...) dropped.
- `previous_response_id` / `conversation` need server-side state: refused with a clear 400 (Codex sends
  the whole history with `store: false`). `store`, `include`, `parallel_tool_calls`, `reasoning`,
  `truncation`, `metadata`, ... accepted; `text.format` json_schema / json_object → `response_format`.

Encoding (`responses_output`): a full Response object: [reasoning?, message?, function_call* /
custom_tool_call*], and its event stream.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from openforge.core import Conversation, ImageRef, Message, ToolCall, ToolSpec
from openforge.core.json_types import JSONObject
from openforge.dialects import images, openai_common, wire
from openforge.dialects.base import (
    AUDIO_PLACEHOLDER,
    BLOCK_SEPARATOR,
    FILE_PLACEHOLDER,
    IMAGE_PLACEHOLDER,
    DecodedRequest,
    Dialect,
    Reply,
    ReplyStart,
    StreamEncoder,
    ToolRoute,
)
from openforge.dialects.errors import DialectError
from openforge.dialects.history import ConversationBuilder, ToolSet
from openforge.dialects.images import Parts, RequestImage
from openforge.dialects.responses_output import (
    CUSTOM_INPUT,
    REASONING_PREFIX,
    REPLY_ID_PREFIX,
    EventStream,
    EventWriter,
    call_item,
    completed_response,
    message_item,
    reasoning_item,
)

# Items of built-in tools that OpenForge drops: never produced here, so nothing the policy said.
_BUILTIN_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "computer_call",
        "computer_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "tool_search_call",
        "tool_search_output",
        "compaction",
        "compaction_summary",
    }
)

_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
_MEDIA_PARTS = {"input_file": FILE_PLACEHOLDER, "input_audio": AUDIO_PLACEHOLDER}
# Reasoning and output items hold no images: a part that claims one is only its placeholder.
_TEXT_ONLY_MEDIA_PARTS = {**_MEDIA_PARTS, "input_image": IMAGE_PLACEHOLDER}


@dataclass
class _OpenTurn:
    """The assistant turn being assembled from consecutive output items."""

    message: Message
    has_text: bool = False


class OpenAIResponses(Dialect):
    name = "responses"
    routes = ("/v1/responses", "/responses")
    reply_id_prefix = REPLY_ID_PREFIX
    call_id_prefix = "call_"

    # ---- request → canonical -----------------------------------------------------------------------
    def decode(self, body: bytes, *, for_count: bool = False) -> DecodedRequest:
        data = wire.parse_body(body)
        for stateful in ("previous_response_id", "conversation"):
            if data.get(stateful) not in (None, ""):
                raise wire.bad(
                    stateful,
                    "is not supported: OpenForge keeps no server-side state; send the whole conversation "
                    "in `input` (as Codex does with store=false)",
                )
        if data.get("prompt") is not None:
            raise wire.bad("prompt", "stored prompt templates are not supported; send `instructions` and `input`")
        model = wire.req_str(data, "model", "", nonempty=True)

        tools, routes, dropped = self._tools(data)
        builder = ConversationBuilder()
        items = data.get("input")
        if items is None:
            raise wire.bad("input", "is required")
        if isinstance(items, str):
            builder.user(items)
        elif isinstance(items, list):
            if not items:
                raise wire.bad("input", "must contain at least one item")
            self._items(builder, items, routes)
        else:
            raise wire.bad("input", f"expected a string or an array of items, got {wire.type_name(items)}")

        max_tokens = wire.opt_int(data, "max_output_tokens", "", minimum=1)
        sampling = wire.sampling_params(
            max_tokens=max_tokens,
            # "between 0 and 2" / a probability (the API reference, as the SDK's create-params carry it)
            temperature=wire.opt_number(data, "temperature", "", minimum=0.0, maximum=2.0),
            top_p=wire.opt_number(data, "top_p", "", minimum=0.0, maximum=1.0),
            names={"max_tokens": "max_output_tokens"},
        )
        tool_choice, forced = self._tool_choice(data, routes)
        reasoning = wire.opt_object(data, "reasoning", "")
        if reasoning is not None:
            wire.opt_choice(reasoning, "effort", "reasoning", openai_common.REASONING_EFFORTS)
            wire.opt_choice(reasoning, "summary", "reasoning", openai_common.REASONING_SUMMARIES)
        openai_common.check_ranges(data, penalties=False)
        conversation = Conversation(
            system=wire.opt_str(data, "instructions", ""),
            messages=builder.messages,
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
            parallel_tool_calls=wire.opt_bool(data, "parallel_tool_calls", "", default=True),
            reasoning_requested=None if reasoning is None else reasoning.get("effort") != "none",
            dropped_tools=dropped,
            tool_routes=routes,
            images=builder.images,
        )

    def _tools(self, data: dict) -> tuple[list[ToolSpec], dict[str, ToolRoute], list[str]]:
        offered = ToolSet()
        routes: dict[str, ToolRoute] = {}

        def add(spec: ToolSpec, route: ToolRoute, param: str) -> None:
            routes[offered.claim(spec.name, param)] = route
            offered.specs.append(spec)

        for tool, path in wire.each_object(data, "tools"):
            kind = wire.req_str(tool, "type", path)
            if kind in ("function", "custom"):
                spec, route = self._tool(tool, kind, None, path)
                add(spec, route, wire.at(path, "name"))
            elif kind == "namespace":
                namespace = wire.req_str(tool, "name", path, nonempty=True)
                for inner, ipath in wire.each_object(tool, "tools", path):
                    inner_kind = wire.req_str(inner, "type", ipath)
                    if inner_kind not in ("function", "custom"):
                        offered.dropped.append(f"{namespace}.{inner.get('name', inner_kind)}")
                        continue
                    spec, route = self._tool(inner, inner_kind, namespace, ipath)
                    add(spec, route, wire.at(ipath, "name"))
            else:
                offered.dropped.append(kind)  # built-in: web_search, local_shell, file_search, image_generation, ...
        return offered.specs, routes, offered.dropped

    def _tool(self, tool: dict, kind: str, namespace: str | None, path: str) -> tuple[ToolSpec, ToolRoute]:
        name = wire.req_str(tool, "name", path, nonempty=True)
        canonical = f"{namespace}.{name}" if namespace else name
        description = wire.opt_str(tool, "description", path) or ""
        if kind == "function":
            parameters = wire.opt_object(tool, "parameters", path) or {"type": "object", "properties": {}}
            wire.check_depth(parameters, wire.at(path, "parameters"))
            return ToolSpec(name=canonical, description=description, parameters=parameters), ToolRoute(
                name=name, namespace=namespace
            )
        # A freeform tool takes raw text; canonically that is one string argument.
        fmt = wire.opt_object(tool, "format", path) or {}
        field_doc = "The raw text input of the tool."
        if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
            field_doc = f"Raw text in this {fmt.get('syntax', 'grammar')} grammar:\n{fmt['definition']}"
        parameters = {
            "type": "object",
            "properties": {CUSTOM_INPUT: {"type": "string", "description": field_doc}},
            "required": [CUSTOM_INPUT],
        }
        return ToolSpec(name=canonical, description=description, parameters=parameters), ToolRoute(
            name=name, namespace=namespace, kind="custom"
        )

    @staticmethod
    def _call_name(name: str, namespace: str | None, routes: dict[str, ToolRoute], top_level: set[str]) -> str:
        if not namespace:
            return name
        qualified = f"{namespace}.{name}"
        if qualified in routes or name not in top_level:
            return qualified
        return name  # a plain tool the client labelled with a default namespace

    def _items(self, builder: ConversationBuilder, items: list, routes: dict[str, ToolRoute]) -> None:
        top_level = {name for name, route in routes.items() if route.namespace is None}
        turn: _OpenTurn | None = None
        for i, item in enumerate(items):
            path = wire.at("input", i)
            item = wire.need_object(item, path)
            kind = wire.opt_str(item, "type", path) or "message"
            if kind == "message":
                role = wire.req_str(item, "role", path)
                if role == "assistant":
                    text = self._text_only(item.get("content"), wire.at(path, "content"))
                    if turn is None or turn.has_text or turn.message.tool_calls:
                        turn = _OpenTurn(builder.assistant(content=text, param=path))
                    else:
                        turn.message.content = text
                    turn.has_text = True
                    continue
                text, refs = self._parts(builder, item.get("content"), wire.at(path, "content"))
                if role == "user":
                    builder.user(text, refs)
                elif role in ("system", "developer"):
                    builder.system(text, refs)
                else:
                    raise wire.bad(
                        wire.at(path, "role"), f"must be 'user', 'assistant', 'system' or 'developer', got {role!r}"
                    )
            elif kind == "reasoning":
                reasoning = self._reasoning_text(item, path)
                if reasoning is None:
                    continue  # reasoning we cannot read (another provider's encrypted blob)
                if turn is None or turn.has_text or turn.message.tool_calls:
                    turn = _OpenTurn(builder.assistant(reasoning=reasoning, param=path))
                else:
                    previous = turn.message.reasoning
                    turn.message.reasoning = reasoning if previous is None else previous + BLOCK_SEPARATOR + reasoning
                continue
            elif kind in ("function_call", "custom_tool_call"):
                call = self._call(item, kind, path, routes, top_level)
                if turn is None:
                    turn = _OpenTurn(builder.assistant(param=path))
                builder.add_call(turn.message, call, wire.at(path, "call_id"))
                continue
            elif kind in ("function_call_output", "custom_tool_call_output"):
                call_id = wire.req_str(item, "call_id", path, nonempty=True)
                output, refs = self._parts(builder, item.get("output"), wire.at(path, "output"))
                builder.tool_result(call_id, output, param=wire.at(path, "call_id"), images=refs)
            elif kind == "item_reference":
                raise wire.bad(wire.at(path, "type"), "item_reference needs server-side state and is not supported")
            elif kind in _BUILTIN_ITEMS:
                pass  # a built-in tool's item; those tools are dropped
            else:
                raise wire.bad(wire.at(path, "type"), f"unsupported input item type {kind!r}")
            turn = None  # anything but an output item closes the assistant turn

    def _call(self, item: dict, kind: str, path: str, routes: dict[str, ToolRoute], top_level: set[str]) -> ToolCall:
        call_id = wire.req_str(item, "call_id", path, nonempty=True)
        name = self._call_name(
            wire.req_str(item, "name", path, nonempty=True), wire.opt_str(item, "namespace", path), routes, top_level
        )
        if kind == "function_call":
            arguments = item.get("arguments", "")
            if not isinstance(arguments, str):
                raise wire.bad(wire.at(path, "arguments"), f"expected a JSON string, got {wire.type_name(arguments)}")
            return ToolCall(
                id=call_id, name=name, arguments=wire.parse_arguments(arguments, wire.at(path, "arguments"))
            )
        return ToolCall(id=call_id, name=name, arguments={CUSTOM_INPUT: wire.req_str(item, "input", path)})

    def _parts(self, builder: ConversationBuilder, content: Any, path: str) -> tuple[str, list[ImageRef]]:
        """A message's content or a call's output: a string, or content parts joined; and the images in it."""
        parts = builder.parts(BLOCK_SEPARATOR)
        self._read_parts(parts, content, path, _MEDIA_PARTS, "input_image")
        return parts.build()

    def _text_only(self, content: Any, path: str) -> str:
        """Content that holds no images (an assistant message): its text, an image part only its placeholder."""
        parts = Parts([], BLOCK_SEPARATOR)
        self._read_parts(parts, content, path, _TEXT_ONLY_MEDIA_PARTS, "")
        return parts.build()[0]

    def _read_parts(self, parts: Parts, content: Any, path: str, media: dict[str, str], image_kind: str) -> None:
        if content is None:
            raise wire.bad(path, "is required")
        if isinstance(content, str):
            parts.text(content)
            return
        if not isinstance(content, list):
            raise wire.bad(path, f"expected a string or an array of content parts, got {wire.type_name(content)}")
        for i, part in enumerate(content):
            openai_common.add_part(parts, part, wire.at(path, i), _TEXT_PARTS, media, image_kind, self._image)

    def _part_text(self, part: Any, path: str) -> str:
        parts = Parts([], BLOCK_SEPARATOR)
        openai_common.add_part(parts, part, path, _TEXT_PARTS, _TEXT_ONLY_MEDIA_PARTS, "", self._image)
        return parts.build()[0]

    @staticmethod
    def _image(part: dict[str, Any], path: str) -> RequestImage:
        """An `input_image` part: `image_url` a data URL (decoded) or an http(s) URL, or `file_id` (by reference)."""
        url = wire.opt_str(part, "image_url", path)
        if url:
            return images.from_url(url, wire.at(path, "image_url"))
        file_id = wire.opt_str(part, "file_id", path)
        if file_id:
            return RequestImage(param=wire.at(path, "file_id"), url=file_id)
        raise wire.bad(path, "an input_image needs `image_url` (a data URL or an http(s) URL) or `file_id`")

    def _reasoning_text(self, item: dict, path: str) -> str | None:
        content = wire.opt_list(item, "content", path)
        texts = [self._part_text(part, wire.at(wire.at(path, "content"), i)) for i, part in enumerate(content)]
        if texts:
            return BLOCK_SEPARATOR.join(texts)
        encrypted = wire.opt_str(item, "encrypted_content", path)
        if encrypted and encrypted.startswith(REASONING_PREFIX):
            try:
                return base64.b64decode(encrypted[len(REASONING_PREFIX) :], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise wire.bad(
                    wire.at(path, "encrypted_content"), "is not reasoning content this proxy wrote"
                ) from None
        summary = wire.opt_list(item, "summary", path)
        texts = [self._part_text(part, wire.at(wire.at(path, "summary"), i)) for i, part in enumerate(summary)]
        return BLOCK_SEPARATOR.join(texts) if texts else None

    def _tool_choice(self, data: dict, routes: dict[str, ToolRoute]) -> tuple[str, str | None]:
        choice = openai_common.tool_choice(data)
        if isinstance(choice, str):
            return choice, None
        kind = wire.req_str(choice, "type", "tool_choice")
        if kind in ("function", "custom"):
            name = wire.req_str(choice, "name", "tool_choice", nonempty=True)
            namespace = wire.opt_str(choice, "namespace", "tool_choice")
            canonical = f"{namespace}.{name}" if namespace else name
            if canonical not in routes:
                raise wire.bad("tool_choice.name", f"names no tool in `tools`: {canonical!r}")
            return "tool", canonical
        return "auto", None  # allowed_tools, built-in tool choices: no constraint we can apply

    def _response_format(self, data: dict) -> dict | None:
        def json_schema(fmt: dict) -> dict:
            schema = wire.need_object(fmt.get("schema"), "text.format.schema")
            wire.check_depth(schema, "text.format.schema")
            return schema

        text = wire.opt_object(data, "text", "")
        fmt = wire.opt_object(text, "format", "text") if text else None
        return openai_common.response_format(fmt, "text.format", json_schema)

    # ---- canonical → response -----------------------------------------------------------------------
    def encode(self, reply: Reply, request: DecodedRequest) -> JSONObject:
        return completed_response(reply, request)

    def stream_encoder(
        self, start: ReplyStart, request: DecodedRequest, *, chunk_chars: int | None = None
    ) -> StreamEncoder:
        return EventStream(start, request, chunk_chars)

    def error(self, err: DialectError) -> tuple[int, JSONObject]:
        return openai_common.openai_error(err, context_param="input")

    def error_stream(self, err: DialectError, *, response_id: str | None = None) -> bytes:
        """`response.created` then `response.failed` with the error's code — Codex reads `code`
        (`context_length_exceeded` → compaction, `server_error` → retry, `invalid_prompt` → give up)."""
        code = openai_common.openai_error_code(err) or ("invalid_prompt" if err.status < 500 else "server_error")
        base = {
            "id": response_id or f"{self.reply_id_prefix}error",
            "object": "response",
            "created_at": 0,
            "status": "in_progress",
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "model": "",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        event = EventWriter()
        failed = {**base, "status": "failed", "error": {"code": code, "message": err.message}}
        return event("response.created", {"response": base}) + event("response.failed", {"response": failed})

    # ---- canonical → request (tests, teachers) ------------------------------------------------------
    def encode_request(
        self, conversation: Conversation, *, model: str = "openforge", stream: bool = False
    ) -> JSONObject:
        s = conversation.sampling
        body: dict[str, Any] = {"model": model, "input": _input_items(conversation)}
        if conversation.system is not None:
            body["instructions"] = conversation.system
        if conversation.tools:
            body["tools"] = [
                {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
                for t in conversation.tools
            ]
        body["max_output_tokens"] = s.max_tokens
        body.update(wire.sampling_fields(s, stop=None, top_k=False))
        if conversation.response_format is not None:
            body["text"] = {
                "format": {"type": "json_schema", "name": "response", "schema": conversation.response_format}
            }
        body["store"] = False
        if stream:
            body["stream"] = True
        return body


def _input_items(conversation: Conversation) -> list[dict[str, Any]]:
    """Canonical messages as Responses input items (what Codex sends back: output items + call outputs)."""
    items: list[dict[str, Any]] = []
    for n, message in enumerate(conversation.messages):
        if message.role == "assistant":
            if message.reasoning is not None:
                items.append(reasoning_item(f"rs_{n}", message.reasoning))
            if message.content or not message.tool_calls:
                items.append(message_item(f"msg_{n}", message.content, "completed"))
            for i, call in enumerate(message.tool_calls):
                items.append(call_item(f"fc_{n}_{i}", call, None, "completed"))
        elif message.role == "tool":
            items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content})
        else:
            role = "developer" if message.role == "system" else "user"
            items.append(
                {"type": "message", "role": role, "content": [{"type": "input_text", "text": message.content}]}
            )
    return items
