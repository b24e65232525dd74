#!/usr/bin/env bash
# Session 21, call 2 (written in session 20): B = main with docs/perf/candidates/bwd-ordered-m80-causal.patch (the
# ordered kernel on 80-row steps under the mask too, from L = 4096) built, the backward's and timeline's GPU tests on
# it; A (main) as a library; the d = 128 rows A B B A in turn with cuDNN. Keep rule: the deterministic mode's causal
# rows from L = 4096 B / A 1.02x or more as geometric mean in both pairs, none of the d = 128 rows under 0.98x.
# Then the timeline's instrumented kernel on 80-row steps (docs/perf/candidates/timeline-m80.patch) and its tests.
# Run from the repository root on the GPU machine (docs/tour and docs/window moved aside; carry .devdeps, .devicons,
# .devrun with its ccache debs):
#   source .devdeps/env.sh && OUT=$OUT bash docs/perf/candidates/second-call.sh > $OUT/log 2>&1
set -uo pipefail
T0=$SECONDS
S=$OUT/0-summary.txt
el() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$S"; }
mkdir -p $OUT/logs /tmp/libs
nvidia-smi -L | tee -a "$S"
if ls .devrun/ccache/*.deb > /dev/null 2>&1; then
  mkdir -p /opt/cc && for d in .devrun/ccache/*.deb; do dpkg -x $d /opt/cc; done
  export PATH=/opt/cc/usr/bin:$PATH LD_LIBRARY_PATH=/opt/cc/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache CCACHE_DIR=/tmp/ccache
fi
export KL_CMAKE_ARGS=-DKL_ICON_PNG_DIR=$PWD/.devicons
P=docs/perf/candidates/bwd-ordered-m80-causal.patch
patch -p1 < $P > $OUT/logs/patch-B.log 2>&1; el "B patch rc=$?"
cmake --preset cuda $KL_CMAKE_ARGS > $OUT/logs/configure.log 2>&1
cmake --build --preset cuda -j16 --target kl_ladder_c test_flash_attention_backward_fast test_flash_attention_timeline \
  > $OUT/logs/build-B.log 2>&1
el "build B rc=$?"
cp build-cuda/libkl_ladder_c.so /tmp/libs/B.so
timeout 200 ctest --preset cuda -j4 --timeout 190 --output-on-failure -R 'FlashAttentionBackwardFast|FlashAttentionTimelineCuda' \
  > $OUT/logs/tests-B.log 2>&1
el "backward + timeline tests on B rc=$? $(grep -E 'tests passed|tests failed' $OUT/logs/tests-B.log)"
grep -E "\(Failed\)|Timeout|Not Run" $OUT/logs/tests-B.log | head | tee -a "$S"
patch -R -p1 < $P > /dev/null 2>&1
cmake --build --preset cuda -j16 --target kl_ladder_c > $OUT/logs/build-A.log 2>&1; el "build A lib rc=$?"
cp build-cuda/libkl_ladder_c.so /tmp/libs/A.so
python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(200)" > /dev/null 2>&1 &
holder=$!
ib() {  # TAG RUN
  timeout 70 python3 bench/interleaved_flash.py --lib /tmp/libs/$1.so --backward --shapes 'd=128' --out $OUT/logs/ib-$2.json \
    > $OUT/logs/ib-$2.txt 2>&1
  el "$2 ($1) rc=$? $(grep '^ladder / cuDNN' $OUT/logs/ib-$2.txt | tail -1)"
}
ib A a1; ib B b1; ib B b2; ib A a2
kill $holder 2>/dev/null
python3 - $OUT/logs >> "$S" <<'PY'
import json, sys, glob, os, math
runs = {os.path.basename(f)[3:-5]: {(r["L"], r["causal"]): r for r in json.load(open(f))["rows"]}
        for f in sorted(glob.glob(sys.argv[1] + "/ib-*.json"))}
def gm(x): return math.exp(sum(map(math.log, x)) / len(x)) if x else float("nan")
print("L causal | det TFLOP/s a1 b1 b2 a2 | det B/A pairs | default B/A pairs | det/default b1 b2")
for k in sorted({k for r in runs.values() for k in r}):
    have = [t for t in ("a1", "b1", "b2", "a2") if t in runs and k in runs[t]]
    det = " ".join(f"{runs[t][k]['ladder_det_tflops']:.1f}" for t in have)
    pr = lambda col: " ".join(f"{runs[b][k][col] / runs[a][k][col]:.3f}" for b, a in (("b1", "a1"), ("b2", "a2"))
                              if b in have and a in have)
    dd = " ".join(f"{runs[t][k]['det_over_ladder']:.3f}" for t in ("b1", "b2") if t in have)
    print(k, "|", det, "|", pr("ladder_det_tflops"), "|", pr("ladder_tflops"), "|", dd)
for b, a in (("b1", "a1"), ("b2", "a2")):
    if b in runs and a in runs:
        ks = [k for k in runs[a] if k in runs[b] and k[1] and k[0] >= 4096]
        r = [runs[b][k]["ladder_det_tflops"] / runs[a][k]["ladder_det_tflops"] for k in ks]
        print(f"{b}/{a}: deterministic, causal rows from 4096: gm {gm(r):.3f} min {min(r):.3f}")
PY
left=$((585 - (SECONDS - T0)))
if [ $left -gt 60 ]; then  # the timeline's instrumented kernel on 80-row steps (on A)
  patch -p1 < docs/perf/candidates/timeline-m80.patch > $OUT/logs/patch-T.log 2>&1; el "timeline patch rc=$?"
  timeout $((left - 20)) cmake --build --preset cuda -j16 --target test_flash_attention_timeline > $OUT/logs/build-T.log 2>&1
  el "timeline candidate built rc=$?"
  timeout 15 ./build-cuda/tests/test_flash_attention_timeline --gtest_filter='FlashAttentionTimelineCuda*' > $OUT/logs/tests-T.log 2>&1
  el "timeline candidate tests rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/logs/tests-T.log | tr '\n' ' ')"
  patch -R -p1 < docs/perf/candidates/timeline-m80.patch > /dev/null 2>&1
fi
cd $OUT && tar czf /tmp/all.tgz --exclude=all.tgz . && mv /tmp/all.tgz $OUT/all.tgz
el "done"
