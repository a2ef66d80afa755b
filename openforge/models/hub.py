"""A model given as a local directory or a Hugging Face Hub id, resolved to a directory on disk.

`--model` / `model:` take either. `ORG/NAME` or `ORG/NAME@REVISION` (a branch, tag or commit: pin a commit
for runs that must be repeatable) that is not an existing directory is fetched with `huggingface_hub` into
its usual cache (`HF_HOME`, `HF_HUB_CACHE`), which it reuses: with `HF_HUB_OFFLINE=1` only the cache is read.
The tokenizer, config and chat template are fetched first (all the proxy needs with a remote backend); the
weights (`*.safetensors`) only when a model is loaded in this process. Pickled weights (`*.bin`) and remote
code are never fetched.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# What a model directory needs besides weights: config, generation config, tokenizer, chat template.
METADATA_PATTERNS = ["*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
WEIGHT_PATTERNS = ["*.safetensors"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ModelRef:
    """`path` for a local directory; `repo_id` (+ `revision`) for a Hub model."""

    path: Path | None = None
    repo_id: str | None = None
    revision: str | None = None

    @classmethod
    def parse(cls, value: str | Path) -> ModelRef:
        text = str(value)
        if isinstance(value, Path) and value.is_dir() or Path(text).is_dir():
            return cls(path=Path(text))
        repo, _, revision = text.partition("@")
        if _HUB_ID.match(repo) and not text.startswith((".", "/", "~")) and (revision or "@" not in text):
            return cls(repo_id=repo, revision=revision or None)
        return cls(path=Path(text))

    @property
    def is_hub(self) -> bool:
        return self.repo_id is not None

    def __str__(self) -> str:
        if self.repo_id:
            return self.repo_id + (f"@{self.revision}" if self.revision else "")
        return str(self.path)


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_model(ref: ModelRef, weights: bool = False) -> Path:
    """The directory of `ref`: a local path as is; a Hub id's snapshot in the Hub cache (fetched unless
    offline), with its weights when `weights`. FileNotFoundError says how to get what is missing."""
    if ref.repo_id is None:  # not a Hub id: a path
        assert ref.path is not None
        if not ref.path.is_dir():
            raise FileNotFoundError(
                f"model directory {ref.path} does not exist (a Hugging Face Hub id is ORG/NAME or ORG/NAME@REVISION)"
            )
        return ref.path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    patterns = METADATA_PATTERNS + (WEIGHT_PATTERNS if weights else [])
    try:
        return Path(
            snapshot_download(
                ref.repo_id, revision=ref.revision, allow_patterns=patterns, local_files_only=hub_offline()
            )
        )
    except (RepositoryNotFoundError, RevisionNotFoundError) as e:
        raise FileNotFoundError(
            f"{ref} is not a directory here, nor a model (or revision) on the Hugging Face "
            f"Hub: {str(e).splitlines()[0]}"
        ) from None
    except LocalEntryNotFoundError:
        where = (
            "HF_HUB_OFFLINE is set and it is not in the Hugging Face cache"
            if hub_offline()
            else "it is not in the Hugging Face cache and the Hub cannot be reached"
        )
        raise FileNotFoundError(
            f"{ref} is not a directory here, and as a Hugging Face Hub id {where} ({_cache_dir()}); "
            "fetch it once where the Hub is reachable (`hf download "
            f"{ref.repo_id}`{' --revision ' + ref.revision if ref.revision else ''}) and copy the cache, or pass a "
            "local model directory"
        ) from None
    except HfHubHTTPError as e:
        raise FileNotFoundError(f"model {ref}: the Hugging Face Hub refused: {str(e).splitlines()[0]}") from None


def _cache_dir() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)
