// The matrix-multiply ceiling the Measure view holds FlashAttention against: the FLOP/s of a large
// GEMM measured on this machine, in the same run.
//   CUDA  cuBLAS: C = A B with A, B [n, n] bf16, C fp32, fp32 accumulation (cublasGemmEx with
//         CUBLAS_COMPUTE_32F), n = 8192 by default: 2 n^3 FLOP per call, on the tensor cores. What
//         FlashAttention fast (kernels/rungs/flash_attention_fast.h) can at best approach: on an H100/H200
//         its two matrix products run on wgmma (warpgroup MMA, operands brought in by TMA), elsewhere on
//         mma.sync.m16n8k16; either way it also has a softmax to do between them, which a GEMM has not.
//   CPU   a cache-blocked fp32 loop (n = 384 by default): CPU figures, not a tuned BLAS.
// Before anything is timed, sampled entries of C are checked against a float64 dot product of the same
// (rounded) inputs, so the ceiling is a real product and not an empty launch.
#pragma once
#include <string>

#include "kernels/runtime/backend.h"

namespace kl::gemm {

struct Ceiling {
  int n = 0;
  double ms = 0;           // median time of one GEMM
  double tflops = 0;       // 2 n^3 / time, in TFLOP/s
  double max_rel_err = 0;  // max over sampled entries of |C - ref| / sum_k |a_ik b_kj|
  std::string what;        // "cuBLAS bf16 GEMM 8192^3, fp32 accumulate"
};

constexpr int kDefaultCudaN = 8192, kDefaultCpuN = 384;

// n = 0 picks the backend's default; iterations = 0 picks 20 (CUDA) or 3 (CPU). Throws InputError for
// n outside [16, 16384] (CUDA) or [16, 2048] (CPU), or not a multiple of 16; RuntimeError (naming the
// cuBLAS status) when a cuBLAS call fails.
Ceiling measure_ceiling(Backend b, int n = 0, int iterations = 0);

namespace detail {
#ifdef KL_HAS_CUDA
Ceiling measure_cuda(int n, int iterations);
#endif
}  // namespace detail

}  // namespace kl::gemm
