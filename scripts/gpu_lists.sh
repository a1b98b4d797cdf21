# GPU lists (comma-separated indices, as CUDA_VISIBLE_DEVICES) for scripts/train.sh and
# scripts/train_pipeline.sh; sourced, defines functions only. nvidia-smi is read with awk (never
# piped into head: under pipefail that can end a launch with SIGPIPE).
gpu_split() { tr ',' '\n' <<<"$1" | tr -d ' ' | grep -v '^$' | sort -u || true; }
gpu_all() { nvidia-smi -L | awk '/^GPU [0-9]+:/ {sub(":", "", $2); print $2}' | paste -sd, -; }
# the GPUs `nvidia-smi -L` lists, not the MIG devices it lists under a partitioned one ("  MIG 1g.18gb ...")
gpu_count() { nvidia-smi -L | awk '/^GPU [0-9]+:/ {n++} END {print n + 0}'; }
gpu_memory_gb() {  # the first GPU's memory in GiB (awk reads every line: no head under pipefail)
  nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk 'NR == 1 {printf "%d", $1 / 1024}'
}
plan_fits() {  # WHO PY CONFIG GPUS JUDGE_GPUS SHARDING [--set ...]: `rubricstree train plan` on stderr;
  # status 3 when the plan does not fit, unless TRAIN_FORCE=1 (then it says so and returns 0)
  local who=$1 py=$2 cfg=$3 gpus=$4 judge=$5 sharding=$6
  shift 6
  if "$py" -m rubricstree train plan "$cfg" --gpus "$gpus" --gpu-memory-gb "$(gpu_memory_gb)" --judge-gpus "$judge" \
       --sharding "$sharding" "$@" >&2; then return 0; fi
  if [ "${TRAIN_FORCE:-0}" = 1 ]; then
    echo "$who: the memory plan does not fit; going on because TRAIN_FORCE=1" >&2; return 0
  fi
  echo "$who: the memory plan above does not fit; change the setting it names (or TRAIN_FORCE=1)" >&2
  return 3
}
gpu_overlap() {  # A B: the GPUs on both lists (empty: none)
  comm -12 <(gpu_split "$1") <(gpu_split "$2") | sort -n | paste -sd, -
}
gpu_minus() {  # A B: the GPUs of A not on B
  comm -23 <(gpu_split "$1") <(gpu_split "$2") | sort -n | paste -sd, -
}
is_local_url() {  # URL: its host is this machine (loopback, or this host's name or one of its addresses)
  [[ "${1:-}" =~ ^https?://(\[[^]]*\]|[^/:]+) ]] || return 1
  local host=${BASH_REMATCH[1]} me
  [[ "$host" =~ ^(localhost|127\.[0-9.]+|0\.0\.0\.0|\[::1\])$ ]] && return 0
  for me in "$(hostname 2>/dev/null || true)" "$(hostname -f 2>/dev/null || true)" \
            $(hostname -I 2>/dev/null || true); do
    [ -n "$me" ] && [ "${host,,}" = "${me,,}" ] && return 0
  done
  return 1
}
policy_gpus() {  # JUDGE_URL: the GPUs of the filter's policy server, or a message and status 2
  # POLICY_CUDA_VISIBLE_DEVICES, else TRAIN_CUDA_VISIBLE_DEVICES, else every GPU but the judge's
  # (JUDGE_CUDA_VISIBLE_DEVICES, whether the pipeline started the judge or it runs on its own)
  local judge=${JUDGE_CUDA_VISIBLE_DEVICES:-} pol=${POLICY_CUDA_VISIBLE_DEVICES:-${TRAIN_CUDA_VISIBLE_DEVICES:-}} shared
  if [ -z "$pol" ]; then
    if [ -z "$judge" ] && is_local_url "${1:-}"; then
      echo "the judge at $1 runs on this machine, on GPUs nobody named: set JUDGE_CUDA_VISIBLE_DEVICES (its GPUs)" \
           "so the policy server keeps off them, or POLICY_CUDA_VISIBLE_DEVICES (the policy server's)" >&2
      return 2
    fi
    pol=$(gpu_minus "$(gpu_all)" "$judge")
  fi
  shared=$(gpu_overlap "$pol" "$judge")
  if [ -n "$shared" ]; then
    echo "GPU(s) $shared are both the judge's (JUDGE_CUDA_VISIBLE_DEVICES=$judge) and the policy server's" \
         "($pol, from POLICY_CUDA_VISIBLE_DEVICES or TRAIN_CUDA_VISIBLE_DEVICES): give each its own" >&2
    return 2
  fi
  if [ -z "$pol" ]; then echo "no GPU is left for the policy server besides the judge's ($judge)" >&2; return 2; fi
  echo "$pol"
}
