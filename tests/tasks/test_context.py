"""A third party's task directory cannot bring host files into its image (`openforge.tasks.context`): a link out
of `environment/`, a device or FIFO, an oversized context, or an `environment/` that is itself a link out are
configuration errors naming the file, found when the task is inspected or loaded (before any work)."""

from __future__ import annotations

import os
import shutil

import pytest

from openforge.tasks import load_task, validate_task_dir
from openforge.tasks.context import BuildContextError, check_build_context
from openforge.tasks.loader import TaskLoadError
from support.paths import EXAMPLES


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "task"
    shutil.copytree(EXAMPLES / "train" / "fix-sum-range", d)
    return d


def test_a_link_out_of_the_build_context_is_an_error_naming_it(task_dir, tmp_path):
    secret = tmp_path / "id_rsa"
    secret.write_text("secret")
    (task_dir / "environment" / "leak").symlink_to(secret)
    errors = validate_task_dir(task_dir)
    assert errors == [
        f"environment/leak: a symbolic link to {secret}, outside the build context: it would bring a "
        "host file into the image; copy the file into environment/ instead"
    ]
    with pytest.raises(TaskLoadError, match="environment/leak: a symbolic link"):
        load_task(task_dir)
    (task_dir / "environment" / "leak").unlink()
    (task_dir / "environment" / "up").symlink_to("../../..")
    assert "environment/up: a symbolic link to ../../.." in validate_task_dir(task_dir)[0]


def test_links_inside_the_context_are_fine(task_dir):
    (task_dir / "environment" / "alias").symlink_to("app")
    assert validate_task_dir(task_dir) == [] and load_task(task_dir).dockerfile is not None


def test_devices_fifos_loops_and_a_linked_environment_are_errors(task_dir, tmp_path):
    os.mkfifo(task_dir / "environment" / "pipe")
    assert "environment/pipe: not a regular file, directory or symbolic link" in validate_task_dir(task_dir)[0]
    os.unlink(task_dir / "environment" / "pipe")
    (task_dir / "environment" / "loop").symlink_to("loop")
    assert "does not resolve (missing, or a loop)" in validate_task_dir(task_dir)[0]
    os.unlink(task_dir / "environment" / "loop")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(task_dir / "environment", elsewhere)
    (task_dir / "environment").symlink_to(elsewhere)
    assert "outside the task directory" in validate_task_dir(task_dir)[0]


def test_the_size_cap_names_the_largest_files(tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "a.bin").write_bytes(b"\0" * 3000)
    (ctx / "b.bin").write_bytes(b"\0" * 2000)
    assert check_build_context(ctx) == 5000
    with pytest.raises(BuildContextError, match=r"the largest files: a\.bin \(0\.0 MiB\), b\.bin"):
        check_build_context(ctx, max_bytes=4000)
