"""Sampled text → reasoning, text and tool calls, as the text streams in.

One parser serves both kinds of reply: a streamed reply feeds it each decoded delta and forwards what it
releases; a whole reply (`parse_output`) feeds it everything at once. So what a harness was streamed and what
the proxy records (and matches the next request against) are the same parse, by construction.

What it releases while the text streams in:
- reasoning (`<think>` ... `</think>`) as it comes, its leading and trailing newlines dropped;
- text outside tool calls as it comes, its leading and trailing whitespace dropped (so a delta is held back
  while it is whitespace that may turn out to be trailing, or may be the start of tool-call markup);
- nothing of a tool call until its markup closes. Then the call is parsed whole by the model family's format
  (`openforge.models.tool_formats`: Hermes JSON, Qwen3-Coder, Mistral, DeepSeek, GLM, Kimi, ...): a call
  that parses is kept for the end of the reply; markup that does not parse is released as text, and the
  problem goes into `parse_error`. Holding the markup costs the harness nothing it could use (a half-written
  call cannot run), and means nothing streamed ever has to be taken back: a tool call is never streamed as
  text and then found to be a call, nor streamed as a call and then found to be text.
Tool calls go out with the end of the reply (the dialects put them after the text: a model's calls close its
turn, and a call in the middle of the text would come back as two text blocks and no longer match the reply).

Formats whose calls cannot be found by markers as the text streams (`whole_reply`: Llama 3's bare JSON reply,
gpt-oss's harmony messages) are held whole and released, parsed by their format, when the reply ends.

Markup that cannot be parsed never fails a call: the harness gets a valid reply and the record says what went
wrong. Where a stream had to decide before seeing the end, the rule is (docs/design.md, "Streaming"):
- reasoning (the format's `think` markers, `<think>` ... `</think>` for most): a streamed reply starts in
  reasoning when the prompt opened it (the template's generation prompt ends in the opening marker) or when the
  output starts with it; reasoning that is never closed stays
  reasoning. A whole reply (`parse_output`, non-streaming requests) reads everything before the first
  closing marker as reasoning, as it always has;
- a tool call whose markup is never closed is released as text at the end, flagged `... is not closed`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from openforge.core import ParsedOutput, ToolCall, ToolSpec
from openforge.dialects import new_id
from openforge.models import ModelDir
from openforge.models.tool_formats import ToolCallFormat, get_tool_format

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"  # the families' default reasoning markers

Delta = tuple[Literal["reasoning", "text"], str]  # ("reasoning", "") opens an empty reasoning part


def _partial(text: str, tag: str) -> int:
    """How many trailing characters of `text` could be the start of `tag` (held back until known)."""
    for k in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:k]):
            return k
    return 0


def prompt_opens_reasoning(prompt_tail: str, tool_format: str = "json") -> bool:
    """Whether a rendered prompt ends inside an open reasoning marker (templates that start the reply's
    reasoning in the generation prompt): the reply then begins with reasoning and never writes the marker."""
    think = get_tool_format(tool_format).think
    return think is not None and prompt_tail.rstrip().endswith(think[0])


class OutputParser:
    """Feed decoded text with `feed` (any split), then `close()` once. Each returns the deltas to stream.

    `reasoning`: True, the output begins inside reasoning; None, it does if it starts with the format's
    opening marker; False, it has none (always False for a format without reasoning markers).
    """

    def __init__(
        self,
        tool_format: str = "json",
        tools: list[ToolSpec] | None = None,
        id_prefix: str = "call_",
        reasoning: bool | None = None,
    ):
        self.format: ToolCallFormat = get_tool_format(tool_format)
        self.think_open, self.think_close = self.format.think or ("", "")
        if self.format.think is None or self.format.whole_reply:
            reasoning = False
        self.tools = tools
        self.id_prefix = id_prefix
        self.state = "start" if reasoning is None else ("reasoning_start" if reasoning else "text")
        if self.format.whole_reply:
            self.state = "whole"
        self.pending = ""  # text not yet classified: a possible tag, a tool call's markup
        self.space = ""  # whitespace after the released content: released only if more content follows
        self.reasoning: str | None = None
        self.content = ""
        self.calls: list[ToolCall] = []
        self.errors: list[str] = []
        self.closed = False

    # ---- feeding ------------------------------------------------------------------------------------
    def feed(self, text: str) -> list[Delta]:
        if self.closed:
            raise RuntimeError("the parser is closed")
        self.pending += text
        out: list[Delta] = []
        while self._step(out):
            pass
        return out

    def close(self) -> list[Delta]:
        """Release what was held; the parse is then `self.output()`."""
        out: list[Delta] = []
        while self._step(out):
            pass
        self.closed = True
        if self.state == "whole":
            self._whole(out)
            return out
        if self.state == "start":  # only whitespace, or the start of "<think>": text
            self.state = "text"
        if self.state == "reasoning_start":
            self._begin_reasoning(out)
            self.pending = self.pending.lstrip()
            self.state = "reasoning"
        if self.state == "reasoning":  # never closed: what was written is the reasoning
            self._reason(self.pending.rstrip("\n"), out)
        elif self.state == "block":
            if self.format.end is None:  # blocks that run to the next start marker or the end of the output
                for body in self.pending.split(self.format.start):
                    self._call(body, out, markup=self.format.start + body)
            else:
                self.errors.append(f"{self.format.start} is not closed")
                self._text(self.format.start + self.pending, out)
        else:
            self._text(self.pending, out)
        self.pending = self.space = ""  # trailing whitespace is dropped
        if self.tools is not None:
            known = {t.name for t in self.tools}
            self.errors += [f"tool {c.name!r} was not offered" for c in self.calls if c.name not in known]
        return out

    def output(self) -> ParsedOutput:
        return ParsedOutput(
            reasoning=self.reasoning,
            content=self.content,
            tool_calls=self.calls,
            parse_error="; ".join(self.errors) or None,
        )

    # ---- the states ---------------------------------------------------------------------------------
    def _step(self, out: list[Delta]) -> bool:
        """Consume what `pending` allows in the current state; True when the state changed (go again)."""
        pending = self.pending
        if self.state == "whole":
            return False  # held until the reply is complete
        THINK_OPEN, THINK_CLOSE = self.think_open, self.think_close  # noqa: N806 (the format's markers)
        if self.state == "start":
            body = pending.lstrip()
            if THINK_OPEN.startswith(body):
                return False  # nothing yet, or maybe "<think>" still coming
            if body.startswith(THINK_OPEN):
                self.pending = body[len(THINK_OPEN) :]
                self._begin_reasoning(out)
                self.state = "reasoning"
            else:
                self.state = "text"
            return True
        if self.state == "reasoning_start":
            body = pending.lstrip()
            if THINK_OPEN.startswith(body) and body != THINK_OPEN:
                return False
            self.pending = body[len(THINK_OPEN) :] if body.startswith(THINK_OPEN) else body
            self._begin_reasoning(out)
            self.state = "reasoning"
            return True
        if self.state == "reasoning":
            at = pending.find(THINK_CLOSE)
            if at >= 0:
                self._reason(pending[:at].rstrip("\n"), out)
                self.pending = pending[at + len(THINK_CLOSE) :]
                self.state = "text"  # the whitespace after `</think>` is the text's leading whitespace
                return True
            ready = pending[: len(pending) - _partial(pending, THINK_CLOSE)]
            ready = ready.rstrip("\n")  # trailing newlines wait: they are dropped if `</think>` follows
            self._reason(ready, out)
            self.pending = pending[len(ready) :]
            return False
        if self.state == "text":
            at = pending.find(self.format.start)
            if at >= 0:
                self._text(pending[:at], out)
                self.pending = pending[at + len(self.format.start) :]
                self.state = "block"
                return True
            ready = pending[: len(pending) - _partial(pending, self.format.start)]
            self._text(ready, out)
            self.pending = pending[len(ready) :]
            return False
        if self.state == "block":
            close = self.format.end
            at = pending.find(close) if close else -1
            if close is None or at < 0:  # (blocks without an end marker end with the output: `close`)
                return False
            self._call(pending[:at], out, markup=self.format.start + pending[: at + len(close)])
            self.pending = pending[at + len(close) :]
            self.state = "text"
            return True
        raise AssertionError(self.state)

    # ---- releasing ----------------------------------------------------------------------------------
    def _begin_reasoning(self, out: list[Delta]) -> None:
        if self.reasoning is None:
            self.reasoning = ""
            out.append(("reasoning", ""))

    def _reason(self, text: str, out: list[Delta]) -> None:
        if not self.reasoning:
            text = text.lstrip("\n")  # leading newlines of the reasoning are dropped
        if text:
            self.reasoning = (self.reasoning or "") + text  # (every state that gets here began the reasoning)
            out.append(("reasoning", text))

    def _text(self, text: str, out: list[Delta]) -> None:
        """Release content: whitespace is held (`space`) until content follows it, so the content has no
        leading or trailing whitespace."""
        piece = self.space + text
        core = piece.rstrip()
        if not self.content:
            core = core.lstrip()
        if not core:
            self.space = piece if self.content else ""
            return
        self.space = piece[len(piece.rstrip()) :]
        self.content += core
        out.append(("text", core))

    def _call(self, body: str, out: list[Delta], markup: str) -> None:
        try:
            found = self.format.parse_block(body, self.tools)
        except ValueError as e:
            self.errors.append(str(e))
            self._text(markup, out)
            return
        self.calls += [ToolCall(id=new_id(self.id_prefix), name=name, arguments=arguments) for name, arguments in found]

    def _whole(self, out: list[Delta]) -> None:
        """A `whole_reply` format: the reply read at once by its format, then released as one stream."""
        parsed = self.format.parse(self.pending, self.tools, lambda: new_id(self.id_prefix))
        self.pending = ""
        if parsed.reasoning is not None:
            self._begin_reasoning(out)
            self._reason(parsed.reasoning, out)
        self._text(parsed.content, out)
        self.calls = list(parsed.tool_calls)
        self.errors += [parsed.parse_error] if parsed.parse_error else []


def parse_output(
    text: str,
    tool_format: str = "json",
    tools: list[ToolSpec] | None = None,
    id_prefix: str = "call_",
) -> ParsedOutput:
    """Split a whole sampled text (control tokens kept, end-of-turn token removed) into its parts. Everything
    before the first closing reasoning marker is reasoning."""
    think = get_tool_format(tool_format).think
    parser = OutputParser(tool_format, tools, id_prefix, reasoning=think is not None and think[1] in text)
    parser.feed(text)
    parser.close()
    return parser.output()


def reply_parser(model: str | Path) -> Callable[[str, list[ToolSpec]], ParsedOutput]:
    """`parse_output` in the tool-call format of `model` (a model directory or Hub id): what `serve-model
    --tool-call-parser auto` parses its replies with, as vLLM's parser does."""
    tool_format = ModelDir(model).tool_call_format

    def parse(text: str, tools: list[ToolSpec]) -> ParsedOutput:
        return parse_output(text, tool_format=tool_format, tools=tools)

    return parse
