#!/usr/bin/env bash
# "Inside the fast kernel" (issue 30, phase 2: the view) on an H100/H200, after `cmake --preset cuda` and a build
# of kernel-ladder and three test programs (cmake --build --preset cuda --target kernel-ladder test_timeline_cli
# test_timeline_view test_timeline_study):
#   1. records and draws in one run (`timeline ... --out`): the forward at d = 128, the by-shape default and the
#      one-CTA-per-tile wgmma (the comparison the view's notice makes), and the backward, as PNGs with the layout
#      audit on; each PNG's line on stdout carries the view's "Notice: ..." for that recording;
#   2. draws the rungs' section on the CUDA backend (`shot flash-attention|backward --backend cuda --chrome
#      --set inside=1 --layout-report`: the "Record now" row shown) at 1280x720 and 3840x2160 with UI scale 2;
#   3. runs the GPU tests (TimelineCliCuda.*: record, append, draw, the panels' audit on CUDA) and the CPU tests of
#      the view, which must pass on this machine too (test_timeline_view, test_timeline_study).
# Writes into $OUT (default ./gpu-out): view_summary.txt (read this first), view_*.png (look at them),
# view_tests.log. Expect about two minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=${KL_BIN:-./build-cuda/kernel-ladder}
tests=${KL_TESTS:-./build-cuda/tests}
sum="$out/view_summary.txt"
: > "$sum"
log() { echo "== $*" | tee -a "$sum"; }
start=$SECONDS

python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(600)" > /dev/null 2>&1 &
holder=$!
trap 'kill $holder 2>/dev/null' EXIT

log "$(date -u) $(nvidia-smi -L 2>&1 | head -1)"
draw() {  # draw NAME ARGS...: one recording drawn into $out/view_NAME.png, the audit's verdict into the summary
  local name=$1
  shift
  log "record and draw $name: timeline $*"
  timeout 90 "$bin" timeline "$@" --json "$out/view_$name.json" --out "$out/view_$name.png" --size 1600x900 \
    --layout-report 2>&1 | tee -a "$sum" | tail -n 3
  echo "rc=${PIPESTATUS[0]}" | tee -a "$sum"
}
draw fwd-d128 flash-attention --set d=128 --set H=16 --set B=2 --set L=2048
draw fwd-d128-wgmma flash-attention --set d=128 --set H=16 --set B=2 --set L=2048 --path wgmma
draw bwd-d128 flash-attention-backward --set d=128 --set H=16 --set B=2 --set L=2048

for panel in flash-attention backward; do
  for look in "1280x720 1" "3840x2160 2"; do
    read -r size scale <<< "$look"
    log "shot $panel --backend cuda --set inside=1 at $size scale $scale"
    timeout 120 "$bin" shot "$panel" --backend cuda --chrome --layout-report --set inside=1 --size "$size" \
      --ui-scale "$scale" --out "$out/view_panel_${panel}_$size.png" 2>&1 | tail -n 4 | tee -a "$sum"
    echo "rc=${PIPESTATUS[0]}" | tee -a "$sum"
  done
done

log "tests: TimelineCliCuda.*, test_timeline_view, test_timeline_study"
timeout 120 "$tests/test_timeline_cli" --gtest_filter='TimelineCliCuda.*' > "$out/view_tests.log" 2>&1
echo "test_timeline_cli (TimelineCliCuda) rc=$?" | tee -a "$sum"
timeout 300 "$tests/test_timeline_view" >> "$out/view_tests.log" 2>&1
echo "test_timeline_view rc=$?" | tee -a "$sum"
timeout 60 "$tests/test_timeline_study" >> "$out/view_tests.log" 2>&1
echo "test_timeline_study rc=$?" | tee -a "$sum"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|Failure|Expected|Which is|Value of" "$out/view_tests.log" | head -60 |
  tee -a "$sum"
log "done in $((SECONDS - start)) s"
