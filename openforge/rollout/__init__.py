"""The orchestrator: episodes of real harnesses on real tasks, each in its own sandbox, graded after."""

from openforge.rollout.config import RolloutConfig
from openforge.rollout.settings import EpisodeSettings

# The orchestrator imports the proxy and the sandboxes (seconds); importing the config (the CLI's defaults)
# should not. Resolved on first use.
_ORCHESTRATOR_EXPORTS = ("RolloutError", "RolloutSummary", "run_rollouts")

__all__ = ["EpisodeSettings", "RolloutConfig", *_ORCHESTRATOR_EXPORTS]


def __getattr__(name: str):
    if name not in _ORCHESTRATOR_EXPORTS:
        raise AttributeError(f"module 'openforge.rollout' has no attribute {name!r}")
    from openforge.rollout import orchestrator

    return getattr(orchestrator, name)
