"""What the machine spent, for the benchmarks that compare CPU per episode. No benchmark here."""

from __future__ import annotations

import os
from pathlib import Path


def _this_checkouts_cpu_module():
    """openforge/core/cpu.py of this checkout, loaded by path: the benchmarks measure the machine the same way when
    they run against an older checkout's package (side by side with a commit from before that module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "_openforge_machine_cpu", Path(__file__).resolve().parents[1] / "openforge" / "core" / "cpu.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


machine_cpu_seconds = _this_checkouts_cpu_module().machine_cpu_seconds


def host_cpu_s() -> float:
    """CPU seconds the whole machine has spent (`openforge.core.cpu.machine_cpu_seconds`): the benchmark's
    process, the Docker daemon, containerd and the containers together."""
    seconds = machine_cpu_seconds()
    if seconds is None:
        raise SystemExit("no /proc/stat here: the benchmarks measure the machine's CPU on Linux")
    return seconds


# cgroup v1's CPU account of every container Docker started (a parent's usage keeps its removed children's)
DOCKER_CGROUP_USAGE = (Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage"), Path("/sys/fs/cgroup/docker/cpu.stat"))


def cpu_split() -> dict[str, float]:
    """Cumulative CPU seconds by where they were spent, for a before/after difference: the whole machine,
    inside Docker's containers (the harness, its tools, the grader), this process with the children it reaped
    (OpenForge), and Docker's two daemons with theirs (dockerd, containerd). What is left of the machine's is
    the shims, runc and the kernel's own work."""
    import resource

    own = sum(
        getattr(resource.getrusage(who), field)
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        for field in ("ru_utime", "ru_stime")
    )
    split = {
        "machine": host_cpu_s(),
        "containers": _docker_containers_cpu_s(),
        "openforge": own,
        "docker daemons": sum(_process_cpu_s(name) for name in ("dockerd", "containerd")),
    }
    return {k: v for k, v in split.items() if v is not None}


def _docker_containers_cpu_s() -> float | None:
    """None where Docker's parent cgroup is not where the cgroupfs driver puts it (then `other` holds it)."""
    v1, v2 = DOCKER_CGROUP_USAGE
    if v1.is_file():
        return int(v1.read_text()) / 1e9
    if v2.is_file():  # cgroup v2: usage_usec on the first line
        return int(v2.read_text().split()[1]) / 1e6
    return None


def _process_cpu_s(name: str) -> float:
    """CPU seconds of the processes called `name`, with the children they have reaped."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if text[text.index("(") + 1 : text.rindex(")")] != name:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    return total


def split_difference(before: dict[str, float], after: dict[str, float], episodes: int) -> dict[str, float]:
    """CPU seconds per episode by where they were spent, `other` being the machine's remainder."""
    spent = {k: (after[k] - before[k]) / max(1, episodes) for k in before}
    spent["other"] = spent["machine"] - sum(v for k, v in spent.items() if k != "machine")
    return {k: round(v, 3) for k, v in spent.items()}


def _short_head(checkout: Path) -> str:
    import subprocess

    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return head.stdout.strip()


def package_commit() -> str:
    """The commit of the checkout the imported `openforge` package comes from (another checkout's, where a run
    puts it first on PYTHONPATH to measure that commit with this benchmark)."""
    import openforge

    return _short_head(Path(openforge.__file__).resolve().parents[1]) or "unknown"


def run_metadata(command: str, configuration: object = "the command's options") -> dict[str, object]:
    """What a results file records about the run that made it: the command, the commit, the date, the machine
    (cores, GPU, load average at the start) and the configuration -- never a path of the machine it ran on."""
    import platform
    import subprocess
    import time

    root = Path(__file__).resolve().parents[1]
    dirty = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return {
        "command": command,
        "commit": _short_head(root) + ("+local changes" if dirty.stdout.strip() else ""),
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
