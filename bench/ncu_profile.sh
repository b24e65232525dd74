#!/usr/bin/env bash
# Nsight Compute on the GPU machine: the backward's main kernel and the forward at one shape each, beside cuDNN's
# kernels for the same shapes (through PyTorch's SDPA), each report exported as text (details page) and as the
# per-instruction source page (CSV), then summarised by bench/ncu_summary.py (stall reasons, shared-memory
# wavefronts against the ideal, instruction mix, the most stalled instructions).
#   bench/ncu_profile.sh [BINARY]     (default ./build-cuda/kernel-ladder; logs and reports into $OUT/ncu)
# Shapes: KL_NCU_BWD_SHAPE (default "B=8 H=16 L=2048 d=128 non-causal") and KL_NCU_FWD_SHAPE (default
# "B=32 H=16 L=512 d=128 non-causal"), rows of the benches (KL_FLASH_BENCH_SHAPES). KL_NCU_BWD_KERNELS: the
# backward's kernels to profile, regular expressions separated by spaces (default flash_bwd_wgmma_tma_kernel, the
# main kernel at d = 64 and 128; at d = 256 "flash_bwd_wgmma_dkdv_d256_kernel flash_bwd_dq_wgmma_kernel", its two);
# KL_NCU_FWD=0 leaves the forward out. The clocks are left alone (--clock-control none: docs of the device tool).
# About 25 s a kernel. First used 2026-12-05 (docs/perf-log.md).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-./build-cuda/kernel-ladder}
out=${OUT:-gpu-out}/ncu
mkdir -p "$out"
bwd=${KL_NCU_BWD_SHAPE:-B=8 H=16 L=2048 d=128 non-causal}
fwd=${KL_NCU_FWD_SHAPE:-B=32 H=16 L=512 d=128 non-causal}
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables
  --section WarpStateStats --section LaunchStats --section Occupancy --section InstructionStats --section SourceCounters"
# NAME, then ncu's kernel selection and the command: one report, exported and summarised.
profile() {
  local name=$1; shift
  # shellcheck disable=SC2086  # $sections: several arguments
  timeout 180 ncu --clock-control none $sections -o "$out/$name" -f "$@" > "$out/$name.log" 2>&1 ||
    { echo "ncu_profile.sh: $name: ncu failed (see $out/$name.log)"; tail -3 "$out/$name.log"; return; }
  ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
  ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
  echo "== $name"
  grep -E "^  [a-z_]|Duration|Registers Per Thread|Grid Size|Block Size" "$out/$name.details.txt" | head -12
  python3 bench/ncu_summary.py "$out/$name.sass.csv" "${NCU_SUMMARY_KERNEL:-}"
}
# PyTorch's cuDNN SDPA, forward and backward once after a warm-up, between cudaProfilerStart and Stop.
cudnn_py() {
  cat <<'PY'
import sys, torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
w = dict(x.split("=") for x in sys.argv[1].split() if "=" in x)
B, H, L, d, causal = int(w["B"]), int(w["H"]), int(w["L"]), int(w["d"]), " causal" in " " + sys.argv[1]
q, k, v, do = (torch.randn(B, H, L, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
for t in (q, k, v): t.requires_grad_()
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for i in range(4):
        if i == 3: torch.cuda.synchronize(); torch.cuda.cudart().cudaProfilerStart()
        F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(do)
    torch.cuda.synchronize(); torch.cuda.cudart().cudaProfilerStop()
PY
}
cudnn_py > "$out/cudnn_sdpa.py"
n=0
for kernel in ${KL_NCU_BWD_KERNELS:-flash_bwd_wgmma_tma_kernel}; do
  name=bwd_ladder; [ $n -eq 0 ] || name=bwd_ladder_$n; n=$((n + 1))
  KL_FLASH_BENCH_SHAPES="$bwd" profile $name -k "regex:$kernel" -s 2 -c 1 "$bin" bench flash-attention-backward --backend cuda
done
NCU_SUMMARY_KERNEL=bprop profile bwd_cudnn --profile-from-start off python3 "$out/cudnn_sdpa.py" "$bwd"
[ "${KL_NCU_FWD:-1}" = 0 ] && exit 0
KL_FLASH_BENCH_SHAPES="$fwd" profile fwd_ladder -k regex:flash_fwd_wgmma -s 2 -c 1 "$bin" bench flash-attention --backend cuda
NCU_SUMMARY_KERNEL=fprop profile fwd_cudnn --profile-from-start off python3 "$out/cudnn_sdpa.py" "$fwd"
