"""The token view: an episode's training samples as the assembler builds them, every token with its loss mask
and rollout logprob, call outputs and segment boundaries marked.

Samples come from `openforge.train.assemble` (the one assembler the trainer uses), in its default mode unless
asked otherwise; nothing here decides what is trained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from markupsafe import Markup

from openforge.core import CallRecord, Episode, Sample
from openforge.train.assemble import assemble, checked_mode, drop_reason
from openforge.view.tokentext import TokenText

# p = exp(logprob) at or above each bound → colour class b0 (sure) … b7 (a long shot)
BUCKET_BOUNDS = (0.9, 0.7, 0.5, 0.3, 0.1, 0.03, 0.01)
# A sample's context before its first trained token longer than this is folded (still in the page).
FOLD_PROMPT_TOKENS = 200


@dataclass
class SampleView:
    sample: Sample
    html: Markup  # the token spans
    prefix_html: Markup | None  # the folded context before the first trained token, when long
    prefix_tokens: int
    trained: int
    call_spans: list[tuple[int, int, int]] = field(default_factory=list)  # (call index, start, end) of outputs

    @property
    def length(self) -> int:
        return len(self.sample.token_ids)


@dataclass
class TokenView:
    mode: str
    samples: list[SampleView]
    why_none: str | None = None  # why the episode gives no sample


def bucket(logprob: float) -> int:
    p = math.exp(logprob)
    for i, bound in enumerate(BUCKET_BOUNDS):
        if p >= bound:
            return i
    return len(BUCKET_BOUNDS)


def token_view(episode: Episode, calls: list[CallRecord], tokens: TokenText | None, mode: str = "merged") -> TokenView:
    checked = checked_mode(mode)
    reason = drop_reason(episode)
    if reason is not None:
        return TokenView(mode, [], f"the trainer leaves this episode out ({reason.replace('_', ' ')})")
    # final_only=False: a retried attempt is shown too, with a note on the page that the trainer skips it
    samples, _ = assemble([(episode, calls)], mode=checked, final_only=False)
    by_index = {c.index: c for c in calls}
    views = [_sample_view(s, by_index, tokens) for s in samples]
    return TokenView(mode, views, None if views else "no call of this episode sampled a token to train on")


def _sample_view(sample: Sample, calls: dict[int, CallRecord], tokens: TokenText | None) -> SampleView:
    starts: dict[int, int] = {}
    spans = []
    for index in sample.metadata.get("calls", []):
        call = calls.get(index)
        if call is None or not call.output_ids:
            continue
        start = len(call.prompt_ids)
        starts[start] = index
        spans.append((index, start, start + len(call.output_ids)))
    cut = sample.prompt_length if sample.prompt_length > FOLD_PROMPT_TOKENS else 0
    cells = [_cell(sample, i, starts.get(i), tokens) for i in range(len(sample.token_ids))]
    return SampleView(
        sample=sample,
        html=Markup("").join(cells[cut:]),
        prefix_html=Markup("").join(cells[:cut]) if cut else None,
        prefix_tokens=cut,
        trained=sum(sample.loss_mask),
        call_spans=spans,
    )


def _cell(sample: Sample, i: int, call_start: int | None, tokens: TokenText | None) -> Markup:
    token_id = sample.token_ids[i]
    if tokens is not None:
        text = tokens.text(token_id) or "\u2205"
        special = tokens.is_special(token_id)
    else:
        text, special = f"\u27e8{token_id}\u27e9", False
    classes = ["t"]
    if special:
        classes.append("sp")
    marker = Markup("")
    if call_start is not None:
        marker = Markup('<span class="callmark" title="output of call {0}">call {0}</span>').format(call_start)
    if sample.loss_mask[i]:
        lp = sample.logprobs[i]
        version = sample.policy_versions[i] if i < len(sample.policy_versions) else -1
        classes += ["m1", f"b{bucket(lp)}"]
        title = f"#{i} id {token_id} · trained · logprob {lp:.3f} (p {math.exp(lp):.2f}) · policy v{version}"
        return marker + Markup('<span class="{}" data-lp="{:.4f}" title="{}">{}</span>').format(
            " ".join(classes), lp, title, text
        )
    return marker + Markup('<span class="{}" title="#{} id {}">{}</span>').format(" ".join(classes), i, token_id, text)


__all__ = ["BUCKET_BOUNDS", "SampleView", "TokenView", "bucket", "token_view"]
