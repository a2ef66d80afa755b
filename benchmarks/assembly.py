"""Assembly benchmark: what merging a continuity segment into one sample saves over one sample per call (the
OpenForgeRL paper's way), and how fast assembly runs, on episodes recorded from the real harnesses.

Recording: the real `claude` and `codex` binaries (from the pinned harness bundle, `openforge harness
install`) run against a real `openforge proxy` process on 127.0.0.1 with the tiny model's tokenizer and the
scripted policy `tests/policies/shell_loop.py`: an episode of N calls is N-1 calls of the harness's own
shell tool (`echo step-<i>`, really executed by the harness) and a final plain-text answer. N = 5, 20, 50
(`--calls`). The token ids are what the proxy rendered for each harness's real requests (its real system
prompt and tool schemas), so prompt lengths are the harness's, in the tiny model's 1k-token vocabulary.

Reported per episode:
  calls        model calls recorded (side calls apart) and continuity segments
  trained      mask-1 tokens: the same in both modes by construction (each sampled token trained once)
  per-call     tokens of all samples when each call is its own sample (prompt + output)
  merged       tokens of all samples when each segment is one sample (its last call's prompt + output)
  ratio        per-call / merged: how many times more tokens a trainer must run through per-call
  assembly     one `assemble()` of the episode (pure, calls already in memory), median of `--repeat` runs,
               for each mode: milliseconds; throughput in record tokens (the calls' prompt + output tokens,
               what assembly reads) per second, and in sample tokens (what it builds) per second
Then `assemble_run` over the whole run (reading every episode back from the store included).

    python benchmarks/assembly.py               # ~1-2 minutes on 2 cores
    python benchmarks/assembly.py --calls 5 20  # shorter
    python benchmarks/assembly.py --json out.json

The proxy process is stopped on exit; all traffic stays on 127.0.0.1. Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openforge.core import Outcome
from openforge.harness import LaunchContext, get_adapter
from openforge.harness.base import run_local
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.models import build_tiny_model
from openforge.store import TrajectoryStore
from openforge.train import assemble, assemble_run

POLICY = ROOT / "tests" / "policies" / "shell_loop.py"
INSTRUCTION = "Run the numbered echo steps, then report."


# ---- recording ----------------------------------------------------------------------------------------------


class Proxy:
    """`openforge proxy` as a child process on loopback (port 0), with its admin API."""

    def __init__(self, run: Path, model_dir: Path):
        self.run = run
        run.mkdir(parents=True, exist_ok=True)
        info = run / "proxy.json"
        self.log = open(run / "proxy.log", "ab")  # noqa: SIM115 - the child writes to it until stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "openforge.cli",
                "proxy",
                "--model",
                str(model_dir),
                "--backend",
                f"scripted:{POLICY}",
                "--run",
                str(run),
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 120
        while not info.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the proxy did not start:\n{(run / 'proxy.log').read_text()[-3000:]}")
            time.sleep(0.05)
        data = json.loads(info.read_text())
        self.url = data["url"]
        self.admin = httpx.Client(
            base_url=data["admin_url"], timeout=30, headers={"authorization": f"Bearer {data['admin_token']}"}
        )

    def new_episode(self, task: str, harness: str) -> dict:
        r = self.admin.post("/admin/episodes", json={"task": task, "harness": harness})
        r.raise_for_status()
        return r.json()

    def end_episode(self, episode_id: str) -> None:
        self.admin.post(f"/admin/episodes/{episode_id}/end").raise_for_status()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def record_episode(proxy: Proxy, bundle: Path, harness: str, calls: int, root: Path) -> tuple[str, float]:
    adapter = get_adapter(harness)
    episode = proxy.new_episode(task=f"calls-{calls}", harness=harness)
    work, home = root / f"{harness}-{calls}" / "work", root / f"{harness}-{calls}" / "home"
    work.mkdir(parents=True)
    home.mkdir(parents=True)
    launch = adapter.launch(LaunchContext(bundle, home, work, proxy.url, episode["key"], "tiny", INSTRUCTION))
    result = run_local(launch, adapter, timeout=600)
    if result.returncode != 0 or result.timed_out:
        raise SystemExit(f"{harness} ({calls} calls) failed: rc={result.returncode}\n{result.stderr[-2000:]}")
    proxy.end_episode(episode["episode_id"])
    return episode["episode_id"], result.seconds


# ---- measuring ----------------------------------------------------------------------------------------------


def time_assembly(pairs, mode: str, repeat: int) -> float:
    """Median seconds of one `assemble()` over `pairs` (calls already in memory)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        assemble(pairs, mode=mode)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(episode, calls, repeat: int) -> dict:
    pairs = [(episode, calls)]
    _, metrics = assemble(pairs)
    main = [c for c in calls if not c.side_call and c.call_error is None]
    record_tokens = sum(
        len(c.prompt_ids) + len(c.output_ids) for c in calls if c.call_error is None and not c.side_call
    )
    row = {
        "harness": episode.harness,
        "calls": len(main),
        "side_calls": len(calls) - len(main),
        "segments": len({c.segment for c in main}),
        "breaks": metrics.calls_broken,
        "first_prompt_tokens": len(main[0].prompt_ids),
        "trained": metrics.training_tokens,
        "sequence": metrics.sequence_tokens,
        "ratio": metrics.token_saving,
        "record_tokens": record_tokens,
    }
    for mode in ("merged", "per-call"):
        seconds = time_assembly(pairs, mode, repeat)
        row[f"{mode}_s"] = seconds
        row[f"{mode}_record_tokens_per_s"] = record_tokens / seconds
        row[f"{mode}_sample_tokens_per_s"] = metrics.sequence_tokens[mode] / seconds
    return row


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'harness':<12}{'calls':>6}{'segs':>5}{'1st prompt':>11}{'trained':>9}{'per-call tok':>13}"
        f"{'merged tok':>11}{'ratio':>7} |{'merged assembly':^27}|{'per-call assembly':^27}"
    )
    print(head)
    unit = f"{'ms':>7}{'in M/s':>10}{'out M/s':>10}"
    print(f"{'':<74}|{unit}|{unit}")
    print("-" * len(head))
    for r in rows:
        assert r["trained"]["merged"] == r["trained"]["per-call"]
        cells = ""
        for mode in ("merged", "per-call"):
            seconds = r[f"{mode}_s"]
            cells += f"|{seconds * 1e3:>7.2f}{r['record_tokens'] / seconds / 1e6:>10.1f}"
            cells += f"{r['sequence'][mode] / seconds / 1e6:>10.1f}"
        print(
            f"{r['harness']:<12}{r['calls']:>6}{r['segments']:>5}{r['first_prompt_tokens']:>11,}"
            f"{r['trained']['merged']:>9,}{r['sequence']['per-call']:>13,}{r['sequence']['merged']:>11,}"
            f"{r['ratio']:>6.1f}x {cells}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[5, 20, 50])
    parser.add_argument("--harnesses", nargs="+", default=["claude-code", "codex"])
    parser.add_argument("--repeat", type=int, default=7, help="assembly timings: median of this many runs")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    bundle = default_bundle_dir()
    missing = [h for h in args.harnesses if get_adapter(h).component and not bundle_status(bundle).get(h)]
    if missing:
        raise SystemExit(f"the harness bundle at {bundle} lacks {missing}: run `openforge harness install`")

    with tempfile.TemporaryDirectory(prefix="openforge-assembly-bench-") as tmp:
        root = Path(tmp)
        model_dir = build_tiny_model(root / "tiny", seed=0)
        proxy = Proxy(root / "run", model_dir)
        recorded = []
        try:
            for harness in args.harnesses:
                for n in args.calls:
                    episode_id, seconds = record_episode(proxy, bundle, harness, n, root)
                    print(f"recorded {harness}, {n} calls, in {seconds:.1f}s", file=sys.stderr)
                    recorded.append(episode_id)
        finally:
            proxy.stop()

        rows = []
        with TrajectoryStore.open(proxy.run) as store:
            graded = []
            for episode_id in recorded:
                episode = store.update_episode(episode_id, outcome=Outcome.passed, reward=1.0)
                graded.append(episode)
                rows.append(measure(episode, store.list_calls(episode_id), args.repeat))
            t0 = time.perf_counter()
            samples, metrics = assemble_run(store)
            run_seconds = time.perf_counter() - t0

    print()
    print_table(rows)
    total_records = sum(r["record_tokens"] for r in rows)
    print(
        f"\nassemble_run over the whole run ({len(rows)} episodes, store reads included): "
        f"{run_seconds * 1e3:.0f} ms, {total_records / run_seconds / 1e6:.1f} M record tokens/s, "
        f"{len(samples)} merged samples; merge rate {metrics.merge_rate:.3f}, breaks {metrics.calls_broken}"
    )
    print(
        "trained = mask-1 tokens (equal in both modes by construction); per-call / merged tok = all tokens of "
        "the samples a trainer runs through; ratio = per-call / merged;\nassembly = one assemble() of the episode "
        "(calls in memory, median): ms, record tokens read per s (in), sample tokens built per s (out)"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"episodes": rows, "run": {"seconds": run_seconds, "metrics": metrics.summary()}}, indent=2)
        )


if __name__ == "__main__":
    main()
