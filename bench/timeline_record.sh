#!/usr/bin/env bash
# The timelines "Inside the fast kernel" (issue 30) on an H100/H200, after `cmake --preset cuda` and a build of
# kernel-ladder and the two timeline test programs (cmake --build --preset cuda --target kernel-ladder
# test_flash_attention_timeline test_timeline_cli):
#   1. records what docs/perf/timeline-h200.json holds, one `kernel-ladder timeline` each, appended to
#      $OUT/timeline-h200.json: the forward's by-shape default at d = 64 and d = 128 (non-causal), d = 128
#      causal, the one-CTA-per-tile kernel with the early rescale at d = 128 (the schedule the default is
#      compared with), and the backward's main kernel at d = 128; B*L = 4096 with H*d = 2048, so every launch
#      has 512 or more work tiles for the 132 SMs; the CLI's default CTAs (first, middle, last);
#   2. runs the GPU tests: every CTA recorded for the defaults, other paths and the backward, phases in order,
#      covering the kernel's CUDA-event time within 5%, output bit-identical to the plain kernel's; the cost of
#      recording printed per kernel ("[ cost     ]" lines).
# Writes into $OUT (default ./gpu-out): timeline-h200.json (copy it to docs/perf/), timeline_summary.txt (read
# this first), timeline_record.log, timeline_tests.log. Expect well under 2 minutes (each process pays the
# GPU's start-up unless another holds a context: a python3 with torch holds one here when it can).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=${KL_BIN:-./build-cuda/kernel-ladder}
tests=${KL_TESTS:-./build-cuda/tests}
json="$out/timeline-h200.json"
sum="$out/timeline_summary.txt"
: > "$sum"
log() { echo "== $*" | tee -a "$sum"; }
start=$SECONDS

python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(600)" > /dev/null 2>&1 &
holder=$!
trap 'kill $holder 2>/dev/null' EXIT

log "$(date -u) $(nvidia-smi -L 2>&1 | head -1)"
rm -f "$json"
record() {  # record NAME ARGS...: one recording appended to $json, its summary into the summary file
  local name=$1
  shift
  log "record $name: timeline $*"
  local one="$out/.timeline_one.log"
  timeout 60 "$bin" timeline "$@" --append --json "$json" > "$one" 2>&1
  local rc=$?
  cat "$one" >> "$out/timeline_record.log"
  echo "rc=$rc" | tee -a "$sum"
  head -n 12 "$one" | tee -a "$sum"
  rm -f "$one"
}
record fwd-d64 flash-attention --set d=64 --set H=32 --set B=2 --set L=2048
record fwd-d128 flash-attention --set d=128 --set H=16 --set B=2 --set L=2048
record fwd-d128-causal flash-attention --set d=128 --set H=16 --set B=2 --set L=2048 --set causal=1
record fwd-d128-wgmma flash-attention --set d=128 --set H=16 --set B=2 --set L=2048 --path wgmma
record bwd-d128 flash-attention-backward --set d=128 --set H=16 --set B=2 --set L=2048
record bwd-d128-wgmma flash-attention-backward --set d=128 --set H=16 --set B=2 --set L=2048 --path wgmma
ls -l "$json" 2>&1 | tee -a "$sum"

log "GPU tests: test_flash_attention_timeline, TimelineCliCuda"
timeout 150 "$tests/test_flash_attention_timeline" > "$out/timeline_tests.log" 2>&1
echo "test_flash_attention_timeline rc=$?" | tee -a "$sum"
timeout 60 "$tests/test_timeline_cli" --gtest_filter='TimelineCliCuda.*' >> "$out/timeline_tests.log" 2>&1
echo "test_timeline_cli (TimelineCliCuda) rc=$?" | tee -a "$sum"
grep -E "^\[ cost|^\[ coverage|^\[  (PASSED|FAILED|SKIPPED) |tests? ran|Failure|Expected|Which is|Value of" \
  "$out/timeline_tests.log" | head -80 | tee -a "$sum"
log "done in $((SECONDS - start)) s"
