"""Select: keep the tasks whose estimated pass rate lies in the band (a task every attempt solves, or none does,
gives GRPO no signal), and split what is kept into train and held-out — deterministic in the run's seed: the
tasks ordered by a hash of (seed, lineage), the first `heldout_fraction` of them held out (at least one when
two or more are kept and the fraction is above 0)."""

from __future__ import annotations

import hashlib

from openforge.curate.ledger import Candidate, Split


def out_of_band(candidate: Candidate, band: tuple[float, float]) -> tuple[str, str] | None:
    """(reason, detail) when the pass rate is outside the band; None when inside or not estimated."""
    rate = candidate.pass_rate
    if rate is None:
        return None
    low, high = band
    if rate < low:
        return "too_hard", f"the solver passed {rate:.0%} of {candidate.graded} attempts, below {low:.0%}"
    if rate > high:
        return "too_easy", f"the solver passed {rate:.0%} of {candidate.graded} attempts, above {high:.0%}"
    return None


def split(accepted: list[Candidate], fraction: float, seed: int) -> dict[str, Split]:
    """candidate id → "train" | "heldout"."""
    order = sorted(accepted, key=lambda c: hashlib.sha256(f"{seed}:{c.lineage}".encode()).hexdigest())
    held = round(fraction * len(order))
    if fraction > 0 and len(order) >= 2:
        held = max(held, 1)
    return {c.id: ("heldout" if i < held else "train") for i, c in enumerate(order)}
