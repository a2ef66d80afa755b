#!/usr/bin/env bash
# GPU readiness: the paths that need an NVIDIA GPU, checked in one run (under 10 minutes on one GPU) with nothing
# but the repository — no weights are downloaded (it builds the tiny model) — printing one line per check:
#   PASS|FAIL|SKIP  <check>  <detail>
#
#   scripts/gpu-check.sh [--out DIR] [--steps N]
#
# Checks:
#   gpu              nvidia-smi sees a GPU
#   tiny-model       openforge model tiny (CPU) into DIR/model
#   vllm-serve       vLLM serves the tiny model (--logprobs-mode processed_logprobs --generation-config vllm)
#   vllm-logprobs    the vllm client's token ids and logprobs for a prompt agree with the embedded engine's
#                    recomputation of the same tokens (processed logprobs at temperature 1; max |diff| < 0.02)
#   proxy-react      openforge rollout --backend vllm:URL through the proxy, react harness, generated tasks: every
#                    episode graded (passed or failed, no infrastructure failure), zero continuity breaks
#   proxy-claude     the same with Claude Code (needs the harness bundle: openforge harness install)
#   oracle-react     oracle episodes through react in the sandbox: all pass (the harness/sandbox path on this node)
#   oracle-claude    oracle episodes through Claude Code: all pass
#   verl-grpo        examples/verl/run_grpo.sh shrunk to the tiny model: one GPU, FSDP actor, vLLM async rollout
#                    through OpenForge's agent loop, N steps (default 2)
#
# Prerequisites on the GPU machine (it cannot download them): this repository installed with its extras in the
# Python on PATH (or $PYTHON) — `pip install -e ".[verl,dev]" "verl[vllm,fsdp]==0.9.1"` —, a Docker daemon with
# the offline base image (scripts/prepare-sandboxes.sh) or bubblewrap for the local sandbox, and for the Claude
# Code checks the harness bundle. A missing prerequisite makes its checks SKIP, with the reason.
# Exit status: 0 when no check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/openforge-gpu-check}
STEPS=2
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
PYTHON=${PYTHON:-python3}
OF=("$PYTHON" -m openforge.cli)
PORT=${VLLM_PORT:-18000}
mkdir -p "$OUT"
rm -rf "${OUT:?}"/run-* "$OUT/verl"
FAILED=0
line() { printf '%-5s %-14s %s\n' "$1" "$2" "$3"; [ "$1" = FAIL ] && FAILED=1; return 0; }
have() { "$PYTHON" -c "import $1" >/dev/null 2>&1; }

SANDBOX=local
if docker image inspect openforge-base:bookworm >/dev/null 2>&1; then SANDBOX=docker; fi
export OPENFORGE_OWNER=gpu-check

# -- gpu --------------------------------------------------------------------------------------------------------
if gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1) && [ -n "$gpu" ]; then
  line PASS gpu "$gpu"
else
  line FAIL gpu "nvidia-smi found no GPU"
fi

# -- tiny model -------------------------------------------------------------------------------------------------
MODEL=$OUT/model
if [ -f "$MODEL/model.safetensors" ] || "${OF[@]}" model tiny "$MODEL" >"$OUT/tiny.log" 2>&1; then
  line PASS tiny-model "$MODEL"
else
  line FAIL tiny-model "see $OUT/tiny.log"
fi

# -- vLLM -------------------------------------------------------------------------------------------------------
VLLM_PID=""
stop_vllm() { [ -n "$VLLM_PID" ] && kill "$VLLM_PID" 2>/dev/null && wait "$VLLM_PID" 2>/dev/null; VLLM_PID=""; }
trap stop_vllm EXIT
if ! have vllm; then
  line SKIP vllm-serve "vllm is not importable by $PYTHON"
else
  "$PYTHON" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name tiny --port "$PORT" \
    --host 127.0.0.1 --logprobs-mode processed_logprobs --generation-config vllm --gpu-memory-utilization 0.3 \
    --max-model-len 8192 --enforce-eager >"$OUT/vllm.log" 2>&1 &
  VLLM_PID=$!
  for _ in $(seq 180); do
    curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
    kill -0 "$VLLM_PID" 2>/dev/null || break
    sleep 1
  done
  if curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then
    line PASS vllm-serve "$("$PYTHON" -c 'import vllm; print("vLLM", vllm.__version__)') on port $PORT"
  else
    line FAIL vllm-serve "not serving after 180 s; see $OUT/vllm.log"
    stop_vllm
  fi
fi
URL=http://127.0.0.1:$PORT

if [ -n "$VLLM_PID" ]; then
  detail=$("$PYTHON" - "$MODEL" "$URL" <<'PY' 2>"$OUT/logprobs.log"
import asyncio, sys
import torch
from openforge.core import SamplingParams
from openforge.inference import GenerationContext, make_backend
from openforge.models import ModelDir

model_dir, url = ModelDir(sys.argv[1]), sys.argv[2]
prompt = model_dir.encode_text("Create the file /app/notes.txt and write hello into it.")
result = asyncio.run(make_backend(f"vllm:{url}", model_dir).generate(
    prompt, SamplingParams(temperature=1.0, max_tokens=32, seed=0), GenerationContext()))
model = model_dir.load_model()
ids = torch.tensor([prompt + result.output_ids])
with torch.no_grad():
    logits = model(ids).logits[0, len(prompt) - 1:-1].float()
ref = torch.log_softmax(logits, -1).gather(1, torch.tensor(result.output_ids)[:, None])[:, 0]
diff = (ref - torch.tensor(result.logprobs)).abs().max().item()
print(f"{len(result.output_ids)} tokens, max |logprob diff| {diff:.4f}")
sys.exit(0 if diff < 0.02 else 1)
PY
  ) && line PASS vllm-logprobs "$detail" || line FAIL vllm-logprobs "${detail:-see $OUT/logprobs.log}"
else
  line SKIP vllm-logprobs "no vLLM server"
fi

# -- proxy + harnesses ------------------------------------------------------------------------------------------
TASKS=$OUT/tasks
rm -rf "$TASKS"
"${OF[@]}" tasks generate "$TASKS" --family create_file,append_line --n 2 --split train >/dev/null 2>&1
# `check_run RUN`: every final episode graded; zero continuity breaks; prints "N episodes, outcomes, breaks"
check_run() {
  "$PYTHON" - "$1" "$2" <<'PY'
import sys
from openforge.store import TrajectoryStore
run, need_pass = sys.argv[1], sys.argv[2] == "pass"
with TrajectoryStore.open(run) as store:
    finals = [e for e in store.list_episodes() if e.metadata.get("final")]
    outcomes = [e.outcome.value for e in finals]
    breaks = [c.break_reason for e in finals for c in store.list_calls(e.id) if c.break_reason and not c.side_call]
ok = finals and all(o in ("passed", "failed") for o in outcomes) and not breaks
if need_pass:
    ok = ok and all(o == "passed" for o in outcomes)
print(f"{len(finals)} episodes: {', '.join(sorted(set(outcomes)))}; continuity breaks: {len(breaks)} {sorted(set(breaks))}")
sys.exit(0 if ok else 1)
PY
}
harness_run() {  # NAME HARNESS BACKEND EXPECT
  local name=$1 harness=$2 backend=$3 expect=$4 run=$OUT/run-$1
  if [ "$harness" = claude-code ] && ! "$PYTHON" -c "import sys; from openforge.harness import bundle_status; sys.exit(0 if bundle_status(None).get('claude-code') else 1)" 2>/dev/null; then
    line SKIP "$name" "Claude Code is not in the harness bundle (openforge harness install --harness claude-code)"
    return
  fi
  if ! "${OF[@]}" rollout --tasks "$TASKS" --harness "$harness" --sandbox "$SANDBOX" --samples 1 --concurrency 2 \
      --model "$MODEL" --backend "$backend" --run "$run" --max-attempts 1 --max-new-tokens 256 \
      --image-map debian:bookworm-slim=openforge-base:bookworm >"$run.log" 2>&1; then
    line FAIL "$name" "rollout failed; see $run.log"
    return
  fi
  detail=$(check_run "$run" "$expect" 2>>"$run.log") && line PASS "$name" "$detail ($SANDBOX sandbox)" \
    || line FAIL "$name" "${detail:-see $run.log}"
}
if [ -n "$VLLM_PID" ]; then
  harness_run proxy-react react "vllm:$URL" graded
  harness_run proxy-claude claude-code "vllm:$URL" graded
else
  line SKIP proxy-react "no vLLM server"
  line SKIP proxy-claude "no vLLM server"
fi
harness_run oracle-react react oracle pass
harness_run oracle-claude claude-code oracle pass
stop_vllm

# -- veRL -------------------------------------------------------------------------------------------------------
if ! have verl || ! have vllm; then
  line SKIP verl-grpo "verl and vllm must be importable by $PYTHON (pip install \"verl[vllm,fsdp]==0.9.1\")"
else
  V=$OUT/verl
  mkdir -p "$V"
  "${OF[@]}" verl dataset --tasks "$TASKS" --harness react --split train --out "$V/train.parquet" >"$V/dataset.log" 2>&1
  cp "$V/train.parquet" "$V/heldout.parquet"
  cat >"$V/agent_loop.yaml" <<YAML
- name: openforge
  _target_: openforge.train.verl.agent_loop.OpenForgeAgentLoop
  openforge:
    run_dir: $V/runs
    model: $MODEL
    tasks: [$TASKS]
    sandbox: $SANDBOX
    image_map: {"debian:bookworm-slim": "openforge-base:bookworm"}
    harness_options: {react: {max_steps: 2, tools: [bash], system_prompt: ""}}
    mode: merged
    max_attempts: 1
    agent_timeout_s: 120
    max_new_tokens: 256
YAML
  if DATA=$V MODEL=$MODEL NGPUS=1 PATH="$(dirname "$(command -v "$PYTHON")"):$PATH" timeout 420 \
      bash examples/verl/run_grpo.sh \
      data.train_batch_size=2 data.max_prompt_length=1024 data.max_response_length=512 \
      actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192 \
      actor_rollout_ref.actor.fsdp_config.optimizer_offload=false \
      actor_rollout_ref.rollout.n=2 actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
      actor_rollout_ref.rollout.gpu_memory_utilization=0.3 actor_rollout_ref.rollout.prompt_length=1024 \
      actor_rollout_ref.rollout.response_length=512 actor_rollout_ref.rollout.agent.num_workers=1 \
      actor_rollout_ref.rollout.agent.agent_loop_config_path="$V/agent_loop.yaml" \
      trainer.total_training_steps="$STEPS" trainer.save_freq=-1 trainer.test_freq=-1 \
      trainer.default_local_dir="$V/checkpoints" trainer.experiment_name=gpu-check >"$V/grpo.log" 2>&1; then
    steps=$(grep -c "critic/score/mean" "$V/grpo.log" || true)
    line PASS verl-grpo "$steps step(s) logged; score: $(grep -o 'critic/score/mean:[^ ]*' "$V/grpo.log" | tr '\n' ' ')"
  else
    line FAIL verl-grpo "see $V/grpo.log (last: $(tail -1 "$V/grpo.log" | cut -c1-160))"
  fi
fi
exit $FAILED
