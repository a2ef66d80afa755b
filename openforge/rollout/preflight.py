"""Before a run starts: what the tasks' environments need, checked once, so that a misconfiguration is one
error with its fix (exit status 2) instead of every episode failing the same way.

- The image map: a task tree's own `image-map.yaml` (`openforge.tasks.tree_image_map`) applies without being
  named; `--image-map` / `image_map` entries override it.
- Images: every image a task runs, or builds its image from (its Dockerfile's `FROM` lines, mapped), must be
  one the sandbox backend can start from (for Docker: on this machine; nothing is pulled), and the backend as
  configured must be able to start them (Docker's `runtime` option: registered with the daemon, and working).
- Harnesses: a GUI harness (computer-use) needs tasks with a GUI (`[environment.gui]`); a desktop task
  (`kind = "desktop"`) needs a harness that can drive a desktop (`HarnessAdapter.gui_kinds`).
"""

from __future__ import annotations

from pathlib import Path

from openforge.core.errors import ConfigurationError
from openforge.sandbox import SandboxProvider
from openforge.tasks import ImageMap, ImageMapError, Task, tree_image_map
from openforge.tasks.environment import task_environment
from openforge.tasks.images import OFFLINE_BASE_IMAGE


class PreflightError(ConfigurationError, ValueError):
    """The run is misconfigured; the message says what and how to fix it."""


def effective_image_map(roots: list[Path], explicit: dict[str, str]) -> tuple[ImageMap, list[Path]]:
    """The task trees' own maps with the explicit entries over them, and the files that were read."""
    try:
        tree, files = tree_image_map(roots)
    except ImageMapError as e:
        raise PreflightError(str(e)) from None
    return tree.merged(ImageMap(explicit)), files


def needed_images(tasks: list[Task], image_map: ImageMap) -> dict[str, list[str]]:
    """Each image the tasks need (after mapping) → the ids of the tasks that need it."""
    needed: dict[str, list[str]] = {}
    for task in tasks:
        try:
            env = task_environment(task, image_map)
        except ValueError as e:
            raise PreflightError(str(e)) from None
        if env.context_dir is not None:  # it builds the task's Dockerfile
            _, images = image_map.rewrite_dockerfile(env.context_dir.joinpath("Dockerfile").read_text())
        else:
            assert env.image is not None  # task_environment gives an image or a Dockerfile to build
            images = [env.image]
        for image in dict.fromkeys(images):
            needed.setdefault(image, []).append(task.id)
    return needed


def check_harnesses(tasks: list[Task], harnesses: list[str]) -> None:
    """PreflightError when a harness that only drives a web page (`HarnessAdapter.gui_only`) is to run tasks
    that have none: every such episode would fail at its launch; or a harness without GUI tools (a shell) is to
    run GUI tasks, which are done through the GUI only. A harness with both (OpenClaw) runs either."""
    from openforge.harness import ADAPTERS

    gui = [h for h in harnesses if h in ADAPTERS and ADAPTERS[h].gui_only]
    plain = [t.id for t in tasks if t.gui is None]
    if gui and plain:
        shown = ", ".join(plain[:5]) + (f" and {len(plain) - 5} more" if len(plain) > 5 else "")
        raise PreflightError(
            f"harness {', '.join(gui)} drives a web page, but {len(plain)} task(s) have no [environment.gui] "
            f"start_url ({shown}): run them with another harness, or choose GUI tasks"
        )
    shells = [h for h in harnesses if h in ADAPTERS and ADAPTERS[h].gui_format is None]
    gui_tasks = [t.id for t in tasks if t.gui is not None]
    if shells and gui_tasks:  # a GUI task's agent gets GUI tools only: a shell would stand in for the GUI
        shown = ", ".join(gui_tasks[:5]) + (f" and {len(gui_tasks) - 5} more" if len(gui_tasks) > 5 else "")
        able = ", ".join(sorted(h for h, a in ADAPTERS.items() if a.gui_format is not None))
        raise PreflightError(
            f"harness {', '.join(shells)} has no GUI tools, but {len(gui_tasks)} task(s) are GUI tasks "
            f"([environment.gui]: {shown}), whose agent works through the GUI only: run them with {able}"
        )
    kinds = sorted({t.gui.kind for t in tasks if t.gui is not None})
    for kind in kinds:  # a browser harness cannot drive a desktop
        unable = [
            h for h in harnesses if h in ADAPTERS and ADAPTERS[h].gui_format and kind not in ADAPTERS[h].gui_kinds
        ]
        if not unable:
            continue
        ids = [t.id for t in tasks if t.gui is not None and t.gui.kind == kind]
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        able = ", ".join(sorted(h for h, a in ADAPTERS.items() if a.gui_format is not None and kind in a.gui_kinds))
        raise PreflightError(
            f"harness {', '.join(unable)} drives a browser only, but {len(ids)} task(s) are {kind} tasks "
            f'([environment.gui] kind = "{kind}": {shown}): run them with {able or "another harness"}'
        )


async def check_images(tasks: list[Task], image_map: ImageMap, provider: SandboxProvider) -> None:
    """PreflightError naming every image the backend lacks, the tasks that need it, and the fix; with every image
    there, what else stops the backend from starting them (`SandboxProvider.setup_problem`: e.g. Docker's
    `runtime` option naming a runtime the daemon lacks)."""
    needed = needed_images(tasks, image_map)
    missing = await provider.missing_images(sorted(needed))
    if not missing:
        problem = await provider.setup_problem(sorted(needed))
        if problem is not None:
            raise PreflightError(problem)
        return
    lines = [f"{len(missing)} image(s) that tasks need are not on this machine, and {provider.name} never pulls them:"]
    for image in missing:
        ids = needed[image]
        sources = [src for src, dst in image_map.pairs if dst == image]
        mapped = f" (the image map's target for {', '.join(sources)})" if sources else ""
        lines.append(f"  {image}{mapped}: {len(ids)} task(s) ({', '.join(ids[:4])}{', ...' if len(ids) > 4 else ''})")
    if OFFLINE_BASE_IMAGE in missing:
        lines.append(f"{OFFLINE_BASE_IMAGE} is the offline base image: build it with scripts/build-base-image.sh")
    unmapped = [i for i in missing if i != OFFLINE_BASE_IMAGE and not any(d == i for _, d in image_map.pairs)]
    if unmapped:
        example = " ".join(f"--image-map {i}={OFFLINE_BASE_IMAGE}" for i in unmapped[:2])
        lines.append(
            f"map them onto local images ({example}, or an image-map.yaml beside the tasks), or load "
            "them with `docker load`"
        )
    elif len(lines) == len(missing) + 1:
        lines.append("build or `docker load` the mapped image(s), or map the tasks' images elsewhere (--image-map)")
    raise PreflightError("\n".join(lines))
