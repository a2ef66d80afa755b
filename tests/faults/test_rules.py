"""The one decision before each of the agent's commands (`openforge.faults.rules`), on a real directory."""

from __future__ import annotations

import os

from openforge.faults import FaultTargets, parse_fault_spec
from openforge.faults.plan import FaultPlan
from openforge.faults.rules import agent_command, decide, written_paths


def _state(tmp_path, spec, **targets):
    return FaultPlan.arm(parse_fault_spec(spec), FaultTargets(**targets), "k").state(str(tmp_path), views=("/app",))


def test_transient_fails_the_first_command_that_changes_something_once(tmp_path):
    state = _state(tmp_path, "transient:1")
    assert decide(state, "ls -la && cat f 2>/dev/null")[0] == "run"
    assert decide(state, "echo a >> f") == ("fail", "1", "bash: fork: Resource temporarily unavailable")
    assert decide(state, "echo a >> f")[0] == "run"
    (fault,) = state["faults"]
    assert fault["fired"] and fault["command"] == 2 and fault["times"] == 1
    other = _state(tmp_path, "transient:1")
    assert decide(other, "rm -r out")[0] == "fail" and decide(other, "rm -r out")[0] == "run"


def test_hang_sleeps_then_the_command_works(tmp_path):
    state = _state(tmp_path, "transient:0,hang:1,hang_s=7")
    action, seconds, _ = decide(state, "ls")
    assert (action, seconds) == ("hang", "7")
    assert decide(state, "ls")[0] == "run"


def test_permission_denies_writes_until_the_file_is_writable(tmp_path):
    (tmp_path / "cfg").mkdir()
    target = tmp_path / "cfg" / "a.ini"
    target.write_text("")
    os.chmod(target, 0o444)
    state = _state(tmp_path, "permission:1", permission="cfg/a.ini")
    assert decide(state, "cat cfg/a.ini")[0] == "run"  # reading is fine
    assert decide(state, "echo x >> /app/cfg/a.ini") == ("fail", "1", "bash: cfg/a.ini: Permission denied")
    assert decide(state, "chmod u+w cfg/a.ini && echo x >> cfg/a.ini")[0] == "run"  # the fix runs
    os.chmod(target, 0o644)
    assert decide(state, "echo x >> cfg/a.ini")[0] == "run"
    assert state["faults"][0]["command"] == 2


def test_disk_full_until_the_ballast_is_gone(tmp_path):
    state = _state(tmp_path, "disk_full:1")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "ballast.bin").write_text("x")
    assert decide(state, "ls -la")[0] == "run"
    assert decide(state, "mkdir -p out && echo 1 > out/n.txt")[:2] == ("fail", "1")
    assert decide(state, "echo 1 > /tmp/elsewhere")[0] == "run"  # outside the work directory
    assert decide(state, "rm -rf .cache && echo 1 > out/n.txt")[0] == "run"
    (tmp_path / ".cache" / "ballast.bin").unlink()
    assert decide(state, "echo 1 > out/n.txt")[0] == "run"


def test_flaky_service_refuses_its_first_call(tmp_path):
    state = _state(tmp_path, "flaky_service:1", service="svc")
    assert decide(state, "ls")[0] == "run"
    assert decide(state, "sh svc get k > out.txt")[:2] == ("fail", "7")
    assert decide(state, "svc get k > out.txt")[0] == "run"


def test_missing_dir_is_noted_when_a_command_meets_it(tmp_path):
    state = _state(tmp_path, "missing_dir:1", missing_dir="cfg")
    assert decide(state, "ls")[0] == "run" and not state["faults"][0]["fired"]
    assert decide(state, "echo a >> cfg/x.ini")[0] == "run"  # the shell reports it, not the rule
    assert state["faults"][0]["fired"] and state["faults"][0]["command"] == 2


def test_wrapped_and_internal_command_lines(tmp_path):
    state = _state(tmp_path, "transient:1")
    state["internal"] = [r"# Snapshot file"]
    state["internal"].append(r"^declare -f")
    state["command_pattern"] = r"&& eval '(?P<cmd>.*)' < /dev/null && pwd -P >\|"
    assert decide(state, "echo '# Snapshot file' > x")[0] == "skip" and state["commands"] == 0
    assert decide(state, "declare -f > snap")[0] == "skip"
    line = "source s.sh && shopt -u extglob && eval 'echo '\\''a b'\\'' >> f' < /dev/null && pwd -P >| /tmp/cwd"
    assert agent_command(line, state) == "echo 'a b' >> f"
    assert decide(state, line)[0] == "fail" and state["commands"] == 1


def test_written_paths():
    roots = ["/app"]
    assert written_paths("mkdir -p cfg && echo 'a=1' >> /app/cfg/a.ini 2>&1 | tee -a out.txt > /dev/null", roots) == [
        "cfg/a.ini",
        "cfg",
        "out.txt",
    ]
    assert written_paths("sed -i s/a/b/ x.txt; cp a b/c; cat a > /tmp/x; wc -l < a.txt", roots) == ["x.txt", "b/c"]
