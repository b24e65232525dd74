#!/usr/bin/env bash
# The next session's call 1 (written in session 21, updated in sessions 23 and 24): the tree that ships, measured once:
# build everything; the window, layout and driven tests with the CUDA backend FIRST (Xvfb + NVIDIA's GLX, in a subshell:
# the suite must not see the display; after the suite's deliberate faults every CUDA + GL process takes 19 s to its
# first frame, and session 20's call, which ran them after the suite, finished none); the whole GPU suite (session 24
# split the d = 256 backward's warpgroups by product; its D256 tests and the backward's passed there, the whole suite
# has not run on it); the forward's 42 rows by default in turn with cuDNN, twice; the 24 backward rows of d = 64 and 128
# with cuDNN once, with each length's deterministic / default in the same run, and the 12 of d = 256 if time is left; on
# an H200, the recorded run (gpu_session.sh bench) in place of the suite and the rows. Run from the repository root on
# the GPU machine (docs/tour and docs/window moved aside; carry .devdeps, .devicons, .devrun, .devx):
#   source .devdeps/env.sh && OUT=$OUT bash docs/perf/candidates/next-call.sh > $OUT/log 2>&1
set -uo pipefail
source docs/perf/candidates/call-start.sh
END=${KL_CALL_END:-585}  # seconds from the start by which the call's last step ends (less where device time is short)
call_build
cat $OUT/gs/summary.txt >> "$S"
( source .devx/x-env.sh && OUT=$OUT/gs timeout 200 bash bench/gpu_session.sh window ) > $OUT/logs/gs-window.log 2>&1
el "window rc=$? $(grep -E 'tests passed|tests failed' $OUT/gs/window-tests.log)"
grep -E "\(Failed\)|\(Timeout\)|GL_RENDERER|interop|backend" $OUT/gs/window-tests.log $OUT/gs/summary.txt 2>/dev/null | tail -8 >> "$S"
pkill Xvfb 2>/dev/null
if nvidia-smi -L | grep -q H200; then
  # An H200 (rare in these sessions): the recorded run instead of the suite and the rows (docs/perf/h200.json and the
  # fast-kernels tables predate the ordered kernel and the 80-row steps); the suite goes to the next call.
  OUT=$OUT/rec timeout 300 bash bench/gpu_session.sh bench > $OUT/logs/gs-bench.log 2>&1; el "bench rc=$?"
  grep -E "^ladder / cuDNN|recorded|recording failed" $OUT/rec/summary.txt >> "$S"
  cp $OUT/rec/recorded-h200.json $OUT/rec/recorded-fast-kernels.md $OUT/ 2>/dev/null
  # The timeline's GPU and host tests (the deterministic recording's path name changed in session 22), if time is left.
  left=$((END - (SECONDS - T0)))
  [ $left -gt 40 ] && timeout $((left - 5)) ctest --test-dir build-cuda -R 'Timeline' -j4 --timeout 120 \
    > $OUT/logs/timeline-tests.log 2>&1
  el "timeline tests rc=$? $(grep -E 'tests passed|tests failed' $OUT/logs/timeline-tests.log)"
  grep -E "\(Failed\)|\(Timeout\)|Skipped\)" $OUT/logs/timeline-tests.log >> "$S"
  cd $OUT && tar czf /tmp/all.tgz --exclude=all.tgz . && mv /tmp/all.tgz $OUT/all.tgz
  el "done (H200: recorded run; commit recorded-h200.json as docs/perf/h200.json, recorded-fast-kernels.md as docs/fast-kernels.md)"
  exit 0
fi
OUT=$OUT/gs timeout 260 bash bench/gpu_session.sh test > $OUT/logs/gs-test.log 2>&1; el "test rc=$?"
grep -A14 "ctest took" $OUT/gs/summary.txt >> "$S"
python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(150)" > /dev/null 2>&1 &
holder=$!
for run in 1 2; do
  left=$((END - 35 - (SECONDS - T0)))
  [ $left -gt 45 ] || break
  timeout $((left - 5)) python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so \
    --out $OUT/logs/if-$run.json > $OUT/logs/if-$run.txt 2>&1
  el "forward run $run rc=$? $(grep '^ladder / cuDNN' $OUT/logs/if-$run.txt | tail -1)"
done
left=$((END - 35 - (SECONDS - T0)))
if [ $left -gt 45 ]; then
  timeout $((left - 5)) python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so --backward --shapes 'd=64,d=128' \
    --out $OUT/logs/ib-1.json > $OUT/logs/ib-1.txt 2>&1
  el "backward rc=$? $(grep '^ladder / cuDNN' $OUT/logs/ib-1.txt | tail -1)"
fi
left=$((END - (SECONDS - T0)))
if [ $left -gt 30 ]; then
  timeout $((left - 5)) python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so --backward --shapes 'd=256' \
    --out $OUT/logs/ib-d256.json > $OUT/logs/ib-d256.txt 2>&1
  el "backward d = 256 rc=$? $(grep '^ladder / cuDNN' $OUT/logs/ib-d256.txt | tail -1)"
fi
kill $holder 2>/dev/null
python3 - $OUT/logs >> "$S" <<'PY'
import json, sys, glob, math
for f in sorted(glob.glob(sys.argv[1] + "/ib-[0-9].json")):
    rows = json.load(open(f))["rows"]
    print(f, "d L causal: default/cuDNN det/default")
    for L in sorted({r["L"] for r in rows}):
        x = [r["det_over_ladder"] for r in rows if r["L"] == L]
        print(f"  L={L}: det/default gm {math.exp(sum(map(math.log, x)) / len(x)):.3f} min {min(x):.3f} rows {len(x)}")
    for r in rows:
        print(f"  {r['d']} {r['L']} {r['causal']}: {r['ladder_over_cudnn']:.3f} {r['det_over_ladder']:.3f}")
for f in sorted(glob.glob(sys.argv[1] + "/if-[0-9].json")):
    print(f, "forward: shape kernel default/cuDNN")
    for r in json.load(open(f))["rows"]:
        print(f"  {r.get('shape')} {r.get('kernel')} {r.get('ladder_over_cudnn', float('nan')):.3f}")
PY
cd $OUT && tar czf /tmp/all.tgz --exclude=all.tgz . && mv /tmp/all.tgz $OUT/all.tgz
el "done"
