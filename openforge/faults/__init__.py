"""Fault injection: the faults real environments throw at agents, put into the environment — never into the
model's recorded calls — so the policy meets them as it would in production.

`spec` reads `--faults SPEC` / the `faults:` config block; `plan` draws an episode's faults (per kind, with
its rate) and records them on the episode; `rules` decides, before each of the agent's shell commands,
whether a fault strikes (the same file runs in this process and inside sandboxes); `hook` is the shell hook
that asks it inside a sandbox, wired per harness; `local` wraps the in-process jail's command runner.
"""

from openforge.faults.plan import BALLAST, FaultPlan, FaultRecord, FaultTargets, draw_kinds
from openforge.faults.spec import KIND_NAMES, FaultKind, FaultSpec, FaultSpecError, parse_fault_spec

__all__ = [
    "BALLAST",
    "FaultKind",
    "FaultPlan",
    "FaultRecord",
    "FaultSpec",
    "FaultSpecError",
    "FaultTargets",
    "KIND_NAMES",
    "draw_kinds",
    "parse_fault_spec",
]
