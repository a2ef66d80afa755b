#!/usr/bin/env bash
# GRPO with veRL 0.9.1 on one 8-GPU node: vLLM rollout, FSDP actor, n=8 episodes per task, Qwen3-8B, every
# rollout a real harness episode run by OpenForge's agent loop (examples/verl/agent_loop.yaml).
# NOT RUN in the task that wrote it (no GPU was available): the keys are checked against veRL 0.9.1's config.
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=${DATA:-/data/openforge/verl}
MODEL=${MODEL:-/data/models/Qwen3-8B}
NGPUS=${NGPUS:-8}
# LoRA (OpenForge's `lora:`): LORA_RANK > 0 trains a rank-R adapter (veRL's actor_rollout_ref.model.lora_*; the
# rollout loads the weights as safetensors, as veRL's LoRA recipe does). 0 trains every weight.
LORA_RANK=${LORA_RANK:-0}
LORA_ALPHA=${LORA_ALPHA:-$((2 * LORA_RANK))}
LORA_TARGETS=${LORA_TARGETS:-all-linear}
LORA=()
if [ "$LORA_RANK" -gt 0 ]; then
  LORA=(
    actor_rollout_ref.model.lora_rank="$LORA_RANK"
    actor_rollout_ref.model.lora_alpha="$LORA_ALPHA"
    actor_rollout_ref.model.target_modules="$LORA_TARGETS"
    actor_rollout_ref.rollout.load_format=safetensors
    actor_rollout_ref.rollout.layered_summon=true
  )
fi
# Asynchronous GRPO (OpenForge's `rl.max_staleness: K`): K > 0 runs veRL's v1 colocated asynchronous trainer,
# drops a group whose trajectories span more than K weight versions (trainer.v1.sampler.max_off_policy_*), and
# corrects with a truncated token-level importance weight min(pi_old / pi_rollout, C) against the recomputed
# proximal (old) policy (algorithm.rollout_correction; C = IS_CAP). 0 is veRL's synchronous trainer.
MAX_STALENESS=${MAX_STALENESS:-0}
IS_CAP=${IS_CAP:-2.0}
ASYNC=()
if [ "$MAX_STALENESS" -gt 0 ]; then
  ASYNC=(
    trainer.v1.trainer_mode=colocate_async
    trainer.v1.sampler.max_off_policy_threshold="$MAX_STALENESS"
    trainer.v1.sampler.max_off_policy_strategy=drop
    algorithm.rollout_correction.rollout_is=token
    algorithm.rollout_correction.rollout_is_threshold="$IS_CAP"
    algorithm.rollout_correction.bypass_mode=false
  )
fi

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=false \
  data.train_files="$DATA/train.parquet" \
  data.val_files="$DATA/heldout.parquet" \
  data.train_batch_size=32 \
  data.max_prompt_length=16384 \
  data.max_response_length=16384 \
  data.filter_overlong_prompts=true \
  data.return_raw_chat=true \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.enable_gradient_checkpointing=true \
  actor_rollout_ref.actor.strategy=fsdp \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  actor_rollout_ref.actor.use_dynamic_bsz=true \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40000 \
  actor_rollout_ref.actor.use_kl_loss=false \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.actor.fsdp_config.param_offload=false \
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=true \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.calculate_log_probs=true \
  actor_rollout_ref.rollout.logprobs_mode=processed_logprobs \
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.prompt_length=16384 \
  actor_rollout_ref.rollout.response_length=16384 \
  actor_rollout_ref.rollout.agent.num_workers=8 \
  actor_rollout_ref.rollout.agent.default_agent_loop=openforge \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$PWD/examples/verl/agent_loop.yaml" \
  trainer.use_v1=true \
  trainer.n_gpus_per_node="$NGPUS" \
  trainer.nnodes=1 \
  trainer.total_epochs=3 \
  trainer.save_freq=20 \
  trainer.test_freq=10 \
  trainer.val_before_train=false \
  trainer.logger='["console"]' \
  trainer.project_name=openforge \
  trainer.experiment_name=grpo-qwen3-8b-harnesses \
  "${LORA[@]}" \
  "${ASYNC[@]}" \
  "$@"
