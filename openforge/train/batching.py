"""Samples → padded tensors for a forward pass, and the split of a batch into micro-batches.

Everything is right-padded and every mask is built from the samples' lengths and loss masks, never from
token values: the pad id may equal the eos id, and an eos the model sampled is a token to train on.

Alignment: every tensor is (batch, time) and aligned with `input_ids`; position t holds what belongs to token
t (its loss mask, its rollout logprob, its advantage). The logprob of token t comes from the logits at t - 1
(see `losses.token_logprobs`), so position 0 can never be trained: a sample whose first token has mask 1 is
refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from openforge.core.records import Sample


@dataclass
class TrainBatch:
    """Padded tensors for a list of samples (B = samples, T = longest sample).

    - `input_ids` (B, T) long: the tokens, then `pad_id`;
    - `attention_mask` (B, T) long: 1 on real tokens, 0 on padding;
    - `loss_mask` (B, T) float: 1 where the token is trained (the sample's loss mask), 0 elsewhere and on pads;
    - `old_logprobs` (B, T) float: rollout (behaviour) logprobs, 0 where the mask is 0;
    - `advantages` (B, T) float: the sample's advantage on its trained tokens, 0 elsewhere;
    - `temperatures` (B,) float: the sampling temperature each sample's logprobs were recorded at.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor
    temperatures: torch.Tensor

    @property
    def num_tokens(self) -> int:
        """Trained tokens (mask 1) in the batch."""
        return int(self.loss_mask.sum().item())

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)  # type: ignore[return-value]


def sample_temperature(sample: Sample, default: float) -> float:
    """The temperature the sample's logprobs were recorded at: `metadata["temperature"]` if the assembler
    wrote one, else `default` (the temperature the rollouts were configured with)."""
    value = sample.metadata.get("temperature", default)
    if value is None:
        value = default
    value = float(value)
    if value <= 0.0:
        # Temperature 0 is greedy decoding: its logprobs are of the untempered distribution, but a greedy
        # sample is no draw from the policy, so it cannot be trained on with a policy-gradient loss.
        raise ValueError(
            f"sample of episode {sample.episode_id} was sampled at temperature {value}; training needs temperature > 0"
        )
    return value


def collate(
    samples: Sequence[Sample],
    pad_id: int = 0,
    advantages: Sequence[float] | None = None,
    default_temperature: float = 1.0,
    sampling_temperatures: bool = True,
) -> TrainBatch:
    """Pad `samples` into a `TrainBatch`. `advantages` (one per sample) is broadcast over each sample's
    trained tokens; None gives zeros (SFT needs none). `sampling_temperatures=False` sets every temperature to
    1: SFT fits the model's own distribution, whatever temperature (or greedy decoding) produced the text."""
    if not samples:
        raise ValueError("cannot collate an empty list of samples")
    if advantages is not None and len(advantages) != len(samples):
        raise ValueError(f"{len(advantages)} advantages for {len(samples)} samples")
    lengths = [len(s.token_ids) for s in samples]
    width = max(lengths)
    batch = len(samples)

    input_ids = torch.full((batch, width), int(pad_id), dtype=torch.long)
    loss_mask = torch.zeros((batch, width), dtype=torch.float32)
    old_logprobs = torch.zeros((batch, width), dtype=torch.float32)
    for row, sample in enumerate(samples):
        n = lengths[row]
        if n == 0:
            raise ValueError(f"sample of episode {sample.episode_id} has no tokens")
        if sample.loss_mask[0]:
            raise ValueError(
                f"sample of episode {sample.episode_id} trains its first token, which no earlier "
                "token predicts; the first trained token must follow a prompt"
            )
        input_ids[row, :n] = torch.tensor(sample.token_ids, dtype=torch.long)
        loss_mask[row, :n] = torch.tensor(sample.loss_mask, dtype=torch.float32)
        old_logprobs[row, :n] = torch.tensor(sample.logprobs, dtype=torch.float32)
    # Masks from lengths: position < length is a real token, whatever its id.
    attention_mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    loss_mask = loss_mask * attention_mask  # loss masks are 0/1 already; this only guarantees pads are 0
    old_logprobs = old_logprobs * loss_mask
    per_sample = torch.tensor(list(advantages) if advantages is not None else [0.0] * batch, dtype=torch.float32)
    temperatures = torch.tensor(
        [sample_temperature(s, default_temperature) if sampling_temperatures else 1.0 for s in samples],
        dtype=torch.float32,
    )
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        old_logprobs=old_logprobs,
        advantages=per_sample[:, None] * loss_mask,
        temperatures=temperatures,
    )


def micro_batches(lengths: Sequence[int], max_tokens: int | None) -> list[list[int]]:
    """Split sample indices into micro-batches whose padded size (rows × longest row) is at most `max_tokens`.

    Samples are grouped by length (longest first) so little is spent on padding; a sample longer than
    `max_tokens` gets a micro-batch of its own. `None` keeps everything in one micro-batch."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if max_tokens is None:
        return [order] if order else []
    if max_tokens <= 0:
        raise ValueError(f"max_tokens per micro-batch must be positive, got {max_tokens}")
    groups: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # Longest first: the first row of a group sets its width.
        width = lengths[current[0]] if current else lengths[i]
        if current and (len(current) + 1) * width > max_tokens:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups
