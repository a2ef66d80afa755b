"""Learning through the real harnesses: the `harnesses` recipe in three training conditions at the same compute
(the same GRPO wall-clock budget, the same number of teacher demonstrations spread over the trained harnesses),
each policy evaluated in react, Claude Code and Codex — a harness a condition did not train on measures transfer.

    python benchmarks/harnesses.py                                  # 3 conditions x 3 seeds
    python benchmarks/harnesses.py --conditions claude-code --seeds 0
    python benchmarks/harnesses.py --conditions --continuity 8     # only the merged-vs-per-call tokens
    python benchmarks/harnesses.py --finished-only                 # the table of the runs that finished

Conditions: `react` (RL through react only), `claude-code` (through Claude Code only), `mixed` (react + Claude
Code + Codex; GRPO groups are (step, task, harness)). Each (condition, seed) runs `openforge quickstart --recipe
harnesses` in its own process, in OUT/CONDITION/seed-S. Targets (means over the seeds): through Claude Code,
SFT+RL >= SFT + 10 points; mixed >= single-harness on the harness both include; transfer reported either way.
Not a test: no assertions, only figures (benchmarks/results/harnesses.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml
from _machine import public_argv
from quickstart import (  # benchmarks/quickstart.py: the one seed loop
    phase_table,
    run_seeds,
)
from rich.console import Console
from rich.table import Table

from openforge.train.records import report_step_records

CONDITIONS = {"react": ["react"], "claude-code": ["claude-code"], "mixed": ["react", "claude-code", "codex"]}
HARNESSES = ["react", "claude-code", "codex"]  # every policy is evaluated in each
POLICIES = ["base", "sft", "rl"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conditions",
        nargs="*",
        choices=list(CONDITIONS),
        default=list(CONDITIONS),
        help="none: only the continuity measurement",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-harnesses"))
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="YAML of TrainConfig fields laid over the harnesses recipe, for every run",
    )
    parser.add_argument("--reuse", action="store_true", help="use a run's report.json where it left one")
    parser.add_argument(
        "--finished-only",
        action="store_true",
        help="run nothing: the table of the (condition, seed) runs that finished (their report.json)",
    )
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/harnesses.json"))
    parser.add_argument(
        "--continuity",
        type=int,
        default=8,
        metavar="N",
        help="first, N oracle episodes through every harness (OpenClaw too): training tokens merged "
        "vs per call (0: skip)",
    )
    args = parser.parse_args()
    console = Console()
    if not console.is_terminal:  # a log file: wide enough for the tables
        console = Console(width=160)
    results: dict[str, dict] = {}
    continuity_tokens = continuity(args.out / "continuity", args.continuity, console) if args.continuity else {}
    if continuity_tokens:
        console.print(continuity_table(continuity_tokens, args.continuity))
    for condition in args.conditions:
        console.rule(f"condition {condition}")
        seeds = args.seeds
        if args.finished_only:
            seeds = [s for s in seeds if (args.out / condition / f"seed-{s}" / "report.json").is_file()]
            if not seeds:
                console.print(f"no finished run of {condition}")
                continue
        config = condition_config(args.out / condition, CONDITIONS[condition], args.config)
        reports = run_seeds(
            seeds,
            args.out / condition,
            ["--recipe", "harnesses"],
            config,
            False,
            args.reuse or args.finished_only,
            console,
        )
        results[condition] = {
            "harnesses": CONDITIONS[condition],
            "seeds": seeds,
            "pass_at_1": by_harness(reports),
            "grpo_steps": [len(report_step_records(r)) for r in reports],
            "grpo_signal": [grpo_signal(report_step_records(r)) for r in reports],
            "timings_s": [r["timings_s"] for r in reports],
            "training_tokens": [training_tokens(Path(r["run"])) for r in reports],
            "wall_split_s": [wall_split(r) for r in reports],
            "behaviour": [behaviour(Path(r["run"])) for r in reports],
        }
        console.print(phase_table(reports, seeds))
    if results:
        console.print(table(results))
        console.print(token_table(results))
        console.print(split_table(results))
        console.print(behaviour_table(results))
    for line in verdict(results):
        console.print(line)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(
        json.dumps(
            {
                "command": "python " + public_argv(sys.argv),
                "seeds": args.seeds,
                "continuity": continuity_tokens,
                "conditions": results,
                "verdict": verdict(results),
            },
            indent=2,
        )
        + "\n"
    )


def grpo_signal(steps: list[dict]) -> dict[str, int]:
    """What GRPO had to learn from: its steps, those with at least one group with signal (rewards that differ),
    and the groups with signal among all."""
    return {
        "steps": len(steps),
        "steps_with_signal": sum(s["groups_with_signal"] > 0 for s in steps),
        "groups_with_signal": sum(s["groups_with_signal"] for s in steps),
        "groups": sum(s["groups"] for s in steps),
    }


def condition_config(out: Path, harnesses: list[str], base: Path | None) -> Path:
    """The condition's YAML: the given fields, its training harnesses, and the teacher's demonstrations spread
    over them (the same number in every condition)."""
    from openforge.train.quickstart import RECIPES, overlay

    fields = yaml.safe_load(base.read_text()) if base else {}
    demos = (fields.get("sft") or {}).get("demos") or RECIPES["harnesses"]["sft"]["demos"]
    fields = overlay(fields or {}, {"harnesses": harnesses, "sft": {"demos": max(1, demos // len(harnesses))}})
    out.mkdir(parents=True, exist_ok=True)
    path = out / "condition.yaml"
    path.write_text(yaml.safe_dump(fields))
    return path


def by_harness(reports: list[dict]) -> dict[str, dict[str, list[float | None]]]:
    """{policy: {harness: [pass@1 percent per seed]}}."""
    return {
        p: {h: [_pct((r["heldout_pass_at_1_by_harness"].get(p) or {}).get(h)) for r in reports] for h in HARNESSES}
        for p in POLICIES
    }


CONTINUITY_HARNESSES = ["react", "claude-code", "codex", "openclaw"]


def continuity(out: Path, n: int, console: Console) -> dict[str, dict]:
    """N oracle episodes (look, command, check, answer: several calls each) through every harness with the recipe's
    harness options, in Docker; per harness the calls, the calls that continued the one before, and the training
    tokens merged vs per call. OpenClaw re-sends a moving context message after the task every call, so no call
    extends the one before and merging saves nothing."""
    import asyncio

    from openforge.models import build_tiny_model
    from openforge.rollout import RolloutConfig, run_rollouts
    from openforge.store import TrajectoryStore
    from openforge.tasks import DEFAULT_IMAGE_MAP, RECOVERY_FAMILIES, InstanceSampler
    from openforge.train.data import write_instances
    from openforge.train.quickstart import HARNESS_OPTIONS

    # recovery families: their oracle looks, acts and checks, so an episode has several calls to merge
    write_instances(InstanceSampler("train", seed=0, families=list(RECOVERY_FAMILIES)).sample(n), out / "tasks")
    model = out / "model" if (out / "model" / "config.json").is_file() else build_tiny_model(out / "model")
    config = RolloutConfig(
        tasks=[out / "tasks"],
        harnesses=CONTINUITY_HARNESSES,
        model=model,
        backend="oracle",
        run=out / "run",
        harness_options=HARNESS_OPTIONS,
        image_map=DEFAULT_IMAGE_MAP,
        concurrency=2,
        resume=(out / "run" / "trajectories.db").exists(),
    )
    asyncio.run(run_rollouts(config, console))
    counts: dict[str, dict] = {}
    with TrajectoryStore.open(out / "run") as store:
        graded = [e for e in store.list_episodes() if e.outcome is not None and not e.outcome.is_infrastructure_failure]
        for harness, (ids, tokens) in sequence_tokens(store, graded).items():
            episodes = [[c for c in store.list_calls(i) if not c.side_call] for i in ids]
            calls = [c for e in episodes for c in e]
            counts[harness] = {
                "episodes": len(ids),
                "calls": len(calls),
                "continued": sum(c.index > 0 and c.break_reason is None for c in calls),
                **tokens,
                # one sample per episode: its last call holds the whole conversation
                "if continuous": sum(len(e[-1].prompt_ids) + len(e[-1].output_ids) for e in episodes if e),
            }
    return counts


def sequence_tokens(store, episodes) -> dict[str, tuple[list[str], dict[str, int]]]:
    """Per harness: its episodes' ids and the tokens their samples hold, merged and one sample per call
    (`assemble_run`'s sequence_tokens)."""
    from openforge.train.assemble import assemble_run

    by_harness: dict[str, list[str]] = {}
    for episode in episodes:
        by_harness.setdefault(episode.harness or "", []).append(episode.id)
    return {
        h: (ids, dict(assemble_run(store, episodes=ids)[1].sequence_tokens)) for h, ids in sorted(by_harness.items())
    }


def continuity_table(counts: dict[str, dict], n: int) -> Table:
    t = Table(title=f"continuity: {n} oracle episodes per harness, training tokens merged vs one sample per call")
    for column in (
        "harness",
        "episodes",
        "calls",
        "calls continuing",
        "merged",
        "per call",
        "per call / merged",
        "if continuous",
        "merged / if continuous",
    ):
        t.add_column(column, justify="left" if column == "harness" else "right")
    for harness, c in counts.items():
        merged, per_call, ideal = c.get("merged", 0), c.get("per-call", 0), c["if continuous"]
        t.add_row(
            harness,
            str(c["episodes"]),
            str(c["calls"]),
            str(c["continued"]),
            str(merged),
            str(per_call),
            f"{per_call / merged:.2f}" if merged else "-",
            str(ideal),
            f"{merged / ideal:.2f}" if ideal else "-",
        )
    t.caption = (
        "if continuous: one sample per episode, as merging gives when every call extends the one before; "
        "merged / if continuous is what broken continuity costs"
    )
    return t


def training_tokens(run: Path) -> dict[str, dict[str, int]]:
    """Per harness, the tokens GRPO's episodes make to train on (every sample's length, summed): merged (one
    sample per continuity segment) vs per call (one sample per model call, as the paper does) — what a harness
    that breaks continuity (OpenClaw's moving context message) costs."""
    from openforge.store import TrajectoryStore

    with TrajectoryStore.open(run / "rl") as store:
        return {h: tokens for h, (_, tokens) in sequence_tokens(store, store.list_episodes()).items()}


# Where an episode's time goes (the runner's timings, per episode): the sandbox and its task's set-up, the harness
# from launch to its first model call, the model calls in the proxy, the harness's tools and its own work between
# calls ("tools": the rest of its run), grading.
EPISODE_PARTS = {
    "set-up": "setup_s",
    "harness start": "harness_start_s",
    "model calls": "model_s",
    "tools": None,
    "grading": "verify_s",
}


def wall_split(report: dict) -> dict:
    """GRPO's wall time: the steps' episodes vs their update (training), and per harness the mean seconds of each
    part of an episode (EPISODE_PARTS). Episodes run concurrently, so their seconds add up to more than the wall."""
    from openforge.store import TrajectoryStore

    steps = report_step_records(report)
    training = sum(s.get("train_s", 0.0) for s in steps)
    per_harness: dict[str, list[dict[str, float]]] = {}
    with TrajectoryStore.open(Path(report["run"]) / "rl") as store:
        for episode in store.list_episodes():
            t = episode.metadata.get("timings") or {}
            if "agent_s" not in t:
                continue
            parts = {name: t.get(key, 0.0) for name, key in EPISODE_PARTS.items() if key}
            parts["tools"] = max(0.0, t["agent_s"] - t.get("harness_start_s", 0.0) - t.get("model_s", 0.0))
            per_harness.setdefault(episode.harness or "", []).append(parts)
    return {
        "grpo_s": round(sum(s["seconds"] for s in steps), 1),
        "training_s": round(training, 1),
        "episodes_s": round(sum(s["seconds"] for s in steps) - training, 1),
        "per_episode_s": {
            h: {name: round(statistics.mean(p[name] for p in rows), 3) for name in EPISODE_PARTS}
            for h, rows in sorted(per_harness.items())
        },
        "episodes": {h: len(rows) for h, rows in sorted(per_harness.items())},
    }


def split_table(results: dict[str, dict]) -> Table:
    t = Table(title="GRPO's wall time (summed over seeds) and where an episode's time goes (mean seconds)")
    for column in ("condition", "GRPO s", "of it episodes", "of it training", "harness", "episodes", *EPISODE_PARTS):
        t.add_column(column, justify="left" if column in ("condition", "harness") else "right")
    for condition, r in results.items():
        splits = r["wall_split_s"]
        wall = [sum(s[k] for s in splits) for k in ("grpo_s", "episodes_s", "training_s")]
        harnesses = sorted({h for s in splits for h in s["per_episode_s"]})
        for i, harness in enumerate(harnesses):
            rows = [s for s in splits if harness in s["per_episode_s"]]
            n = sum(s["episodes"][harness] for s in rows)
            means = [
                sum(s["per_episode_s"][harness][part] * s["episodes"][harness] for s in rows) / n
                for part in EPISODE_PARTS
            ]
            t.add_row(
                condition if i == 0 else "",
                *(f"{w:.0f}" if i == 0 else "" for w in wall),
                harness,
                str(n),
                *(f"{m:.2f}" for m in means),
            )
    return t


BEHAVIOUR = {
    "calls": "mean_calls",
    "sampled tokens": "mean_sampled_tokens",
    "unparsed calls": "parse_error_calls",
    "met an error": "met_error",
    "recovered": "recovered",
}


def behaviour(run: Path) -> dict[str, dict[str, dict]]:
    """{policy: {harness: behaviour}} over the held-out evaluation's episodes (`openforge analyze`'s metrics):
    calls and sampled tokens per episode, calls the proxy could not parse into a tool call, episodes that met a
    failed tool result and of them those that passed."""
    from openforge.analysis import analyze_store

    out: dict[str, dict[str, dict]] = {}
    for policy in POLICIES:
        store = run / "eval" / policy
        if (store / "trajectories.db").is_file():
            analysis = analyze_store(store, run)
            out[policy] = {
                h: {"episodes": b.graded, **{name: getattr(b, key) for name, key in BEHAVIOUR.items()}}
                for h, b in analysis.per_harness.items()
            }
    return out


def behaviour_table(results: dict[str, dict]) -> Table:
    t = Table(title="behaviour in the held-out evaluation (first seed): per episode, or episodes")
    for column in ("condition", "policy", "harness", "graded", *BEHAVIOUR):
        t.add_column(column, justify="left" if column in ("condition", "policy", "harness") else "right")
    for condition, r in results.items():
        first = r["behaviour"][0] if r["behaviour"] else {}
        for policy, harnesses in first.items():
            for harness, b in harnesses.items():
                t.add_row(
                    condition,
                    policy,
                    harness,
                    str(b["episodes"]),
                    *(
                        "-" if b[name] is None else f"{b[name]:.1f}" if isinstance(b[name], float) else str(b[name])
                        for name in BEHAVIOUR
                    ),
                )
    return t


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 2)


def _mean(values: list[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return round(statistics.mean(vs), 2) if vs else None


def table(results: dict[str, dict]) -> Table:
    t = Table(title="held-out pass@1 (greedy, %): mean over a condition's seeds [each seed]")
    t.add_column("condition (trained on)")
    t.add_column("seeds")
    t.add_column("policy")
    for h in HARNESSES:
        t.add_column(h, justify="right")
    for condition, r in results.items():
        for p in POLICIES:
            cells = []
            for h in HARNESSES:
                values = r["pass_at_1"][p][h]
                value = _mean(values)
                each = (
                    " [" + " ".join("-" if v is None else f"{v:.0f}" for v in values) + "]" if len(values) > 1 else ""
                )
                cells.append("-" if value is None else f"{value:.1f}{each}" + ("" if h in r["harnesses"] else " *"))
            first = p == "base"
            t.add_row(
                f"{condition} ({', '.join(r['harnesses'])})" if first else "",
                " ".join(map(str, r["seeds"])) if first else "",
                p,
                *cells,
            )
    t.caption = "* a harness the condition did not train on (transfer)"
    return t


def token_table(results: dict[str, dict]) -> Table:
    t = Table(title="GRPO's sequence tokens per harness, summed over seeds: merged vs one sample per call")
    for column in ("condition", "harness", "merged", "per call", "per call / merged"):
        t.add_column(column, justify="left" if column in ("condition", "harness") else "right")
    for condition, r in results.items():
        totals: dict[str, dict[str, int]] = {}
        for run in r["training_tokens"]:
            for harness, counts in run.items():
                for mode, n in counts.items():
                    totals.setdefault(harness, {}).setdefault(mode, 0)
                    totals[harness][mode] += n
        for harness, counts in totals.items():
            merged, per_call = counts.get("merged", 0), counts.get("per-call", 0)
            t.add_row(condition, harness, str(merged), str(per_call), f"{per_call / merged:.2f}" if merged else "-")
    return t


def verdict(results: dict[str, dict]) -> list[str]:
    lines = []
    cc = results.get("claude-code")
    if cc:
        rl, sft = _mean(cc["pass_at_1"]["rl"]["claude-code"]), _mean(cc["pass_at_1"]["sft"]["claude-code"])
        if rl is not None and sft is not None:
            lines.append(
                f"through Claude Code: SFT+RL − SFT = {rl - sft:+.1f} points over {len(cc['seeds'])} "
                "seed(s) (target +10, 3 seeds)"
            )
    mixed = results.get("mixed")
    for single in ("react", "claude-code"):
        if mixed and single in results:
            # paired: only the seeds both conditions ran
            seeds = [s for s in mixed["seeds"] if s in results[single]["seeds"]]
            m = _mean([mixed["pass_at_1"]["rl"][single][mixed["seeds"].index(s)] for s in seeds])
            o = _mean([results[single]["pass_at_1"]["rl"][single][results[single]["seeds"].index(s)] for s in seeds])
            if m is not None and o is not None:
                lines.append(
                    f"in {single}: mixed − {single}-only = {m - o:+.1f} points on seed(s) "
                    f"{' '.join(map(str, seeds))} (target >= 0)"
                )
    for condition, r in results.items():
        for h in HARNESSES:
            if h not in r["harnesses"]:
                rl, sft = _mean(r["pass_at_1"]["rl"][h]), _mean(r["pass_at_1"]["sft"][h])
                if rl is not None and sft is not None:
                    lines.append(f"transfer, {condition} → {h} (never trained on): SFT {sft:.1f}, SFT+RL {rl:.1f}")
    return lines


if __name__ == "__main__":
    main()
