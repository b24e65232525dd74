#!/usr/bin/env bash
# The forward's paths (issue 16; those no shape took were removed in issue 29) on the GPU machine, after `cmake --preset cuda && cmake --build --preset cuda`:
#   1. ctest -R FlashAttentionFast (every path's sweeps; output on failure), or the log KL_FWD_CTEST_LOG names
#   2. `bench flash-attention` with KL_FLASH_FAST_BENCH_PATHS: each shape timed with the default kernel
#      (wgmma) and each candidate back to back, twice (the second pass in reverse kernel order, so drift
#      inside the run shows as a disagreement between the passes)
#   3. bench/torch_flash.py (cuDNN and flash backends) in the same session, and the per-kernel table.
# Logs under $OUT (default ./gpu-out). About 4 minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=./build-cuda/kernel-ladder
{
  date -u
  nvidia-smi -L
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
} > "$out/summary.txt" 2>&1
echo "== ctest" >> "$out/summary.txt"
if [ -n "${KL_FWD_CTEST_LOG:-}" ]; then  # this machine's sweeps already ran (bench/gpu_session.sh test): reuse its log
  cp "$KL_FWD_CTEST_LOG" "$out/ctest.log"
else
  timeout 320 ctest --test-dir build-cuda -R '^FlashAttentionFast(Host)?\.' -j8 --timeout 250 --output-on-failure \
    > "$out/ctest.log" 2>&1
fi
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Skipped" "$out/ctest.log" >> "$out/summary.txt"
# A candidate whose correctness test did not pass (or hung) is left out of the timing, so a hang cannot
# eat the run; the default is always timed.
keep=wgmma
# The paths timed beside wgmma (KL_FWD_CANDIDATES overrides: test-name:path pairs; a new candidate goes here).
for c in ${KL_FWD_CANDIDATES:-LateRescaleTma:wgmma-late persistent:wgmma-persistent persistentlate:wgmma-persistent-late persistentq2late:wgmma-persistent-q2-late persistentm192:wgmma-persistent-m192 persistentq2laten160:wgmma-persistent-q2-late-n160}; do
  test_name=${c%%:*} path=${c#*:}
  if grep -qiE "FlashAttentionFast\.${test_name}KernelMatchesReference \.+ +Passed" "$out/ctest.log"; then
    keep=$keep,$path
  else
    echo "left out of the bench: $path (its test did not pass)" >> "$out/summary.txt"
  fi
done
paths=$keep
rpaths=$(echo "$keep" | tr ',' '\n' | tac | paste -sd,)
echo "== bench, pass 1 ($paths)" >> "$out/summary.txt"
KL_FLASH_FAST_BENCH_PATHS=$paths timeout 150 "$bin" bench flash-attention --backend cuda --json "$out/fa1.json" \
  > "$out/bench1.txt" 2>&1 || echo "bench pass 1 failed: rc $?" >> "$out/summary.txt"
echo "== bench, pass 2 ($rpaths)" >> "$out/summary.txt"
KL_FLASH_FAST_BENCH_PATHS=$rpaths timeout 150 "$bin" bench flash-attention --backend cuda --json "$out/fa2.json" \
  > "$out/bench2.txt" 2>&1 || echo "bench pass 2 failed: rc $?" >> "$out/summary.txt"
echo "== peers" >> "$out/summary.txt"
timeout 300 python3 bench/torch_flash.py --ladder-json "$out/fa1.json" --out "$out/peer.json" > "$out/peers.txt" 2>&1 \
  || echo "torch_flash.py failed: rc $?" >> "$out/summary.txt"
head -1 "$out/peers.txt" >> "$out/summary.txt"
for pass in 1 2; do
  echo "== table, pass $pass" >> "$out/summary.txt"
  python3 bench/fwd_paths_table.py --ladder-json "$out/fa$pass.json" --peer-json "$out/peer.json" \
    --md "$out/table$pass.md" >> "$out/summary.txt" 2>&1
done
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> "$out/summary.txt" 2>&1
cat "$out/summary.txt"
