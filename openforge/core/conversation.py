"""The canonical conversation: what every dialect decodes into and every renderer reads.

Pure data, no I/O. Dialect modules (Anthropic Messages, OpenAI Responses, Chat Completions) translate
their wire formats into these types; the renderer turns them into token ids with a model's chat template.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class ToolSpec(_Data):
    """A tool the model may call; `parameters` is a JSON schema object."""

    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolCall(_Data):
    """One call the model made. `arguments` is the decoded JSON object the model produced."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


Role = Literal["system", "user", "assistant", "tool"]


class ImageRef(_Data):
    """An image a message carried, by reference: its bytes live in the store, once per `sha256`.

    The message's `content` holds the image's placeholder text, `length` characters at `offset` (what a text-only
    model reads); a model whose chat template takes images gets the image there instead. An image the harness sent by
    reference (an http(s) URL, a file id) has no bytes here: `url` names it and `sha256` is None.
    """

    offset: int = Field(ge=0)
    length: int = Field(default=0, ge=0)
    sha256: str | None = None
    media_type: str | None = None
    size: int = Field(default=0, ge=0)  # bytes of the decoded image
    url: str | None = None


class Message(_Data):
    """One turn.

    - `user` / `system`: `content` text.
    - `assistant`: optional `reasoning` (thinking), `content` text, and `tool_calls`.
    - `tool`: the result of the call named by `tool_call_id`, in `content`; `is_error` marks a failed tool.
    - `images`: the images of a user, system or tool message, each standing at its placeholder in `content`.
    """

    role: Role
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    images: list[ImageRef] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_role_fields(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role!r}")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        return self


class SamplingParams(_Data):
    """How to sample. `max_tokens` is the most new tokens; `top_k` 0 means no top-k truncation."""

    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    max_tokens: int = Field(default=1024, ge=1)
    stop: list[str] = Field(default_factory=list)
    stop_token_ids: list[int] = Field(default_factory=list)
    seed: int | None = None

    @field_validator("stop_token_ids")
    @classmethod
    def _non_negative_ids(cls, v: list[int]) -> list[int]:
        if any(i < 0 for i in v):
            raise ValueError("token ids are non-negative integers")
        return v


class Conversation(_Data):
    """A request as the model sees it: system prompt, turns, tools and sampling parameters.

    `response_format` is an optional JSON schema the reply must satisfy (Anthropic `output_config`,
    OpenAI `response_format` / `text.format`).
    """

    system: str | None = None
    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    response_format: dict[str, Any] | None = None
    model: str | None = None

    @property
    def has_tools(self) -> bool:
        return bool(self.tools)


class ParsedOutput(_Data):
    """Sampled text split into what a dialect encodes: reasoning, text and tool calls.

    `parse_error` is set when the text held tool-call markup that could not be parsed; the markup is then
    left in `content` as plain text.
    """

    reasoning: str | None = None
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    parse_error: str | None = None
