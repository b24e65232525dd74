#!/usr/bin/env bash
# The backward's wgmma main kernel on an H100/H200, after `cmake --preset cuda && cmake --build --preset cuda`:
#   1. the backward-fast tests (both main kernels: the Wgmma* tests run only where the sm_90a code loads),
#   2. a `run flash-attention-backward --variant fast` smoke per path (KL_FLASH_BWD_PATH=mma|wgmma), both dQ
#      modes, causal and not, Lq != Lk with tails, bf16 and fp16, d 64 and 128, against the teaching variant,
#   3. `bench flash-attention-backward --backend cuda` once per path (--json each, for bench/torch_flash_backward.py).
# Logs into $OUT (default ./gpu-out): bwd_summary.txt (read this first), bwd_ctest.log, bwd_smoke.txt,
# bwd_bench_{mma,wgmma}.{txt,json}. About 3 to 4 minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=./build-cuda/kernel-ladder
sum="$out/bwd_summary.txt"
log() { echo "== $*" | tee -a "$sum"; }

log "$(date -u) $(nvidia-smi -L 2>&1 | head -1)"
log "ctest -R FlashAttentionBackwardFast"
timeout 170 ctest --preset cuda -R FlashAttentionBackwardFast -j4 --timeout 160 --output-on-failure -V \
  > "$out/bwd_ctest.log" 2>&1
echo "ctest rc=$?" | tee -a "$sum"
grep -E "tests passed|tests failed|Total Test time|\(Failed\)|\(Timeout\)|Not Run|\*\*\*Skipped|wgmma backward on this device" \
  "$out/bwd_ctest.log" | tee -a "$sum"
grep -E "^\S*: Failure|Expected|Which is|error" "$out/bwd_ctest.log" | head -40 >> "$sum"

log "run smoke (fast, both paths, against teaching on CUDA; rel = relative norm error)"
tmp=$(mktemp -d)
smoke() {  # B H Lq Lk d causal dtype deterministic
  local B=$1 H=$2 Lq=$3 Lk=$4 d=$5 causal=$6 dtype=$7 det=$8
  python3 - "$tmp" "$B" "$H" "$Lq" "$Lk" "$d" <<'EOF' || return 1
import sys, numpy as np
t, B, H, Lq, Lk, d = sys.argv[1], *map(int, sys.argv[2:])
rng = np.random.default_rng(B * 1000003 + Lq * 1009 + Lk * 13 + d)
for name, L in (("q", Lq), ("k", Lk), ("v", Lk), ("do", Lq)):
    np.save(f"{t}/{name}.npy", rng.uniform(-1, 1, (B, H, L, d)).astype(np.float32))
EOF
  local ins="--in q=$tmp/q.npy --in k=$tmp/k.npy --in v=$tmp/v.npy --in do=$tmp/do.npy"
  "$bin" run flash-attention-backward --backend cuda --variant teaching $ins --set causal="$causal" \
    --out dq="$tmp/t_dq.npy" --out dk="$tmp/t_dk.npy" --out dv="$tmp/t_dv.npy" > "$tmp/log" 2>&1 || { cat "$tmp/log"; return 1; }
  local path line
  line="B=$B H=$H Lq=$Lq Lk=$Lk d=$d causal=$causal $dtype det=$det:"
  for path in mma wgmma; do
    if ! KL_FLASH_BWD_PATH=$path timeout 60 "$bin" run flash-attention-backward --backend cuda --variant fast $ins \
        --set causal="$causal" --set dtype="$dtype" --set deterministic="$det" \
        --out dq="$tmp/${path}_dq.npy" --out dk="$tmp/${path}_dk.npy" --out dv="$tmp/${path}_dv.npy" > "$tmp/log" 2>&1; then
      line="$line $path FAILED ($(head -c 300 "$tmp/log"))"
      continue
    fi
    line="$line $path $(python3 - "$tmp" "$path" <<'EOF'
import sys, numpy as np
t, p = sys.argv[1], sys.argv[2]
res = []
for n in ("dq", "dk", "dv"):
    ref, got = np.load(f"{t}/t_{n}.npy").astype(np.float64), np.load(f"{t}/{p}_{n}.npy").astype(np.float64)
    rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
    res.append(f"{n} {rel:.2e}{'' if np.isfinite(got).all() else ' NaN!'}")
print(" ".join(res))
EOF
)"
  done
  echo "$line" | tee -a "$out/bwd_smoke.txt" "$sum"
}
for d in 128 64; do
  smoke 2 3 300 517 "$d" 0 bf16 0
  smoke 2 3 517 300 "$d" 1 bf16 0
  smoke 1 2 1000 1000 "$d" 1 fp16 0
  smoke 1 2 333 129 "$d" 1 bf16 1
done
rm -rf "$tmp"
echo "(bf16 expects rel ~ 5e-3 or below against the float32 teaching variant, fp16 ~ 1e-3; wgmma should match mma)" | tee -a "$sum"

for path in mma wgmma; do
  log "bench flash-attention-backward, KL_FLASH_BWD_PATH=$path"
  KL_FLASH_BWD_PATH=$path timeout 110 "$bin" bench flash-attention-backward --backend cuda \
    --json "$out/bwd_bench_$path.json" > "$out/bwd_bench_$path.txt" 2>&1
  echo "bench rc=$?" | tee -a "$sum"
  grep -E "fast" "$out/bwd_bench_$path.txt" | tee -a "$sum"
done
log "done $(date -u)"
