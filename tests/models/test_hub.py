"""Models by Hugging Face Hub id: `ORG/NAME[@REVISION]` resolves through huggingface_hub's cache — tested
offline (`HF_HUB_OFFLINE=1`) against a cache laid out the way the Hub client lays it out (refs/, snapshots/
of symlinks into blobs/) — with revision pinning, the weights fetched only when loaded, and errors that say
how to get a model that is not there."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openforge.models import ModelDir, ModelDirError, ModelRef
from openforge.train.config import TrainConfig
from support.paths import REPO

MAIN, PINNED = "a" * 40, "b" * 40


def add_snapshot(cache: Path, repo: str, commit: str, files: dict[str, bytes], refs: tuple[str, ...] = ()) -> Path:
    """One commit of `repo` in the cache, as `hf download` leaves it."""
    root = cache / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (root / "blobs").mkdir(exist_ok=True)
    for name, data in files.items():
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path, tiny_model_dir, monkeypatch):
    """org/tiny: main = the tiny model; commit PINNED (branch `dev`) = the same with another chat template."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    files = {p.name: p.read_bytes() for p in tiny_model_dir.iterdir() if p.is_file()}
    add_snapshot(cache, "org/tiny", MAIN, files, refs=("main",))
    other = {**files, "chat_template.jinja": b"{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"}
    add_snapshot(cache, "org/tiny", PINNED, other, refs=("dev",))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))  # read when huggingface_hub was imported
    return cache


def test_hub_ids_and_directories_are_told_apart(tmp_path):
    assert ModelRef.parse("Qwen/Qwen3-8B") == ModelRef(repo_id="Qwen/Qwen3-8B")
    assert ModelRef.parse("Qwen/Qwen3-8B@abc123") == ModelRef(repo_id="Qwen/Qwen3-8B", revision="abc123")
    (tmp_path / "org" / "name").mkdir(parents=True)
    os.chdir(tmp_path)
    try:
        assert ModelRef.parse("org/name") == ModelRef(path=Path("org/name"))  # an existing directory wins
    finally:
        os.chdir(REPO)
    for local in ("./models/x", "/data/models/x", "runs/quickstart/model", "model"):
        assert not ModelRef.parse(local).is_hub


def test_a_hub_id_resolves_to_its_cached_snapshot(hub_cache, tiny_model_dir):
    m = ModelDir("org/tiny")
    assert m.path == hub_cache / "models--org--tiny" / "snapshots" / MAIN
    assert m.vocab_size == ModelDir(tiny_model_dir).vocab_size and m.tool_call_format == "json"


def test_a_revision_pins_the_snapshot(hub_cache):
    for revision in (PINNED, "dev"):
        m = ModelDir(f"org/tiny@{revision}")
        assert m.path.name == PINNED
        assert m.chat_template.startswith("{% for m in messages %}")


def test_weights_load_from_the_cache(hub_cache):
    model = ModelDir("org/tiny").load_model()
    assert sum(p.numel() for p in model.parameters()) > 0


def test_not_in_the_cache_offline_says_how_to_get_it(hub_cache):
    with pytest.raises(ModelDirError) as e:
        ModelDir("org/missing")
    assert "HF_HUB_OFFLINE" in str(e.value) and "hf download org/missing" in str(e.value)
    with pytest.raises(ModelDirError, match="--revision cafe"):
        ModelDir("org/tiny@cafe")


def test_model_info_takes_a_hub_id(hub_cache):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, "-m", "openforge.cli", "model", "info", "org/tiny"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert f"snapshots/{MAIN}" in r.stdout and "tool-call format: json" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "openforge.cli", "model", "info", "org/missing"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2 and "not in the Hugging Face cache" in r.stderr


def test_train_config_takes_a_hub_id():
    config = TrainConfig.model_validate({"model": "Qwen/Qwen3-0.6B@main", "tasks": {"families": ["create_file"]}})
    assert config.model == "Qwen/Qwen3-0.6B@main"
