# GPU lists (comma-separated indices, as CUDA_VISIBLE_DEVICES) for scripts/train.sh and
# scripts/train_pipeline.sh; sourced, defines functions only. nvidia-smi is read with awk (never
# piped into head: under pipefail that can end a launch with SIGPIPE).
gpu_split() { tr ',' '\n' <<<"$1" | tr -d ' ' | grep -v '^$' | sort -u || true; }
gpu_all() { nvidia-smi -L | awk '/^GPU [0-9]+:/ {sub(":", "", $2); print $2}' | paste -sd, -; }
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
