#!/usr/bin/env bash
# Launch one Fathom-Vaidya training stage with verl 0.9.1 (python -m verl.trainer.main_ppo).
#
#   scripts/train_verl.sh configs/verl/stage1_mcq.yaml [key=value ...]
#   RUBRICSTREE_JUDGE_URL=http://judge:8000 scripts/train_verl.sh configs/verl/stage3_clinical_rubric.yaml \
#       actor_rollout_ref.model.path=/ckpt/fv-8b-diag trainer.n_gpus_per_node=8
#   scripts/train_verl.sh configs/verl/stage2_error_rubric.yaml --cfg job   # print the composed config only
#
# CONFIG is a Hydra config on top of verl's ppo_trainer.yaml; extra arguments are Hydra overrides
# (prefix keys verl does not have with '+'). Training needs a GPU machine: verl's trainer runs a
# vLLM rollout engine and FSDP workers with FlashAttention-2 (install: pip install -e ".[train,verl,gpu]",
# then pip install "flash-attn==2.8.3" --no-build-isolation; docs/verl.md); the driver, torch's CUDA
# build, vLLM's kernels and flash-attn are checked before anything starts (training/env_check.py).
# Stages 2 and 3 also need a judge server (scripts/serve_judge.sh) at $RUBRICSTREE_JUDGE_URL.
# Data: $RUBRICSTREE_VERL_DATA (default ./data/verl) holds stageN_{train,val}.parquet
# (python -m training.verl_data --help).
# Each stage ends with a Hugging Face export of its last checkpoint, <trainer.default_local_dir>/hf
# (python -m training.verl_export), the next stage's actor_rollout_ref.model.path; stages 2-3 are
# refused without one (or an explicit path).
set -euo pipefail

CONFIG=${1:?usage: scripts/train_verl.sh CONFIG.yaml [hydra overrides ...] [--debug]}
shift
# --debug is ours (the preflight's traceback), not Hydra's: verl's main_ppo would refuse it
DEBUG=()
ARGS=()
for a in "$@"; do if [ "$a" = --debug ]; then DEBUG=(--debug); else ARGS+=("$a"); fi; done
set -- ${ARGS[@]+"${ARGS[@]}"}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -f "$CONFIG" ] || { echo "train_verl: no such config: $CONFIG" >&2; exit 2; }
CONFIG_DIR=$(cd "$(dirname "$CONFIG")" && pwd)
CONFIG_NAME=$(basename "$CONFIG" .yaml)

PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3

# absolute, so that every Ray worker finds the files whatever its working directory (a relative
# value is read from where you run this, as you would expect, not from the repository root)
RUBRICSTREE_VERL_DATA=${RUBRICSTREE_VERL_DATA:-$ROOT/data/verl}
case "$RUBRICSTREE_VERL_DATA" in /*|*://*) ;; *) RUBRICSTREE_VERL_DATA=$PWD/$RUBRICSTREE_VERL_DATA ;; esac
export RUBRICSTREE_VERL_DATA

only_print=0
for a in "$@"; do
  case "$a" in --cfg|--cfg=*|--help|-h|--info|--info=*) only_print=1 ;; esac
done

# stages 2-3 start from the previous stage's export: the config reads it from FV_STAGE1_MODEL /
# FV_STAGE2_MODEL (no default, so never the base model by accident); say how to pass it
NEEDS=$(grep -o 'path: \${oc.env:FV_STAGE[0-9]_MODEL}' "$CONFIG" | grep -o 'FV_STAGE[0-9]_MODEL' || true)
# (`--cfg job` only prints the config: no start model needed)
if [ "$only_print" = 0 ] && [ -n "$NEEDS" ] && [ -z "${!NEEDS:-}" ] \
   && ! grep -q '^actor_rollout_ref.model.path=' <<< "$(printf '%s\n' "$@")"; then
  echo "train_verl: $CONFIG_NAME starts from the previous stage's checkpoint and none is given: pass" \
       "actor_rollout_ref.model.path=<previous stage>/hf (its Hugging Face export, which this script writes at" \
       "the end of every stage) or set $NEEDS; actor_rollout_ref.model.path=Qwen/Qwen3-8B starts from the base" \
       "model on purpose" >&2
  exit 2
fi
START_ARGS=("$@")
[ -n "$NEEDS" ] && [ -n "${!NEEDS:-}" ] && START_ARGS+=("actor_rollout_ref.model.path=${!NEEDS}")
for a in "${START_ARGS[@]}"; do  # a local folder as the start: a Hugging Face export, not a raw checkpoint
  case "$a" in actor_rollout_ref.model.path=/*|actor_rollout_ref.model.path=.*|actor_rollout_ref.model.path=*/hf)
    if [ ! -f "${a#*=}/config.json" ]; then
      echo "train_verl: ${a#*=} has no config.json: not a Hugging Face export (a verl stage writes" \
           "<trainer.default_local_dir>/hf when it ends; python -m training.verl_export CHECKPOINT_DIR makes one)" >&2
      exit 2
    fi ;;
  esac
done

"$PY" -c "import verl" 2>/dev/null || { echo "train_verl: verl is not installed for $PY: pip install -e '.[verl]'" >&2; exit 2; }

if [ "$only_print" = 0 ]; then
  HAS_GPU=1
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    HAS_GPU=0
    echo "train_verl: no GPU found. verl's trainer needs GPUs (vLLM rollout + FSDP);" \
         "use '--cfg job' to check the config here, or set RUBRICSTREE_ALLOW_NO_GPU=1 to try anyway." >&2
    [ "${RUBRICSTREE_ALLOW_NO_GPU:-0}" = 1 ] || exit 2
  fi
  # verl's trainer entry point and its default v1 trainer import packages verl does not declare
  # (TransferQueue, cachetools, fastapi, uvicorn): fail here, not inside a Ray actor
  if ! err=$("$PY" -c "import verl.trainer.main_ppo, verl.trainer.ppo.v1.trainer_base" 2>&1); then
    echo "train_verl: verl's trainer does not import for $PY ($(tail -n 1 <<<"$err")):" \
         "pip install -e '.[train,verl,gpu]'" >&2
    [ "${RUBRICSTREE_ALLOW_NO_GPU:-0}" = 1 ] || exit 2
  fi
  # vLLM (the rollout engine), its kernels and sleep-mode allocator; flash-attn, which verl 0.9.1 loads
  # the actor with unless model.override_config.attn_implementation says otherwise (use_remove_padding
  # packs sequences for its varlen kernel; neither verl[vllm] nor our extras install it); on a GPU
  # machine the driver against torch's CUDA build (python -m training.env_check): without them the
  # run dies after Ray and the workers have started
  CHECK=(--verl)
  grep -q 'attn_implementation' "$CONFIG" <(printf '%s\n' "$@") || CHECK+=(--flash-attn)
  [ "$HAS_GPU" = 1 ] && CHECK+=(--gpu)
  if ! (cd "$ROOT" && "$PY" -m training.env_check "${CHECK[@]}"); then
    echo "train_verl: this machine cannot run verl's trainer as configured (see above); nothing was started" >&2
    [ "${RUBRICSTREE_ALLOW_NO_GPU:-0}" = 1 ] || exit 2
  fi
  if grep -q 'RUBRICSTREE_JUDGE_URL' "$CONFIG" && [ -z "${RUBRICSTREE_JUDGE_URL:-}" ] \
     && ! grep -q 'judge\.url=' <<< "$(printf '%s\n' "$@")"; then
    echo "train_verl: $CONFIG_NAME scores with a judge: set RUBRICSTREE_JUDGE_URL (scripts/serve_judge.sh)" \
         "or pass reward.custom_reward_function.reward_kwargs.judge.url=..." >&2
    exit 2
  fi
fi

# wandb on a node with no key and no login: offline (a run folder for `wandb sync`), said here
if [ "$only_print" = 0 ] && [ -z "${WANDB_API_KEY:-}" ] && [ -z "${WANDB_MODE:-}" ] \
   && ! grep -qs 'api.wandb.ai' "$HOME/.netrc"; then
  export WANDB_MODE=offline
  echo "train_verl: no WANDB_API_KEY: wandb (if in trainer.logger) logs offline (WANDB_MODE=offline; wandb sync later)" >&2
fi

cd "$ROOT"
if [ "$only_print" = 1 ]; then
  exec "$PY" -m verl.trainer.main_ppo --config-path "$CONFIG_DIR" --config-name "$CONFIG_NAME" "$@"
fi
# where verl saves (trainer.default_local_dir, relative to the repository root): the stage ends with
# a Hugging Face export of its last actor checkpoint in $CKPT/hf (training/verl_export.py, verl's
# model merger), what the next stage (actor_rollout_ref.model.path=$CKPT/hf), eval and vllm serve load.
# The preflight checks first what would fail only later (training/verl_preflight.py): no checkpoint
# saved (save_freq <= 0), a judge that does not answer, a start folder without weights, a rerun
# whose new start model verl's resume_mode=auto would ignore for the old run's checkpoint.
CKPT=$("$PY" -m training.verl_preflight "$CONFIG_DIR/$CONFIG_NAME.yaml" "$@" ${DEBUG[@]+"${DEBUG[@]}"} | tail -n 1) || {
  echo "train_verl: $CONFIG_NAME did not pass the preflight (above); nothing was started" >&2; exit 2; }
"$PY" -m verl.trainer.main_ppo --config-path "$CONFIG_DIR" --config-name "$CONFIG_NAME" "$@"
echo "train_verl: exporting the last checkpoint in $CKPT to $CKPT/hf (verl.model_merger)" >&2
"$PY" -m training.verl_export "$CKPT"
