"""`openforge train --config FILE`: what a training run is (YAML, validated; errors name the field and the fix).

    run: runs/my-run
    model: tiny                       # or a model directory (tokenizer, chat template, weights)
    backend: embedded                 # the RL stage pushes weights into the proxy in process
    tasks: {families: [create_file, append_line]}     # or {dirs: [examples/tasks]}
    harnesses: [react]                # several are mixed in one run: GRPO groups are (step, task, harness)
    sandbox: docker                   # docker | local | kubernetes | auto
    max_new_tokens: 256               # per model call, every episode of the run (EpisodeSettings)
    sft: {teacher: oracle, demos: 32, steps: 100}     # optional
    rl: {steps: 20, prompts: 8, group: 4, eval_every: 5}
    lora: {rank: 8, alpha: 16, target_modules: [q_proj, v_proj]}   # optional: SFT and GRPO train an adapter
    loggers: [tensorboard, {kind: wandb, project: my-team}]   # RUN/metrics.jsonl is always written

Where and how the run's episodes run (harness options, sandbox, image map, token cap, attempts, proxy, ...) are
the `EpisodeSettings` every config that runs episodes embeds (`openforge.rollout.settings`): top-level keys here.
See `examples/train/*.yaml` and the README section "openforge train". `openforge quickstart` is this config's
preset `openforge.train.quickstart.QUICKSTART`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openforge.config import moved_keys
from openforge.faults import FaultSpec, parse_fault_spec
from openforge.models.tiny import TinyModelSpec
from openforge.rollout.settings import EpisodeSettings, HarnessNames, ServingSettings, TaskValidationSettings
from openforge.tasks.images import DEFAULT_IMAGE_MAP
from openforge.train.trainer_config import GRPOConfig, LoRASettings, SFTConfig, SFTOptimization

if TYPE_CHECKING:
    from openforge.harness.react import ReactAdapter

# Keys that moved: old dotted path → new (the old one still works, with a deprecation warning naming the new).
MOVED_KEYS = {"rl.max_new_tokens": "max_new_tokens"}


class TaskSource(BaseModel):
    """Exactly one of `dirs` (Harbor task directories or roots: the `train` split trains, `heldout` evaluates)
    or `families` (generated: fresh training instances every RL step, held-out instances from the generator's
    held-out split)."""

    model_config = ConfigDict(extra="forbid")

    dirs: list[Path] | None = None
    families: list[str] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TaskSource:
        if (self.dirs is None) == (self.families is None):
            raise ValueError("give exactly one of tasks.dirs (task directories) or tasks.families (generated)")
        if self.dirs is not None and not self.dirs:
            raise ValueError("tasks.dirs is empty: list task directories or roots holding them")
        if self.families is not None:
            from openforge.tasks import get_families

            get_families(self.families)  # unknown names raise ValueError listing the known ones
        return self


class SFTSettings(SFTOptimization):
    """The first stage: record a teacher through the proxy and the run's harnesses, SFT on its successes for
    `steps` optimizer steps (the optimisation and its schedule: `SFTOptimization`, the SFT trainer's own settings).
    `demos`: with families, generated teacher instances; with dirs, episodes per (train task, harness).

    `teacher`: any backend spec. A token-level teacher (`oracle`, `embedded`, `vllm:URL`, `sglang:URL`,
    `scripted:FILE`) must share the student's tokenizer (`teacher_model`, default the run's model, is checked);
    a teacher behind an API (`openai:URL`, `anthropic:URL`) is recorded as messages and every sample is
    re-rendered with the student's chat template and tokenizer.

    The paper's recipe: `rollouts_per_task` teacher episodes per (task, harness) (default: `demos` with dirs, 1
    with families), keep those with reward >= `min_reward`, drop near-identical trajectories of a task
    (`dedup_similarity`: 0..1, None = keep all), keep at most `max_per_task` per task."""

    teacher: str = "oracle"  # any backend spec (see above)
    teacher_model: Path | None = None  # a token-level teacher's model directory (default: the run's model)
    demos: int = Field(default=32, ge=1)
    rollouts_per_task: int | None = Field(default=None, ge=1)
    min_reward: float = 1.0
    dedup_similarity: float | None = Field(default=None, gt=0.0, le=1.0)
    max_per_task: int | None = Field(default=None, ge=1)
    steps: int = Field(default=100, ge=1)
    # The same-compute control: after GRPO, continue SFT from the SFT checkpoint (same demos and schedule) for
    # as many steps as fit in GRPO's wall time, and evaluate it as `sft_more` beside the other policies — so a
    # gain can be told apart from more training. Needs `evaluation: policies`.
    control: bool = False

    @model_validator(mode="after")
    def _teacher_model_is_token_level(self) -> SFTSettings:
        from openforge.inference import is_message_level

        if self.teacher_model is not None and is_message_level(self.teacher):
            raise ValueError(
                f"sft.teacher_model names the model directory of a token-level teacher; {self.teacher!r} "
                "is a model behind an API, recorded as messages and re-rendered for the student: drop "
                "sft.teacher_model"
            )
        return self

    def trainer_config(self, steps: int, seed: int) -> SFTConfig:
        """The SFT trainer's settings: this stage's optimisation, for `steps` steps, batches drawn with `seed`."""
        return SFTConfig(**self.model_dump(include=set(SFTOptimization.model_fields)), steps=steps, seed=seed)


class RLSettings(GRPOConfig):
    """GRPO (the update: `GRPOConfig`, the GRPO trainer's own settings; `temperature` is also what GRPO's
    episodes are sampled at). Each step: `prompts` training tasks (fresh instances with families) × every
    harness × `group` episodes, one update, a checkpoint, the new weights pushed into the proxy. `seconds`:
    stop starting steps after this wall-clock budget. `eval_every`: greedy held-out pass@1 every so many steps
    (and before the first and after the last); `eval_instances`: held-out instances (families) or at most so
    many held-out tasks (dirs). `drop_after`: see `openforge.train.difficulty`. The token cap is the run's
    `max_new_tokens` (once `rl.max_new_tokens`)."""

    steps: int = Field(default=10, ge=0)
    seconds: float | None = Field(default=None, gt=0)
    prompts: int = Field(default=8, ge=1)
    group: int = Field(default=4, ge=2)
    eval_every: int = Field(default=5, ge=1)  # with `evaluation: curve`
    eval_instances: int = Field(default=32, ge=1)
    concurrency: int = Field(default=4, ge=1)  # sandboxed episodes at once (the in-process path runs all)
    # Difficulty during training (task directories): drop a task after this many consecutive visits on which all
    # of its graded episodes passed (saturated) or none did (impossible); None keeps every task.
    drop_after: int | None = Field(default=None, ge=1)


class LoggerSettings(BaseModel):
    """A metric logger (`openforge.train.loggers`): `kind` tensorboard | wandb | mlflow | trackio; `project`
    (wandb/trackio project, MLflow experiment); `name` of the run (default: the run directory's name);
    `options` for the logger (e.g. wandb `{mode: online}`, mlflow `{tracking_uri: http://...}`). A bare name
    (`loggers: [tensorboard]`) is a logger with the defaults."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["tensorboard", "wandb", "mlflow", "trackio"]
    project: str = "openforge"
    name: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class FaultSettings(BaseModel):
    """Faults injected into the environment (`openforge.faults`; a spec like `transient:0.5,missing_dir:0.5`
    or its mapping). `rl`: into GRPO's episodes; `eval`: the held-out evaluations run a second time with
    these (pass@1 with and without faults). The teacher never meets faults: its demonstrations are the happy
    path. `faults: SPEC` (one spec) sets both."""

    model_config = ConfigDict(extra="forbid")

    rl: FaultSpec | None = None
    eval: FaultSpec | None = None

    @field_validator("rl", "eval", mode="before")
    @classmethod
    def _spec(cls, v: Any) -> Any:
        return parse_fault_spec(v)


class TrainConfig(EpisodeSettings, ServingSettings, TaskValidationSettings):
    """A training run: the `EpisodeSettings` of every episode it runs (teacher, GRPO, evaluation), and what it
    trains; the tasks it trains on are checked against the reward-hack suite before anything else
    (`validate_tasks`, on by default here; `drop_hackable_tasks`: `TaskValidationSettings`). `evaluation`:
    `curve` measures greedy held-out pass@1 during GRPO (before the first step, every `rl.eval_every` steps and
    after the last: RUN/evals.jsonl); `policies` measures it once per policy after training — the base model, the
    SFT checkpoint, the RL checkpoint (and `sft_more` with `sft.control`) — as the quickstart reports it.
    `image_map`: laid over the offline base image's map (`episode_image_map`)."""

    run: Path = Path("runs/train")
    seed: int = 0
    # `tiny` (built into RUN/model), a packaged model (`smollm2-135m`: fetched and imported into RUN/model), a
    # model directory or a Hub id
    model: str = "tiny"
    # `model: tiny`'s shape (TinyModelSpec fields, e.g. `{sliding_window: 96}`); its seed is the run's `seed`
    tiny_model: TinyModelSpec | None = None
    tasks: TaskSource
    harnesses: HarnessNames = Field(default_factory=lambda: ["react"])
    # the held-out evaluation's harnesses (default: `harnesses`); one that is not trained on measures transfer
    eval_harnesses: HarnessNames | None = None
    # harnesses only the trained policies (SFT, SFT+RL) are also evaluated in, without faults: transfer from the
    # harnesses they learned through, at a fraction of evaluating every policy everywhere
    transfer_harnesses: HarnessNames | None = None
    sft: SFTSettings | None = None
    rl: RLSettings = Field(default_factory=RLSettings)
    # SFT and GRPO train a LoRA adapter (`LoRASettings`); the run's checkpoints hold it and the merged weights
    lora: LoRASettings | None = None
    # each decoder layer recomputes its activations in the backward pass instead of keeping them: a real model's
    # step in a fraction of the memory for about a quarter more compute (benchmarks/train_memory.py)
    activation_checkpointing: bool = False
    evaluation: Literal["curve", "policies"] = "curve"
    loggers: list[LoggerSettings] = Field(default_factory=list)
    faults: FaultSettings | None = None
    validate_tasks: bool = True  # a hackable task trains a hack: checked unless turned off

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        return moved_keys(data, MOVED_KEYS)

    @field_validator("loggers", mode="before")
    @classmethod
    def _logger_names(cls, v: Any) -> Any:
        return [{"kind": item} if isinstance(item, str) else item for item in v] if isinstance(v, list) else v

    @field_validator("tiny_model", mode="before")
    @classmethod
    def _tiny_seed_is_the_runs(cls, v: Any) -> Any:
        if isinstance(v, dict) and "seed" in v:
            raise ValueError("the tiny model's seed is the run's: set `seed`, not `tiny_model.seed`")
        return v

    @model_validator(mode="after")
    def _tiny_model_needs_tiny(self) -> TrainConfig:
        if self.tiny_model is not None and self.model != "tiny":
            raise ValueError(
                f"tiny_model shapes the model built for `model: tiny`, but model is {self.model!r}: drop tiny_model"
            )
        return self

    def tiny_model_spec(self) -> TinyModelSpec:
        return (self.tiny_model or TinyModelSpec()).model_copy(update={"seed": self.seed})

    @field_validator("faults", mode="before")
    @classmethod
    def _one_spec_for_both(cls, v: Any) -> Any:
        """`faults: SPEC` (a string, or a mapping of kinds) stands for `{rl: SPEC, eval: SPEC}`."""
        if isinstance(v, str) or (isinstance(v, dict) and v and not set(v) <= {"rl", "eval"}):
            spec = parse_fault_spec(v)
            return {"rl": spec, "eval": spec}
        return v

    @property
    def rl_faults(self) -> FaultSpec | None:
        return self.faults.rl if self.faults else None

    @property
    def eval_faults(self) -> FaultSpec | None:
        return self.faults.eval if self.faults else None

    @model_validator(mode="after")
    def _control_needs_policies(self) -> TrainConfig:
        if self.sft is not None and self.sft.control and self.evaluation != "policies":
            raise ValueError(
                "sft.control compares policies after training: set `evaluation: policies` (or drop sft.control)"
            )
        return self

    @model_validator(mode="after")
    def _transfer_is_elsewhere(self) -> TrainConfig:
        if not self.transfer_harnesses:
            return self
        both = [h for h in self.transfer_harnesses if h in self.heldout_harnesses]
        if both:
            raise ValueError(
                f"transfer_harnesses {both} are already in eval_harnesses (every policy is evaluated there): "
                "drop them from one of the two"
            )
        if self.evaluation != "policies":
            raise ValueError("transfer_harnesses evaluates the trained policies: set `evaluation: policies`")
        return self

    @model_validator(mode="after")
    def _drop_after_needs_dirs(self) -> TrainConfig:
        if self.rl.drop_after is not None and self.tasks.families is not None:
            raise ValueError(
                "rl.drop_after drops task directories that stopped carrying signal; generated families "
                "draw fresh instances every step (none is visited twice): use tasks.dirs, or drop "
                "rl.drop_after"
            )
        return self

    @field_validator("backend")
    @classmethod
    def _embedded_only(cls, v: str) -> str:
        if v != "embedded":
            raise ValueError(
                f"backend {v!r} cannot train here: the RL stage updates the weights in this process and pushes them "
                "into the embedded backend, so use `backend: embedded`. To train with vLLM or SGLang, use veRL "
                "(README: 'Training with veRL'). A teacher on another backend goes in `sft.teacher`."
            )
        return v

    @field_validator("model")
    @classmethod
    def _model_dir(cls, v: str) -> str:
        from openforge.models.hub import ModelRef
        from openforge.models.packaged import PACKAGED_MODELS

        if v in ("tiny", *PACKAGED_MODELS):
            return v
        if not ModelRef.parse(v).is_hub and not (Path(v) / "config.json").is_file():
            raise ValueError(
                f"{v!r} is not a model directory (no config.json): give a model directory, a Hugging "
                f"Face Hub id (ORG/NAME[@REVISION]), a packaged model ({', '.join(PACKAGED_MODELS)}: fetched "
                "and imported into RUN/model), or `tiny` to build the tiny model into RUN/model"
            )
        return v

    @property
    def in_process(self) -> bool:
        """Generated families with only the react harness run in this process (`run_family_episodes`); all
        else runs through the orchestrator in sandboxes."""
        return self.tasks.families is not None and self.harnesses == ["react"]

    @property
    def heldout_harnesses(self) -> list[str]:
        """The harnesses the held-out evaluation runs (`eval_harnesses`, default `harnesses`)."""
        return self.eval_harnesses or self.harnesses

    @property
    def in_process_eval(self) -> bool:
        """The held-out evaluation runs in this process (generated families, the react harness alone)."""
        return self.in_process and self.heldout_harnesses == ["react"]

    def episode_image_map(self) -> dict[str, str]:
        """The image map of the run's sandboxed episodes: `image_map` over the offline base image's
        (`debian:bookworm-slim` → `openforge-base:bookworm`, what generated tasks are FROM), so that a run on
        this machine needs no registry unless its config says otherwise."""
        return {**DEFAULT_IMAGE_MAP, **self.image_map}

    def react(self) -> ReactAdapter:
        """The react harness as this run configures it (what the in-process episodes run: the same options, and
        the same rule for the token cap, as a sandboxed react episode)."""
        from openforge.harness import get_adapter
        from openforge.harness.react import ReactAdapter

        adapter = get_adapter("react", **self.adapter_options("react"))
        assert isinstance(adapter, ReactAdapter)  # the registry's `react`
        return adapter
