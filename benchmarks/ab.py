"""Run one benchmark from two commits side by side: a checkout of BEFORE (a git worktree) and this checkout,
alternating over rounds, before first, on the same machine at the same time -- the way to tell a change's effect
from a noisy machine's drift. The benchmark must take `--results PATH` and write a JSON file there.

    python benchmarks/ab.py --before 3568b44 --rounds 2 --results benchmarks/results/proxy-cpu-ab.json -- \\
        benchmarks/proxy.py --only cpu --contexts 1000,100000 --skip-profile

Writes every run's results, labelled `before` / `after` with its round and commit, in one file, plus the
command, commit, date and machine of the comparison itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from _machine import public_argv, run_metadata
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
RUN_RESULTS = ".ab-run.json"  # each run's own results file, relative to its checkout (no machine path in it)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def run_once(checkout: Path, benchmark: list[str], console: Console, label: str, round_: int) -> dict:
    """The benchmark from `checkout` (its own code first on the path), its results file read back."""
    out = checkout / RUN_RESULTS
    out.unlink(missing_ok=True)
    argv = [sys.executable, *benchmark, "--results", RUN_RESULTS]
    console.print(f"[bold]{label}[/] round {round_}: {shlex.join(['python', *benchmark])}")
    done = subprocess.run(argv, cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)})
    if done.returncode != 0 or not out.is_file():
        raise SystemExit(f"{label} round {round_}: the benchmark exited with {done.returncode} and no results")
    results = json.loads(out.read_text())
    out.unlink()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the commit to compare this checkout with")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--results", type=Path, required=True, help="where the comparison goes (JSON)")
    ap.add_argument("benchmark", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS... (run from each checkout)")
    args = ap.parse_args()
    benchmark = args.benchmark[1:] if args.benchmark[:1] == ["--"] else args.benchmark
    if not benchmark:
        ap.error("give the benchmark after --: SCRIPT ARGS...")
    console = Console()
    meta = run_metadata(
        "python benchmarks/ab.py " + public_argv(sys.argv[1:]), {"before": args.before, "rounds": args.rounds}
    )
    runs = []
    with tempfile.TemporaryDirectory(prefix="openforge-ab-") as tmp:
        before = Path(tmp) / "before"
        git("worktree", "add", "--detach", str(before), args.before)
        try:
            for round_ in range(1, args.rounds + 1):
                for label, checkout in (("before", before), ("after", ROOT)):
                    results = run_once(checkout, benchmark, console, label, round_)
                    runs.append({"label": label, "round": round_, "commit": results.get("commit"), "results": results})
        finally:
            git("worktree", "remove", "--force", str(before))
    args.results.write_text(json.dumps({**meta, "runs": runs}, indent=1) + "\n")
    console.print(f"{len(runs)} runs written to {args.results}")


if __name__ == "__main__":
    main()
