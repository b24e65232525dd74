#!/usr/bin/env bash
# A call of its own (written in session 22, not yet run): the forward's n160 candidate, fwd-q2-late-n160.patch
# (wgmma-persistent-q2-late-n160: q2-late's two Q tiles and late rescale on 160 keys a tile at d = 128, O stored from
# registers, since 2 x 32 + 2 x (40 + 40) KiB = 224 KiB leaves no room for O's tile), applied to this tree, built,
# its sweep and the host tests run, then timed in turn with cuDNN against the default (auto: q2-late, 128 keys, O by
# bulk stores) in one library, the d = 128 rows without the mask (the grouped-query ones among them), in both path
# orders. The other kernels' code does not change (a new wgmma shape and a new traits type only). Run from the
# repository root on the GPU machine (docs/tour and docs/window moved aside; carry .devdeps, .devicons, .devrun):
#   source .devdeps/env.sh && OUT=$OUT bash docs/perf/candidates/fwd-n160-call.sh > $OUT/log 2>&1
set -uo pipefail
source docs/perf/candidates/call-start.sh
git apply docs/perf/candidates/fwd-q2-late-n160.patch || { el "the patch does not apply"; exit 2; }
call_build
grep -iE "spill|C75" $OUT/gs/summary.txt | head -4 >> "$S"
timeout 200 ctest --test-dir build-cuda -R 'FlashAttentionFast(Host)?\.' -j8 --timeout 180 > $OUT/logs/tests.log 2>&1
el "forward tests rc=$? $(grep -E 'tests passed|tests failed' $OUT/logs/tests.log)"
grep -E "\(Failed\)|\(Timeout\)|N160" $OUT/logs/tests.log >> "$S"
if grep -qE "PersistentQ2LateN160KernelMatchesReference \.+ +Passed" $OUT/logs/tests.log; then
  for order in auto,wgmma-persistent-q2-late-n160 wgmma-persistent-q2-late-n160,auto; do
    left=$((585 - (SECONDS - T0)))
    [ $left -gt 40 ] || break
    timeout $((left - 5)) python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so --paths $order \
      --shapes 'd=128 non-causal' --out $OUT/logs/n160-$order.json > $OUT/logs/n160-$order.txt 2>&1
    el "paths $order rc=$?"
    tail -14 $OUT/logs/n160-$order.txt >> "$S"
  done
fi
cd $OUT && tar czf /tmp/all.tgz --exclude=all.tgz . && mv /tmp/all.tgz $OUT/all.tgz
el "done"
