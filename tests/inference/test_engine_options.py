"""`engine_options`: how the embedded backend runs the model, set by a run's config or `--engine-option`; they
reach the backend that serves the run's episodes, the real-model recipe turns the float32 ones on, and a wrong
one is named before any episode runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from openforge.inference import embedded
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.store import TrajectoryStore
from openforge.train.config import TrainConfig
from openforge.train.quickstart import RECIPES
from openforge.train.serving import proxy_config
from support.rollout import IMAGE_MAP, make_task

OPTIONS = {"cascade_attention": True, "onednn_linears": True}


def recording_backend_options(monkeypatch) -> list[dict]:
    """The keyword arguments of every EmbeddedBackend made from now on (the real backend is still made)."""
    seen: list[dict] = []
    init = embedded.EmbeddedBackend.__init__

    def recording_init(self, model_dir, **options):
        seen.append(options)
        init(self, model_dir, **options)

    monkeypatch.setattr(embedded.EmbeddedBackend, "__init__", recording_init)
    return seen


async def test_a_rollouts_engine_options_reach_the_backend_serving_its_episodes(
    local_ready, tmp_path, tiny_model_dir, monkeypatch
):
    seen = recording_backend_options(monkeypatch)
    tasks = tmp_path / "tasks"
    make_task(tasks, "any")
    config = RolloutConfig(
        tasks=[tasks],
        sandbox="local",
        model=tiny_model_dir,
        run=tmp_path / "run",
        image_map=IMAGE_MAP,
        max_attempts=1,
        max_new_tokens=8,
        sandbox_options={"root": str(tmp_path / "sandboxes")},
        engine_options=OPTIONS,
    )
    await run_rollouts(config)
    assert len(seen) == 1 and {k: seen[0].get(k) for k in OPTIONS} == OPTIONS
    with TrajectoryStore.open(tmp_path / "run") as store:
        (episode,) = store.list_episodes()
        assert store.count_calls(episode.id) >= 1  # the episode's calls were served by that backend


def test_training_serves_with_the_configs_engine_options(tmp_path):
    default = TrainConfig.model_validate({"tasks": {"families": ["create_file"]}})
    built = proxy_config(default, tmp_path / "model", tmp_path / "run", 1.0, tmp_path)
    assert not set(OPTIONS) & set(built.backend_options)  # off unless asked
    real_model = TrainConfig.model_validate(RECIPES["real-model"])
    built = proxy_config(real_model, tmp_path / "model", tmp_path / "run", 1.0, tmp_path)
    assert {k: built.backend_options[k] for k in OPTIONS} == OPTIONS
    assert "bf16_linears" not in built.backend_options  # it changes the recorded logprobs: never by default


def test_engine_options_with_another_backend_or_an_unknown_one_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"engine_options \['cascade_attention'\] apply to the embedded backend only"):
        RolloutConfig(
            tasks=[tmp_path],
            model=tmp_path,
            run=tmp_path,
            backend="vllm:http://127.0.0.1:9",
            engine_options={"cascade_attention": True},
        )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "openforge.cli",
            "eval",
            "--tasks",
            str(tmp_path),
            "--model",
            str(tmp_path),
            "--run",
            str(tmp_path / "run"),
            "--engine-option",
            "cascade=true",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "engine_options.cascade" in " ".join(r.stderr.split()), r.stderr
