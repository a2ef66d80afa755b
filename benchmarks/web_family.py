"""GUI training on the web family (issue 29): held-out pass@1 of base, SFT and SFT+RL (and the same-compute
control where the config asks for it) through the built-in computer-use harness on page snapshots, one seed.

    python benchmarks/web_family.py            # about 40 minutes on 2 loaded cores
    python benchmarks/web_family.py --reuse    # read RUN/report.json where a finished run left one

Writes the web tasks (`openforge tasks generate TASKS/train|heldout --family web`, seed 0) where they are not
yet, runs `openforge train --config examples/train/web-family.yaml --run RUN` in its own process, and writes
benchmarks/results/web-family-training.json from the run's report.json. Not a test: no assertions, only figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml
from _machine import public_argv, run_metadata

from openforge.train.records import report_step_records

CONFIG = Path("examples/train/web-family.yaml")
POLICIES = {"base": "base (pretrained)", "sft": "SFT (oracle's GUI demos)", "rl": "SFT + GRPO", "sft_more": "control"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--run", type=Path, default=Path("runs/web-family"))
    parser.add_argument("--train-tasks", type=int, default=16, help="generated training instances")
    parser.add_argument("--heldout-tasks", type=int, default=12, help="generated held-out instances")
    parser.add_argument("--reuse", action="store_true", help="use RUN/report.json where a finished run left one")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run (train --resume)")
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/web-family-training.json"))
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    (tasks,) = config["tasks"]["dirs"]
    for split, n in (("train", args.train_tasks), ("heldout", args.heldout_tasks)):
        out = Path(tasks) / split
        if not out.is_dir():
            _openforge("tasks", "generate", str(out), "--family", "web", "--n", str(n), "--split", split, "--seed", "0")
    report_path = args.run / "report.json"
    started = time.monotonic()
    if not (args.reuse and report_path.is_file()):
        _openforge(
            "train", "--config", str(args.config), "--run", str(args.run), *(["--resume"] if args.resume else [])
        )
    wall = time.monotonic() - started
    report = json.loads(report_path.read_text())
    write_results(args, config, report, None if args.reuse and wall < 60 else wall)


def _openforge(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "openforge.cli", *argv], check=True)


def write_results(args: argparse.Namespace, config: dict, report: dict, wall: float | None) -> None:
    pass_at_1 = report["heldout_pass_at_1"]
    steps = report_step_records(report)
    figures = {
        "heldout_pass_at_1": {p: pass_at_1[p] for p in POLICIES if p in pass_at_1},
        "heldout_instances": report["heldout_instances"],
        "grpo_steps": len(steps),
        "grpo_episodes": sum(s.get("episodes", 0) for s in steps),
        "grpo_steps_detail": [
            {
                k: s.get(k)
                for k in ("step", "reward", "pass_rate", "episodes", "groups_with_signal", "updated", "seconds")
            }
            for s in steps
        ],
        "teacher_episodes": report.get("teacher_episodes"),
        "sft": report.get("sft"),
        "timings_s": report["timings_s"],
        "wall_s": report.get("wall_s", wall),
        "behaviour": report.get("behaviour"),
        "sandbox": report.get("sandbox"),
        "peak_rss_mb": report.get("peak_rss_mb"),
    }
    sft, rl = pass_at_1.get("sft"), pass_at_1.get("rl")
    verdict = (
        "no SFT figure"
        if sft is None or rl is None
        else f"SFT+RL − SFT = {100 * (rl - sft):+.1f} points of held-out pass@1 "
        + ("(beats SFT)" if rl > sft else "(does not beat SFT)")
    )
    command = "python " + public_argv(sys.argv)
    meta = run_metadata(command, configuration={"config_file": str(args.config), **config, "seed": config.get("seed")})
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps({**meta, "measured": figures, "verdict": verdict}, indent=2) + "\n")
    print(json.dumps(figures["heldout_pass_at_1"]), verdict)


if __name__ == "__main__":
    main()
