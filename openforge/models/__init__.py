"""Model directories (Hugging Face format): tokenizer, chat template, weights; and the tiny-model builder."""

from openforge.models.model_dir import ModelDir, ModelDirError, to_hf_messages
from openforge.models.tiny import TinyModelSpec, build_tiny_model

__all__ = ["ModelDir", "ModelDirError", "TinyModelSpec", "build_tiny_model", "to_hf_messages"]
