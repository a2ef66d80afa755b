"""`openforge eval`: a rollout run and its report. With faults, the episodes run without them in RUN and with
them in RUN/faults, and the report compares the two (`robustness.py`). With `validate_tasks`, the tasks are
checked against the reward hacks first (`openforge.rollout.run.validated_tasks`), and the report says what was
left out."""

from __future__ import annotations

from rich.console import Console

from openforge.analysis import analyze_run, write_analysis
from openforge.eval.report import write_report
from openforge.eval.robustness import FAULTS_DIR
from openforge.rollout.config import RolloutConfig
from openforge.rollout.orchestrator import RolloutSummary
from openforge.rollout.run import check_graded, run_episodes, validated_tasks
from openforge.store import TrajectoryStore


def run_eval(config: RolloutConfig, console: Console) -> list[RolloutSummary]:
    """The run's episodes (both runs' with faults), the behaviour analysis and RUN/report.{md,json}; the
    runs' summaries. RolloutInterrupted if Ctrl-C stopped a run (no report then); NothingGradedError, after
    the report, when no episode of the last run could be graded."""
    config, validation = validated_tasks(config, console)
    faults = config.faults
    runs = (
        {"": config}
        if faults is None
        else {
            " (without faults)": config.model_copy(update={"faults": None}),
            " (with faults)": config.model_copy(update={"run": config.run / FAULTS_DIR}),
        }
    )
    summaries = [run_episodes(run, console, label) for label, run in runs.items()]
    analysis = analyze_run(config.run)
    write_analysis(analysis, config.run)
    with TrajectoryStore.open(config.run) as store:
        write_report(
            store,
            config.run,
            console,
            analysis=analysis,
            faults=faults.text() if faults else None,
            validation=validation,
        )
    console.print(f"report: {config.run / 'report.md'}, {config.run / 'report.json'}, {config.run / 'analysis.png'}")
    check_graded(summaries[-1])
    return summaries
