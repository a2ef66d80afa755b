"""Which episodes count: the one definition of a final episode, in Python (`is_final`) and in SQL (`FINAL_SQL`).

Reports (pass@k, outcomes), behaviour analysis, training (assembly, teacher selection), the viewer (the run page,
the "final attempts only" filter, GRPO groups), resuming a run and task curation all count the same episodes:

An episode is **final** when it has an outcome and its `final` flag is not false.

- **Retries.** The orchestrator (`openforge rollout` / `eval`, the veRL agent loop, the in-process family
  episodes) retries an attempt that ended in an infrastructure failure, in a new episode of the same slot (task,
  harness, sample). `rollout/outcome.py`'s `record_outcome` writes the flag together with the outcome:
  `metadata["final"]` is true on the slot's last attempt and false on every attempt it retried. A retried attempt
  is never final; the last attempt is, even when it failed for the infrastructure too (then it is a slot whose
  failure is reported by its class, but not a sample: pass@k and training take graded episodes only).
- **Unfinished episodes.** An episode with no outcome yet is not final, whatever its flag: it is still running,
  or its process was killed (a crash, Ctrl-C) before it was graded, and `--resume` runs its slot again. Only
  when its outcome is recorded can anyone know whether it is the slot's last attempt.
- **No flag.** An episode written without the flag did not come from the orchestrator (the store's API, the
  proxy's admin API, another tool): nothing retried it, so it is its own slot and final once it has an outcome.
  The flag is part of the episode's JSON metadata, which every schema version has (`schema.py`, v1 on); no
  migration adds or changes it, so an older store follows the same rule.

Of the final episodes, the **graded** ones are samples (pass@k, GRPO groups, training): an outcome of the
agent's (`core.GRADED_OUTCOMES`: `passed`, `failed`, `verifier_failed`) and a reward (`GRADED_SQL`). The others
failed for the infrastructure and are reported by their class.
"""

from __future__ import annotations

from openforge.core import GRADED_OUTCOMES, Episode

# Over `episodes e`. JSON false reads as 0 in SQLite; a missing (or null) flag as NULL, which `IS NOT 0` lets by.
FINAL_SQL = "(e.outcome IS NOT NULL AND json_extract(e.metadata, '$.final') IS NOT 0)"
# Over `episodes e`: an outcome of the agent's, with a reward (the values are the enum's own, never user input).
GRADED_SQL = f"(e.outcome IN ({', '.join(repr(o.value) for o in sorted(GRADED_OUTCOMES))}) AND e.reward IS NOT NULL)"


def is_final(episode: Episode) -> bool:
    """Whether `episode` counts (the module docstring's rule; the same as `FINAL_SQL`)."""
    return episode.outcome is not None and not is_retried(episode)


def is_retried(episode: Episode) -> bool:
    """Whether a later attempt of the same slot replaced `episode` (the orchestrator marked it not final)."""
    return episode.metadata.get("final") in (False, 0)
