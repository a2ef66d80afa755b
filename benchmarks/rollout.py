"""Rollout benchmark: episodes per minute and per-episode overhead of OpenForge's orchestrator (react harness,
Docker sandbox, oracle backend) beside Harbor's Docker environment running the same tasks with its oracle
agent, at concurrency 1, 4 and 8.

The systems (the same tasks, the same reference solutions, the same hidden tests, one episode per task):

  openforge     `openforge.rollout.run_rollouts(RolloutConfig(harnesses=["react"], sandbox="docker",
                backend="oracle", concurrency=C, image_map={debian:bookworm-slim: openforge-base:bookworm}))`,
                in this process (its proxy, tokenizer load and leftover sweep included in the wall time).
                Per episode: image by content hash (a cache hit: no build), container create + start
                (network none, cgroup limits, tini as PID 1) and the proxy forwarder in its network namespace,
                the task's environment set up, the react harness (a Python agent in the container) makes two
                model calls through the recording proxy: the oracle answers the first with the task's
                solution/solve.sh as a call of the harness's bash tool, the second with a final answer; tests are
                copied in, tests/test.sh runs as root, the reward is read, the container is removed; the
                episode, its calls and its timings are written to SQLite.
  harbor        Harbor (PyPI `harbor`, pinned) `Job.create(config)` + `job.run()` with the config of
                `harbor run -p TASKS -i <task>... -a oracle -e docker -n C -q` (1 attempt, no retries,
                `--delete`, the default), in its own virtualenv and process (its start-up and imports are not
                counted). Per trial: `docker compose build` (a BuildKit cache hit), `down`, `up` (a project
                network + the container, PID 1 `sh -c "sleep infinity"`), the oracle agent uploads solution/ and
                runs solve.sh with `docker compose exec`, tests uploaded, test.sh run, reward read from the
                bind-mounted /logs/verifier, then `docker compose down --rmi local --volumes` (container,
                network and the per-trial image tag removed); trial results written as JSON files.
  harbor+init   the same with one extra Compose overlay (`--extra-docker-compose`, `services.main.init: true`)
                so that PID 1 handles SIGTERM: stock Harbor's PID 1 (`sh -c "sleep infinity"`) ignores it, so
                every `compose down` waits Docker's 10 s stop timeout before SIGKILL. Shown so that the ratio
                can also be read against a Harbor without that wait.

Task copies for Harbor: `FROM debian:bookworm-slim` -> `FROM openforge-base:bookworm` (the local base image
both use; Docker Hub is unreachable, and the BuildKit `docker` driver takes a local image without pulling)
and `allow_internet = false` dropped from task.toml (Harbor 0.26 enforces "no-network" on Docker only with an
egress sidecar image from Docker Hub; without it the task is refused), so Harbor's containers sit on their
Compose project's own bridge network; nothing in the tasks uses it. OpenForge's containers have no network.

Measurement, per system and concurrency level C (several rounds, the systems interleaved within each round,
their order rotated from round to round; a warm-up run of both on every task first, not counted):

  wall            seconds of the run call (above), summed over the rounds
  episodes        final episodes (slots) completed, summed over the rounds; passed = reward 1
  episodes/min    episodes / wall x 60
  W               in-container work: the time solve.sh + test.sh take inside a running container, measured
                  once per task before the runs (`date +%s%N` around `bash solve.sh` and `bash test.sh` in one
                  `docker exec`, in a fresh container of the task's image); W-bar = its mean over the episodes
  overhead        wall x C / episodes - W-bar: the slot time one episode holds beyond its own commands (start,
                  exec machinery, model calls, grading plumbing, tear-down, queueing, the run's fixed start-up
                  cost spread over its episodes, and CPU contention at C > 1 on this 2-core machine)
  ep. time - W    mean per-episode total time (each system's own clock: OpenForge `timings.total_s`, create
                  to destroy; Harbor `finished_at - started_at`) minus W-bar
  phases          means per episode: start (to the container being ready for the agent), agent (the
                  agent/oracle phase: harness + model calls + solve.sh for OpenForge; upload + exec of solve.sh
                  for Harbor), verify (tests in + test.sh + reward), rest (tear-down and the bookkeeping between
                  phases)
  fixed           wall - (last episode end - first episode start): the run's own start-up and shut-down
  load            the machine's 1-minute load average just before the runs (other sessions' work shows here)
  CPU s/ep        CPU seconds the whole machine spent during the run (/proc/stat: the system's process, the Docker
                  daemon, containerd, the containers) / episodes
  warm hits       OpenForge: the share of episodes whose sandbox (and grader) was started ahead of them
                  (`warm_sandboxes`, default 2); wait s: mean time an episode waited for its sandbox; the JSON's
                  peak_warm: the most started ahead at once (each with its grader). With --cold, `openforge-cold`
                  runs OpenForge with `warm_sandboxes: 0` in the same rounds, side by side.

    python benchmarks/rollout.py            # 3 levels x 2 rounds, 8/16/24 tasks: about 15 minutes
    python benchmarks/rollout.py --quick    # 1 round, 4/8/8 tasks: about 4 minutes
    python benchmarks/rollout.py --no-harbor-init --rounds 1

Every container, network and image tag a run makes is removed at the end, on Ctrl-C too. Traffic: the
model API stays on this machine (a Unix socket bridged into each OpenForge container); Harbor's telemetry is
switched off (HARBOR_TELEMETRY=0). Benchmarks are not tests: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

try:
    from rich.console import Console
    from rich.table import Table

    import openforge
except ImportError:  # run with another interpreter: use the project's virtualenv
    venv_python = ROOT / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.executable).resolve() != venv_python.resolve():
        os.execv(str(venv_python), [str(venv_python), *sys.argv])
    raise

import _harbor_support as hs
from _machine import host_cpu_s, public_argv

console = Console(width=190)
BASE_IMAGE = "openforge-base:bookworm"
IMAGE_MAP = {"debian:bookworm-slim": BASE_IMAGE}
PROBE_REPO = "openforge-bench-probe"
SYSTEMS = ("openforge", "openforge-cold", "harbor", "harbor+init")
OPENFORGE = ("openforge", "openforge-cold")


# ---- results ------------------------------------------------------------------------------------------------


@dataclass
class Episode:
    task: str
    ok: bool  # reward 1
    outcome: str
    total_s: float
    start_s: float
    agent_s: float
    verify_s: float
    begin: float  # wall-clock timestamps (each system's own clock), for the span
    end: float

    @property
    def rest_s(self) -> float:
        return max(0.0, self.total_s - self.start_s - self.agent_s - self.verify_s)


@dataclass
class Run:
    system: str
    concurrency: int
    round: int
    wall_s: float
    episodes: list[Episode]
    attempts: int  # OpenForge: attempts stored (retries of infrastructure failures count); Harbor: trials
    note: str = ""
    load: float = float("nan")  # 1-minute load average just before the run (other work on the machine)
    cpu_s: float = float("nan")  # CPU seconds the whole machine spent during the run (/proc/stat)
    pool: dict = field(default_factory=dict)  # OpenForge: what its warm sandboxes did (PoolStats)

    @property
    def span_s(self) -> float:
        if not self.episodes:
            return 0.0
        return max(e.end for e in self.episodes) - min(e.begin for e in self.episodes)


@dataclass
class Bench:
    work: Path
    tasks: list  # openforge.tasks.Task, in benchmark order
    harbor_tasks: Path
    harbor_jobs: Path
    init_overlay: Path
    model: Path
    harbor_venv: Path
    of_runs: list[Path] = field(default_factory=list)
    harbor_proc: subprocess.Popen | None = None
    probe_images: list[str] = field(default_factory=list)
    work_s: dict[str, float] = field(default_factory=dict)  # task id -> W (solve + test), seconds
    pools: dict[str, dict] = field(default_factory=dict)  # OpenForge run name -> its PoolStats


# ---- preflight ----------------------------------------------------------------------------------------------


def log(msg: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {msg}")


def ensure_docker() -> str:
    r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if r.returncode != 0:
        log("starting dockerd (scripts/start-docker.sh)")
        subprocess.run(["bash", str(ROOT / "scripts/start-docker.sh")], check=True)
        r = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, check=True
        )
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode != 0:
        log(f"building the base image {BASE_IMAGE} (scripts/build-base-image.sh)")
        subprocess.run(["bash", str(ROOT / "scripts/build-base-image.sh")], check=True)
    return r.stdout.strip()


def make_tiny_model(dest: Path) -> Path:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    r = subprocess.run(
        [sys.executable, "-m", "openforge.cli", "model", "tiny", str(dest)],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    if r.returncode != 0:
        raise RuntimeError(f"openforge model tiny failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return dest


# ---- in-container work (W) ----------------------------------------------------------------------------------

_PROBE = r"""
s=$(date +%s%N)
bash /probe/solution/solve.sh >/dev/null 2>&1
m=$(date +%s%N)
mkdir -p /logs/verifier
bash /probe/tests/test.sh >/dev/null 2>&1
e=$(date +%s%N)
r=$(python3 -c 'import json; print(json.load(open("/logs/verifier/reward.json"))["reward"])' 2>/dev/null \
   || cat /logs/verifier/reward.txt 2>/dev/null)
echo "$s $m $e $r"
"""


def probe_task(bench: Bench, task, harbor_dir: Path) -> tuple[float, float, str]:
    """(solve seconds, test seconds, reward) of the reference solution in a fresh container of the task's image
    (built from the same Dockerfile, mapped onto the local base image, in the environment's workdir)."""
    tag = f"{PROBE_REPO}:{task.id}"
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, str(harbor_dir / "environment")], check=True, capture_output=True
    )
    bench.probe_images.append(tag)
    name = f"openforge-bench-probe-{task.id}-{os.getpid()}"
    subprocess.run(
        [
            "docker",
            "run",
            "-d",
            "--name",
            name,
            "--network",
            "none",
            "--init",
            "--label",
            "openforge-bench=probe",
            tag,
            "sleep",
            "infinity",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(["docker", "exec", name, "mkdir", "-p", "/probe"], check=True, capture_output=True)
        for part in ("solution", "tests"):
            subprocess.run(
                ["docker", "cp", str(harbor_dir / part), f"{name}:/probe/{part}"], check=True, capture_output=True
            )
        wd = (
            subprocess.run(
                ["docker", "inspect", "-f", "{{.Config.WorkingDir}}", name], capture_output=True, text=True
            ).stdout.strip()
            or "/"
        )
        r = subprocess.run(
            ["docker", "exec", "-w", wd, name, "bash", "-c", _PROBE], capture_output=True, text=True, check=True
        )
        s, m, e, *reward = r.stdout.split()
        return (int(m) - int(s)) / 1e9, (int(e) - int(m)) / 1e9, (reward[0] if reward else "?")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def measure_work(bench: Bench) -> None:
    rows = {}
    with ThreadPoolExecutor(4) as pool:
        futs = {t.id: pool.submit(probe_task, bench, t, bench.harbor_tasks / t.id) for t in bench.tasks}
        for tid, fut in futs.items():
            rows[tid] = fut.result()
    bad = [tid for tid, (_, _, rew) in rows.items() if rew.strip() not in ("1", "1.0", "1.00")]
    if bad:
        log(f"[yellow]the reference solution did not score 1 in the probe for: {', '.join(bad)}[/]")
    for tid, (s, t, _) in rows.items():
        bench.work_s[tid] = s + t
    ws = list(bench.work_s.values())
    log(
        f"in-container work W (solve.sh + test.sh) over {len(ws)} tasks: mean {statistics.mean(ws) * 1000:.0f} ms, "
        f"min {min(ws) * 1000:.0f} ms, max {max(ws) * 1000:.0f} ms"
    )


# ---- OpenForge ----------------------------------------------------------------------------------------------


def run_openforge(
    bench: Bench, task_ids: list[str], concurrency: int, name: str, warm: bool = True
) -> tuple[float, list[Episode], int, str]:
    from openforge.rollout import RolloutConfig, run_rollouts
    from openforge.store import TrajectoryStore

    run = bench.work / "of-runs" / name
    run.parent.mkdir(parents=True, exist_ok=True)
    bench.of_runs.append(run)
    config = RolloutConfig(
        tasks=[ROOT / "examples" / "tasks"],
        task_ids=task_ids,
        harnesses=["react"],
        sandbox="docker",
        samples=1,
        concurrency=concurrency,
        model=bench.model,
        backend="oracle",
        run=run,
        image_map=IMAGE_MAP,
        **({} if warm else {"warm_sandboxes": 0}),
    )
    logfile = bench.work / f"{name}.log"
    with open(logfile, "w") as f:
        quiet = Console(file=f, width=160, force_terminal=False)
        t0 = time.monotonic()
        summary = asyncio.run(run_rollouts(config, console=quiet))
        wall = time.monotonic() - t0
    if summary.interrupted:
        raise KeyboardInterrupt
    bench.pools[name] = dataclasses.asdict(summary.warm)
    store = TrajectoryStore.open(run)
    episodes, attempts = [], 0
    try:
        attempts = store.count_episodes()
        for e in store.final_episodes():
            tm = e.metadata.get("timings") or {}
            total = float(tm.get("total_s", 0.0))
            episodes.append(
                Episode(
                    task=e.task or "?",
                    ok=(e.outcome is not None and getattr(e.outcome, "value", e.outcome) == "passed"),
                    outcome=str(getattr(e.outcome, "value", e.outcome)),
                    total_s=total,
                    start_s=float(tm.get("setup_s", 0.0)),
                    agent_s=float(tm.get("agent_s", 0.0)),
                    verify_s=float(tm.get("verify_s", 0.0)),
                    begin=e.created_at,
                    end=e.created_at + total,
                )
            )
    finally:
        close = getattr(store, "close", None)
        if close:
            close()
    retries = [ln for ln in logfile.read_text(errors="replace").splitlines() if ln.startswith("retrying")]
    note = f"{len(retries)} retried" if retries else ""
    return wall, episodes, attempts, note


def openforge_leftovers(bench: Bench) -> list[str]:
    from openforge.rollout.orchestrator import run_label
    from openforge.sandbox.base import LABEL_RUN, label_value

    ids: list[str] = []
    for run in bench.of_runs:
        r = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label={LABEL_RUN}={label_value(run_label(run))}"],
            capture_output=True,
            text=True,
        )
        ids += r.stdout.split()
    return ids


# ---- Harbor -------------------------------------------------------------------------------------------------


def run_harbor(
    bench: Bench, task_ids: list[str], concurrency: int, name: str, init: bool
) -> tuple[float, list[Episode], int, str]:
    config = hs.job_config(name, bench.harbor_jobs, bench.harbor_tasks, task_ids, concurrency)
    if init:
        config["environment"]["extra_docker_compose"] = [str(bench.init_overlay)]
    cfg_path = bench.work / f"{name}.json"
    out_path = bench.work / f"{name}.out.json"
    cfg_path.write_text(json.dumps(config))
    with open(bench.work / f"{name}.log", "w") as logf:
        bench.harbor_proc = subprocess.Popen(
            [
                str(hs.harbor_python(bench.harbor_venv)),
                str(ROOT / "benchmarks" / "_harbor_support.py"),
                "run-job",
                str(cfg_path),
                str(out_path),
            ],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=hs.loopback_env(),
            cwd=str(bench.work),
            start_new_session=True,
        )
        rc = bench.harbor_proc.wait()
        bench.harbor_proc = None
    if rc != 0 or not out_path.exists():
        tail = (bench.work / f"{name}.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"Harbor job {name} failed (exit {rc}):\n{tail}")
    out = json.loads(out_path.read_text())
    episodes = []
    errors = 0
    for t in out["trials"]:
        begin, end = t["started_at"], t["finished_at"]
        agent = t["agent_execution"] or [None, None]
        ver = t["verifier"] or [None, None]
        agent_start = agent[0] or begin
        start_s = agent_start - begin
        agent_s = (agent[1] - agent[0]) if agent[0] and agent[1] else 0.0
        verify_s = (ver[1] - ver[0]) if ver[0] and ver[1] else 0.0
        if t["exception"]:
            errors += 1
        episodes.append(
            Episode(
                task=t["task"],
                ok=(t["reward"] is not None and float(t["reward"]) >= 1.0),
                outcome="passed"
                if t["reward"] is not None and float(t["reward"]) >= 1.0
                else ("error" if t["exception"] else "failed"),
                total_s=end - begin,
                start_s=start_s,
                agent_s=agent_s,
                verify_s=verify_s,
                begin=begin,
                end=end,
            )
        )
    note = f"{errors} exceptions" if errors else ""
    return out["wall_s"], episodes, len(out["trials"]), note


def stop_harbor_child(bench: Bench) -> None:
    proc = bench.harbor_proc
    if proc is None or proc.poll() is not None:
        return
    # SIGINT first: Harbor cancels its trials and each stops its environment (compose down, shielded)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(90)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


# ---- clean-up -----------------------------------------------------------------------------------------------


def cleanup(bench: Bench | None) -> dict[str, int]:
    left = {
        "openforge containers": 0,
        "harbor containers": 0,
        "harbor networks": 0,
        "harbor images": 0,
        "probe containers": 0,
    }
    if bench is None:
        return left
    stop_harbor_child(bench)
    ids = openforge_leftovers(bench)
    if ids:
        states = subprocess.run(
            ["docker", "inspect", "--format", "{{.Name}} {{.State.Status}} created {{.Created}}", *ids],
            capture_output=True,
            text=True,
        ).stdout.strip()
        log(f"[yellow]OpenForge left {len(ids)} container(s) after its run[/]: {states}")
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True)
        left["openforge containers"] = len(ids)
    removed = hs.remove_harbor_leftovers(bench.harbor_tasks, [bench.harbor_jobs])
    left["harbor containers"] = removed["containers"]
    left["harbor networks"] = removed["networks"]
    left["harbor images"] = removed["images"]
    probes = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "label=openforge-bench=probe"], capture_output=True, text=True
    ).stdout.split()
    if probes:
        subprocess.run(["docker", "rm", "-f", *probes], capture_output=True)
        left["probe containers"] = len(probes)
    if bench.probe_images:
        subprocess.run(["docker", "rmi", "-f", *bench.probe_images], capture_output=True)
    return left


def check_clean(bench: Bench) -> list[str]:
    """A second sweep: what of ours was still there (should be nothing)."""
    problems = []
    if openforge_leftovers(bench):
        problems.append("openforge containers")
    again = hs.remove_harbor_leftovers(bench.harbor_tasks, [bench.harbor_jobs])
    problems += [f"harbor {k}" for k, v in again.items() if v]
    if subprocess.run(
        ["docker", "ps", "-aq", "--filter", "label=openforge-bench=probe"], capture_output=True, text=True
    ).stdout.split():
        problems.append("probe containers")
    return problems


# ---- report -------------------------------------------------------------------------------------------------


def mean(xs: list[float]) -> float:
    return statistics.mean(xs) if xs else float("nan")


def aggregate(runs: list[Run], work_s: dict[str, float]) -> dict:
    eps = [e for r in runs for e in r.episodes]
    n = len(eps)
    wall = sum(r.wall_s for r in runs)
    c = runs[0].concurrency
    w_bar = mean([work_s.get(e.task, 0.0) for e in eps])
    return {
        "episodes": n,
        "passed": sum(e.ok for e in eps),
        "attempts": sum(r.attempts for r in runs),
        "wall_s": wall,
        "per_min": n / wall * 60 if wall else float("nan"),
        "w_bar_s": w_bar,
        "overhead_s": wall * c / n - w_bar if n else float("nan"),
        "episode_minus_w_s": mean([e.total_s for e in eps]) - w_bar,
        "start_s": mean([e.start_s for e in eps]),
        "agent_s": mean([e.agent_s for e in eps]),
        "verify_s": mean([e.verify_s for e in eps]),
        "rest_s": mean([e.rest_s for e in eps]),
        "fixed_s": mean([r.wall_s - r.span_s for r in runs]),
        "load": mean([r.load for r in runs]),
        "host_cpu_s_per_episode": sum(r.cpu_s for r in runs) / n if n else float("nan"),
        **pool_figures([r.pool for r in runs if r.pool], n),
        "notes": "; ".join(f"r{r.round}: {r.note}" for r in runs if r.note),
    }


def pool_figures(pools: list[dict], episodes: int) -> dict:
    """OpenForge's warm sandboxes over its runs: the share of episodes that found theirs started, the mean wait
    for a sandbox, and the most started ahead at once (each with its grader: twice as many containers)."""
    if not pools:
        return {}
    taken = sum(p["hits"] + p["misses"] for p in pools)
    return {
        "warm_hit_rate": sum(p["hits"] for p in pools) / taken if taken else 0.0,
        "sandbox_wait_s": sum(p["wait_s"] for p in pools) / episodes if episodes else float("nan"),
        "peak_warm": max(p["peak_live"] for p in pools),
    }


def report(runs: list[Run], bench: Bench, levels: list[int], systems: list[str]) -> dict:
    agg: dict[tuple[str, int], dict] = {}
    for s in systems:
        for c in levels:
            rs = [r for r in runs if r.system == s and r.concurrency == c]
            if rs:
                agg[(s, c)] = aggregate(rs, bench.work_s)

    t = Table(
        title="Rollouts with the oracle policy: OpenForge (react, docker, oracle) vs Harbor (docker, oracle)",
        title_justify="left",
    )
    for col, j in [
        ("C", "right"),
        ("system", "left"),
        ("episodes", "right"),
        ("passed", "right"),
        ("wall s", "right"),
        ("episodes/min", "right"),
        ("overhead s/ep", "right"),
        ("ep. time − W s", "right"),
        ("W ms", "right"),
        ("start", "right"),
        ("agent", "right"),
        ("verify", "right"),
        ("rest", "right"),
        ("fixed s", "right"),
        ("CPU s/ep", "right"),
        ("warm hits", "right"),
        ("wait s", "right"),
        ("load", "right"),
        ("notes", "left"),
    ]:
        t.add_column(col, justify=j)
    for c in levels:
        for s in systems:
            a = agg.get((s, c))
            if a is None:
                continue
            t.add_row(
                str(c),
                s,
                str(a["episodes"]),
                str(a["passed"]),
                f"{a['wall_s']:.1f}",
                f"{a['per_min']:.1f}",
                f"[bold]{a['overhead_s']:.2f}[/]",
                f"{a['episode_minus_w_s']:.2f}",
                f"{a['w_bar_s'] * 1000:.0f}",
                f"{a['start_s']:.2f}",
                f"{a['agent_s']:.2f}",
                f"{a['verify_s']:.2f}",
                f"{a['rest_s']:.2f}",
                f"{a['fixed_s']:.2f}",
                f"{a['host_cpu_s_per_episode']:.2f}",
                f"{a['warm_hit_rate']:.0%}" if "warm_hit_rate" in a else "",
                f"{a['sandbox_wait_s']:.2f}" if "sandbox_wait_s" in a else "",
                f"{a['load']:.1f}",
                a["notes"],
            )
        t.add_section()
    console.print(t)

    r = Table(title="OpenForge / Harbor (target: overhead ratio <= 1/3 = 0.33)", title_justify="left")
    for col in ("C", "vs", "overhead ratio", "ep. time − W ratio", "episodes/min speed-up", "≤ 1/3?"):
        r.add_column(col, justify="left" if col == "vs" else "right")
    ratios = {}
    for c in levels:
        for mine, other in [(m, o) for m in OPENFORGE for o in systems if o not in OPENFORGE]:
            of, hb = agg.get((mine, c)), agg.get((other, c))
            if of is None or hb is None:
                continue
            ratio = of["overhead_s"] / hb["overhead_s"]
            ratios[f"{c}/{other}" if mine == "openforge" else f"{c}/{mine}/{other}"] = ratio
            r.add_row(
                str(c),
                other if mine == "openforge" else f"{other} ({mine})",
                f"[bold]{ratio:.3f}[/]",
                f"{of['episode_minus_w_s'] / hb['episode_minus_w_s']:.3f}",
                f"{of['per_min'] / hb['per_min']:.2f}x",
                "yes" if ratio <= 1 / 3 else "[red]no[/]",
            )
    console.print(r)
    return {"aggregate": {f"{s}@{c}": a for (s, c), a in agg.items()}, "ratios": ratios}


# ---- main ---------------------------------------------------------------------------------------------------


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round, 4/8/8 tasks at C=1/4/8")
    ap.add_argument("--levels", default="1,4,8", help="concurrency levels (default 1,4,8)")
    ap.add_argument(
        "--tasks",
        default=None,
        help="tasks (= episodes) per run at each level, comma-separated (default 8,16,24; quick 4,8,8)",
    )
    ap.add_argument("--rounds", type=int, default=None, help="rounds per level (default 2; quick 1)")
    ap.add_argument("--no-harbor-init", action="store_true", help="skip the harbor+init variant")
    ap.add_argument(
        "--cold", action="store_true", help="also run OpenForge without warm sandboxes (openforge-cold), side by side"
    )
    ap.add_argument("--harbor-venv", type=Path, default=Path(tempfile.gettempdir()) / "openforge-harbor-venv")
    ap.add_argument("--harbor-version", default=hs.HARBOR_VERSION)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    ap.add_argument("--keep-work", action="store_true", help="keep the work directory (logs, runs, jobs)")
    args = ap.parse_args(argv)

    levels = [int(x) for x in args.levels.split(",")]
    counts = [int(x) for x in (args.tasks or ("4,8,8" if args.quick else "8,16,24")).split(",")]
    if len(counts) == 1:
        counts = counts * len(levels)
    if len(counts) != len(levels):
        ap.error("--tasks needs one count per level")
    rounds = args.rounds or (1 if args.quick else 2)
    systems = [
        s
        for s in SYSTEMS
        if not (args.no_harbor_init and s == "harbor+init") and not (not args.cold and s == "openforge-cold")
    ]

    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)

    bench: Bench | None = None
    work = Path(tempfile.mkdtemp(prefix="openforge-bench-rollout-"))
    runs: list[Run] = []
    interrupted = False
    try:
        server = ensure_docker()
        hversion = hs.ensure_harbor(args.harbor_venv, args.harbor_version, log)
        cversion = hs.ensure_compose(args.harbor_venv, log)
        from openforge.tasks import load_tasks

        all_tasks = sorted(load_tasks([ROOT / "examples" / "tasks"]), key=lambda t: t.id)
        need = max(counts)
        if need > len(all_tasks):
            ap.error(f"at most {len(all_tasks)} tasks per run")
        # spread train / held-out: alternate the two splits
        train = [t for t in all_tasks if t.split != "heldout"]
        held = [t for t in all_tasks if t.split == "heldout"]
        order = []
        while train or held:
            for pool in (train, train, held):
                if pool:
                    order.append(pool.pop(0))
        tasks = order[:need]
        bench = Bench(
            work=work,
            tasks=tasks,
            harbor_tasks=work / "harbor-tasks",
            harbor_jobs=work / "harbor-jobs",
            init_overlay=work / "harbor-init.yaml",
            model=work / "tiny",
            harbor_venv=args.harbor_venv,
        )
        hs.harbor_task_copies([Path(t.path) for t in tasks], bench.harbor_tasks, IMAGE_MAP)
        bench.init_overlay.write_text("services:\n  main:\n    init: true\n")
        bench.harbor_jobs.mkdir()
        make_tiny_model(bench.model)
        console.print(
            f"[bold]machine[/]: {os.cpu_count()} CPUs, {platform.platform()}, Docker {server}, "
            f"docker compose {cversion}, Harbor {hversion} (Python 3.12 venv {args.harbor_venv}), "
            f"OpenForge {getattr(openforge, '__version__', '?')}"
        )
        console.print(
            f"[bold]plan[/]: levels {levels}, tasks per run {counts}, {rounds} round(s), systems "
            f"{', '.join(systems)}; work dir {work}"
        )

        log("measuring the in-container work W of every task (probe containers)")
        measure_work(bench)

        ids = [t.id for t in tasks]
        log("warm-up (not counted): every task once on each system at C=4")
        w, eps, _, note = run_openforge(bench, ids, 4, "warm-openforge")
        log(f"  openforge warm-up: {len(eps)} episodes, {sum(e.ok for e in eps)} passed, {w:.1f}s {note}")
        w, eps, _, note = run_harbor(bench, ids, 4, "warm-harbor", init=False)
        log(f"  harbor warm-up: {len(eps)} episodes, {sum(e.ok for e in eps)} passed, {w:.1f}s {note}")

        for c, n in zip(levels, counts):
            sel = ids[:n]
            for rnd in range(rounds):
                k = rnd % len(systems)
                for s in systems[k:] + systems[:k]:
                    load = os.getloadavg()[0]
                    name = f"{s.replace('+', '-')}-c{c}-r{rnd}"
                    cpu0 = host_cpu_s()
                    if s in OPENFORGE:
                        wall, eps, att, note = run_openforge(bench, sel, c, name, warm=(s == "openforge"))
                    else:
                        wall, eps, att, note = run_harbor(bench, sel, c, name, init=(s == "harbor+init"))
                    cpu = host_cpu_s() - cpu0
                    runs.append(Run(s, c, rnd, wall, eps, att, note, load, cpu, bench.pools.get(name, {})))
                    log(
                        f"C={c} round {rnd} {s:12s} {len(eps):3d} episodes ({sum(e.ok for e in eps)} passed) in "
                        f"{wall:6.1f}s = {len(eps) / wall * 60:6.1f}/min; "
                        f"slot time {wall * c / max(1, len(eps)):.2f}s/ep; "
                        f"load before {load:.2f} {note}"
                    )
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted: cleaning up[/]")
    finally:
        left = cleanup(bench)
        removed = {k: v for k, v in left.items() if v}
        if removed:
            log(f"removed leftovers: {removed}")
        if bench is not None:
            problems = check_clean(bench)
            log("nothing of ours left in Docker" if not problems else f"[red]still present: {problems}[/]")
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"work directory kept: {work}")

    if runs and bench is not None:
        figures = report(runs, bench, levels, systems)
        if args.json:
            command = "python benchmarks/rollout.py " + public_argv(sys.argv[1:] if argv is None else argv)
            args.json.write_text(
                json.dumps(
                    {
                        "command": command,
                        "commit": subprocess.run(
                            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
                        ).stdout.strip(),
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
                        "configuration": {"levels": levels, "tasks": counts, "rounds": rounds, "systems": systems},
                        "levels": levels,
                        "tasks": counts,
                        "rounds": rounds,
                        "work_s": bench.work_s,
                        **figures,
                        "runs": [
                            {
                                "system": r.system,
                                "c": r.concurrency,
                                "round": r.round,
                                "wall_s": r.wall_s,
                                "episodes": len(r.episodes),
                                "attempts": r.attempts,
                            }
                            for r in runs
                        ],
                    },
                    indent=2,
                )
            )
    if interrupted:
        sys.exit(130)


if __name__ == "__main__":
    main()
