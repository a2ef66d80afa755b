"""Per-episode phases of OpenForge's Docker episodes (react harness, oracle backend, 8 shipped tasks), for
comparing two commits side by side: run this file from each checkout in turn, interleaved over rounds, and
compare. What `benchmarks/rollout.py` measures against Harbor, without Harbor: quick enough to A/B a change to
grading (issue 25: the grader against grading in the agent's container).

    python benchmarks/episode_phases.py --concurrency 4 --label after --json /tmp/phases.jsonl
    # from another checkout, with PYTHONPATH set to it:
    PYTHONPATH=$OTHER python $OTHER/benchmarks/episode_phases.py --concurrency 4 --label before --json /tmp/phases.jsonl

Also `--harness claude-code`, `--runtime crun` (the containers' OCI runtime); `--summarize RUNS.jsonl --results
OUT.json` writes the means over rounds.

Prints one line and appends one JSON object per run: wall seconds of the run, per episode the means of its
recorded timings (`total_s`, `setup_s`, `agent_s`, `verify_s`, the grader's `state_copy_s` where there is one),
and the machine's CPU seconds per episode by where they went (`_machine.cpu_split`: inside the containers, this
process, Docker's daemons, the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _machine import cpu_split, host_cpu_s, package_commit, public_argv, run_metadata, split_difference

from openforge.models import build_tiny_model
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.store import TrajectoryStore

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["append-setting", "backup-csv", "count-words", "create-greeting", "grep-errors", "top-ip", "csv-column-sum"]
TASKS += ["sort-unique-names"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--samples", type=int, default=1, help="episodes per task (8 tasks)")
    ap.add_argument("--all-tasks", action="store_true", help="every shipped task (24) instead of the 8")
    ap.add_argument("--harness", default="react", help="react, claude-code, codex or openclaw")
    ap.add_argument("--label", default="run")
    ap.add_argument("--runtime", default=None, help="the OCI runtime of the containers (Docker's `runtime` option)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openforge-episode-phases")
    ap.add_argument("--json", type=Path, default=None, help="append the figures to this JSON-lines file")
    ap.add_argument("--summarize", type=Path, help="only summarize a --json file's runs into --results")
    ap.add_argument("--results", type=Path, help="with --summarize: the results file to write")
    args = ap.parse_args()
    if args.summarize is not None:
        summarize(args.summarize, args.results)
        return
    run = args.work / args.label / "run"
    shutil.rmtree(run, ignore_errors=True)
    model = args.work / "model"
    if not (model / "config.json").is_file():
        build_tiny_model(model)
    config = RolloutConfig(
        tasks=[ROOT / "examples" / "tasks"],
        task_ids=None if args.all_tasks else TASKS,
        model=model,
        backend="oracle",
        run=run,
        sandbox="docker",
        concurrency=args.concurrency,
        samples=args.samples,
        image_map={"debian:bookworm-slim": "openforge-base:bookworm"},
        harnesses=[args.harness],
        harness_options={"react": {"max_steps": 4}},
        sandbox_options={"runtime": args.runtime} if args.runtime else {},
    )
    start, cpu_start, split_start = time.monotonic(), host_cpu_s(), cpu_split()
    outcomes = asyncio.run(run_rollouts(config)).outcomes
    wall, cpu, split_end = time.monotonic() - start, host_cpu_s() - cpu_start, cpu_split()
    with TrajectoryStore.open(run) as store:
        rows = [e.metadata["timings"] for e in store.list_episodes()]
    keys = sorted({k for r in rows for k in r})
    means = {k: round(statistics.mean(r.get(k, 0.0) for r in rows), 3) for k in keys}
    record = {
        **run_metadata("python benchmarks/episode_phases.py " + public_argv(sys.argv[1:])),
        "label": args.label,
        "openforge_package": package_commit(),  # the commit measured (another checkout's, on PYTHONPATH)
        "harness": args.harness,
        "concurrency": args.concurrency,
        "wall_s": round(wall, 2),
        "outcomes": outcomes,
    }
    # the whole machine's CPU (this process, the daemon, runc, the containers): what an episode costs it
    record["host_cpu_s_per_episode"] = round(cpu / max(1, len(rows)), 3)
    record["cpu_s_per_episode_by_place"] = split_difference(split_start, split_end, len(rows))
    record["episode_means"] = means
    print(json.dumps(record))
    if args.json is not None:
        with args.json.open("a") as f:
            f.write(json.dumps(record) + "\n")


def summarize(runs_file: Path, results: Path | None) -> None:
    """Means over the rounds of each (label, harness, concurrency): episodes/min, CPU per episode and the
    per-episode phases; each run's own record (commit, date, machine) kept beside them."""
    runs = [json.loads(line) for line in runs_file.read_text().splitlines() if line.strip()]
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(f"{r['label']} / {r.get('harness', 'react')} / C={r['concurrency']}", []).append(r)
    summary = {}
    for name, rs in groups.items():
        episodes = sum(rs[0]["outcomes"].values())
        phases = sorted({k for r in rs for k in r["episode_means"]})
        summary[name] = {
            "rounds": len(rs),
            "commit": rs[0].get("openforge_package", rs[0].get("commit")),
            "episodes_per_run": episodes,
            "episodes_per_min": round(statistics.mean(60 * episodes / r["wall_s"] for r in rs), 1),
            "host_cpu_s_per_episode": round(statistics.mean(r["host_cpu_s_per_episode"] for r in rs), 3),
            "cpu_s_per_episode_by_place": _mean_split(rs),
            "episode_means": {k: round(statistics.mean(r["episode_means"].get(k, 0.0) for r in rs), 3) for k in phases},
        }
        print(name, json.dumps(summary[name]))
    if results is not None:
        meta = run_metadata("python benchmarks/episode_phases.py " + public_argv(sys.argv[1:]))
        results.write_text(json.dumps({**meta, "summary": summary, "runs": runs}, indent=1) + "\n")


def _mean_split(runs: list[dict]) -> dict[str, float] | None:
    """The mean CPU per episode by place over `runs`; None for runs recorded before the split was measured."""
    splits = [r["cpu_s_per_episode_by_place"] for r in runs if "cpu_s_per_episode_by_place" in r]
    if not splits:
        return None
    return {k: round(statistics.mean(s[k] for s in splits), 3) for k in splits[0]}


if __name__ == "__main__":
    main()
