"""Task curation end to end on the **scripted generator** (examples/curate/scripted_generator.py: a fixed,
known mix of candidates — it tests the pipeline and makes no new tasks; what a real run accepts depends on the
generator model, and none can run on these machines), with the scripted solver for the difficulty estimate:
propose → prune → build → test → refine → select in Docker, then the funnel, the time and tokens per accepted
task, and last the line `accepted N of M candidates`. The accepted tasks stay in the directory it names
(runs/curate-benchmark/tasks, train/ and heldout/), ready for `openforge eval` or `openforge train`.

    python benchmarks/curate.py          # about a minute on 2 cores; needs a Docker daemon and openforge-base
    python benchmarks/curate.py --results benchmarks/results/curate.json   # also the figures as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--results",
        type=Path,
        help="write the funnel, the cost per accepted task and the last line "
        "here as JSON (e.g. benchmarks/results/curate.json)",
    )
    args = parser.parse_args()
    console = Console()
    config = load_config(REPO / "examples" / "curate" / "curate.yaml", CurateConfig)
    here = {
        "seeds": [REPO / p for p in config.seeds],
        "out": OUT,
        "generator": f"scripted:{REPO / 'examples/curate/scripted_generator.py'}",
        "solver": config.solver.model_copy(
            update={"backend": f"scripted:{REPO / 'examples/curate/scripted_solver.py'}"}
        ),
    }
    config = config.model_copy(update=here)
    shutil.rmtree(OUT, ignore_errors=True)  # a fresh run: the time per task is this run's
    started = time.monotonic()
    report = run_curation(config, console)
    wall = time.monotonic() - started
    console.print("\nfunnel: " + " → ".join(f"{name} {n}" for name, n in report.funnel))
    if report.accepted:
        console.print(
            f"time per accepted task: {wall / report.accepted:.1f} s ({wall:.0f} s for {report.accepted}; "
            "the solver model was built in that time); the paper: about 16 min and $4 per task"
        )
    console.print(f"accepted tasks in {OUT / 'tasks'}")
    print(report.last_line)
    if args.results:
        results = {
            "benchmark": "curate",
            "command": "python benchmarks/curate.py --results " + str(args.results),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "wall_s": round(wall, 1),
            "seconds_per_accepted": round(wall / report.accepted, 1) if report.accepted else None,
            "accepted_line": report.last_line,
            "report": report.model_dump(mode="json"),
        }
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(results, indent=2) + "\n")
        console.print(f"results in {args.results}")


if __name__ == "__main__":
    main()
