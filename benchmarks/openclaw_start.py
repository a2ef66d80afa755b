"""OpenClaw's start with and without the bundle's compile cache (openforge/harness/node_cache.py).

Runs the bundle's OpenClaw against the loopback stub (`openforge.harness.smoke`, in its own network namespace)
ROUNDS times per variant, alternating: the launch OpenForge uses (Node's compile cache read from the bundle),
and the launch before the bundle had one (an empty cache of the run's own, as a fresh per-episode TMPDIR gave).
Per variant: the median seconds of the whole run (start to exit; the stub answers at once), the CPU seconds of
the run (OpenClaw's processes), and whether its requests are the same as the other variant's but for per-run ids
(`smoke.comparable`).

    python benchmarks/openclaw_start.py --rounds 5 --results benchmarks/results/openclaw-start.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _machine import public_argv, run_metadata

from openforge.harness.bundle import read_manifest
from openforge.harness.smoke import comparable, smoke_run

VARIANTS = ("bundle cache", "no cache")


def run_once(variant: str, scratch: Path) -> tuple[dict[str, Any], float]:
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "cache").mkdir(parents=True)
    options = {"extra_env": {"NODE_COMPILE_CACHE": str(scratch / "cache")}} if variant == "no cache" else {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = smoke_run("openclaw", options=options)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result["returncode"] != 0:
        raise SystemExit(f"openclaw exited {result['returncode']}: {result['stderr'][-500:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return result, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--results", type=Path)
    args = ap.parse_args()
    if not read_manifest()["components"].get("openclaw", {}).get("compile_cache"):
        sys.exit("the bundle has no OpenClaw compile cache: run `openforge harness install --harness openclaw`")
    scratch = Path(tempfile.mkdtemp(prefix="openforge-openclaw-start-"))
    seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    requests: dict[str, set[str]] = {v: set() for v in VARIANTS}
    try:
        for r in range(args.rounds):
            for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:  # order alternated: no position bias
                result, used = run_once(variant, scratch)
                seconds[variant].append(result["seconds"])
                cpu[variant].append(used)
                requests[variant].add(json.dumps([comparable(q) for q in result["requests"]]))
                print(f"round {r} {variant:12s} {result['seconds']:6.2f} s  cpu {used:6.2f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    variants = {
        v: {
            "median_s": round(statistics.median(seconds[v]), 3),
            "median_cpu_s": round(statistics.median(cpu[v]), 3),
            "seconds": [round(s, 3) for s in seconds[v]],
            "cpu_s": [round(s, 3) for s in cpu[v]],
        }
        for v in VARIANTS
    }
    identical = requests["bundle cache"] == requests["no cache"] and len(requests["no cache"]) == 1
    saved = 1 - variants["bundle cache"]["median_s"] / variants["no cache"]["median_s"]
    for v, row in variants.items():
        print(f"{v:12s} median {row['median_s']:.2f} s, CPU {row['median_cpu_s']:.2f} s")
    print(f"wall time saved: {saved:.0%}; requests the same but for per-run ids: {identical}")
    if args.results:
        meta = run_metadata(
            "python benchmarks/openclaw_start.py " + public_argv(sys.argv[1:]),
            {"rounds": args.rounds, "variants": list(VARIANTS)},
        )
        record = {
            **meta,
            "variants": variants,
            "wall_saved_fraction": round(saved, 3),
            "requests_identical": identical,
        }
        args.results.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
