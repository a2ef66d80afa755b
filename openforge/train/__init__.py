"""Training: the assembler (recorded calls → samples), the trainers, and the one training pipeline.

The pipeline (`openforge train`; `openforge quickstart` runs it on the preset in `quickstart.py`):
`pipeline.py` runs the stages — `teacher.py` (teacher episodes), `sft_stage.py` (SFT and its same-compute
control), `rl_stage.py` (GRPO steps), `evaluation.py` (held-out pass@1) — sharing a `context.RunContext`;
`data.py` draws and splits the tasks, `serving.py` starts the proxy and the sandboxes, `records.py` defines
the steps.jsonl / evals.jsonl records, `stored.py` reads back the episodes a stage ran, `report.py` and
`plots.py` write the report, `progress.py` the phases and bars."""

import importlib
from typing import TYPE_CHECKING

from openforge.train.assemble import AssemblyMetrics, assemble, assemble_episode, assemble_run

if TYPE_CHECKING:  # the names `__getattr__` resolves, as type checkers (which do not run it) see them
    from openforge.train.advantages import group_advantages, groups_with_signal
    from openforge.train.batching import TrainBatch, collate, micro_batches
    from openforge.train.checkpoint import (
        CheckpointError,
        TrainerState,
        load_checkpoint,
        read_trainer_state,
        restore_rng,
        save_checkpoint,
    )
    from openforge.train.grpo import GRPOMetrics, GRPOTrainer
    from openforge.train.losses import PolicyLoss, clipped_policy_loss, sft_loss, token_logprobs
    from openforge.train.sft import SFTTrainer, sft_step
    from openforge.train.trainer_config import GRPOConfig, SFTConfig
    from openforge.train.weights_sync import WeightSyncError, apush_weights, push_weights, push_weights_in_process

# The trainers import torch (seconds); importing the assembler should not. Resolved on first use.
_TRAINER_EXPORTS = {
    "TrainBatch": "batching",
    "collate": "batching",
    "micro_batches": "batching",
    "group_advantages": "advantages",
    "groups_with_signal": "advantages",
    "PolicyLoss": "losses",
    "clipped_policy_loss": "losses",
    "sft_loss": "losses",
    "token_logprobs": "losses",
    "SFTConfig": "trainer_config",
    "SFTTrainer": "sft",
    "sft_step": "sft",
    "GRPOConfig": "trainer_config",
    "GRPOMetrics": "grpo",
    "GRPOTrainer": "grpo",
    "CheckpointError": "checkpoint",
    "TrainerState": "checkpoint",
    "load_checkpoint": "checkpoint",
    "read_trainer_state": "checkpoint",
    "restore_rng": "checkpoint",
    "save_checkpoint": "checkpoint",
    "WeightSyncError": "weights_sync",
    "apush_weights": "weights_sync",
    "push_weights": "weights_sync",
    "push_weights_in_process": "weights_sync",
}
__all__ = [  # the assembler and every name of _TRAINER_EXPORTS (tests/train/test_exports.py holds them equal)
    "AssemblyMetrics",
    "assemble",
    "assemble_episode",
    "assemble_run",
    "TrainBatch",
    "collate",
    "micro_batches",
    "group_advantages",
    "groups_with_signal",
    "PolicyLoss",
    "clipped_policy_loss",
    "sft_loss",
    "token_logprobs",
    "SFTConfig",
    "SFTTrainer",
    "sft_step",
    "GRPOConfig",
    "GRPOMetrics",
    "GRPOTrainer",
    "CheckpointError",
    "TrainerState",
    "load_checkpoint",
    "read_trainer_state",
    "restore_rng",
    "save_checkpoint",
    "WeightSyncError",
    "apush_weights",
    "push_weights",
    "push_weights_in_process",
]


def __getattr__(name: str) -> object:
    module = _TRAINER_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openforge.train' has no attribute {name!r}")
    return getattr(importlib.import_module(f"openforge.train.{module}"), name)
