"""Every results file in benchmarks/results/ says where it came from: the exact `command`, the `commit` measured,
the `date`, the `machine` (cores, GPU) and the `configuration` — and holds no absolute path of the machine it
ran on. Benchmarks write these themselves (`benchmarks/_machine.run_metadata`); this script checks them, and
fills the files written before that from git history, marked as recorded afterwards.

    python scripts/results_provenance.py --check   # exit 1 naming each file and what it lacks (tests run this)
    python scripts/results_provenance.py --fill    # add what a file lacks, from git and the commands below
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
REQUIRED = ("command", "commit", "date", "machine", "configuration")
# A path of the machine a benchmark ran on; container paths (/app, a sandbox's /tmp) are the tasks' own.
MACHINE_PATH = re.compile(r"/(?:work|root|home)/[^\s\"']*")
TMP_IN_COMMAND = re.compile(r"/tmp/[^\s\"']*")

# The commands of files written before benchmarks recorded their own (from the docs that quote them).
COMMANDS = {  # files named here had their command written in by hand, from the tasks and sandboxes they hold
    "rollout-baseline.json": "python benchmarks/rollout.py --json benchmarks/results/rollout-baseline.json",
    "sft_prompt_claude_code.json": "python benchmarks/sft_prompt.py (one command per run: runs[].command)",
    "sft_prompt_window_react.json": "python benchmarks/sft_prompt.py (one command per run: runs[].command)",
    "viewer.json": "python benchmarks/viewer.py",
}
# What a file's configuration is, where the file does not hold it under its own name
CONFIG_KEYS = ("configuration", "config", "levels", "tasks", "hacks", "seeds", "about", "episodes", "rounds")
MACHINE = {"cores": 2, "gpu": None, "note": "the project's 2-core development machine (recorded afterwards)"}


def problems(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    found = [f"no {key}" for key in REQUIRED if key not in data]
    text = path.read_text()
    found += [f"a machine path: {p}" for p in sorted(set(MACHINE_PATH.findall(text)))[:3]]
    command = str(data.get("command", ""))
    found += [f"a machine path in its command: {p}" for p in TMP_IN_COMMAND.findall(command)]
    return found


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()


def _relative(value: Any) -> Any:
    if isinstance(value, str):
        value = value.replace(str(ROOT) + "/", "").replace(str(ROOT), ".")
        return MACHINE_PATH.sub(lambda m: Path(m[0]).name, value)
    if isinstance(value, list):
        return [_relative(v) for v in value]
    if isinstance(value, dict):
        return {k: _relative(v) for k, v in value.items()}
    return value


def fill(path: Path) -> dict[str, Any]:
    data = _relative(json.loads(path.read_text()))
    name = path.name
    added = _git("log", "--diff-filter=A", "--format=%H %cI", "--", f"benchmarks/results/{name}").splitlines()
    first = added[-1].split() if added else ["unknown", "unknown"]
    if "command" not in data:
        data["command"] = COMMANDS.get(name, "unknown")
    data["command"] = TMP_IN_COMMAND.sub(lambda m: f"benchmarks/results/{Path(m[0]).name}", data["command"])
    if "commit" not in data:
        data["commit"] = data.pop("openforge", None) or first[0][:12]
        data.setdefault("provenance", "commit and date recorded afterwards: the commit that added this file")
    if "date" not in data:
        data["date"] = first[1]
    if "machine" not in data:
        cores = data.get("cpus")
        data["machine"] = {**MACHINE, "cores": cores or MACHINE["cores"]}
    if "configuration" not in data:
        held = [k for k in CONFIG_KEYS if k in data]
        data["configuration"] = f"the command's options; fields {', '.join(held)}" if held else "the command's options"
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fill", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    files = sorted(RESULTS.glob("*.json"))
    if args.fill:
        for path in files:
            if problems(path):
                path.write_text(json.dumps(fill(path), indent=1, ensure_ascii=False) + "\n")
    bad = {p.name: problems(p) for p in files if problems(p)}
    for name, found in bad.items():
        print(f"benchmarks/results/{name}: {'; '.join(found)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
