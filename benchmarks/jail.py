"""What the jail's cgroups cost: one jailed command (`run_jailed`, as the quickstart's in-process episodes run
each of the agent's commands) timed three ways, interleaved side by side so machine noise hits all alike: in a
cgroup reused from the pool (what `run_jailed` does), in a fresh cgroup created and removed for the command
(what it did before the pool), and with no cgroup at all. Needs root and writable cgroups (else the columns are
the same: the jail then falls back to RLIMIT_NPROC).

Commands run in blocks of `--block` of one variant, the blocks interleaved: a jail's namespaces are torn down
after it exits, and without a cgroup to wait on (`kill_all` returns once the cgroup is empty) that cost lands
on whatever command runs next — timing one command of each variant in turn charged the no-cgroup variant's
teardown to the variant after it.

    python benchmarks/jail.py [--n 40] [--block 10] [--results benchmarks/results/jail.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import openforge.sandbox.local.jail as jail

COMMAND = "echo hi > b.txt && cat a.txt"


class FreshEachCommand:
    """The jail before the pool: a cgroup created for every command and removed after it."""

    def acquire(self):
        return jail._jail_cgroup()

    def release(self, cg) -> None:
        cg.kill_all()
        cg.remove()


class NoCgroup:
    def acquire(self):
        return None

    def release(self, cg) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="commands per variant")
    parser.add_argument("--block", type=int, default=10, help="commands of one variant in a row")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/jail.json"))
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="openforge-jail-bench-"))
    root.chmod(0o755)  # the jail's user must reach its work directory
    workdir = root / "w"
    workdir.mkdir()
    jail.prepare_workdir(workdir, {"a.txt": "x\n"})
    pools = {"pooled cgroup": jail.CGROUPS, "fresh cgroup": FreshEachCommand(), "no cgroup": NoCgroup()}
    seconds: dict[str, list[float]] = {k: [] for k in pools}
    for _ in range(max(1, args.n // args.block)):
        for variant, pool in pools.items():
            jail.CGROUPS = pool
            for _ in range(args.block):
                started = time.perf_counter()
                jail.run_jailed(workdir, COMMAND)
                seconds[variant].append(time.perf_counter() - started)
    jail.CGROUPS = pools["pooled cgroup"]
    medians = {k: round(1000 * statistics.median(v), 1) for k, v in seconds.items()}
    for variant, ms in medians.items():
        print(f"{variant}: median {ms} ms per command")
    ratios = {k: round(medians[k] / medians["no cgroup"], 2) for k in ("pooled cgroup", "fresh cgroup")}
    print("ratio to no cgroup: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps({
        "command": f"python benchmarks/jail.py --n {args.n} --block {args.block}", "cpus": os.cpu_count(), "command_run": COMMAND,
        "median_ms": medians, "ratio_to_no_cgroup": ratios,
        "load_average_at_end": os.getloadavg()[0]}, indent=2) + "\n")


if __name__ == "__main__":
    main()
