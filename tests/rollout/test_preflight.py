"""A misconfiguration is told once: a task whose image cannot be had is one configuration error with its fix
(exit status 2) before any episode runs; a run in which no episode could be graded exits non-zero; a task
tree's own image-map.yaml (examples/tasks/image-map.yaml) applies without being named."""

from __future__ import annotations

import pytest
import yaml

from openforge.rollout.preflight import PreflightError, check_harnesses, needed_images
from openforge.tasks import ImageMap, load_tasks, tree_image_map
from support.paths import EXAMPLES
from support.rollout import eval_cli, make_task


def test_the_shipped_tree_map_is_found_from_any_task_directory():
    for root in (EXAMPLES, EXAMPLES / "heldout", next((EXAMPLES / "train").iterdir())):
        mapping, files = tree_image_map([root])
        assert files == [(EXAMPLES / "image-map.yaml").resolve()]
        assert mapping.map_image("debian:bookworm-slim") == "openforge-base:bookworm"


def test_a_tree_without_a_map_maps_nothing(tmp_path):
    make_task(tmp_path / "tasks", "t")
    (tmp_path / ".git").mkdir()  # the search stops at the repository's root
    mapping, files = tree_image_map([tmp_path / "tasks"])
    assert files == [] and not mapping


def test_needed_images_are_the_mapped_from_lines():
    tasks = load_tasks([EXAMPLES], split="heldout")
    assert {i.split("@")[0] for i in needed_images(tasks, ImageMap())} == {"debian:bookworm-slim"}
    mapped = needed_images(tasks, tree_image_map([EXAMPLES])[0])
    assert list(mapped) == ["openforge-base:bookworm"] and len(mapped["openforge-base:bookworm"]) == len(tasks)


def test_an_image_that_cannot_be_had_is_one_error_before_any_episode(docker_ready, tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    result = eval_cli(
        EXAMPLES,
        run,
        tiny_model_dir,
        "--split",
        "heldout",
        "--image-map",
        "debian:bookworm-slim=openforge-no-such-image:1",
    )
    assert result.exit_code == 2, result.output
    assert result.output.count("openforge-no-such-image:1") >= 1
    assert "task(s)" in result.output and "never pulls" in result.output and "--image-map" in result.output
    assert "sandbox_error" not in result.output and "retrying" not in result.output
    assert not (run / "trajectories.db").exists()  # nothing ran


def test_the_tree_map_applies_without_being_named(docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    make_task(tasks, "mapped")
    (tasks / "image-map.yaml").write_text(
        yaml.safe_dump({"image_map": {"debian:bookworm-slim": "openforge-base:bookworm"}})
    )
    result = eval_cli(tasks, tmp_path / "run", tiny_model_dir)
    assert result.exit_code == 0, result.output
    assert "image map:" in result.output and "passed=1" in result.output


def test_without_a_map_the_missing_base_image_is_named_with_the_fix(docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "repo" / "tasks"
    make_task(tasks, "unmapped")
    (tmp_path / "repo" / ".git").mkdir()
    result = eval_cli(tasks, tmp_path / "run", tiny_model_dir)
    assert result.exit_code == 2, result.output
    assert "debian:bookworm-slim" in result.output
    assert "--image-map debian:bookworm-slim=openforge-base:bookworm" in result.output


def test_a_run_with_nothing_graded_exits_non_zero(docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    make_task(tasks, "broken-verifier", test_sh="exit 3\n")  # writes no reward: verifier_error, every attempt
    result = eval_cli(
        tasks,
        tmp_path / "run",
        tiny_model_dir,
        "--max-attempts",
        "1",
        "--image-map",
        "debian:bookworm-slim=openforge-base:bookworm",
    )
    assert result.exit_code == 1, result.output
    assert "no episode could be graded" in result.output and "1 × verifier_error" in result.output
    assert (tmp_path / "run" / "report.json").is_file()  # the report still says what happened


def test_a_gui_harness_on_tasks_without_a_gui_is_one_error():
    tasks = load_tasks([EXAMPLES])
    gui = load_tasks([EXAMPLES.parent / "gui-tasks"])
    with pytest.raises(PreflightError, match=r"harness computer-use drives a web page, but \d+ task\(s\) have no"):
        check_harnesses(tasks + gui, ["react", "computer-use"])
    check_harnesses(gui, ["computer-use"])
    check_harnesses(tasks, ["react"])
    with pytest.raises(PreflightError, match=r"harness react has no GUI tools, but 4 task\(s\) are GUI tasks"):
        check_harnesses(gui, ["react"])
    # OpenClaw has its shell and file tools on a plain task and its browser tool on a GUI task: it runs either
    check_harnesses(tasks + gui, ["openclaw"])
