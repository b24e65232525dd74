// Rung 6, fast variant: device code shared by the mma.sync kernels (flash_attention_backward_fast.cu) and the
// wgmma main kernel (flash_attention_backward_fast_sm90.cuh). CUDA only.
#pragma once
#include <cstdint>

#include "kernels/rungs/flash_attention_backward_fast.h"

namespace kl::flash_attention_backward {

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

}  // namespace kl::flash_attention_backward
