"""Smoke-run a real harness from the bundle against the loopback model-API stub (`stub_api`), not the proxy.

`smoke_run("codex")` starts the stub and the harness together in a child process that, where the machine
allows it, lives in its own network namespace with nothing but loopback (`unshare -n`, or `unshare -rn` for
an unprivileged user) -- so whatever a harness might try to reach besides the stub, it cannot. It returns what
the harness sent (requests: method, path, headers, body), its exit code, output and parsed transcript.

Used by the test suite, and by hand to check one installed harness: the command line form runs it and
prints the result as JSON:

    python -m openforge.harness.smoke codex [--bundle DIR] [--shell-command CMD] [--no-isolate]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["comparable", "isolation_prefix", "smoke_run"]

SMOKE_KEY = "ofk-smoke-episode-key"
SMOKE_MODEL = "openforge-stub"
# what differs from one run of a harness to the next whatever else is the same (comparable())
PER_RUN = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),  # session ids
    (re.compile(r"\[\w{3} \d{4}-\d\d-\d\d \d\d:\d\d UTC\]"), "[<time>]"),  # OpenClaw's task timestamp
    (re.compile(r"openforge-smoke-[\w-]+?-\w{8}\b"), "<scratch>"),  # smoke_run's temporary directories
)
PER_RUN_HEADERS = ("traceparent", "host", "content-length")


@functools.lru_cache(maxsize=1)
def isolation_prefix() -> tuple[str, ...] | None:
    """The command prefix that runs a process in a fresh network namespace (only loopback), or None when this
    machine does not allow it (no `unshare`, or no permission: e.g. an unprivileged container)."""
    unshare = shutil.which("unshare")
    if not unshare:
        return None
    for prefix in ((unshare, "-n"), (unshare, "-rn")):
        try:
            probe = subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix
    return None


def smoke_run(
    harness: str,
    bundle_dir: Path | str | None = None,
    *,
    script: list | None = None,
    reply: str | dict[str, Any] = "Hello from the OpenForge stub.",
    instruction: str = "Say hello.",
    workdir: Path | str | None = None,
    home: Path | str | None = None,
    options: dict[str, Any] | None = None,
    isolate: str = "auto",
    timeout: float = 240.0,
) -> dict[str, Any]:
    """Run `harness` once against the stub; returns a dict with `returncode`, `stdout`, `stderr`, `seconds`,
    `timed_out`, `transcript`, `requests`, `isolated`, `launch` (argv/env/files), `workdir`, `home` and
    `workdir_files` (name -> text of the small files left in the working directory).

    `isolate`: "auto" (network namespace when possible), "require" (raise if not possible) or "off".
    `workdir` / `home` default to temporary directories that are removed afterwards."""
    from openforge.harness.bundle import default_bundle_dir

    bundle = Path(bundle_dir) if bundle_dir is not None else default_bundle_dir()
    prefix: tuple[str, ...] | None = None
    if isolate != "off":
        prefix = isolation_prefix()
        if prefix is None and isolate == "require":
            raise RuntimeError("cannot create a network namespace here (`unshare -n` / `unshare -rn` failed)")
    scratch = Path(tempfile.mkdtemp(prefix=f"openforge-smoke-{harness}-"))
    try:
        work = Path(workdir) if workdir is not None else scratch / "work"
        home_dir = Path(home) if home is not None else scratch / "home"
        work.mkdir(parents=True, exist_ok=True)
        home_dir.mkdir(parents=True, exist_ok=True)
        return _run(harness, bundle, prefix, work, home_dir, script, reply, instruction, options, timeout)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def comparable(request: dict[str, Any]) -> tuple[dict[str, str], str]:
    """A recorded request as (headers, body text) without what differs from run to run of the same launch: ids
    (session, trace), the minute in a timestamp, the stub's port, smoke_run's scratch directories. Two launches
    whose requests are comparable-equal sent the same bytes but for those."""
    text = json.dumps(request["body"], sort_keys=True)
    for pattern, stand_in in PER_RUN:
        text = pattern.sub(stand_in, text)
    headers = {k: v for k, v in request["headers"].items() if k not in PER_RUN_HEADERS}
    return headers, text


def _run(
    harness: str,
    bundle: Path,
    prefix: tuple[str, ...] | None,
    work: Path,
    home_dir: Path,
    script: Any,
    reply: Any,
    instruction: str,
    options: Any,
    timeout: float,
) -> dict[str, Any]:
    spec = {
        "harness": harness,
        "bundle": str(bundle.resolve()),
        "script": script or [],
        "reply": reply,
        "instruction": instruction,
        "workdir": str(work.resolve()),
        "home": str(home_dir.resolve()),
        "options": options or {},
        "timeout": timeout,
        "isolated": prefix is not None,
    }
    with tempfile.TemporaryDirectory(prefix="openforge-smoke-") as tmp:
        spec_path, out_path = Path(tmp, "spec.json"), Path(tmp, "result.json")
        spec_path.write_text(json.dumps(spec))
        os.chmod(tmp, 0o755)  # `unshare -rn` maps us to root in the namespace; files stay ours
        cmd = [
            *(prefix or ()),
            sys.executable,
            "-m",
            "openforge.harness.smoke",
            "--child",
            str(spec_path),
            str(out_path),
        ]
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "HOME")}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, env=env)
        if not out_path.is_file():
            raise RuntimeError(f"the smoke-run child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        result = json.loads(out_path.read_text())
    files = {}
    for p in sorted(work.iterdir()):
        if p.is_file() and p.stat().st_size <= 65536:
            files[p.name] = p.read_text(errors="replace")
    result["workdir_files"] = files
    return result


def _bring_loopback_up() -> None:
    """`ip link set lo up` without iproute2 (a fresh network namespace starts with lo down)."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, siocgifflags, ifreq))[1]
        if not flags & iff_up:
            fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def _child(spec_path: str, out_path: str) -> int:
    from openforge.harness import LaunchContext, get_adapter, run_local
    from openforge.harness.stub_api import StubModelAPI

    spec = json.loads(Path(spec_path).read_text())
    if spec["isolated"]:
        _bring_loopback_up()
    adapter = get_adapter(spec["harness"], **spec["options"])
    with StubModelAPI(reply=spec["reply"], script=spec["script"]) as api:
        launch = adapter.launch(
            LaunchContext(
                PurePosixPath(spec["bundle"]),
                PurePosixPath(spec["home"]),
                PurePosixPath(spec["workdir"]),
                api.base_url,
                SMOKE_KEY,
                SMOKE_MODEL,
                spec["instruction"],
            )
        )
        result = run_local(launch, adapter, timeout=spec["timeout"])
        requests = [dict(r.__dict__) for r in api.requests]
    out = {
        "harness": spec["harness"],
        "isolated": spec["isolated"],
        "returncode": result.returncode,
        "timed_out": result.timed_out,
        "seconds": result.seconds,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "transcript": result.transcript,
        "requests": requests,
        "key": SMOKE_KEY,
        "model": SMOKE_MODEL,
        "launch": {
            "argv": launch.argv,
            "env": launch.env,
            "session_id": launch.session_id,
            "files": {str(k): v for k, v in launch.files.items()},
        },
        "workdir": spec["workdir"],
        "home": spec["home"],
    }
    Path(out_path).write_text(json.dumps(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--child"]:
        return _child(args[1], args[2])
    p = argparse.ArgumentParser(prog="python -m openforge.harness.smoke", description=__doc__.split("\n\n")[0])
    p.add_argument("harness")
    p.add_argument("--bundle", default=None)
    p.add_argument("--shell-command", default=None, help="make the stub call the harness's shell tool first")
    p.add_argument("--no-isolate", action="store_true")
    a = p.parse_args(args)
    script = None
    if a.shell_command:
        from openforge.harness import get_adapter

        script = [get_adapter(a.harness).shell_call(a.shell_command)]
    res = smoke_run(a.harness, a.bundle, script=script, isolate="off" if a.no_isolate else "auto")
    print(json.dumps(res, indent=2))
    return 0 if res["returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
