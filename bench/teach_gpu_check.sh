#!/usr/bin/env bash
# Issue 27 on the GPU machine, after `cmake --preset cuda && cmake --build --preset cuda`:
#   1. the tests whose GPU halves skip without a device: the registers and stack frame the CPU backend
#      states (ptxas's sm_90 record) against the running build's cudaFuncGetAttributes; rung 4's occupancy
#      and the softmax limits sentence on the CUDA backend; the ReLU + dropout fusion sentence on a GPU;
#   2. `study` on the CUDA backend for attention, softmax, relu-dropout, flash-attention and backward (their
#      notice lines and sentences as a GPU states them);
#   3. the four redesigned views at 1280x720 in the window's frame (rungs 2, 5, 6 and Measure, quick run),
#      each audited (0 findings expected).
# Everything under $OUT (default ./gpu-out). A few minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=./build-cuda/kernel-ladder
t=./build-cuda/tests
{
  date -u
  nvidia-smi -L
  for x in test_kernel_resources test_attention_study test_softmax_study test_relu_dropout_study test_measure_study; do
    echo "== $x"
    timeout 300 "$t/$x" 2>&1 | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|Expected|Which is|actual" 
  done
} > "$out/tests.txt" 2>&1
for p in attention softmax relu-dropout flash-attention backward; do
  timeout 120 "$bin" study "$p" --backend cuda > "$out/study-$p.txt" 2>&1
done
for p in relu-dropout flash-attention backward; do
  timeout 120 "$bin" shot "$p" --backend cuda --chrome --layout-report --size 1280x720 --out "$out/$p-1280x720.png" \
    > "$out/shot-$p.txt" 2>&1
done
timeout 300 "$bin" shot measure --backend cuda --chrome --layout-report --size 1280x720 --set run=1 --set quick=1 \
  --out "$out/measure-1280x720.png" > "$out/shot-measure.txt" 2>&1
grep -h "layout report" "$out"/shot-*.txt >> "$out/tests.txt"
echo "wrote $out/tests.txt, study-*.txt and the four PNGs"
