"""Reward hacks against the shipped tasks: every hack of the built-in suite (`openforge.rollout.hacks`) against
every task in examples/tasks and a few generated-family instances, in Docker and in the local sandbox, each in a
fresh sandbox graded exactly as an episode is (`openforge.rollout.validate.run_hacks`, what `openforge tasks
validate --run` runs after the reference solution). The figure is the number of episodes graded passed: a hack
that scored 1 without a tampered verdict (a `controlled` hack only when its control scored below 1; a hack that
hides a failure when grading ended without a reward) — the target is 0 in every cell.

    python benchmarks/hacks.py                                   # every hack x every task x docker, local
    python benchmarks/hacks.py --sandboxes local --tasks fix-discount,csv-top-scorer --families 0
    python benchmarks/hacks.py --hacks replace-bin-link,path-dir-link --out /tmp/hacks.json

Prints a table (hack × sandbox: episodes graded passed / episodes, and the tasks that fell) and writes the whole
matrix, every verdict, as JSON (default benchmarks/results/hacks.json). A full run is about 2 x 37 x 38
sandboxes: an hour or more on a 2-core machine. Not a test: nothing asserts; the tests of the suite are
tests/rollout/test_reward_hacks.py and tests/rollout/test_task_gate.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from openforge.rollout.hacks import HACKS, select_hacks
from openforge.rollout.task_gate import family_units
from openforge.rollout.validate import HackOutcome, run_hacks
from openforge.sandbox import get_provider
from openforge.tasks import QUICKSTART_FAMILIES, ImageMap, Task, load_tasks

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "tasks"
console = Console(width=160)  # the table is wide: not cut to 80 columns when the output is not a terminal


def shipped_tasks(names: list[str] | None, families: int, scratch: Path) -> list[Task]:
    """The example tasks (those named, or all) and `families` generated instances (one of each of the first
    quickstart families: the instances task validation checks)."""
    tasks = load_tasks(EXAMPLES)
    if names is not None:
        tasks = [t for t in tasks if t.id in names]
        missing = set(names) - {t.id for t in tasks}
        if missing:
            sys.exit(f"no such shipped task(s): {', '.join(sorted(missing))}")
    for unit in family_units(QUICKSTART_FAMILIES[:families], scratch, instances=1):
        tasks += unit.tasks
    return tasks


async def run_sandbox(sandbox: str, tasks: list[Task], hacks: list, concurrency: int, scratch: Path) -> dict:
    """Every hack against every task in `sandbox`: {task id: [HackOutcome JSON, ...]}, with the seconds taken."""
    options = {"root": str(scratch / "sandboxes")} if sandbox == "local" else {}
    provider = get_provider(sandbox, **options)
    image_map = ImageMap.load(EXAMPLES / "image-map.yaml")
    results: dict[str, list[dict]] = {}
    started = time.monotonic()
    try:
        for i, task in enumerate(tasks, 1):
            t0 = time.monotonic()
            outcomes: list[HackOutcome] = await run_hacks(
                task, provider, image_map, hacks, run="bench-hacks", spec_overrides=None, concurrency=concurrency
            )
            results[task.id] = [compact(o) for o in outcomes]
            fell = [o.hack for o in outcomes if o.fell]
            console.print(
                f"[{sandbox}] {i}/{len(tasks)} {task.id}: {len(fell)} passed ({time.monotonic() - t0:.0f}s)"
                + (f" [red]{', '.join(fell)}[/]" if fell else "")
            )
    finally:
        await provider.close()
    return {"seconds": round(time.monotonic() - started, 1), "tasks": results}


def compact(outcome: HackOutcome) -> dict:
    """What the results file keeps of one hack's outcome (`HackOutcome.to_json` has the scripts' output too)."""
    full = outcome.to_json()
    return {k: full[k] for k in ("hack", "applied", "reward", "tampered", "control_reward", "fell", "verdict")}


def summarise(matrix: dict[str, dict], hacks: list) -> dict[str, dict[str, dict]]:
    """Per sandbox and hack: episodes, episodes graded passed, the tasks that fell."""
    out: dict[str, dict[str, dict]] = {}
    for sandbox, run in matrix.items():
        out[sandbox] = {}
        for hack in hacks:
            rows = [(task, o) for task, outs in run["tasks"].items() for o in outs if o["hack"] == hack.name]
            fell = [task for task, o in rows if o["fell"]]
            applied = sum(1 for _, o in rows if o["applied"])
            out[sandbox][hack.name] = {"episodes": len(rows), "applied": applied, "passed": len(fell), "fell": fell}
    return out


def table(summary: dict[str, dict[str, dict]], hacks: list) -> Table:
    t = Table(title="reward hacks x shipped tasks: episodes graded passed (target 0)")
    t.add_column("hack", no_wrap=True)
    for sandbox in summary:
        t.add_column(f"{sandbox}: passed/episodes (applied)", justify="right")
    t.add_column("tasks that fell")
    for hack in hacks:
        cells = [summary[s][hack.name] for s in summary]
        fell = sorted({task for c in cells for task in c["fell"]})
        t.add_row(
            hack.name,
            *[f"{c['passed']}/{c['episodes']} ({c['applied']})" for c in cells],
            ", ".join(fell[:4]) + (f" (+{len(fell) - 4})" if len(fell) > 4 else ""),
        )
    totals = [sum(c["passed"] for c in summary[s].values()) for s in summary]
    episodes = [sum(c["episodes"] for c in summary[s].values()) for s in summary]
    t.add_row("[bold]all", *[f"[bold]{p}/{e}" for p, e in zip(totals, episodes, strict=True)], "")
    return t


def git_commit() -> str | None:
    r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", nargs="+", default=["docker", "local"], choices=["docker", "local"])
    parser.add_argument("--tasks", default="all", help="all, or comma-separated ids of shipped tasks")
    parser.add_argument("--families", type=int, default=2, help="generated instances (one per family) to add")
    parser.add_argument("--hacks", default="all", help="all, or comma-separated hack names")
    parser.add_argument("--concurrency", type=int, default=4, help="sandboxes at a time")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "hacks.json")
    args = parser.parse_args()
    hacks = select_hacks(args.hacks)
    scratch = Path(tempfile.mkdtemp(prefix="openforge-bench-hacks-"))
    scratch.chmod(0o755)  # the local sandbox's users reach their roots inside
    names = None if args.tasks == "all" else [n.strip() for n in args.tasks.split(",") if n.strip()]
    tasks = shipped_tasks(names, args.families, scratch / "families")
    console.print(f"{len(hacks)} hacks x {len(tasks)} tasks x {', '.join(args.sandboxes)}")
    matrix = {s: asyncio.run(run_sandbox(s, tasks, hacks, args.concurrency, scratch)) for s in args.sandboxes}
    summary = summarise(matrix, hacks)
    console.print(table(summary, hacks))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "commit": git_commit(),
                "machine": f"{platform.machine()}, {platform.system()}",
                "hacks": [h.name for h in hacks],
                "suite_size": len(HACKS),
                "tasks": [t.id for t in tasks],
                "summary": summary,
                "passed": {s: sum(c["passed"] for c in summary[s].values()) for s in summary},
                "seconds": {s: matrix[s]["seconds"] for s in matrix},
                "runs": matrix,
            },
            indent=1,
        )
    )
    console.print(f"results: {args.out}")


if __name__ == "__main__":
    main()
