"""Where Claude Code's time before its first model request goes, and what its own settings can remove.

Runs the bundle's Claude Code against the loopback stub (`openforge.harness.smoke`, in its own network
namespace) ROUNDS times per variant, interleaved (order rotated each round): the launch OpenForge uses, and
the same launch with settings and environment variables that skip start-up work (the IDE probe, spinner tips).
Per variant: the median seconds of the whole run (start to exit; the stub answers at once) and whether the
requests it sent are byte-identical to the plain launch's once the per-run random ids (`metadata.user_id`:
device and session ids) are set aside. One more run with Claude Code's own start-up profiler
(`CLAUDE_CODE_PROFILE_STARTUP=1`) gives the phases of its start.

    python benchmarks/harness_start.py --rounds 7 --results benchmarks/results/harness-start.json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _machine import public_argv, run_metadata

from openforge.harness.smoke import smoke_run

VARIANTS: dict[str, dict[str, Any]] = {
    "openforge": {},
    "no IDE probe": {"extra_env": {"CLAUDE_CODE_AUTO_CONNECT_IDE": "false", "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1"}},
    "no spinner tips": {"extra_args": ["--settings", '{"spinnerTipsEnabled": false}']},
}
VARIANTS["both"] = {**VARIANTS["no IDE probe"], **VARIANTS["no spinner tips"]}


def requests_without_ids(result: dict[str, Any]) -> str:
    bodies = []
    for request in result["requests"]:
        if request["method"] != "POST":
            continue
        body = json.loads(json.dumps(request["body"]))
        body.get("metadata", {}).pop("user_id", None)
        bodies.append(body)
    return json.dumps(bodies, sort_keys=True)


def run_once(options: dict[str, Any], scratch: Path) -> dict[str, Any]:
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "home").mkdir(parents=True)
    (scratch / "work").mkdir()
    result = smoke_run("claude-code", options=options, home=scratch / "home", workdir=scratch / "work")
    if result["returncode"] != 0:
        raise SystemExit(f"claude-code exited {result['returncode']}: {result['stderr'][-500:]}")
    result["profile"] = next((p.read_text() for p in (scratch / "home").rglob("startup-perf/*.txt")), None)
    return result


def profile_phases(text: str) -> dict[str, float]:
    """The profiler's checkpoints (ms since the process started), e.g. `main_tsx_entry`: module loading."""
    return {m[1]: float(m[0]) for m in re.findall(r"\[\+\s*([\d.]+)ms\] \(\+\s*[\d.]+ms\) (\w+)", text)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--results", type=Path)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="openforge-harness-start-"))
    try:
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
        requests: dict[str, set[str]] = {name: set() for name in VARIANTS}
        names = list(VARIANTS)
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:  # order rotated: no position bias
                result = run_once(VARIANTS[name], scratch)
                seconds[name].append(result["seconds"])
                requests[name].add(requests_without_ids(result))
        profiled = run_once({"extra_env": {"CLAUDE_CODE_PROFILE_STARTUP": "1"}}, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = requests["openforge"]
    variants = {
        name: {
            "median_s": round(statistics.median(seconds[name]), 3),
            "seconds": [round(s, 3) for s in seconds[name]],
            "requests_identical_to_openforge": requests[name] == base and len(base) == 1,
        }
        for name in VARIANTS
    }
    marks = profile_phases(profiled["profile"] or "")
    phases = {
        "runtime_load_ms": marks.get("cli_entry"),
        "module_load_ms": round(marks.get("main_tsx_entry", 0) - marks.get("cli_before_main_import", 0), 1),
        "init_and_setup_ms": round(marks.get("main_after_run", 0) - marks.get("main_tsx_entry", 0), 1),
        "to_first_turn_ms": marks.get("headless_turn_start"),
    }
    for name, v in variants.items():
        print(f"{name:18s} median {v['median_s']:.3f} s   requests identical: {v['requests_identical_to_openforge']}")
    print("start-up profile:", json.dumps(phases))
    if args.results:
        meta = run_metadata(
            "python benchmarks/harness_start.py " + public_argv(sys.argv[1:]),
            {"variants": VARIANTS, "rounds": args.rounds, "harness": "claude-code (the bundle's pinned version)"},
        )
        record = {**meta, "rounds": args.rounds, "variants": variants, "profile_phases": phases}
        record["profile"] = profiled["profile"]
        args.results.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
