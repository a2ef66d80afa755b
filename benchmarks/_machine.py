"""What the machine spent, for the benchmarks that compare CPU per episode. No benchmark here."""

from __future__ import annotations

import os
from pathlib import Path

from openforge.core.cpu import machine_cpu_seconds


def host_cpu_s() -> float:
    """CPU seconds the whole machine has spent (`openforge.core.cpu.machine_cpu_seconds`): the benchmark's
    process, the Docker daemon, containerd and the containers together."""
    seconds = machine_cpu_seconds()
    if seconds is None:
        raise SystemExit("no /proc/stat here: the benchmarks measure the machine's CPU on Linux")
    return seconds


def run_metadata(command: str, configuration: object = "the command's options") -> dict[str, object]:
    """What a results file records about the run that made it: the command, the commit, the date, the machine
    (cores, GPU, load average at the start) and the configuration -- never a path of the machine it ran on."""
    import platform
    import subprocess
    import time

    root = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return {
        "command": command,
        "commit": commit.stdout.strip() + ("+local changes" if dirty.stdout.strip() else ""),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "configuration": configuration,
        "machine": {
            "cores": os.cpu_count(),
            "gpu": None,
            "platform": platform.platform(),
            "load_average_start": round(os.getloadavg()[0], 2),
        },
    }


def public_argv(argv: list[str]) -> str:
    """A command line as a results file records it: absolute paths inside the checkout relative to it, other
    absolute paths cut to their last part (no path of the machine it ran on)."""
    root = Path(__file__).resolve().parents[1]

    def public(arg: str) -> str:
        if not arg.startswith("/"):
            return arg
        path = Path(os.path.abspath(arg))  # not resolved: a symlink under the checkout stays there
        return str(path.relative_to(root)) if path.is_relative_to(root) else path.name

    return " ".join(public(a) for a in argv)


def write_results(path: Path, command: str, configuration: object, **figures: object) -> None:
    """A results file: `run_metadata` (the command without machine paths) and the figures."""
    import json
    import sys

    meta = run_metadata(f"{command} {public_argv(sys.argv[1:])}", configuration)
    path.write_text(json.dumps({**meta, **figures}, indent=1) + "\n")
    print(f"wrote {path}")
