#!/usr/bin/env bash
# Issue 26's GPU checks (the helper branch h26-bits), one run on the GPU machine: builds the cuda preset's
# binary and the tests below, then
#   1. the unedited editable source against the shipped kernel on CUDA, every rung, bit for bit
#      (nvcc's build against NVRTC's; test_unedited_equals_shipped), and the older NVRTC / rung tests;
#   2. the first-write read-back: a spoiled interop write is said and drawn through the host copy
#      (test_data_texture), and the same in the app (a shot with KL_TEST_CORRUPT_TEXTURE=interop);
#   3. KL_TRACE_STARTUP=1 on a --backend cuda shot: where a CUDA+GL process's start-up time goes.
# Results in $OUT (default ./gpu-out), four files: summary.txt, tests.log, startup.txt, corrupt-interop.png.
# Success: every test line "[  PASSED  ]" with no FAILED; startup.txt's lines (driver, device query,
# context, EGL, first interop registration, first frame) summing to about a second on a healthy machine.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/summary.txt"; }
tests=(test_unedited_equals_shipped test_data_texture test_startup_trace test_nvrtc test_rungs_2_3
       test_attention_source test_flash_attention_backward_source)

log "$(date -u) $(nvidia-smi -L 2>&1 | head -1)"
log "build"
{ cmake --preset cuda ${KL_CMAKE_ARGS:-} && cmake --build --preset cuda -j"$(nproc)" --target kernel-ladder "${tests[@]}"; } \
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
run_test test_unedited_equals_shipped '*'
run_test test_data_texture 'DataTextureTest.*'
run_test test_startup_trace 'StartupTrace.*'
run_test test_nvrtc '*'
run_test test_rungs_2_3 '*'
run_test test_attention_source '*'
run_test test_flash_attention_backward_source '*'

log "startup trace of a --backend cuda shot (twice: a cold and a warm start)"
for i in 1 2; do
  echo "-- run $i" >> "$out/startup.txt"
  KL_TRACE_STARTUP=1 timeout 120 ./build-cuda/kernel-ladder shot vector-add --backend cuda --out "$out/startup.png" \
    >> "$out/startup.txt" 2>&1
done
rm -f "$out/startup.png"
cat "$out/startup.txt" >> "$out/summary.txt"

log "a spoiled interop write in the app"
KL_TEST_CORRUPT_TEXTURE=interop timeout 120 ./build-cuda/kernel-ladder shot vector-add --backend cuda \
  --out "$out/corrupt-interop.png" 2>&1 | tee -a "$out/summary.txt"
