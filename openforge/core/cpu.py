"""CPU time of the whole machine, from /proc/stat: what a process's own usage (getrusage) misses — the kernel's
work on its behalf in its own threads (namespaces and cgroups torn down after a jailed command), the Docker
daemon, containers, grandchildren never reaped by it."""

from __future__ import annotations

import os
from pathlib import Path

STAT = Path("/proc/stat")


def machine_cpu_seconds() -> float | None:
    """CPU seconds every core has spent busy since boot (user, nice, system, irq, softirq, steal); None where
    there is no /proc/stat."""
    try:
        fields = STAT.read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def machine_cores() -> int:
    """The cores /proc/stat counts (every online one)."""
    return os.cpu_count() or 1
