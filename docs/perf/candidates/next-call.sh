#!/usr/bin/env bash
# Session 17, call 1 (written in session 16): (a) the ordered kernel from shorter lengths (candidate
# docs/perf/candidates/bwd-ordered-from-short-l.patch, KL_BWD_ORDERED_FROM_L=512): the backward's GPU tests with it,
# then the L = 512 and 1024 rows in turn with cuDNN, main / candidate / main / candidate; (b) the consumers' phases at a
# cool clock and the L2 hit rates (docs/perf/diagnostics), d = 128 L = 8192 causal and not.
set -uo pipefail
T0=$SECONDS
S=$OUT/0-summary.txt
el() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$S"; }
mkdir -p $OUT/logs
patch -p1 < docs/perf/candidates/bwd-ordered-from-short-l.patch > $OUT/logs/patch.log 2>&1; el "patch from-L rc=$?"
patch -p1 < docs/perf/diagnostics/bwd-ordered-phases.patch >> $OUT/logs/patch.log 2>&1; el "patch phases rc=$?"
nvidia-smi -L | tee -a "$S"
mkdir -p /opt/cc && for d in .devrun/ccache/*.deb; do dpkg -x $d /opt/cc; done
export PATH=/opt/cc/usr/bin:$PATH LD_LIBRARY_PATH=/opt/cc/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
{ cmake --preset cuda -DKL_ICON_PNG_DIR=$PWD/.devicons && cmake --build --preset cuda -j16 --target kl_ladder_c test_flash_attention_backward_fast; } > $OUT/logs/build.log 2>&1
el "build rc=$?"
KL_BWD_ORDERED_FROM_L=512 timeout 150 ctest --preset cuda -j4 --timeout 140 --output-on-failure -R 'FlashAttentionBackward' > $OUT/logs/bwd-tests.log 2>&1
el "backward tests from 512 rc=$? $(grep -E 'tests passed|tests failed' $OUT/logs/bwd-tests.log)"; grep -E "\(Failed\)|Timeout" $OUT/logs/bwd-tests.log | head | tee -a "$S"
python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(200)" > /dev/null 2>&1 &
holder=$!
ib() {  # FROM TAG
  env $([ $1 != main ] && echo KL_BWD_ORDERED_FROM_L=$1) timeout 60 python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so --backward --shapes 'L=512 d=64,L=512 d=128,L=1024 d=64,L=1024 d=128' --out $OUT/logs/ib-$2.json > $OUT/logs/ib-$2.txt 2>&1
  el "$2 from=$1 rc=$? $(grep '^ladder / cuDNN' $OUT/logs/ib-$2.txt | tail -1 | sed 's/.*deterministic/det/')"
}
ib main a0; ib 512 a1; ib main b0; ib 512 b1
kill $holder 2>/dev/null
python3 - $OUT/logs >> "$S" <<'PY'
import json, sys, glob, os
d = sys.argv[1]
runs = {os.path.basename(f)[3:-5]: {(r["d"], r["L"], r["causal"]): r for r in json.load(open(f))["rows"]} for f in sorted(glob.glob(d + "/ib-*.json"))}
print("d L causal | det TFLOP/s (det/atomic) per run | cand/main per pair")
for k in sorted({k for r in runs.values() for k in r}):
    v = {t: runs[t][k] for t in runs if k in runs[t]}
    print(k, "|", " ".join(f"{t}:{v[t]['ladder_det_tflops']:.1f}({v[t]['det_over_ladder']:.3f})" for t in v), "|",
          " ".join(f"{v[p+'1']['ladder_det_tflops'] / v[p+'0']['ladder_det_tflops']:.3f}" for p in "ab" if p + "0" in v and p + "1" in v))
PY
KL_PHASES=1 timeout 60 python3 docs/perf/diagnostics/ordered-phases-drive.py 'B=2 H=16 L=8192 d=128 causal,B=2 H=16 L=8192 d=128 non-causal' > $OUT/logs/drive.log 2>&1
el "phases rc=$?"; grep -E "^(EV|PH|GT)" $OUT/logs/drive.log | cut -c1-330 >> "$S"
timeout 120 ncu --profile-from-start off --clock-control none --cache-control none --csv --log-file $OUT/logs/ncu-l2.csv \
  --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes.sum,sm__cycles_elapsed.avg.per_second \
  python3 docs/perf/diagnostics/ncu-backward-launches.py 'B=2 H=16 L=8192 d=128 causal,B=2 H=16 L=8192 d=128 non-causal' > $OUT/logs/ncu-l2-py.log 2>&1
el "ncu l2 rc=$?"
python3 - $OUT/logs/ncu-l2.csv >> "$S" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki, mi, vi, ii = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"), h.index("ID")
cur = None
for r in rows[1:]:
    if r[ii] != cur:
        cur = r[ii]; print(); print(r[ki][:60], end="")
    print(f" | {r[mi]} {r[vi]}", end="")
print()
PY
cd $OUT && tar czf /tmp/all.tgz --exclude=all.tgz . && mv /tmp/all.tgz $OUT/all.tgz
el "done"
