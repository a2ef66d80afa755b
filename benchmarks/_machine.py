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
