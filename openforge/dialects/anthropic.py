"""Anthropic Messages (`POST /v1/messages`): Claude Code's dialect, and OpenClaw's `anthropic-messages`.

Decoding:
- `system` (string or text blocks) → `Conversation.system`; `role: "system"` messages inside `messages`
  (Claude Code sends them) → canonical system messages in place.
- user blocks: text; image → decoded (base64 source) or kept by reference (url, file source) with its
  placeholder text (`images.py`); document → a placeholder (documents with a text source keep their text);
  tool_result (string or blocks, images included, `is_error`) → canonical tool messages, in block order.
- assistant blocks: text; thinking → reasoning (signature ignored); redacted_thinking ignored;
  tool_use → tool calls; server-tool blocks (never produced here) ignored.
- `cache_control` anywhere, `metadata`, `context_management`, `thinking`, `service_tier`, ... accepted and
  ignored (thinking only sets `reasoning_requested`); `output_config.format` (or the older
  `output_format`) JSON schema → `Conversation.response_format`.
- tools: custom tools (`input_schema`) kept; typed server tools (`web_search_*`, `bash_*`, ...) dropped.
- `max_tokens` required (not for count_tokens).

Encoding (`anthropic_output`): a `message` with [thinking, text, tool_use*] blocks, whole or as its event
stream; a canonical conversation as a request.
"""

from __future__ import annotations

from typing import Any

from openforge.core import Conversation, ToolCall, ToolSpec
from openforge.core.json_types import JSONObject
from openforge.dialects import images, wire
from openforge.dialects.anthropic_output import MessageStream, message_body, request_body
from openforge.dialects.base import (
    BLOCK_SEPARATOR,
    FILE_PLACEHOLDER,
    DecodedReply,
    DecodedRequest,
    Dialect,
    Reply,
    ReplyStart,
    StreamEncoder,
)
from openforge.dialects.errors import DialectError
from openforge.dialects.history import ConversationBuilder, ToolSet
from openforge.dialects.images import Parts, RequestImage

# Blocks that only server-side tools produce; OpenForge never does, so in history they carry nothing
# the policy said and are skipped.
_SERVER_BLOCKS = frozenset(
    {
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)

_ERROR_TYPES = {
    "invalid_request": (400, "invalid_request_error"),
    "prompt_too_long": (400, "invalid_request_error"),
    "authentication": (401, "authentication_error"),
    "not_found": (404, "not_found_error"),
    "request_timeout": (408, "invalid_request_error"),
    "request_too_large": (413, "request_too_large"),
    "rate_limit": (429, "rate_limit_error"),
    "api_error": (500, "api_error"),
    "overloaded": (529, "overloaded_error"),
}


class AnthropicMessages(Dialect):
    name = "anthropic"
    routes = ("/v1/messages",)
    count_routes = ("/v1/messages/count_tokens",)
    reply_id_prefix = "msg_"
    call_id_prefix = "toolu_"

    # ---- request → canonical -----------------------------------------------------------------------
    def decode(self, body: bytes, *, for_count: bool = False) -> DecodedRequest:
        data = wire.parse_body(body)
        model = wire.req_str(data, "model", "", nonempty=True)
        max_tokens = wire.opt_int(data, "max_tokens", "", minimum=1)
        if max_tokens is None and not for_count:
            raise wire.bad("max_tokens", "is required")

        tools, dropped = self._tools(data)
        builder = ConversationBuilder()
        messages = wire.req_list(data, "messages", "")
        if not messages:
            raise wire.bad("messages", "must contain at least one message")
        for i, message in enumerate(messages):
            self._message(builder, message, wire.at("messages", i))

        # The ranges of the Messages API reference (platform.claude.com/docs/en/api/messages): temperature
        # "ranges from 0.0 to 1.0", top_p a probability, top_k a count.
        temperature = wire.opt_number(data, "temperature", "", minimum=0.0, maximum=1.0)
        top_p = wire.opt_number(data, "top_p", "", minimum=0.0, maximum=1.0)
        top_k = wire.opt_int(data, "top_k", "", minimum=0)
        sampling = wire.sampling_params(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            stop=wire.str_list(wire.opt_list(data, "stop_sequences", ""), "stop_sequences"),
            names={"stop": "stop_sequences"},
        )
        tool_choice, forced = self._tool_choice(data, tools)
        thinking = self._thinking(data, max_tokens)
        if thinking:
            self._check_thinking_compatible(temperature, top_p, top_k, tool_choice)
        self._effort(data)
        disable_parallel = (wire.opt_object(data, "tool_choice", "") or {}).get("disable_parallel_tool_use") is True
        conversation = Conversation(
            system=self._system(data.get("system")),
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
            parallel_tool_calls=not disable_parallel,
            reasoning_requested=thinking,
            dropped_tools=dropped,
            images=builder.images,
        )

    def _system(self, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise wire.bad("system", f"expected a string or an array of text blocks, got {wire.type_name(value)}")
        if not value:
            return None
        return BLOCK_SEPARATOR.join(self._text_block(block, wire.at("system", i)) for i, block in enumerate(value))

    def _text_block(self, block: Any, path: str) -> str:
        block = wire.need_object(block, path)
        kind = wire.req_str(block, "type", path)
        if kind != "text":
            raise wire.bad(wire.at(path, "type"), f"expected a text block, got {kind!r}")
        return wire.req_str(block, "text", path)

    def _message(self, builder: ConversationBuilder, message: Any, path: str) -> None:
        message = wire.need_object(message, path)
        role = wire.req_str(message, "role", path)
        if "content" not in message or message["content"] is None:
            raise wire.bad(wire.at(path, "content"), "is required")
        content = message["content"]
        if not isinstance(content, (str, list)):
            raise wire.bad(
                wire.at(path, "content"),
                f"expected a string or an array of content blocks, got {wire.type_name(content)}",
            )
        if role == "user":
            self._user(builder, content, wire.at(path, "content"))
        elif role == "assistant":
            self._assistant(builder, content, wire.at(path, "content"))
        elif role == "system":
            # Claude Code puts system reminders inside `messages`; they stay where they are.
            text = (
                content
                if isinstance(content, str)
                else BLOCK_SEPARATOR.join(
                    self._text_block(block, wire.at(wire.at(path, "content"), i)) for i, block in enumerate(content)
                )
            )
            builder.system(text)
        else:
            raise wire.bad(wire.at(path, "role"), f"must be 'user', 'assistant' or 'system', got {role!r}")

    def _user(self, builder: ConversationBuilder, content: str | list, path: str) -> None:
        if isinstance(content, str):
            builder.user(content)
            return
        parts = builder.parts(BLOCK_SEPARATOR)

        def flush() -> None:
            if parts:
                builder.user(*parts.build())

        for i, block in enumerate(content):
            bpath = wire.at(path, i)
            block = wire.need_object(block, bpath)
            kind = wire.req_str(block, "type", bpath)
            if kind == "tool_result":
                flush()  # results and text keep their order
                call_id = wire.req_str(block, "tool_use_id", bpath, nonempty=True)
                result = builder.parts(BLOCK_SEPARATOR)
                self._result_content(result, block.get("content"), wire.at(bpath, "content"))
                text, refs = result.build()
                builder.tool_result(
                    call_id,
                    text,
                    is_error=wire.opt_bool(block, "is_error", bpath),
                    param=wire.at(bpath, "tool_use_id"),
                    images=refs,
                )
            else:
                self._user_block(parts, block, kind, bpath)
        flush()
        if not content:
            builder.user("")

    def _user_block(self, parts: Parts, block: dict, kind: str, path: str) -> None:
        if kind == "text":
            parts.text(wire.req_str(block, "text", path))
        elif kind == "image":
            parts.image(self._image(block, path))
        elif kind == "document":
            source = block.get("source")
            if isinstance(source, dict) and source.get("type") == "text" and isinstance(source.get("data"), str):
                parts.text(source["data"])
            else:
                parts.text(FILE_PLACEHOLDER)
        elif kind == "search_result":
            inner = wire.opt_list(block, "content", path)
            parts.text(
                BLOCK_SEPARATOR.join(
                    self._text_block(b, wire.at(wire.at(path, "content"), i)) for i, b in enumerate(inner)
                )
            )
        else:
            raise wire.bad(wire.at(path, "type"), f"unsupported content block type {kind!r} in a user message")

    @staticmethod
    def _image(block: dict, path: str) -> RequestImage:
        """An `image` block: a base64 source decoded, a `url` or `file` source kept by reference."""
        spath = wire.at(path, "source")
        source = wire.need_object(block.get("source"), spath)
        kind = wire.req_str(source, "type", spath)
        if kind == "base64":
            declared = wire.req_str(source, "media_type", spath)
            return images.decode_base64(wire.req_str(source, "data", spath), declared, wire.at(spath, "data"))
        if kind == "url":
            return RequestImage(param=spath, url=wire.req_str(source, "url", spath, nonempty=True))
        if kind == "file":
            return RequestImage(param=spath, url=wire.req_str(source, "file_id", spath, nonempty=True))
        raise wire.bad(wire.at(spath, "type"), f"must be 'base64', 'url' or 'file', got {kind!r}")

    def _result_content(self, parts: Parts, value: Any, path: str) -> None:
        if value is None:
            parts.text("")
            return
        if isinstance(value, str):
            parts.text(value)
            return
        if not isinstance(value, list):
            raise wire.bad(path, f"expected a string or an array of content blocks, got {wire.type_name(value)}")
        for i, block in enumerate(value):
            bpath = wire.at(path, i)
            block = wire.need_object(block, bpath)
            kind = wire.req_str(block, "type", bpath)
            if kind in ("text", "image", "document", "search_result"):
                self._user_block(parts, block, kind, bpath)
            else:
                # The harness owns tool results (Claude Code's tool search returns `tool_reference`
                # blocks): an unknown kind is noted, not fatal to the episode.
                parts.text(f"[{kind} block omitted]")

    def _assistant(self, builder: ConversationBuilder, content: str | list, path: str) -> None:
        if isinstance(content, str):
            builder.assistant(content=content, param=path)
            return
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[tuple[ToolCall, str]] = []
        for i, block in enumerate(content):
            bpath = wire.at(path, i)
            block = wire.need_object(block, bpath)
            kind = wire.req_str(block, "type", bpath)
            if kind == "text":
                texts.append(wire.req_str(block, "text", bpath))
            elif kind == "thinking":
                thoughts.append(wire.req_str(block, "thinking", bpath))
            elif kind == "tool_use":
                arguments = block.get("input", {})
                if not isinstance(arguments, dict):
                    raise wire.bad(wire.at(bpath, "input"), f"expected an object, got {wire.type_name(arguments)}")
                wire.check_depth(arguments, wire.at(bpath, "input"))
                call = ToolCall(
                    id=wire.req_str(block, "id", bpath, nonempty=True),
                    name=wire.req_str(block, "name", bpath, nonempty=True),
                    arguments=arguments,
                )
                calls.append((call, wire.at(bpath, "id")))
            elif kind == "redacted_thinking" or kind in _SERVER_BLOCKS:
                continue  # opaque or server-side: nothing the policy wrote
            else:
                raise wire.bad(
                    wire.at(bpath, "type"), f"unsupported content block type {kind!r} in an assistant message"
                )
        message = builder.assistant(
            content=BLOCK_SEPARATOR.join(texts),
            reasoning=BLOCK_SEPARATOR.join(thoughts) if thoughts else None,
            param=path,
        )
        for call, param in calls:
            builder.add_call(message, call, param)

    def _tools(self, data: dict) -> tuple[list[ToolSpec], list[str]]:
        offered = ToolSet()
        for tool, path in wire.each_object(data, "tools"):
            kind = wire.opt_str(tool, "type", path)
            if kind is not None and kind != "custom":
                label = tool.get("name")
                offered.dropped.append(label if isinstance(label, str) else kind)
                continue  # a server tool (web search, hosted bash, ...): nothing here can run it
            name = offered.claim(wire.req_str(tool, "name", path, nonempty=True), wire.at(path, "name"))
            schema = tool.get("input_schema")
            if schema is None:
                raise wire.bad(wire.at(path, "input_schema"), "is required")
            schema = wire.need_object(schema, wire.at(path, "input_schema"))
            wire.check_depth(schema, wire.at(path, "input_schema"))
            offered.specs.append(
                ToolSpec(name=name, description=wire.opt_str(tool, "description", path) or "", parameters=schema)
            )
        return offered.specs, offered.dropped

    def _tool_choice(self, data: dict, tools: list[ToolSpec]) -> tuple[str, str | None]:
        choice = wire.opt_object(data, "tool_choice", "")
        if choice is None:
            return "auto", None
        kind = wire.req_str(choice, "type", "tool_choice")
        if kind == "auto":
            return "auto", None
        if kind == "any":
            return "required", None
        if kind == "none":
            return "none", None
        if kind == "tool":
            name = wire.req_str(choice, "name", "tool_choice", nonempty=True)
            if name not in {t.name for t in tools}:
                raise wire.bad("tool_choice.name", f"names no tool in `tools`: {name!r}")
            return "tool", name
        raise wire.bad("tool_choice.type", f"must be 'auto', 'any', 'tool' or 'none', got {kind!r}")

    def _thinking(self, data: dict, max_tokens: int | None) -> bool | None:
        """Whether thinking was asked for (None: not said), checked as the API checks it: `type` one of
        enabled / disabled / adaptive; with `enabled`, `budget_tokens` "must be ≥1024 and less than
        max_tokens" (platform.claude.com/docs/en/build-with-claude/extended-thinking, and the SDK's
        ThinkingConfigEnabledParam)."""
        thinking = wire.opt_object(data, "thinking", "")
        if thinking is None:
            return None
        kind = wire.req_str(thinking, "type", "thinking")
        if kind not in ("enabled", "disabled", "adaptive"):
            raise wire.bad("thinking.type", f"must be 'enabled', 'disabled' or 'adaptive', got {kind!r}")
        if kind == "enabled":
            budget = wire.opt_int(thinking, "budget_tokens", "thinking")
            if budget is None:
                raise wire.bad("thinking.budget_tokens", "is required when thinking is enabled")
            if budget < 1024:
                raise wire.bad("thinking.budget_tokens", f"must be at least 1024, got {budget}")
            if max_tokens is not None and budget >= max_tokens:
                raise wire.bad("thinking.budget_tokens", f"must be less than max_tokens ({max_tokens}), got {budget}")
        return kind != "disabled"

    @staticmethod
    def _check_thinking_compatible(
        temperature: float | None, top_p: float | None, top_k: int | None, tool_choice: str
    ) -> None:
        """Thinking "isn't compatible with temperature or top_k modifications as well as forced tool use";
        top_p may be set between 0.95 and 1 (extended-thinking docs, "Feature compatibility")."""
        if temperature is not None and temperature != 1.0:
            raise wire.bad("temperature", f"may only be set to 1 when thinking is enabled, got {temperature}")
        if top_k is not None:
            raise wire.bad("top_k", "cannot be set when thinking is enabled")
        if top_p is not None and top_p < 0.95:
            raise wire.bad("top_p", f"must be between 0.95 and 1 when thinking is enabled, got {top_p}")
        if tool_choice in ("required", "tool"):
            raise wire.bad("tool_choice", "thinking cannot be used with forced tool use ('any' or 'tool')")

    @staticmethod
    def _effort(data: dict) -> None:
        # output_config.effort: the values of the SDK's OutputConfigParam
        config = wire.opt_object(data, "output_config", "")
        if config is not None:
            wire.opt_choice(config, "effort", "output_config", ("low", "medium", "high", "xhigh", "max"))

    def _response_format(self, data: dict) -> dict | None:
        config = wire.opt_object(data, "output_config", "")
        fmt, path = (config.get("format"), "output_config.format") if config else (None, "")
        if fmt is None and data.get("output_format") is not None:
            fmt, path = data["output_format"], "output_format"  # the structured-outputs beta's spelling
        if fmt is None:
            return None
        fmt = wire.need_object(fmt, path)
        kind = wire.req_str(fmt, "type", path)
        if kind != "json_schema":
            raise wire.bad(wire.at(path, "type"), f"only 'json_schema' is supported, got {kind!r}")
        schema = wire.need_object(fmt.get("schema"), wire.at(path, "schema"))
        wire.check_depth(schema, wire.at(path, "schema"))
        return schema

    # ---- canonical → response -----------------------------------------------------------------------
    def encode(self, reply: Reply, request: DecodedRequest) -> JSONObject:
        return message_body(reply)

    def stream_encoder(
        self, start: ReplyStart, request: DecodedRequest, *, chunk_chars: int | None = None
    ) -> StreamEncoder:
        return MessageStream(start, request, chunk_chars)

    def encode_count(self, input_tokens: int) -> JSONObject:
        return {"input_tokens": input_tokens}

    def error(self, err: DialectError) -> tuple[int, JSONObject]:
        status, kind = _ERROR_TYPES[err.kind]
        return status, {"type": "error", "error": {"type": kind, "message": err.message}}

    def error_stream(self, err: DialectError, *, response_id: str | None = None) -> bytes:
        _, body = self.error(err)
        return wire.sse(body, "error")

    # ---- response → canonical (a client of an upstream model) -----------------------------------------
    def decode_reply(self, body: bytes | JSONObject) -> DecodedReply:
        data = body if isinstance(body, dict) else wire.parse_body(body)
        content = wire.req_list(data, "content", "")
        builder = ConversationBuilder()  # the reply, read as the assistant turn of a history
        self._assistant(builder, content, "content")
        return self._decoded_reply(
            builder.messages[-1],
            cut=data.get("stop_reason") == "max_tokens",
            usage=wire.opt_object(data, "usage", "") or {},
            counts=("input_tokens", "output_tokens"),
            model=wire.opt_str(data, "model", ""),
        )

    # ---- canonical → request (tests, teachers) ------------------------------------------------------
    def encode_request(
        self, conversation: Conversation, *, model: str = "openforge", stream: bool = False
    ) -> JSONObject:
        return request_body(conversation, model=model, stream=stream)
