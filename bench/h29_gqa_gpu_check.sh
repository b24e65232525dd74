#!/usr/bin/env bash
# Issue 29's grouped-query attention in the backward's teaching and naive variants (helper branch h29-gqa),
# one run on the GPU machine: builds the cuda preset's tests below, then runs on CUDA
#   1. rung 6's tests (test_flash_attention_backward): both variants against the float64 reference at
#      Hq / Hkv = 1, 2, 4, 8, odd lengths, Lq != Lk, causal; the trace over a group; dK, dV bitwise repeatable;
#   2. the unedited editable source against nvcc's shipped build, the grouped-query case included
#      (test_unedited_equals_shipped, flash-attention-backward on CUDA: dK, dV bitwise, dQ to 1e-5);
#   3. the editable source's CPU and CUDA traces (test_flash_attention_backward_source).
# Results in $OUT (default ./gpu-out): summary.txt and tests.log. Success: every test line "[  PASSED  ]",
# no FAILED, and no SKIPPED for the tests that need a device (the summary lists any).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/summary.txt"; }
tests=(test_flash_attention_backward test_unedited_equals_shipped test_flash_attention_backward_source)

log "$(date -u) $(nvidia-smi -L 2>&1 | head -1)"
log "build"
{ cmake --preset cuda ${KL_CMAKE_ARGS:-} && cmake --build --preset cuda -j"$(nproc)" --target "${tests[@]}"; } \
  > "$out/build.log" 2>&1 || { tail -60 "$out/build.log" | tee -a "$out/summary.txt"; exit 1; }
rm -f "$out/build.log"

run_test() {  # NAME FILTER
  log "$1 --gtest_filter=$2"
  timeout 300 "./build-cuda/tests/$1" --gtest_filter="$2" > "$out/one.log" 2>&1
  echo "exit $?" >> "$out/one.log"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST|^exit " "$out/one.log" | tee -a "$out/summary.txt"
  { echo "== $1"; cat "$out/one.log"; } >> "$out/tests.log"
  rm -f "$out/one.log"
}
run_test test_flash_attention_backward '*'
run_test test_unedited_equals_shipped '*flash_attention_backward*'
run_test test_flash_attention_backward_source '*'
