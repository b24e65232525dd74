// Rung 6, fast variant: device code shared by the mma.sync kernels (flash_attention_backward_fast.cu) and the
// wgmma main kernel (flash_attention_backward_fast_sm90.cuh). CUDA only.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/rungs/flash_attention_fast_device.cuh"

namespace kl::flash_attention_backward {

// This CTA's place in the launch order (bwd_main_cta in the header): the dK/dV kernels' (K/V tile, kv head, batch),
// from the linear block index.
__device__ __forceinline__ int linear_block() {
  return int(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
}
__device__ __forceinline__ BwdCta main_cta(const FastBackwardParams& p) {
  // The grid's order straight from blockIdx: no division before the CTA's first load (1% to 2% at the short causal
  // rows, whose CTAs run a few steps).
  if (!bwd_main_reorders(p)) return {int(blockIdx.x), int(blockIdx.y), int(blockIdx.z)};
  return bwd_main_cta(p, linear_block(), int(gridDim.x), int(gridDim.y), int(gridDim.z));
}

// The (batch b, head h) slices of FastBackwardParams' contiguous [B, H, L, d] tensors (the header's layout):
// q, dout, dq [Lq][D]; k, v, dk, dv [Lk][D]; lse, drow [Lq]; dq_accum [Lq][D] fp32. The inputs' slices are
// members, set up once at the kernel's start; the outputs' are computed from p where they are written: dk, dv
// as the slice, dq and dq_accum as the element (row, col) a thread adds or stores (dq_accum in the atomic mode
// only: in the deterministic mode p.dq_accum may be null). Why two forms: with these, every kernel compiles to
// the code it had with the arithmetic written inline; a dq or dq_accum slice pointer plus a row offset gave
// some of them longer address arithmetic.
template <class T, int D>
struct HeadPointers {
  int64_t bh;  // b * H + h: the slice's index
  const T *q, *dout, *k, *v;
  const float *lse, *drow;

  __device__ __forceinline__ HeadPointers(const FastBackwardParams& p, int b, int h)
      : bh(int64_t(b) * p.H + h),
        q(static_cast<const T*>(p.q) + bh * p.Lq * D),
        dout(static_cast<const T*>(p.dout) + bh * p.Lq * D),
        k(static_cast<const T*>(p.k) + bh * p.Lk * D),
        v(static_cast<const T*>(p.v) + bh * p.Lk * D),
        lse(p.lse + bh * p.Lq),
        drow(p.drow + bh * p.Lq) {}

  __device__ __forceinline__ T* dq_at(const FastBackwardParams& p, int64_t row, int col) const {
    return static_cast<T*>(p.dq) + (bh * p.Lq + row) * D + col;
  }
  __device__ __forceinline__ float* dq_accum_at(const FastBackwardParams& p, int64_t row, int col) const {
    return p.dq_accum + (bh * p.Lq + row) * D + col;
  }
  __device__ __forceinline__ T* dk(const FastBackwardParams& p) const { return static_cast<T*>(p.dk) + bh * p.Lk * D; }
  __device__ __forceinline__ T* dv(const FastBackwardParams& p) const { return static_cast<T*>(p.dv) + bh * p.Lk * D; }
};

// Grouped-query attention's slices (the kGqa kernels; p.H_kv < p.H, group = H / H_kv): q, dout, lse, drow, dq
// and dq_accum at query (batch, head) bh; k, v, dk, dv at kv (batch, head) kv_bh = b * H_kv + the query head's
// kv head. kByKvHead (the main kernels, grid (K/V tiles, H_kv, B)): h is a kv head, and bh its group's first
// query head, whose group - 1 successors follow in memory (query head + i is rows i * Lq .. of the slices:
// dq_at and dq_accum_at take such rows). Else (the dQ pass, grid (query tiles, H, B)): h is a query head.
template <class T, int D, bool kByKvHead>
struct GroupHeadPointers {
  int64_t bh, kv_bh;
  const T *q, *dout, *k, *v;
  const float *lse, *drow;

  __device__ __forceinline__ GroupHeadPointers(const FastBackwardParams& p, int b, int h)
      : bh(int64_t(b) * p.H + (kByKvHead ? h * (p.H / p.H_kv) : h)),
        kv_bh(int64_t(b) * p.H_kv + (kByKvHead ? h : h / (p.H / p.H_kv))),
        q(static_cast<const T*>(p.q) + bh * p.Lq * D),
        dout(static_cast<const T*>(p.dout) + bh * p.Lq * D),
        k(static_cast<const T*>(p.k) + kv_bh * p.Lk * D),
        v(static_cast<const T*>(p.v) + kv_bh * p.Lk * D),
        lse(p.lse + bh * p.Lq),
        drow(p.drow + bh * p.Lq) {}

  __device__ __forceinline__ T* dq_at(const FastBackwardParams& p, int64_t row, int col) const {
    return static_cast<T*>(p.dq) + (bh * p.Lq + row) * D + col;
  }
  __device__ __forceinline__ float* dq_accum_at(const FastBackwardParams& p, int64_t row, int col) const {
    return p.dq_accum + (bh * p.Lq + row) * D + col;
  }
  __device__ __forceinline__ T* dk(const FastBackwardParams& p) const {
    return static_cast<T*>(p.dk) + kv_bh * p.Lk * D;
  }
  __device__ __forceinline__ T* dv(const FastBackwardParams& p) const {
    return static_cast<T*>(p.dv) + kv_bh * p.Lk * D;
  }
};

// The slices a kernel takes: HeadPointers without grouped-query attention (the kernels as they were), else
// GroupHeadPointers.
template <bool kGqa, class T, int D, bool kByKvHead>
using HeadsFor = typename std::conditional<kGqa, GroupHeadPointers<T, D, kByKvHead>, HeadPointers<T, D>>::type;

// The query heads per kv head (grouped-query attention).
__device__ __forceinline__ int kv_group(const FastBackwardParams& p) { return p.H / p.H_kv; }

// A row's log-sum-exp L as the kernels use it, L * log2(e); a row that sees no key (L = -inf) gets +inf: P = 0.
__device__ __forceinline__ float lse_log2(float L) {
  constexpr float kLog2e = 1.4426950408889634f;
  return L == -INFINITY ? INFINITY : L * kLog2e;
}

// The row statistics one thread needs for its rows `row` and `row + 8`: L * log2(e) (+inf for rows past
// Lq and rows that see nothing, so P = exp2(S * scale*log2e - that) is exactly 0) and D.
__device__ __forceinline__ void row_stats(const float* lse, const float* drow, int row, int Lq, float (&lse2)[2],
                                          float (&dr)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row + 8 * r;
    lse2[r] = lse_log2(i < Lq ? lse[i] : -INFINITY);
    dr[r] = i < Lq ? drow[i] : 0.f;
  }
}

// The dQ passes' epilogue: dQ = scale * acc, rounded to T, into this thread's query rows `row` and row + 8 (those
// < Lq), columns 8j + 2 t4 and + 1 for j < D / 8, where acc holds them as an mma.sync or wgmma accumulator does
// (elements 4j + 2r, + 1 at row + 8r).
template <class T, int D, class Heads>
__device__ __forceinline__ void store_dq_rows(const Heads& hp, const FastBackwardParams& p, int row, int t4,
                                              const float* acc) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (row + 8 * r >= p.Lq) continue;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(hp.dq_at(p, row + 8 * r, j * 8 + 2 * t4)) =
          flash_attention::pack2<T>(acc[4 * j + 2 * r] * p.scale, acc[4 * j + 2 * r + 1] * p.scale);
  }
}

}  // namespace kl::flash_attention_backward
