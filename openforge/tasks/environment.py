"""Which environment a task runs in, after the image map: a (mapped) image, or a Dockerfile to build."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from openforge.tasks.images import ImageMap
from openforge.tasks.model import Task


@dataclass
class TaskEnvironment:
    """``image`` to run as is, or ``dockerfile_text`` (FROM lines already mapped) to build in ``context_dir``."""

    image: str | None = None
    dockerfile_text: str | None = None
    context_dir: Path | None = None
    workdir: str | None = None

    @property
    def builds(self) -> bool:
        return self.dockerfile_text is not None


def task_environment(task: Task, image_map: ImageMap | None = None) -> TaskEnvironment:
    """Decide how to get the task's environment.

    A ``[environment] docker_image`` that the image map maps is used (mapped); otherwise the task's Dockerfile
    is built with its FROM lines mapped; otherwise the image is used as named.
    """
    im = image_map or ImageMap()
    if task.image and im.lookup(task.image) is not None:
        return TaskEnvironment(image=im.map_image(task.image), workdir=task.workdir)
    if task.dockerfile is not None:
        return TaskEnvironment(
            dockerfile_text=im.apply_to_dockerfile(task.dockerfile.read_text()),
            context_dir=task.dockerfile.parent,
            workdir=task.workdir,
        )
    if task.image:
        return TaskEnvironment(image=task.image, workdir=task.workdir)
    raise ValueError(f"{task.id}: neither environment/Dockerfile nor [environment] docker_image")


def prepare_build_context(env: TaskEnvironment, dest: str | Path) -> Path:
    """Copy the build context to ``dest`` and write the mapped Dockerfile there; returns ``dest``."""
    if env.dockerfile_text is None or env.context_dir is None:
        raise ValueError("this environment is an image; there is nothing to build")
    d = Path(dest)
    shutil.copytree(env.context_dir, d, dirs_exist_ok=True)
    (d / "Dockerfile").write_text(env.dockerfile_text)
    return d
