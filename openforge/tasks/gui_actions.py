"""A GUI task's demonstration: `solution/actions.json`, the steps the oracle teacher sends through a GUI
harness's own tools, one tool call per model call (`openforge.inference.gui_oracle`).

    [
      {"tool": "type",     "target": {"role": "textbox", "name": "Customer"}, "text": "Ada Lovelace"},
      {"tool": "select",   "target": {"role": "combobox", "name": "Plan"}, "value": "Pro"},
      {"tool": "click",    "target": {"role": "button", "name": "Save"}},
      {"tool": "navigate", "url": "http://127.0.0.1:8080/orders"},
      {"tool": "key",      "key": "Enter"},
      {"tool": "scroll",   "dy": 600},
      {"tool": "done",     "answer": "42"}
    ]

A target names an element as the page's accessibility tree does (its role and accessible name); the oracle
finds it in the latest page snapshot of the conversation. A final `done` step is optional (the oracle finishes
anyway); its `answer` is what the agent reports. `solution/solve.sh` stays beside it (Harbor needs it) but for a
GUI task it only shows the verifier that the end state can be reached; it is never the demonstration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openforge.tasks.solution import SolutionError

ACTIONS_FILE = "actions.json"
#: each step's tool and the fields it needs besides `tool` (`target` is {"role": str, "name": str})
STEP_FIELDS: dict[str, tuple[str, ...]] = {
    "click": ("target",),
    "type": ("target", "text"),
    "select": ("target", "value"),
    "key": ("key",),
    "scroll": ("dy",),
    "navigate": ("url",),
    "done": (),
}
_OPTIONAL = {"done": ("answer",)}


def actions_path(task_dir: Path) -> Path:
    return task_dir / "solution" / ACTIONS_FILE


def load_actions(path: Path) -> list[dict[str, Any]] | None:
    """The steps of `path` (None when there is no such file), checked: SolutionError names the step and the fix."""
    if not path.is_file():
        return None
    try:
        steps = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise SolutionError(
            f"{path} is not valid JSON ({e}): write a list of steps, e.g. "
            '[{"tool": "click", "target": {"role": "button", "name": "Save"}}]'
        ) from None
    if not isinstance(steps, list) or not steps:
        raise SolutionError(f"{path} must hold a non-empty JSON list of steps")
    for i, step in enumerate(steps):
        where = f"{path} step {i + 1}"
        if not isinstance(step, dict) or step.get("tool") not in STEP_FIELDS:
            raise SolutionError(f'{where}: "tool" must be one of {", ".join(STEP_FIELDS)}, got {step!r}')
        tool = step["tool"]
        allowed = {"tool", *STEP_FIELDS[tool], *_OPTIONAL.get(tool, ())}
        missing = [f for f in STEP_FIELDS[tool] if f not in step]
        extra = sorted(set(step) - allowed)
        if missing or extra:
            raise SolutionError(
                f"{where} ({tool}): "
                + (f"missing {', '.join(missing)}" if missing else f"unknown field(s) {', '.join(extra)}")
                + f"; a {tool} step has {', '.join(sorted(allowed - {'tool'})) or 'no other fields'}"
            )
        target = step.get("target")
        if "target" in step and not (
            isinstance(target, dict)
            and set(target) == {"role", "name"}
            and all(isinstance(target[k], str) and target[k] for k in ("role", "name"))
        ):
            raise SolutionError(f'{where} ({tool}): "target" must be {{"role": "...", "name": "..."}}, got {target!r}')
        for key in ("text", "value", "key", "url", "answer"):
            if key in step and not isinstance(step[key], str):
                raise SolutionError(f'{where} ({tool}): "{key}" must be a string')
        if "dy" in step and (isinstance(step["dy"], bool) or not isinstance(step["dy"], int)):
            raise SolutionError(f'{where} ({tool}): "dy" must be an integer (pixels)')
    if any(s["tool"] == "done" for s in steps[:-1]):
        raise SolutionError(f"{path}: a done step can only be the last")
    return steps


__all__ = ["ACTIONS_FILE", "STEP_FIELDS", "actions_path", "load_actions"]
