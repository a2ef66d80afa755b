"""What the jail's per-command cgroup costs: one jailed command (`run_jailed`, as the quickstart's in-process
episodes run each of the agent's commands) timed with its own cgroup and without (the cgroup step skipped).
Needs root and writable cgroups (else both columns are the same: the jail then falls back to RLIMIT_NPROC).

Commands run in blocks of `--block` of one variant, the blocks interleaved so machine noise hits both alike. Not
one command of each in turn: a jail's namespaces are torn down after it exits, and without a cgroup to wait on
(the cgroup's removal waits until it is empty) that cost lands on whatever command runs next — timed one by one,
the no-cgroup variant's teardown was charged to the other (the earlier figure, 44 vs 23 ms, was that).

    python benchmarks/jail.py [--n 100] [--block 10] [--results benchmarks/results/jail.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _machine import public_argv, run_metadata

from openforge.sandbox.local import jail

COMMAND = "echo hi > b.txt && cat a.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="commands per variant")
    parser.add_argument("--block", type=int, default=10, help="commands of one variant in a row")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/jail.json"))
    args = parser.parse_args()
    with_cgroup = jail._jail_cgroup
    root = Path(tempfile.mkdtemp(prefix="openforge-jail-bench-"))
    root.chmod(0o755)  # the jail's user must reach its work directory
    workdir = root / "w"
    workdir.mkdir()
    jail.prepare_workdir(workdir, {"a.txt": "x\n"})
    seconds: dict[str, list[float]] = {"own cgroup": [], "no cgroup": []}
    for _ in range(max(1, args.n // args.block)):
        for variant in seconds:
            jail._jail_cgroup = with_cgroup if variant == "own cgroup" else (lambda _mb: None)
            for _ in range(args.block):
                started = time.perf_counter()
                jail.run_jailed(workdir, COMMAND)
                seconds[variant].append(time.perf_counter() - started)
    jail._jail_cgroup = with_cgroup
    medians = {k: round(1000 * statistics.median(v), 1) for k, v in seconds.items()}
    for variant, ms in medians.items():
        print(f"{variant}: median {ms} ms per command")
    print(f"ratio: {medians['own cgroup'] / medians['no cgroup']:.2f}")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(
        json.dumps(
            {
                **run_metadata(
                    "python benchmarks/jail.py " + public_argv(sys.argv[1:]),
                    {"n": args.n, "block": args.block},
                ),
                "cpus": os.cpu_count(),
                "command_run": COMMAND,
                "median_ms": medians,
                "ratio": round(medians["own cgroup"] / medians["no cgroup"], 2),
                "load_average_at_end": os.getloadavg()[0],
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
