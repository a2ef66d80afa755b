"""Model directories (Hugging Face format): tokenizer, chat template, weights; and the tiny-model builder."""

from transformers.utils import logging as _hf_logging

from openforge.models.model_dir import ContentCutError, ContentMarks, ModelDir, ModelDirError, to_hf_messages
from openforge.models.tiny import TinyModelSpec, build_tiny_model

__all__ = ["ContentCutError", "ContentMarks", "ModelDir", "ModelDirError", "TinyModelSpec", "build_tiny_model", "to_hf_messages"]

# transformers' per-shard progress bars are noise for a 2M-parameter model saved and loaded many times.
_hf_logging.disable_progress_bar()
