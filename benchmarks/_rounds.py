"""Side-by-side measurement for the benchmarks: variants measured in turn, each in a fresh process, the order
reversed every other round (a machine that drifts, or warms up, then favours neither side)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable


def alternating_rounds(
    variants: list[str],
    rounds: int,
    measure: Callable[[str], dict],
    report: Callable[[int, str, dict], None] | None = None,
) -> dict[str, list[dict]]:
    """`measure(variant)` once per variant per round; each variant's figures in round order."""
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(rounds):
        for variant in variants if r % 2 == 0 else variants[::-1]:
            got = measure(variant)
            runs[variant].append(got)
            if report is not None:
                report(r, variant, got)
    return runs


def worker_figures(command: list[str], **run_options: object) -> dict:
    """Run a worker process to its end; its figures are the JSON object on its last line of output."""
    out = subprocess.run(command, capture_output=True, text=True, **run_options)  # type: ignore[call-overload]
    if out.returncode != 0:
        raise SystemExit(f"worker {command[1:4]} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
