"""Recorded episodes → the rows TRL's GRPO trainer trains on (pure: no TRL, no torch).

TRL 1.16's `rollout_func` returns one row per prompt slot it was given: `prompt_ids`, `completion_ids`,
`logprobs` (aligned with the completion) and `env_mask` (1 where the policy sampled the token, 0 where a tool
or the harness wrote it: TRL multiplies it into the loss mask). The slots come in GRPO groups of
`num_generations` consecutive copies of one prompt, and TRL computes each row's advantage against the other
rows of its group, so a group always has exactly that many rows. A row here is an assembled sample
(`openforge.train.assemble`, merged mode) cut at its first trained token:

- an episode whose continuity held is **one row**: the last call's prompt + output, every sampled token at the
  position where it was sampled with mask 1, everything between the outputs (tool results, the template's
  turn markup) with mask 0;
- an episode whose continuity broke is **one row per segment**, each with the episode's reward (counted:
  `broken_episodes`, `segment_rows`) — the embedded trainer's samples, so the group's baseline is computed
  over the same rows;
- an episode that ended in an infrastructure failure (or gave no sampled token) is **one blank row**: a
  single token with mask 0 and no reward, so it neither trains nor enters its group's baseline (TRL leaves a
  row every reward function scored `None` out of the mean and std, with advantage 0) — counted.

A group's rows are taken episode by episode in slot order; an episode whose rows no longer fit (a broken
episode late in its group) is left out whole (`left_out`), and slots still empty get blank rows (`padding`),
so the group keeps its size and no sampled token is ever cut from a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from openforge.core import CallRecord, Episode, Sample
from openforge.train.assemble import assemble_episode, drop_reason


@dataclass(frozen=True)
class Row:
    """One TRL row. `reward` None: no reward (a blank row); `versions`: the policy versions that sampled its
    trained tokens."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]
    reward: float | None
    episode_id: str | None = None
    segment: int = 0
    versions: tuple[int, ...] = ()

    @property
    def trained_tokens(self) -> int:
        return sum(self.env_mask)


def sample_row(sample: Sample) -> Row:
    """An assembled sample as a row: the prompt up to its first trained token, the rest as the completion."""
    cut = sample.prompt_length
    versions = sorted({v for v, m in zip(sample.policy_versions, sample.loss_mask) if m})
    return Row(
        prompt_ids=sample.token_ids[:cut],
        completion_ids=sample.token_ids[cut:],
        logprobs=sample.logprobs[cut:],
        env_mask=sample.loss_mask[cut:],
        reward=sample.reward,
        episode_id=sample.episode_id,
        segment=sample.segment,
        versions=tuple(versions),
    )


def blank_row(token_id: int, episode_id: str | None = None) -> Row:
    """A row that trains nothing and is scored by nothing (one token, mask 0, no reward). `token_id`: the
    end-of-turn token, so TRL does not count the row as truncated."""
    return Row([token_id], [token_id], [0.0], [0], None, episode_id)


@dataclass
class EpisodeRows:
    """What one episode gives: its rows and why (`merged`, `segments`, `infrastructure`, `untrainable`)."""

    episode_id: str
    kind: str
    rows: list[Row]
    reward: float | None  # the graded reward (None: not graded)


def episode_rows(episode: Episode, calls: list[CallRecord], blank_token: int, step: int = 0) -> EpisodeRows:
    """An episode's rows: one per merged sample, or one blank row when it has none to give."""
    if drop_reason(episode) is not None:
        return EpisodeRows(episode.id, "infrastructure", [blank_row(blank_token, episode.id)], None)
    samples = assemble_episode(episode, calls, mode="merged", step=step)
    if not samples:
        return EpisodeRows(episode.id, "untrainable", [blank_row(blank_token, episode.id)], episode.reward)
    kind = "merged" if len(samples) == 1 else "segments"
    return EpisodeRows(episode.id, kind, [sample_row(s) for s in samples], episode.reward)


class BatchStats(BaseModel):
    """One rollout batch: its episodes, the rows they became, and what did not become a trained row."""

    step: int = 0  # the trainer's global step when the batch was generated
    policy_version: int | None = None  # the version the batch's episodes sampled from
    episodes: int = 0
    graded: int = 0
    reward: float | None = None  # mean reward of the graded episodes
    pass_rate: float | None = None
    rows: int = 0
    broken_episodes: int = 0  # continuity broke: one row per segment
    segment_rows: int = 0
    infrastructure_failures: int = 0  # blank rows
    untrainable: int = 0  # graded, yet no sampled token: blank rows
    left_out: int = 0  # episodes whose rows did not fit their group
    padding: int = 0  # blank rows that fill a group
    trained_tokens: int = 0  # mask 1
    masked_tokens: int = 0  # completion tokens with mask 0 (tool output, turn markup)
    outcomes: dict[str, int] = {}
    seconds: float = 0.0


@dataclass
class Packed:
    rows: list[Row] = field(default_factory=list)
    stats: BatchStats = field(default_factory=BatchStats)


def pack_groups(groups: Sequence[Sequence[EpisodeRows]], slots: int, blank_token: int) -> Packed:
    """Each group's episodes (in slot order) as exactly `slots` rows (see the module docstring)."""
    packed = Packed()
    stats = packed.stats
    graded: list[float] = []
    for episodes in groups:
        taken: list[Row] = []
        for ep in episodes:
            stats.episodes += 1
            if ep.reward is not None:
                graded.append(ep.reward)
            if len(taken) + len(ep.rows) > slots:
                stats.left_out += 1
                continue
            taken += ep.rows
            stats.infrastructure_failures += ep.kind == "infrastructure"
            stats.untrainable += ep.kind == "untrainable"
            if ep.kind == "segments":
                stats.broken_episodes += 1
                stats.segment_rows += len(ep.rows)
        stats.padding += slots - len(taken)
        taken += [blank_row(blank_token) for _ in range(slots - len(taken))]
        packed.rows += taken
    stats.rows = len(packed.rows)
    stats.graded = len(graded)
    if graded:
        stats.reward = sum(graded) / len(graded)
        stats.pass_rate = sum(r >= 1.0 for r in graded) / len(graded)
    stats.trained_tokens = sum(r.trained_tokens for r in packed.rows)
    stats.masked_tokens = sum(len(r.env_mask) - r.trained_tokens for r in packed.rows if r.reward is not None)
    return packed


def trl_columns(rows: Sequence[Row]) -> dict[str, Any]:
    """The rows as `rollout_func`'s return value: TRL's keys, and OpenForge's per-row fields (TRL hands every
    extra key to the reward functions)."""
    return {
        "prompt_ids": [r.prompt_ids for r in rows],
        "completion_ids": [r.completion_ids for r in rows],
        "logprobs": [r.logprobs for r in rows],
        "env_mask": [r.env_mask for r in rows],
        "openforge_reward": [r.reward for r in rows],
        "openforge_episode": [r.episode_id for r in rows],
        "openforge_versions": [list(r.versions) for r in rows],
    }
