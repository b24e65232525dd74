#!/usr/bin/env bash
# The next session's call 2 (written in session 21; no machine came in session 22, none was left for it in 23 and 24),
# on the machine call 1 built on (warm; build-cuda kept): Nsight Compute on the d = 256 backward's two kernels (the
# dK/dV kernel, split by product since session 24, and the 48-key dQ pass) and cuDNN's backward at one of the shapes
# where the ladder reads lowest against cuDNN (B=4 H=8 L=4096 d=256 causal: 0.78x-0.83x in the twenty-first session,
# 0.88x-0.90x with the split by product; L = 8192 causal read 0.81x-0.86x), so the next step at d = 256 starts from
# stall reasons and shared-memory wavefronts (the split's premise: fewer operand reads a step), not arithmetic alone.
#   source .devdeps/env.sh && OUT=$OUT bash docs/perf/candidates/profile-d256.sh > $OUT/log 2>&1
set -uo pipefail
[ -x build-cuda/kernel-ladder ] || { echo "profile-d256.sh: no build-cuda/kernel-ladder (run call 1 first)"; exit 2; }
KL_NCU_BWD_SHAPE="B=4 H=8 L=4096 d=256 causal" \
  KL_NCU_BWD_KERNELS="flash_bwd_wgmma_dkdv_d256_kernel flash_bwd_dq_wgmma_kernel" KL_NCU_FWD=0 \
  timeout 500 bash bench/ncu_profile.sh > "$OUT/0-summary.txt" 2>&1
echo "ncu_profile rc=$?" >> "$OUT/0-summary.txt"
cd "$OUT" && tar czf /tmp/all.tgz --exclude=all.tgz --exclude='*.ncu-rep' . && mv /tmp/all.tgz "$OUT/all.tgz"
