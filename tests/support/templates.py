"""Model directories that pair the tiny model with real chat templates (tests/fixtures/templates). No tests here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.paths import FIXTURES

TEMPLATES = FIXTURES / "templates"


def real_template(name: str) -> str:
    """The chat template of a real model, verbatim (see tests/fixtures/templates/README.md)."""
    return json.loads((TEMPLATES / name / "tokenizer_config.json").read_text())["chat_template"]


def model_with_template(tiny_model_dir: Path, out: Path, name: str) -> Path:
    """The tiny model (weights, tokenizer with the same control tokens) speaking a real model's template."""
    if not out.exists():
        shutil.copytree(tiny_model_dir, out)
        (out / "chat_template.jinja").write_text(real_template(name))
    return out
