"""`gpt_oss` — OpenAI's harmony format (gpt-oss): a reply is a series of messages, each with a header and a
channel; `analysis` is reasoning, `final` the answer, and a `commentary` message addressed to
`functions.NAME` a tool call with JSON arguments:

    <|channel|>analysis<|message|>Need ls.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.bash <|constrain|>json<|message|>{"command":"ls"}<|call|>

The recipient may also stand before the channel (`<|start|>assistant to=functions.bash<|channel|>commentary`).
`<|call|>` and `<|return|>` end the turn (the end-of-turn token is removed before parsing).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from openforge.core import ParsedOutput, ToolCall, ToolSpec

from .base import NameAndArguments, ToolCallFormat, finish, json_object

_MESSAGE = re.compile(
    r"(?:<\|start\|>)?(?P<header>.*?)<\|message\|>(?P<body>.*?)"
    r"(?:<\|end\|>|<\|call\|>|<\|return\|>|(?=<\|start\|>)|$)",
    re.DOTALL,
)
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")


class GptOss(ToolCallFormat):
    name = "gpt_oss"
    start = "to=functions."
    end = "<|call|>"
    think = None
    whole_reply = True  # a message's channel and recipient decide what it is: read message by message

    @classmethod
    def detect(cls, chat_template: str) -> bool:
        return "<|channel|>" in chat_template

    def parse_block(self, body: str, tools: list[ToolSpec] | None) -> list[NameAndArguments]:
        raise NotImplementedError  # harmony replies are read message by message (parse)

    def parse(self, text: str, tools: list[ToolSpec] | None, call_id: Callable[[], str]) -> ParsedOutput:
        if "<|message|>" not in text:  # no harmony markup at all: plain text
            return finish(None, text, [], [], tools)
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[ToolCall] = []
        errors: list[str] = []
        pos = 0
        for m in _MESSAGE.finditer(text):
            if m.start() != pos and text[pos : m.start()].strip():
                content.append(text[pos : m.start()])  # text between messages: kept, not lost
            pos = m.end()
            header, body = m.group("header"), m.group("body")
            channel = _CHANNEL.search(header)
            recipient = _RECIPIENT.search(header)
            if recipient and recipient.group(1).startswith("functions."):
                try:
                    calls.append(
                        ToolCall(
                            id=call_id(),
                            name=recipient.group(1)[len("functions.") :],
                            arguments=json_object(body.strip()),
                        )
                    )
                except ValueError as e:
                    errors.append(str(e))
                    content.append(m.group(0))
            elif recipient:
                errors.append(f"call to {recipient.group(1)!r}: only functions.* tools are served")
                content.append(m.group(0))
            elif channel and channel.group(1) == "analysis":
                reasoning.append(body)
            else:  # final, or commentary without a recipient (a preamble the user sees)
                content.append(body)
        if text[pos:].strip():
            content.append(text[pos:])
        return finish("\n".join(reasoning) if reasoning else None, "".join(content), calls, errors, tools)
