"""Assembled samples → a veRL `DataProto`, laid out as veRL's agent loops lay out a rollout batch.

Per sample (row), with P = the longest prompt and R = the longest response of the batch:

- `prompts` (P): the tokens before the sample's first trained token, **left**-padded;
- `responses` (R): the rest, **right**-padded; `response_mask` (R): 1 on sampled tokens (the loss mask);
- `input_ids` = prompts ‖ responses, `attention_mask` (1 on real tokens), `position_ids` (veRL's
  `compute_position_id_with_mask`: 0 at the first real token);
- `token_level_scores` (R): the sample's reward on its last response token, 0 elsewhere;
- `rollout_log_probs` (R): the logprobs recorded at sampling time (0 off the mask);
- non-tensor `uid`: the GRPO group (`Sample.group_id`), plus `episode_id` and `task`/`harness`.

Masks come from lengths, never from token values (the pad id may equal the end-of-turn id).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from openforge.core import Sample
from openforge.store import NotARunError, TrajectoryStore

if TYPE_CHECKING:
    from verl.protocol import DataProto


def _check(samples: Sequence[Sample]) -> None:
    if not samples:
        raise ValueError("no samples to put in a DataProto (did every episode fail or lack a reward?)")
    for s in samples:
        if not 0 < s.prompt_length < len(s.token_ids):
            raise ValueError(
                f"sample of episode {s.episode_id} has prompt_length {s.prompt_length} outside "
                f"(0, {len(s.token_ids)}): it needs a prompt and at least one response token"
            )


def samples_to_dataproto(samples: Sequence[Sample], pad_token_id: int) -> DataProto:
    """One DataProto row per sample (see the module docstring)."""
    from verl.protocol import DataProto
    from verl.utils.model import compute_position_id_with_mask

    _check(samples)
    n = len(samples)
    width_p = max(s.prompt_length for s in samples)
    width_r = max(len(s.token_ids) - s.prompt_length for s in samples)
    prompts = torch.full((n, width_p), pad_token_id, dtype=torch.long)
    responses = torch.full((n, width_r), pad_token_id, dtype=torch.long)
    prompt_attention = torch.zeros((n, width_p), dtype=torch.long)
    response_attention = torch.zeros((n, width_r), dtype=torch.long)
    response_mask = torch.zeros((n, width_r), dtype=torch.long)
    scores = torch.zeros((n, width_r), dtype=torch.float32)
    logprobs = torch.zeros((n, width_r), dtype=torch.float32)
    for row, s in enumerate(samples):
        p, r = s.prompt_length, len(s.token_ids) - s.prompt_length
        prompts[row, width_p - p :] = torch.tensor(s.token_ids[:p])
        prompt_attention[row, width_p - p :] = 1
        responses[row, :r] = torch.tensor(s.token_ids[p:])
        response_attention[row, :r] = 1
        response_mask[row, :r] = torch.tensor(s.loss_mask[p:])
        logprobs[row, :r] = torch.tensor(s.logprobs[p:], dtype=torch.float32)
        scores[row, r - 1] = s.reward  # veRL puts the outcome reward on the last valid response token
    attention_mask = torch.cat([prompt_attention, response_attention], dim=1)
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "response_mask": response_mask,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": compute_position_id_with_mask(attention_mask),
        "token_level_scores": scores,
        "rollout_log_probs": logprobs,
    }
    non_tensors = {
        "uid": np.array([s.group_id for s in samples], dtype=object),
        "episode_id": np.array([s.episode_id for s in samples], dtype=object),
        "task": np.array([s.metadata.get("task") for s in samples], dtype=object),
        "harness": np.array([s.metadata.get("harness") for s in samples], dtype=object),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info={"source": "openforge"})


def export_run_dataproto(
    run_dir: str | Path, out: str | Path, *, mode: str = "merged", pad_token_id: int | None = None
) -> tuple[int, dict[str, Any]]:
    """Assemble a recorded run (`mode`: merged or per-call) and save it with `DataProto.save_to_disk`.
    `pad_token_id`: default, the pad id of the run's model directory (from the run's rollout info).
    Returns (rows written, assembly metrics summary)."""
    from openforge.train.assemble import assemble_run, checked_mode

    run_dir = Path(run_dir)
    if not (run_dir / "trajectories.db").is_file():
        raise NotARunError(f"{run_dir} holds no trajectories.db: is it a run directory?")
    with TrajectoryStore.open(run_dir) as store:
        samples, metrics = assemble_run(store, mode=checked_mode(mode))
        if pad_token_id is None:
            pad_token_id = _run_pad_token_id(store)
    batch = samples_to_dataproto(samples, pad_token_id)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    batch.save_to_disk(str(out))
    return len(batch), metrics.summary()


def _run_pad_token_id(store: TrajectoryStore) -> int:
    from openforge.models import ModelDir, ModelDirError

    info = store.get_run_info() or {}
    model = info.get("rollout", {}).get("model") or info.get("model")  # `openforge rollout` / the agent loop
    if not model or not Path(model).is_dir():
        raise ModelDirError(
            f"the run names no model directory that exists here ({model!r} in its run info): pass --pad-token-id"
        )
    return ModelDir(model).pad_token_id
