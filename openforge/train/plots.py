"""RUN/report.png: the training reward per GRPO step, and held-out pass@1 (per policy, or per evaluation
during GRPO)."""

from __future__ import annotations

from pathlib import Path

from openforge.train.records import EvalRecord, StepRecord

POLICY_COLORS = {"base": "#999", "sft": "#69c", "rl": "#c63", "sft_more": "#9bd"}


def plot(path: Path, steps: list[StepRecord], evals: list[EvalRecord], by_policy: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.plot([s.step for s in steps], [s.reward for s in steps], marker=".", label="mean reward")
    left.plot([s.step for s in steps], [s.pass_rate for s in steps], marker=".", alpha=0.6, label="pass rate")
    left.set_xlabel("GRPO step")
    left.set_ylim(-0.05, 1.05)
    left.set_title("training reward per step (fresh instances)")
    left.legend()
    scored = [(e, e.pass_at_1) for e in evals if e.pass_at_1 is not None]
    faulted = [(e, e.pass_at_1_with_faults) for e, _ in scored if e.pass_at_1_with_faults is not None]
    if by_policy:
        labels = [e.label or "?" for e, _ in scored]
        width = 0.4 if faulted else 0.8
        xs = list(range(len(scored)))
        right.bar(
            [x - (width / 2 if faulted else 0) for x in xs],
            [100 * score for _, score in scored],
            width=width,
            color=[POLICY_COLORS.get(k, "#999") for k in labels],
            label="no faults",
        )
        if faulted:
            right.bar(
                [x + width / 2 for x in xs],
                [100 * (e.pass_at_1_with_faults or 0) for e, _ in scored],
                width=width,
                color=[POLICY_COLORS.get(k, "#999") for k in labels],
                hatch="//",
                alpha=0.6,
                label="with faults",
            )
            right.legend(fontsize=8)
        right.set_xticks(xs, labels)
        right.set_title(
            "held-out pass@1 (greedy): base → SFT → SFT+RL"
            + (" (sft_more: GRPO's time spent on SFT)" if "sft_more" in labels else ""),
            fontsize=9,
        )
    else:
        right.xaxis.set_major_locator(MaxNLocator(integer=True))
        right.plot(
            [e.after_steps for e, _ in scored],
            [100 * score for _, score in scored],
            marker="o",
            color="#c63",
            label="no faults",
        )
        if faulted:
            right.plot(
                [e.after_steps for e, _ in faulted],
                [100 * score for _, score in faulted],
                marker="s",
                linestyle="--",
                color="#c63",
                label="with faults",
            )
            right.legend(fontsize=8)
        right.set_xlabel("GRPO steps done")
        right.set_title("held-out pass@1 (greedy)")
    right.set_ylabel("held-out pass@1 (%)")
    right.set_ylim(-5, 105)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
