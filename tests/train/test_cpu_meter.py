"""What GRPO's CPU meter counts: the process and its reaped children (`share`), and the whole machine
(`machine_share`), which also sees work done outside them — the kernel's for the jails, Docker's, a process this
one never reaps."""

from __future__ import annotations

import subprocess
import time

from openforge.train.rl_stage import CpuMeter


def test_machine_share_counts_work_the_process_does_not():
    meter = CpuMeter()
    # a busy loop in a grandchild: its parent (sh) exits at once, so this process never reaps the loop
    subprocess.run(["sh", "-c", "timeout 1.5 sh -c 'while :; do :; done' >/dev/null 2>&1 &"], check=True)
    time.sleep(1.7)
    got = meter.read()
    # the loop ran ~1.5 s on some core: the machine saw it, this process (which slept) did not — compared as a
    # difference, so other threads of the test process, counted in both, cannot make it fail
    assert got["machine_cpu_s"] - got["cpu_s"] >= 1.0, got
    assert 0 < got["machine_share"] <= 1.0 and got["share"] < got["machine_share"], got
