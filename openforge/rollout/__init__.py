"""The orchestrator: episodes of real harnesses on real tasks, each in its own sandbox, graded after."""

from typing import TYPE_CHECKING

from openforge.rollout.config import RolloutConfig
from openforge.rollout.settings import EpisodeSettings

if TYPE_CHECKING:
    from openforge.rollout.orchestrator import RolloutError, RolloutSummary, run_rollouts

# The orchestrator imports the proxy and the sandboxes (seconds); importing the config (the CLI's defaults)
# should not. Resolved on first use.
_ORCHESTRATOR_EXPORTS = ("RolloutError", "RolloutSummary", "run_rollouts")

__all__ = ["EpisodeSettings", "RolloutConfig", "RolloutError", "RolloutSummary", "run_rollouts"]


def __getattr__(name: str) -> object:
    if name not in _ORCHESTRATOR_EXPORTS:
        raise AttributeError(f"module 'openforge.rollout' has no attribute {name!r}")
    from openforge.rollout import orchestrator

    return getattr(orchestrator, name)
