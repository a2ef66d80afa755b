"""Difficulty during training: pass rates from GRPO's own rollouts, tasks dropped after `rl.drop_after` visits
on which all passed (saturated) or none did (impossible), rebuilt on --resume; the compute of groups without
signal counted per step; and a real run on task directories that drops the tasks its policy cannot solve."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import pytest

from openforge.config import ConfigError, validate_config
from openforge.train.config import TrainConfig
from openforge.train.difficulty import DifficultyTracker, no_signal_cost, task_results
from openforge.train.pipeline import run_training
from openforge.train.records import read_steps
from support.paths import EXAMPLES


@dataclass
class Ep:
    task: str
    harness: str
    reward: float | None
    seconds: float = 1.0


def test_a_task_is_dropped_after_so_many_visits_of_one_kind():
    tracker = DifficultyTracker(drop_after=2)
    assert tracker.observe({"easy": (4, 4), "hard": (0, 4), "mid": (2, 4)}) == {}
    assert tracker.observe({"easy": (4, 4), "hard": (1, 4)}) == {"easy": "saturated"}  # hard: mixed, count reset
    assert tracker.observe({"hard": (0, 3)}) == {}
    assert tracker.observe({"hard": (0, 4), "mid": (0, 0)}) == {"hard": "impossible"}  # nothing graded: no visit kind
    assert tracker.dropped == {"easy": "saturated", "hard": "impossible"}
    assert tracker.tasks["hard"].pass_rate == 1 / 15 and tracker.tasks["mid"].visits == 2
    replayed = DifficultyTracker.replay(2, [{"easy": (4, 4)}, {"easy": (4, 4)}])
    assert replayed.dropped == {"easy": "saturated"}
    assert DifficultyTracker(None).observe({"t": (3, 3)}) == {}  # not dropping: rates only


def test_groups_without_signal_and_their_cost():
    episodes = [
        Ep("a", "react", 1.0, 2.0),
        Ep("a", "react", 0.0, 3.0),  # signal
        Ep("b", "react", 0.0, 5.0),
        Ep("b", "react", 0.0, 7.0),
        Ep("b", "react", None, 1.0),  # none
        Ep("a", "codex", 1.0, 4.0),
    ]  # one graded episode: none
    cost = no_signal_cost(episodes)
    assert (cost.groups, cost.episodes, cost.seconds) == (2, 4, 17.0)
    assert task_results(episodes) == {"a": (2, 3), "b": (0, 2)}


def test_drop_after_is_for_task_directories():
    with pytest.raises(ConfigError, match="use tasks.dirs"):
        validate_config({"tasks": {"families": ["create_file"]}, "rl": {"drop_after": 2}}, TrainConfig)


def test_a_run_drops_the_tasks_its_policy_never_solves(docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    for name in ("append-setting", "backup-csv"):
        shutil.copytree(EXAMPLES / "train" / name, tasks / "train" / name)
    config = TrainConfig.model_validate(
        {
            "run": str(tmp_path / "run"),
            "model": str(tiny_model_dir),
            "tasks": {"dirs": [str(tasks)]},
            "harnesses": ["react"],
            "sandbox": "docker",
            "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
            "max_attempts": 1,
            "harness_options": {"react": {"max_steps": 1, "tools": ["bash"]}},
            "max_new_tokens": 8,
            "rl": {"steps": 4, "prompts": 1, "group": 2, "drop_after": 1},
        }
    )
    report = run_training(config)
    steps = read_steps(tmp_path / "run")
    # the random-init student solves nothing: each task is dropped on its first visit, then GRPO stops
    assert [len(s.dropped_tasks) for s in steps] == [1, 1]
    assert {why for s in steps for why in s.dropped_tasks.values()} == {"impossible"}
    assert [s.active_tasks for s in steps] == [1, 0]
    assert steps[1].tasks != steps[0].tasks  # a dropped task is not drawn again
    assert all(s.task_results[s.tasks[0]] == (0, 2) for s in steps)
    assert all(s.no_signal_groups == 1 and s.no_signal_episodes == 2 and s.no_signal_seconds > 0 for s in steps)
    assert all(0 < s.train_s < s.seconds for s in steps)  # the checkpoint and weight push, even without an update
    assert report["grpo_step_records"][0]["dropped_tasks"] == steps[0].dropped_tasks
    markdown = (tmp_path / "run" / "report.md").read_text()
    assert (
        "Groups without signal (GRPO skips them) cost 4 of 4 episodes" in markdown and "impossible, step 0" in markdown
    )
