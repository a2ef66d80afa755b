"""The task as an episode carries it: what the proxy keeps with the episode (its metadata's `task`) and what a
backend is handed with every call of that episode (`GenerationContext.task`, as JSON)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from openforge.core.json_types import JSONObject


class TaskPayload(BaseModel):
    """Built by the episode runners (the orchestrator's and the in-process one for generated families) from a
    task, stored with the episode, read back by backends that need it (the `oracle` teacher reads `solution`
    and `shell_tool`, or for a GUI task `actions` and `gui_format`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    instruction: str | None = None
    split: str | None = None
    family: str | None = None
    # the reference solution, for the oracle teacher (None: the task has none)
    solution: str | None = None
    # read-only commands the oracle runs before its solution (a look around) and after it (a check of the
    # result); None: none
    look: str | None = None
    check: str | None = None
    # (tool name, argument name) of the harness's own shell tool, so the oracle answers through it
    shell_tool: tuple[str, str] | None = None
    # the tool kinds the task needs (`[metadata] required_tools` in task.toml: shell, read, write, edit, search),
    # for the behaviour analytics' tool coverage; None: not declared (the oracle's episode stands in)
    required_tools: tuple[str, ...] | None = None
    # a GUI task's demonstration (`solution/actions.json`, `openforge.tasks.gui_actions`): the steps the oracle
    # sends through the harness's GUI tools instead of a shell command; None: the task has none
    actions: tuple[dict[str, Any], ...] | None = None
    # the format of the harness's page snapshots (`HarnessAdapter.gui_format`), where the oracle finds each
    # step's element; None: the harness drives no GUI
    gui_format: str | None = None
    # where a GUI task's site starts (`[environment.gui] start_url`): the oracle opens it first in a harness whose
    # browser starts on no page (OpenClaw), and resolves a demonstration's relative URLs against it
    start_url: str | None = None

    def to_json(self) -> JSONObject:
        """The stored form (every field present, `None` where unset)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: object) -> TaskPayload | None:
        """The payload stored with an episode. An orchestrator of its own may post any JSON task through the
        admin API: its known fields are read (`id`, else `name`) and the rest ignored; None for a bare task
        name or fields of the wrong type."""
        if not isinstance(data, dict):
            return None
        known = {k: v for k, v in data.items() if k in cls.model_fields}
        known.setdefault("id", data.get("name") or "")
        try:
            return cls.model_validate(known)
        except ValidationError:
            return None
