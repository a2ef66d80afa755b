"""Task curation end to end on the **scripted generator** (examples/curate/scripted_generator.py: a fixed,
known mix of candidates — it tests the pipeline and makes no new tasks; what a real run accepts depends on the
generator model, and none can run on these machines), with the scripted solver for the difficulty estimate:
propose → prune → build → test → refine → select in Docker, then the funnel, the time and tokens per accepted
task, and last the line `accepted N of M candidates`. The accepted tasks stay in the directory it names
(runs/curate-benchmark/tasks, train/ and heldout/), ready for `openforge eval` or `openforge train`.

    python benchmarks/curate.py          # about a minute on 2 cores; needs a Docker daemon and openforge-base
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402

from openforge.config import load_config  # noqa: E402
from openforge.curate import CurateConfig, run_curation  # noqa: E402

OUT = REPO / "runs" / "curate-benchmark"


def main() -> None:
    console = Console()
    config = load_config(REPO / "examples" / "curate" / "curate.yaml", CurateConfig)
    here = {"seeds": [REPO / p for p in config.seeds], "out": OUT,
            "generator": f"scripted:{REPO / 'examples/curate/scripted_generator.py'}",
            "solver": config.solver.model_copy(update={"backend": f"scripted:{REPO / 'examples/curate/scripted_solver.py'}"})}
    config = config.model_copy(update=here)
    shutil.rmtree(OUT, ignore_errors=True)  # a fresh run: the time per task is this run's
    started = time.monotonic()
    report = run_curation(config, console)
    wall = time.monotonic() - started
    console.print(f"\nfunnel: " + " → ".join(f"{name} {n}" for name, n in report.funnel))
    if report.accepted:
        console.print(f"time per accepted task: {wall / report.accepted:.1f} s ({wall:.0f} s for {report.accepted}; "
                      "the solver model was built in that time); the paper: about 16 min and $4 per task")
    console.print(f"accepted tasks in {OUT / 'tasks'}")
    print(report.last_line)


if __name__ == "__main__":
    main()
