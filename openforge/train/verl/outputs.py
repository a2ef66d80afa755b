"""Assembled samples → veRL `AgentLoopOutput`s (prompt = tokens before the first trained one, response = the
rest, its mask and rollout logprobs), cut to the rollout's prompt / response lengths."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openforge.core import Sample

if TYPE_CHECKING:
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput


@dataclass
class Limits:
    prompt_length: int
    response_length: int


@dataclass
class Converted:
    outputs: list[AgentLoopOutput] = field(default_factory=list)
    over_prompt_length: int = 0  # samples left out: their prompt does not fit rollout.prompt_length
    responses_cut: int = 0  # samples whose response was cut at rollout.response_length


def sample_to_output(
    sample: Sample, limits: Limits, metrics: dict[str, Any], extra: dict[str, Any]
) -> AgentLoopOutput | None:
    """One `AgentLoopOutput`, or None when the prompt is longer than `limits.prompt_length` (veRL would cut
    its start, and the trained tokens would be conditioned on a context they were not sampled in)."""
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopMetrics,
        AgentLoopOutput,
    )

    p = sample.prompt_length
    if p > limits.prompt_length:
        return None
    end = min(len(sample.token_ids), p + limits.response_length)
    calls = sample.metadata.get("calls", [])
    return AgentLoopOutput(
        prompt_ids=sample.token_ids[:p],
        response_ids=sample.token_ids[p:end],
        response_mask=sample.loss_mask[p:end],
        response_logprobs=sample.logprobs[p:end],
        reward_score=sample.reward,
        num_turns=2 * len(calls),  # each call: a user/tool turn and an assistant turn
        metrics=AgentLoopMetrics(**metrics),
        extra_fields={
            **extra,
            "openforge": {
                **extra.get("openforge", {}),
                "calls": calls,
                "segment": sample.segment,
                "opened_by": sample.metadata.get("opened_by"),
                "response_cut": end < len(sample.token_ids),
            },
        },
    )


def samples_to_outputs(
    samples: list[Sample], limits: Limits, metrics: dict[str, Any], extra: dict[str, Any]
) -> Converted:
    converted = Converted()
    for sample in samples:
        output = sample_to_output(sample, limits, metrics, extra)
        if output is None:
            converted.over_prompt_length += 1
            continue
        converted.responses_cut += int(output.extra_fields["openforge"]["response_cut"])
        converted.outputs.append(output)
    return converted
