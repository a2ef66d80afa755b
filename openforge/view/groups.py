"""A GRPO group — the final episodes of one (step, task, harness) — with each sample's advantage, computed as the
trainer computes it: the assembler's samples (`assemble_run`, the step's group id), groups with signal
(`groups_with_signal`), advantages over the samples of groups with signal (`group_advantages`, GRPOConfig's
normalisation)."""

from __future__ import annotations

from dataclasses import dataclass, field

from openforge.core import Episode, Sample
from openforge.store import TrajectoryStore
from openforge.train.assemble import assemble_run, drop_reason, group_id


@dataclass
class Member:
    episode: Episode
    samples: list[Sample] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)  # one per sample; [] when the group has no signal
    dropped: str | None = None  # why the trainer leaves the episode out, if it does

    @property
    def trained_tokens(self) -> int:
        return sum(sum(s.loss_mask) for s in self.samples)


@dataclass
class GroupView:
    step: int
    task: str | None
    harness: str | None
    group_id: str
    members: list[Member]
    signal: bool  # at least two different rewards among its samples: the trainer learns from it
    norm_by_std: bool

    @property
    def rewards(self) -> list[float]:
        return [s.reward for m in self.members for s in m.samples]


def group_view(store: TrajectoryStore, step: int, task: str | None, harness: str | None) -> GroupView:
    from openforge.train.advantages import group_advantages, groups_with_signal
    from openforge.train.grpo import GRPOConfig

    config = GRPOConfig()
    episodes = store.group_episodes(step, task, harness)
    samples, _ = assemble_run(store, episodes=episodes, step=step)
    gid = group_id(episodes[0], step) if episodes else f"{step}|{task}|{harness}"
    members = {e.id: Member(e, dropped=drop_reason(e)) for e in episodes}
    for s in samples:
        members[s.episode_id].samples.append(s)
    signal = bool(groups_with_signal([s.reward for s in samples], [s.group_id for s in samples]))
    kept = [s for s in samples if any(s.loss_mask)] if signal else []
    if kept:
        values = group_advantages(
            [s.reward for s in kept], [s.group_id for s in kept], config.norm_by_std, config.eps
        ).tolist()
        by_sample = {id(s): v for s, v in zip(kept, values)}
        for m in members.values():
            m.advantages = [by_sample.get(id(s), 0.0) for s in m.samples]
    return GroupView(step, task, harness, gid, list(members.values()), signal, config.norm_by_std)
