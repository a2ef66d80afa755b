"""Model directories (Hugging Face format, local or a Hub id): tokenizer, chat template, tool-call format,
weights; and the tiny-model builder (which needs the `engine` extra: torch and transformers, imported only
when it is used)."""

from typing import TYPE_CHECKING

from openforge.models.hub import ModelRef, resolve_model
from openforge.models.model_dir import ContentCutError, ContentMarks, ModelDir, ModelDirError, to_hf_messages

if TYPE_CHECKING:
    from openforge.models.tiny import TinyModelSpec, build_tiny_model

__all__ = [
    "ContentCutError",
    "ContentMarks",
    "ModelDir",
    "ModelDirError",
    "ModelRef",
    "TinyModelSpec",
    "build_tiny_model",
    "resolve_model",
    "to_hf_messages",
]


def __getattr__(name: str) -> object:
    # The tiny-model builder imports transformers; the proxy (light core) never needs it.
    if name in ("TinyModelSpec", "build_tiny_model"):
        from openforge.models import tiny

        return getattr(tiny, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
