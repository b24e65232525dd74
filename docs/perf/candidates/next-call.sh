#!/usr/bin/env bash
# Session 18, call 1 (written in session 17): the softmax's mask tested once a step instead of per element.
# Three builds of kl_ladder_c: A main, B docs/perf/candidates/bwd-softmax-mask-split-ordered.patch (the ordered
# kernel), C bwd-softmax-mask-split-both.patch (the ordered and the wgmma / wgmma-tma kernels); the backward's GPU
# tests on C; the 24 rows of d = 64 and 128 in turn with cuDNN, A B C C B A; Nsight Compute's source counters for C's
# two d = 128 main kernels at L = 8192, both masks (the instructions a step per consumer warp under the mask: 918
# ordered, 713 atomic on main). Run from the repository root on the GPU machine (docs/tour and docs/window moved aside; carry .devdeps,
# .devicons, .devrun):  source .devdeps/env.sh && OUT=$OUT bash docs/perf/candidates/next-call.sh > $OUT/log 2>&1
set -uo pipefail
T0=$SECONDS
S=$OUT/0-summary.txt
el() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$S"; }
mkdir -p $OUT/logs /tmp/libs
nvidia-smi -L | tee -a "$S"
mkdir -p /opt/cc && for d in .devrun/ccache/*.deb; do dpkg -x $d /opt/cc; done
export PATH=/opt/cc/usr/bin:$PATH LD_LIBRARY_PATH=/opt/cc/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
cmake --preset cuda -DKL_ICON_PNG_DIR=$PWD/.devicons -DCMAKE_CUDA_FLAGS=-lineinfo > $OUT/logs/configure.log 2>&1
F='kernels/rungs/flash_attention_backward_fast_sm90.cuh kernels/rungs/flash_attention_backward_fast_ordered_sm90.cuh'
mkdir -p /tmp/orig && for f in $F; do cp $f /tmp/orig/; done
restore() { for f in $F; do cp /tmp/orig/$(basename $f) $f; done; }
lib() {  # TAG [PATCH]: build kl_ladder_c (and the backward tests) with PATCH applied to main
  restore && { [ -z "${2:-}" ] || patch -p1 < "$2" > $OUT/logs/patch-$1.log 2>&1; }
  cmake --build --preset cuda -j16 --target kl_ladder_c test_flash_attention_backward_fast > $OUT/logs/build-$1.log 2>&1
  local rc=$?; cp build-cuda/libkl_ladder_c.so /tmp/libs/$1.so
  el "build $1 rc=$rc $(grep -h 'spill stores' $OUT/logs/build-$1.log | grep -vc ' 0 bytes spill stores') kernels with spills"
}
lib A; lib B docs/perf/candidates/bwd-softmax-mask-split-ordered.patch; lib C docs/perf/candidates/bwd-softmax-mask-split-both.patch
timeout 130 ctest --preset cuda -j4 --timeout 120 --output-on-failure -R 'FlashAttentionBackward' > $OUT/logs/bwd-tests.log 2>&1
el "backward tests on C rc=$? $(grep -E 'tests passed|tests failed' $OUT/logs/bwd-tests.log)"; grep -E "\(Failed\)|Timeout" $OUT/logs/bwd-tests.log | head | tee -a "$S"
python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(400)" > /dev/null 2>&1 &
holder=$!
ib() {  # TAG RUN
  timeout 70 python3 bench/interleaved_flash.py --lib /tmp/libs/$1.so --backward --shapes 'd=64,d=128' --out $OUT/logs/ib-$2.json > $OUT/logs/ib-$2.txt 2>&1
  el "$2 ($1) rc=$? $(grep '^ladder / cuDNN' $OUT/logs/ib-$2.txt | tail -1)"
}
ib A a1; ib B b1; ib C c1; ib C c2; ib B b2; ib A a2
kill $holder 2>/dev/null
python3 - $OUT/logs >> "$S" <<'PY'
import json, sys, glob, os, math
d = sys.argv[1]
runs = {os.path.basename(f)[3:-5]: {(r["d"], r["L"], r["causal"]): r for r in json.load(open(f))["rows"]} for f in sorted(glob.glob(d + "/ib-*.json"))}
def gm(x): return math.exp(sum(map(math.log, x)) / len(x)) if x else float("nan")
for col, name in (("ladder_det_tflops", "det"), ("ladder_tflops", "atomic")):
    for new, old in (("b", "a"), ("c", "b")):
        for i in "12":
            if new + i in runs and old + i in runs:
                r = [runs[new + i][k][col] / runs[old + i][k][col] for k in runs[old + i] if k in runs[new + i]]
                print(f"{name} {new}{i}/{old}{i}: gm {gm(r):.3f} min {min(r):.3f} max {max(r):.3f} rows {len(r)}")
print("d L causal | det (det/atomic) and atomic/cuDNN per run")
for k in sorted({k for r in runs.values() for k in r}):
    print(k, "|", " ".join(f"{t}:{runs[t][k]['ladder_det_tflops']:.0f}({runs[t][k]['det_over_ladder']:.3f},{runs[t][k]['ladder_over_cudnn']:.3f})" for t in sorted(runs) if k in runs[t]))
PY
cp /tmp/libs/C.so build-cuda/libkl_ladder_c.so
timeout 100 ncu --profile-from-start off --clock-control none --cache-control none -k regex:'flash_bwd_ordered_kernel|flash_bwd_wgmma_tma_kernel' \
  --section SourceCounters -o $OUT/src python3 docs/perf/diagnostics/ncu-backward-launches.py 'B=2 H=16 L=8192 d=128 causal,B=2 H=16 L=8192 d=128 non-causal' > $OUT/logs/ncu.log 2>&1
el "ncu rc=$?"
ncu --import $OUT/src.ncu-rep --page source --print-source sass --csv > $OUT/logs/src.csv 2> $OUT/logs/src.err
python3 docs/perf/diagnostics/ncu-steps.py $OUT/logs/src.csv 1064960 2097152 >> "$S" 2>&1
restore
cd $OUT && tar czf /tmp/all.tgz --exclude=all.tgz --exclude=src.ncu-rep . && mv /tmp/all.tgz $OUT/all.tgz
el "done"
