"""The parquet veRL trains from: one row per (task, harness), read by veRL's `RLHFDataset`.

Columns (what `RLHFDataset` and the agent loop read):

- `data_source`: `openforge/<harness>` (veRL groups validation metrics by it);
- `prompt`: the task as a chat (`[{"role": "user", "content": instruction}]`). veRL tokenizes it only to
  filter over-long prompts; the episode's real prompt is whatever the harness sends through the proxy;
- `agent_name`: `openforge` (rows pick their agent loop by it);
- `reward_model`: `{"style": "verifier", "ground_truth": ""}`: the reward comes from the task's verifier in
  the agent loop; veRL's reward functions are never asked;
- `extra_info`: `index` (the row), `task_id`, `task_path` (absolute, as seen where the dataset was built; the
  loop's `tasks` setting re-roots it on workers where tasks live elsewhere), `harness`, `split`.

Several harnesses make one row per task per harness, so a batch mixes harnesses (training on several at once
beats training on one: docs/design.md, "What the reference system found").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforge.core.errors import ConfigurationError
from openforge.train.verl import AGENT_NAME

if TYPE_CHECKING:
    from openforge.tasks import Task


def dataset_rows(tasks: Iterable[Task], harnesses: Sequence[str]) -> list[dict[str, Any]]:
    """The rows for `tasks` (loaded `Task`s) × `harnesses`, task-major."""
    if not harnesses:
        raise ValueError("no harness given: pass at least one (e.g. --harness react,claude-code)")
    rows: list[dict[str, Any]] = []
    for task in tasks:
        for harness in harnesses:
            rows.append(
                {
                    "data_source": f"openforge/{harness}",
                    "prompt": [{"role": "user", "content": task.instruction}],
                    "agent_name": AGENT_NAME,
                    "reward_model": {"style": "verifier", "ground_truth": ""},
                    "extra_info": {
                        "index": len(rows),
                        "task_id": task.id,
                        "task_path": str(Path(task.path).resolve()),
                        "harness": harness,
                        "split": task.split or "",
                    },
                }
            )
    return rows


class DatasetError(ConfigurationError, ValueError):
    """The dataset cannot be written as asked (an unknown harness, no tasks); the message says what is allowed."""


def write_dataset(
    task_roots: Sequence[str | Path], harnesses: Sequence[str], out: str | Path, split: str | None = None
) -> int:
    """Load the tasks under `task_roots` (only `split` if given), write the parquet, return its row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from openforge.harness import ADAPTERS
    from openforge.tasks import load_tasks

    unknown = [h for h in harnesses if h not in ADAPTERS]
    if unknown:
        raise DatasetError(f"unknown harness(es) {', '.join(unknown)}; known: {', '.join(sorted(ADAPTERS))}")
    tasks = load_tasks(task_roots, split=split)
    if not tasks:
        where = ", ".join(map(str, task_roots))
        raise DatasetError(f"no tasks under {where}" + (f" in split {split!r}" if split else ""))
    rows = dataset_rows(tasks, list(dict.fromkeys(harnesses)))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return len(rows)
