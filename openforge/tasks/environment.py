"""Which environment a task runs in, after the image map: a (mapped) image, or a Dockerfile to build."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from openforge.tasks.images import ImageMap
from openforge.tasks.model import Task


@dataclass
class TaskEnvironment:
    """``image`` to run as is, or the ``Dockerfile`` in ``context_dir`` to build, with ``image_map`` applied to
    its FROM lines by whatever builds it (the map is applied once, where the image is built)."""

    image: str | None = None
    context_dir: Path | None = None
    image_map: ImageMap = field(default_factory=ImageMap)
    workdir: str | None = None

    @property
    def builds(self) -> bool:
        return self.context_dir is not None

    @property
    def dockerfile_text(self) -> str | None:
        """The Dockerfile as it will be built (FROM lines mapped); None for an image."""
        if self.context_dir is None:
            return None
        return self.image_map.apply_to_dockerfile((self.context_dir / "Dockerfile").read_text())


def task_environment(task: Task, image_map: ImageMap | None = None) -> TaskEnvironment:
    """Decide how to get the task's environment.

    A ``[environment] docker_image`` that the image map maps is used (mapped); otherwise the task's Dockerfile
    is built with its FROM lines mapped; otherwise the image is used as named.
    """
    im = image_map or ImageMap()
    if task.image and im.lookup(task.image) is not None:
        return TaskEnvironment(image=im.map_image(task.image), workdir=task.workdir)
    if task.dockerfile is not None:
        return TaskEnvironment(context_dir=task.dockerfile.parent, image_map=im, workdir=task.workdir)
    if task.image:
        return TaskEnvironment(image=task.image, workdir=task.workdir)
    raise ValueError(f"{task.id}: neither environment/Dockerfile nor [environment] docker_image")
