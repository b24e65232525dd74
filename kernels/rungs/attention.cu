// Rung 4, CUDA side: the `unfused` variant (standard attention), two kernels around rung 3's softmax.
// (The smem kernel, attention_smem, is the editable source kernels/editable/sources/attention.cu, built
// by nvcc for this backend and launched through editable::launch from attention.cpp.)
//   attention_scores  one 16 x 16 block per 16 x 16 tile of S: the tile's 16 query rows and 16 key rows
//                     in shared memory, one score per thread, written to global memory (masked -inf).
//   attention_pv      one 16 x 16 block per 16 x 16 tile of O = P V, a tiled matrix product over keys.
#include <cfloat>

#include "kernels/rungs/attention.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::attention::detail {

template <int D>
__global__ void attention_scores(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ S,
                                 int64_t lq, int64_t lk, float scale, bool causal) {
  constexpr int T = kUnfusedTile;
  __shared__ float Qs[T][D];
  __shared__ float Ks[T][D + 1];  // padded: the 16 threads of a row read 16 different keys
  const int64_t bh = blockIdx.z, i0 = int64_t(blockIdx.y) * T, j0 = int64_t(blockIdx.x) * T;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * T + tx;
  for (int idx = tid; idx < T * D; idx += T * T) {
    const int r = idx / D, c = idx % D;
    Qs[r][c] = i0 + r < lq ? q[(bh * lq + i0 + r) * D + c] : 0.0f;
    Ks[r][c] = j0 + r < lk ? k[(bh * lk + j0 + r) * D + c] : 0.0f;
  }
  __syncthreads();
  const int64_t i = i0 + ty, j = j0 + tx;
  if (i >= lq || j >= lk) return;
  float acc = 0.0f;
#pragma unroll 16
  for (int c = 0; c < D; ++c) acc = fmaf(Qs[ty][c], Ks[tx][c], acc);
  S[(bh * lq + i) * lk + j] = j < visible_keys(i, lq, lk, causal) ? __fmul_rn(acc, scale) : -INFINITY;
}

__global__ void attention_pv(const float* __restrict__ P, const float* __restrict__ v, float* __restrict__ out,
                             int64_t lq, int64_t lk, int d) {
  constexpr int T = kUnfusedTile;
  __shared__ float Ps[T][T + 1];
  __shared__ float Vs[T][T + 1];
  const int64_t bh = blockIdx.z, i0 = int64_t(blockIdx.y) * T;
  const int c0 = blockIdx.x * T, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t i = i0 + ty;
  const int c = c0 + tx;  // d is a multiple of 16: always inside
  float acc = 0.0f;
  for (int64_t j0 = 0; j0 < lk; j0 += T) {
    Ps[ty][tx] = i < lq && j0 + tx < lk ? P[(bh * lq + i) * lk + j0 + tx] : 0.0f;
    Vs[ty][tx] = j0 + ty < lk ? v[(bh * lk + j0 + ty) * d + c] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int t = 0; t < T; ++t) acc = fmaf(Ps[ty][t], Vs[t][tx], acc);
    __syncthreads();
  }
  if (i < lq) out[(bh * lq + i) * d + c] = acc;
}

template <int D>
static void scores_d(const float* q, const float* k, float* S, const Shape& s, float scale, bool causal) {
  const dim3 grid(unsigned((s.lk + kUnfusedTile - 1) / kUnfusedTile), unsigned((s.lq + kUnfusedTile - 1) / kUnfusedTile),
                  unsigned(s.bh()));
  cuda::launch("attention_scores", attention_scores<D>, grid, dim3(kUnfusedTile, kUnfusedTile), 0, 0, q, k, S, s.lq,
               s.lk, scale, causal);
}

void scores_cuda(const float* q, const float* k, float* S, const Shape& s, float scale, bool causal) {
  switch (s.d) {
    case 16: return scores_d<16>(q, k, S, s, scale, causal);
    case 32: return scores_d<32>(q, k, S, s, scale, causal);
    case 64: return scores_d<64>(q, k, S, s, scale, causal);
    case 128: return scores_d<128>(q, k, S, s, scale, causal);
    default: throw InputError(out_of_range_message("d", std::to_string(s.d), "one of 16, 32, 64, 128"));
  }
}

void pv_cuda(const float* p, const float* v, float* out, const Shape& s) {
  const dim3 grid(unsigned(s.d / kUnfusedTile), unsigned((s.lq + kUnfusedTile - 1) / kUnfusedTile), unsigned(s.bh()));
  cuda::launch("attention_pv", attention_pv, grid, dim3(kUnfusedTile, kUnfusedTile), 0, 0, p, v, out, s.lq, s.lk,
               s.d);
}

}  // namespace kl::attention::detail
