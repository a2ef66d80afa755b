"""Sampled text → reasoning, text and tool calls, in the model's tool-call format.

Each model family's format is its own module in `openforge.models.tool_formats` (Hermes JSON — the tiny
model, Qwen2.5/Qwen3 —, Qwen3-Coder, Llama 3.x JSON, Mistral, DeepSeek V3/V3.1, GLM-4.5, Kimi K2, gpt-oss
harmony); the model directory names its format (`ModelDir.tool_call_format`). Markup that cannot be parsed
is left in the text and reported in `parse_error`: the harness still gets a valid reply (never a 500) and
the record says what went wrong.
"""

from __future__ import annotations

from openforge.core import ParsedOutput, ToolSpec
from openforge.dialects import new_id
from openforge.models.tool_formats import get_tool_format


def parse_output(
    text: str,
    tool_format: str = "json",
    tools: list[ToolSpec] | None = None,
    id_prefix: str = "call_",
) -> ParsedOutput:
    """Split sampled text (control tokens kept, end-of-turn token removed) into its parts."""
    return get_tool_format(tool_format).parse(text, tools, lambda: new_id(id_prefix))
