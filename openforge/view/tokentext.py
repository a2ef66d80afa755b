"""Token ids as text, for people: each id decoded on its own (cached), control tokens told apart, and an
episode's sampled output split into reasoning, text and tool calls exactly as the proxy split it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openforge.core import ParsedOutput, ToolSpec

if TYPE_CHECKING:  # loading the models package imports transformers: only when a tokenizer is needed
    from openforge.models import ModelDir


class TokenText:
    def __init__(self, model: ModelDir):
        self.model = model
        self._text: dict[int, str] = {}
        self._special = {int(i) for i, token in model.tokenizer.get_added_tokens_decoder().items() if token.special}
        self._eos = set(model.eos_token_ids)

    @classmethod
    def load(cls, path: Path) -> TokenText:
        from openforge.models import ModelDir

        return cls(ModelDir(path))

    @property
    def name(self) -> str:
        return self.model.path.name

    def text(self, token_id: int) -> str:
        """One token's text (a byte-level piece of a multi-byte character decodes as U+FFFD)."""
        text = self._text.get(token_id)
        if text is None:
            text = self._text[token_id] = self.model.decode([token_id])
        return text

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special

    def decode(self, ids: list[int]) -> str:
        return self.model.decode(ids)

    def parse_reply(self, output_ids: list[int], tools: list[ToolSpec]) -> ParsedOutput:
        """The sampled output as the proxy parsed it for the harness (the end-of-turn token removed; tool-call ids
        are fresh, not the ones the harness saw)."""
        from openforge.proxy.output_parser import parse_output

        text_ids = output_ids[:-1] if output_ids and output_ids[-1] in self._eos else output_ids
        return parse_output(self.decode(text_ids), tool_format=self.model.tool_call_format, tools=tools)
