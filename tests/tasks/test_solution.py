"""A task's solution as one bash command (openforge.tasks.solution): its directory recreated beside the
script byte for byte, CRLF stripped from scripts as Harbor does, run from the working directory, cleaned up;
a lone bash script stays its own short text (what the oracle has always sent for such tasks)."""

from __future__ import annotations

import gzip
import os
import subprocess
from pathlib import Path

import pytest

from openforge.tasks import SolutionError, generate_family_tasks, inspect_task_dir, load_task, solution_script
from openforge.tasks.solution import MAX_COMMAND_BYTES
from support.paths import EXAMPLES

BINARY = bytes(range(256)) + b"\r\n\x00EOF\n"


def run(command: str, cwd: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp)}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def solution_dir(tmp_path: Path) -> Path:
    sol = tmp_path / "solution"
    (sol / "lib" / "deep").mkdir(parents=True)
    (sol / "empty").mkdir()
    (sol / "solve.sh").write_bytes(
        b"#!/bin/bash\r\n"
        b'here="$(cd "$(dirname "$0")" && pwd)"\r\n'
        b'cp "$here/data.bin" "$here/lib/deep/notes.txt" "$here/crlf.txt" .\r\n'
        b'python3 "$here/lib/tool.py" > tool.out\r\n'
        b'"$here/run.sh" > run.out\r\n'
        b'[ -d "$here/empty" ] && echo yes > empty.out\r\n'
        b'readlink "$here/link" > link.out\r\n'
        b'echo "$GREETING" > env.out\r\n'
        b"pwd > cwd.out\r\n"
        b'echo "$here" > here.out\r\n'
        b"exit 7\r\n"
    )
    (sol / "wrong.sh").write_text("#!/bin/bash\necho wrong > wrong.out\n")
    (sol / "data.bin").write_bytes(BINARY)
    (sol / "crlf.txt").write_bytes(b"data keeps\r\nits endings\r\n")  # not a script: byte for byte
    (sol / "lib" / "tool.py").write_bytes(b'print("EOF")\r\nprint("tool")\r\n')  # a script: CR stripped
    (sol / "lib" / "deep" / "notes.txt").write_text("no final newline")
    (sol / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (sol / "run.sh").chmod(0o755)
    (sol / "link").symlink_to("lib/tool.py")
    return sol


def test_the_directory_travels_inside_the_command(tmp_path):
    sol = solution_dir(tmp_path)
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    command = solution_script(sol / "solve.sh", {"GREETING": "hello 'world'"})
    assert "\r" not in command.split("base64 -d", 1)[0]  # the scripts' CRs are gone before any base64 file

    done = run(command, work, tmp)
    assert done.returncode == 7, done.stderr  # the script's own exit status
    assert (work / "data.bin").read_bytes() == BINARY
    assert (work / "crlf.txt").read_bytes() == b"data keeps\r\nits endings\r\n"
    assert (work / "notes.txt").read_text() == "no final newline"
    assert (work / "tool.out").read_text() == "EOF\ntool\n"
    assert (work / "run.out").read_text() == "ran\n"  # the executable bit came along
    assert (work / "empty.out").read_text() == "yes\n"
    assert (work / "link.out").read_text() == "lib/tool.py\n"  # a link stays a link, never followed
    assert (work / "env.out").read_text() == "hello 'world'\n"
    assert (work / "cwd.out").read_text().strip() == str(work)  # run from the working directory
    here = Path((work / "here.out").read_text().strip())
    assert here.parent == tmp and not here.exists()  # beside its files, in a temporary directory, removed after
    assert list(tmp.iterdir()) == []
    assert not (work / "wrong.out").exists() and "wrong.out" not in command  # wrong.sh is no part of it


def test_wrong_sh_runs_with_the_helpers_but_without_solve_sh(tmp_path):
    sol = solution_dir(tmp_path)
    command = solution_script(sol / "wrong.sh")
    assert '"$d/data.bin"' in command and "solve.sh" not in command
    work = tmp_path / "work"
    work.mkdir()
    assert run(command, work, tmp_path).returncode == 0
    assert (work / "wrong.out").read_text() == "wrong\n"


def test_a_lone_bash_script_is_sent_as_its_own_text(tmp_path):
    """What the oracle sent before there was a directory to carry: solve.sh without its shebang, stripped —
    byte for byte the same for every generated task (the quickstart's demonstrations must not change)."""
    for path in generate_family_tasks("all", tmp_path / "gen", n=2, seed=5):
        task = load_task(path)
        text = task.solve_script.read_text()
        assert solution_script(task.solve_script) == text.partition("\n")[2].strip()
    sol = tmp_path / "plain"
    sol.mkdir()
    (sol / "solve.sh").write_bytes(b"#!/usr/bin/env bash\r\nmkdir -p out\r\necho hi > out/a.txt\r\n")
    (sol / "wrong.sh").write_text("#!/bin/bash\ntrue\n")
    assert solution_script(sol / "solve.sh") == "mkdir -p out\necho hi > out/a.txt"
    assert solution_script(sol / "solve.sh", {"A": "1"}) == "export A=1\nmkdir -p out\necho hi > out/a.txt"


def test_another_interpreter_runs_through_its_shebang(tmp_path):
    sol = tmp_path / "solution"
    sol.mkdir()
    (sol / "solve.sh").write_text("#!/usr/bin/env python3\nopen('py.out', 'w').write('from python')\n")
    command = solution_script(sol / "solve.sh")
    assert 'bash "$d/solve.sh"' not in command and '"$d/solve.sh"' in command
    work = tmp_path / "work"
    work.mkdir()
    assert run(command, work, tmp_path).returncode == 0
    assert (work / "py.out").read_text() == "from python"


def test_what_cannot_be_one_command_is_named(tmp_path):
    sol = tmp_path / "t" / "solution"
    sol.mkdir(parents=True)
    (sol / "solve.sh").write_text("#!/bin/bash\n\n")
    with pytest.raises(SolutionError, match="holds no command"):
        solution_script(sol / "solve.sh")
    (sol / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    with pytest.raises(SolutionError, match=r"\[solution\] env: 'A-B' is not a shell variable name"):
        solution_script(sol / "solve.sh", {"A-B": "x"})
    (sol / "big.bin").write_bytes(os.urandom(MAX_COMMAND_BYTES))
    with pytest.raises(SolutionError, match="more than the 100000 a shell tool's command can carry"):
        solution_script(sol / "solve.sh")
    with pytest.raises(SolutionError, match="no such file"):
        solution_script(sol / "nothing.sh")

    # the schema check says so too, naming the file: such a task cannot be demonstrated by the oracle
    task = tmp_path / "t"
    (task / "instruction.md").write_text("do it\n")
    (task / "task.toml").write_text('version = "1.0"\n')
    (task / "environment").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("#!/bin/bash\n")
    (task / "tests" / "test.sh").chmod(0o755)
    errors = inspect_task_dir(task).errors
    assert len(errors) == 1 and errors[0].startswith("solution/solve.sh: as one command"), errors


def test_shipped_tasks_with_helper_files(tmp_path):
    """sales-rollup (helpers in lib/, digest-pinned FROM) and migrate-service-config (CRLF solve.sh, a gzip
    helper) send their whole solution/ directory, with CRLF gone from the scripts."""
    rollup = load_task(EXAMPLES / "train" / "sales-rollup")
    migrate = load_task(EXAMPLES / "heldout" / "migrate-service-config")
    assert "@sha256:" in rollup.dockerfile.read_text().splitlines()[0]
    assert b"\r\n" in migrate.solve_script.read_bytes()
    command = solution_script(rollup.solve_script)
    assert 'cat > "$d/lib/money.py"' in command and 'cat > "$d/rollup.py"' in command
    command = solution_script(migrate.solve_script)
    assert 'base64 -d > "$d/defaults.json.gz"' in command and "\r" not in command
    work = tmp_path / "work"
    work.mkdir()
    (work / "legacy.ini").write_text("[logging]\nlevel = warn\n")
    assert run(command, work, tmp_path).returncode == 0
    assert (work / "config" / "MIGRATED").read_text() == "3\n"  # log.level plus the two gzip'd defaults
    assert gzip.decompress((migrate.solution_dir / "defaults.json.gz").read_bytes()).startswith(b"{")
