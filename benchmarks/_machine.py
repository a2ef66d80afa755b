"""What the machine spent, for the benchmarks that compare CPU per episode. No benchmark here."""

from __future__ import annotations

import os
from pathlib import Path


def host_cpu_s() -> float:
    """CPU seconds the whole machine has spent (user, nice, system, irq, softirq, steal), from /proc/stat: the
    benchmark's process, the Docker daemon, containerd and the containers together."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


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


def write_results(path: Path, command: str, configuration: object, **figures: object) -> None:
    """A results file: `run_metadata` (the command without machine paths) and the figures."""
    import json
    import sys

    argv = " ".join(a if not a.startswith("/") else Path(a).name for a in sys.argv[1:])
    path.write_text(json.dumps({**run_metadata(f"{command} {argv}", configuration), **figures}, indent=1) + "\n")
    print(f"wrote {path}")
