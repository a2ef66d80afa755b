"""Tasks meet sandboxes: the `SandboxSpec` for a task, and who its agent runs as.

Docker builds the task's Dockerfile (FROM lines mapped by the image map, once, where it builds), so a container
starts in the task's initial state; a backend that builds no image (the local one) replays the Dockerfile in
the sandbox instead. Either way the caller creates the sandbox from `make_sandbox_spec` and then calls
`Sandbox.setup_environment(task)`: how the initial state is made is the backend's business
(`openforge.sandbox`), not the orchestrator's.
"""

from __future__ import annotations

import secrets

from openforge.sandbox import SandboxProvider, SandboxSpec, sandbox_name
from openforge.tasks.environment import task_environment
from openforge.tasks.images import ImageMap
from openforge.tasks.model import AgentUser, Task

__all__ = ["agent_spec_user", "agent_user", "make_sandbox_spec"]


def agent_spec_user(task: Task, run_choice: AgentUser | None, provider: SandboxProvider) -> str | None:
    """`SandboxSpec.user` for the agent: the run's choice (`RolloutConfig.agent_user`), else the task's
    `[agent] user`, else root, as the backend runs it (`SandboxProvider.spec_user`). A GUI task's agent is always
    the unprivileged `agent` (`agent_user`)."""
    return provider.spec_user(agent_user(task, run_choice))


def agent_user(task: Task, run_choice: AgentUser | None = None) -> AgentUser:
    """Who the task's agent runs as: `agent` for a GUI task (`[environment.gui]`: its app runs as another user
    that only root could bypass, so no run may make its agent root), else the run's choice, the task's `[agent]
    user`, or root."""
    if task.gui is not None:
        return "agent"
    return run_choice or task.config.agent.user or "root"


def make_sandbox_spec(
    task: Task, image_map: ImageMap | None, name: str | None = None, run: str | None = None, **overrides: object
) -> SandboxSpec:
    """A `SandboxSpec` for the task: its (mapped) image, or its Dockerfile's directory with the image map for
    its FROM lines; its resources (storage and the build's time limit included), workdir, `[environment] env`
    and whether building may reach the network (`allow_internet`). `overrides` are further SandboxSpec
    fields (proxy_uds, mounts, user, ...)."""
    env = task_environment(task, image_map)
    res = task.resources
    fields: dict[str, object] = {
        "name": name or sandbox_name(run or "tasks", f"{task.id}-{secrets.token_hex(4)}"),
        "cpus": res.cpus,
        "memory_mb": res.memory_mb,
        "pids": res.pids,
        "workdir": env.workdir,
        "env": dict(task.config.environment.env),
        "storage_mb": res.storage_mb,
        "build_timeout_s": res.build_timeout_s,
        "build_network": bool(task.config.environment.allow_internet),
    }
    if run is not None:
        fields["run"] = run
    if env.builds:
        fields["dockerfile_dir"] = env.context_dir
        fields["image_map"] = env.image_map.to_dict()
    else:
        fields["image"] = env.image
    fields.update(overrides)
    return SandboxSpec.model_validate(fields)
