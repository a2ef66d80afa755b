"""Tool-call formats of the model families OpenForge serves, one module each, registered by name.

`detect_tool_format(chat_template)` picks the format a model's chat template renders (`ModelDir.tool_format`);
`get_tool_format(name)` looks one up. The most specific markup is checked first: GLM's and Qwen3-Coder's
calls also sit in `<tool_call>` tags, so Hermes JSON (`json`) is the last match and the default.
"""

from __future__ import annotations

from .base import ToolCallFormat
from .deepseek import DeepSeekV3
from .glm import GLM45
from .harmony import GptOss
from .hermes import HermesJSON
from .kimi import KimiK2
from .llama3 import Llama3JSON
from .mistral import Mistral
from .qwen3_coder import Qwen3Coder

# In detection order (most specific first); `json` is the default.
_FORMATS: tuple[ToolCallFormat, ...] = (
    GptOss(),
    KimiK2(),
    DeepSeekV3(),
    GLM45(),
    Qwen3Coder(),
    Mistral(),
    Llama3JSON(),
    HermesJSON(),
)
FORMATS: dict[str, ToolCallFormat] = {f.name: f for f in _FORMATS}
DEFAULT_FORMAT = "json"


def get_tool_format(name: str) -> ToolCallFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; known: {', '.join(sorted(FORMATS))}") from None


def detect_tool_format(chat_template: str) -> ToolCallFormat:
    """The format a chat template renders tool calls in (`json` when none is recognised)."""
    return next((f for f in _FORMATS if f.detect(chat_template)), FORMATS[DEFAULT_FORMAT])


__all__ = ["DEFAULT_FORMAT", "FORMATS", "ToolCallFormat", "detect_tool_format", "get_tool_format"]
