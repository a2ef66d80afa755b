"""Scripted policy for the orchestrator's failure tests: what it does depends on the task id.

Runs in the test process (the proxy is in process), so it may reach the Docker daemon itself.
"""

import json
import os

PROBE = (
    "echo NET:$(ls /sys/class/net | tr '\\n' ' '); "
    "ls /tests >/dev/null 2>&1 && echo TESTS:visible || echo TESTS:absent; "
    'python3 -c "import socket,sys; s=socket.socket(); s.settimeout(2); '
    "r=s.connect_ex(('127.0.0.1', int(sys.argv[1]))); print('ADMIN:reachable' if r == 0 else 'ADMIN:unreachable')\" "
    "$ADMIN_PORT"
)


def bash(command):
    return "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": command}}) + "\n</tool_call>"


def respond(conversation, call_index, task):
    task_id = task["id"] if isinstance(task, dict) else str(task)
    acted = any(m.role == "tool" for m in conversation.messages)
    if task_id == "proxy-fail":
        raise RuntimeError("the policy server is on fire")
    if acted or task_id in ("do-nothing", "verifier-crash"):
        return "Done."
    if task_id == "hang":
        return bash("sleep 600")
    if task_id == "oom":
        return bash("python3 -c 'b = bytearray(900 * 1024 * 1024); print(len(b))'; echo survived")
    if task_id.startswith("lock-workdir"):  # locks the verifier (root without capabilities) out of the work area
        return bash('chmod 000 "$PWD"')
    if task_id == "kill-harness":  # the agent's own command kills its harness
        return bash("kill -9 $PPID")
    if task_id == "late-caller":  # leaves the episode's key in the work area, which the verifier (standing in
        return bash("echo $OPENFORGE_API_KEY > key.txt; touch done.txt")  # for code run during grading) gets
    if task_id == "forkbomb":
        return bash(":(){ :|:& };:")
    if task_id == "kill-container":
        import docker

        client = docker.from_env()
        for c in client.containers.list(filters={"label": f"openforge.run={os.environ['CHAOS_RUN_LABEL']}"}):
            # the episode's own: the agent's sandbox (not a grader) with the harness running beside init and its
            # keep-alive (the run's warm sandboxes, started for the next episodes, run only those)
            if c.labels.get("openforge.role") != "grader" and len(c.top()["Processes"]) > 2:
                c.kill()
        return bash("echo still here")
    if task_id == "probe":
        return bash(PROBE.replace("$ADMIN_PORT", os.environ["CHAOS_ADMIN_PORT"]))
    return bash("true")
