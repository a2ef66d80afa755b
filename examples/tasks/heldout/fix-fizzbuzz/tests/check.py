"""Hidden checker of a code task (OpenForge's hardened pattern; the same file in every code task).

The function under test is called in a child process, on the inputs of `cases.json`; its answers come back as
JSON on a pipe of their own and are compared here, in a process where the agent's code never runs. So:

- nothing of the work directory is imported by a test framework (no `unittest.py`, `sitecustomize.py`,
  `conftest.py` or standard-library look-alike there is ever loaded): Python runs isolated (`-I`: no
  PYTHONPATH, no user site, not the current directory), from the tests' directory, and the module under test
  is loaded by its path alone;
- what the agent's code returns is compared as plain JSON values (an object that claims to equal everything
  is not JSON); its exit code, its output and what it prints are not trusted;
- the expected answers are read here and their file (the sandbox's copy in /tests) removed before the agent's
  code runs, and this process cannot be read by it (not dumpable): the code under test, running as root too,
  cannot look them up;
- afterwards every process below this one is killed (whatever the code under test left behind: this process
  is their subreaper, so a daemonised one is found too), the verifier's directory is made afresh (a file, a
  link or a directory planted there is removed, not followed), and the reward is written last, without
  following links.

What it cannot stop: the code under test, running as root in the verifier, can kill this process; then no
reward of ours is written, and grading (OpenForge counts a verifier killed by a signal as a verifier error)
must not take what the code left. Usage: python3 -I -B check.py APP_DIR VERIFIER_DIR
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time

CHILD = r"""
import importlib.util, json, os, sys
out = os.fdopen(int(sys.argv[3]), "w")
inputs = json.loads(sys.stdin.read())
spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(sys.argv[1]))[0], sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
function = getattr(module, sys.argv[2])
answers = []
for args in inputs:
    try:
        answers.append({"value": json.loads(json.dumps(function(*args)))})
    except Exception as e:
        answers.append({"error": type(e).__name__})
out.write(json.dumps(answers))
out.close()
"""
TIMEOUT_S = 60


def not_dumpable():
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/PID/mem for others
    except Exception:
        pass


def answers_of(module, function, inputs):
    """The child's answers, or None when it gave none (crashed, exited early, timed out, wrote garbage)."""
    read_end, write_end = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-I", "-B", "-c", CHILD, module, function, str(write_end)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_end,),
        start_new_session=True,
        cwd="/",
    )
    os.close(write_end)
    try:
        child.stdin.write(json.dumps(inputs).encode())
        child.stdin.close()
    except OSError:
        pass
    chunks = []
    deadline = time.monotonic() + TIMEOUT_S
    os.set_blocking(read_end, False)
    while time.monotonic() < deadline:
        try:
            data = os.read(read_end, 1 << 16)
        except BlockingIOError:
            if child.poll() is not None and not _readable(read_end):
                break
            time.sleep(0.01)
            continue
        if not data:
            break
        chunks.append(data)
    os.close(read_end)
    try:
        child.kill()
    except OSError:
        pass
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return None


def _readable(fd):
    import select

    return bool(select.select([fd], [], [], 0)[0])


def become_subreaper():
    """Orphans of the agent's code (a daemonised writer) are re-parented to this process, not to PID 1, so
    `stop_descendants` finds every one of them."""
    try:
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass


def descendants():
    parent_of = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                state, parent = f.read().rsplit(")", 1)[1].split()[:2]
            if state not in ("Z", "X"):  # dead already (a zombie is reaped below)
                parent_of[int(p)] = int(parent)
        except (OSError, ValueError, IndexError):
            pass
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {p for p, parent in parent_of.items() if parent in frontier and p not in mine}
        mine |= frontier
    return mine


def stop_descendants():
    """Stop, then kill, every process below this one (what the agent's code left running), in rounds until
    none is left; zombies are reaped."""
    for _ in range(100):
        found = descendants()
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in found:
                try:
                    os.kill(p, sig)
                except OSError:
                    pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not found:
            return
        time.sleep(0.02)


def write_reward(out_dir, passed, detail):
    if os.path.islink(out_dir) or (os.path.lexists(out_dir) and not os.path.isdir(out_dir)):
        os.unlink(out_dir)
    elif os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    fd = os.open(os.path.join(out_dir, "reward.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump({"reward": 1.0 if passed else 0.0, "cases_passed": detail}, f)


def main():
    app, out_dir = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    not_dumpable()
    become_subreaper()
    cases_file = os.path.join(here, "cases.json")
    with open(cases_file) as f:
        spec = json.load(f)
    if here == "/tests":  # graded in a sandbox: a copy, which the code under test must not read
        os.unlink(cases_file)
    cases = spec["cases"]
    module = os.path.join(app, spec["module"])
    answers = answers_of(module, spec["function"], [c["args"] for c in cases]) if os.path.isfile(module) else None
    stop_descendants()
    good = 0
    if isinstance(answers, list) and len(answers) == len(cases):
        for case, answer in zip(cases, answers):
            if isinstance(answer, dict) and "value" in answer and _same(answer["value"], case["expect"]):
                good += 1
    for case, answer in zip(cases, answers if isinstance(answers, list) else [None] * len(cases)):
        ok = isinstance(answer, dict) and "value" in answer and _same(answer["value"], case["expect"])
        print(
            ("ok  " if ok else "FAIL")
            + f" {spec['function']}{tuple(case['args'])!r} == {case['expect']!r}"
            + ("" if ok else f": got {answer!r}")
        )
    passed = good == len(cases)
    print("PASS" if passed else f"FAIL: {good}/{len(cases)} cases")
    write_reward(out_dir, passed, good)


def _same(got, want):
    """Equal as JSON values of the same types (True is not 1, 1.0 equals 1)."""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return got == want
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


if __name__ == "__main__":
    main()
