"""The orchestrator: episodes of real harnesses on real tasks, each in its own sandbox, graded after."""

from openforge.rollout.config import RolloutConfig
from openforge.rollout.orchestrator import RolloutError, RolloutSummary, run_rollouts

__all__ = ["RolloutConfig", "RolloutError", "RolloutSummary", "run_rollouts"]
