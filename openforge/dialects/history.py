"""Assembling canonical messages and tools from wire pieces, with the bookkeeping every dialect needs.

A tool result must answer a call that an earlier assistant turn made, and only once; a call id may be
used once; a tool name may be offered once. These are the checks real APIs make too, and they catch a
harness (or a proxy bug) that would otherwise render a result the model never asked for.
"""

from __future__ import annotations

from openforge.core import ImageRef, Message, ToolCall, ToolSpec
from openforge.dialects import wire
from openforge.dialects.images import Parts, RequestImage


class ToolSet:
    """The tools a request offers (`specs`), each name once, and the tools nothing here can run (`dropped`:
    server-side and built-in tools, by name)."""

    def __init__(self) -> None:
        self.specs: list[ToolSpec] = []
        self.dropped: list[str] = []
        self._names: set[str] = set()

    def claim(self, name: str, param: str) -> str:
        """Take a tool name; a second tool with it is a 400 naming `param`."""
        if name in self._names:
            raise wire.bad(param, f"tool name {name!r} is used more than once")
        self._names.add(name)
        return name


class ConversationBuilder:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._call_names: dict[str, str] = {}  # call id → tool name, for every call made so far
        self._answered: set[str] = set()
        self.images: list[RequestImage] = []  # every image of the request, in body order

    def parts(self, separator: str) -> Parts:
        """A collector for one message's content parts (text and images)."""
        return Parts(self.images, separator)

    def system(self, text: str, images: list[ImageRef] | None = None) -> None:
        self.messages.append(Message(role="system", content=text, images=images or []))

    def user(self, text: str, images: list[ImageRef] | None = None) -> None:
        self.messages.append(Message(role="user", content=text, images=images or []))

    def assistant(
        self, *, content: str = "", reasoning: str | None = None, tool_calls: list[ToolCall] | None = None, param: str
    ) -> Message:
        message = Message(role="assistant", content=content, reasoning=reasoning)
        self.messages.append(message)
        for call in tool_calls or []:
            self.add_call(message, call, param)
        return message

    def add_call(self, message: Message, call: ToolCall, param: str) -> None:
        """Append a call to an assistant message already in the conversation (Responses builds turns item by item)."""
        if call.id in self._call_names:
            raise wire.bad(param, f"tool call id {call.id!r} is used more than once")
        self._call_names[call.id] = call.name
        message.tool_calls.append(call)

    def tool_result(
        self,
        call_id: str,
        content: str,
        *,
        is_error: bool = False,
        param: str,
        images: list[ImageRef] | None = None,
    ) -> None:
        name = self._call_names.get(call_id)
        if name is None:
            raise wire.bad(param, f"tool result for {call_id!r} answers no earlier tool call (unknown tool call id)")
        if call_id in self._answered:
            raise wire.bad(param, f"tool call {call_id!r} already has a result")
        self._answered.add(call_id)
        self.messages.append(
            Message(
                role="tool",
                content=content,
                tool_call_id=call_id,
                name=name,
                is_error=is_error,
                images=images or [],
            )
        )
