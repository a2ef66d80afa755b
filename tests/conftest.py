"""Shared fixtures. Models are built locally (nothing can be downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openforge.models import ModelDir, build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny model, built once per test session."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir) -> ModelDir:
    return ModelDir(tiny_model_dir)
