// Small device helpers shared by the FlashAttention fast kernels (flash_attention_fast.cu, mma.sync;
// flash_attention_fast_sm90.cuh, wgmma; flash_attention_backward_fast.cu, mma.sync): packing, exp2 on the
// special-function unit, reductions across the 4 threads (a quad) that share an accumulator row, and
// (namespace fast_detail) the PTX wrappers of the mma.sync kernels: cp.async, ldmatrix, mma.m16n8k16 and
// the XOR-swizzled shared-memory tiles. Included by .cu files only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "kernels/runtime/cuda_launch.cuh"

namespace kl::flash_attention {

// Two floats -> one register of two 16-bit elements, `lo` in the low half (round to nearest even).
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}

// 2^x on the special-function unit (MUFU.EX2); exp2(-inf) = +0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Max and sum across the 4 threads (a quad) that share a row of an accumulator.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// One row of an accumulator fragment, rounded to T in pairs (pair(j): columns 8j + 2 t4, +1, for j < kJ; the
// quad's other three lanes hold the row's other pairs), written with 8-byte stores: lanes t4 and t4 ^ 1 swap one
// pair per two j's, so that an even lane holds 4 columns of 8 (2p) .. and an odd one 4 columns of 8 (2p + 1) ..;
// per warp store, 8 rows of 32 contiguous bytes (one whole sector each) instead of 8 rows of 16 (half sectors),
// and half the stores. One shuffle per two j's, a few registers (the persistent kernels have none to spare). Every
// lane of the warp calls it (the shuffles), `in` says whether its row is stored (rows past the end: not); `row`
// not 8-byte aligned: 4-byte stores of the same values.
template <int kJ, class T, class Pair>
__device__ __forceinline__ void store_row_pairs_v2(T* row, bool in, Pair pair, int lane) {
  static_assert(kJ % 2 == 0, "pairs of 8-column groups");
  const int t4 = lane & 3;
  const bool odd = t4 & 1;
  const bool v2 = (reinterpret_cast<uintptr_t>(row) & 7) == 0;
#pragma unroll
  for (int pp = 0; pp < kJ / 2; ++pp) {
    const uint32_t a = pair(2 * pp), b = pair(2 * pp + 1);
    const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? a : b, 1);  // even: the partner's a; odd: its b
    const uint32_t lo = odd ? got : a, hi = odd ? b : got;
    T* dst = row + (odd ? 8 * (2 * pp + 1) + 2 * (t4 - 1) : 8 * (2 * pp) + 2 * t4);
    if (!in) continue;
    if (v2) {
      asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(__cvta_generic_to_global(dst)), "r"(lo), "r"(hi)
                   : "memory");
    } else {
      reinterpret_cast<uint32_t*>(dst)[0] = lo;
      reinterpret_cast<uint32_t*>(dst)[1] = hi;
    }
  }
}

namespace fast_detail {

// ---- [SECTION] PTX wrappers --------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1. src_bytes = 0 writes 16 zero bytes and reads nothing (the
// masked tail: rows past Lq / Lk arrive as zeros, so 0 * garbage never makes a NaN).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A B + D, m16n8k16, fp32 accumulate.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- [SECTION] shared-memory tiles ------------------------------------------------------------------
// A tile of `rows` x kHeadDim elements, row-major, each row kHeadDim/8 chunks of 16 bytes; chunk c of
// row r is stored at chunk position c ^ (r & 7). Eight consecutive rows' chunk c then sit in eight
// different 16-byte bank groups: ldmatrix (8 row addresses per phase) and the cp.async stores are
// conflict free.
template <int kHeadDim>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

// Rows [row0, row0 + kRows) of a [L, d] matrix (row stride in elements) into a swizzled shared tile;
// rows >= rows_valid are zero-filled.
template <class T, int kRows, int kHeadDim, int kThreads>
__device__ __forceinline__ void load_tile_async(T* s, const T* g, int64_t row_stride, int row0, int rows_valid,
                                                int tid) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kTotal = kRows * kChunks;
  static_assert(kTotal % kThreads == 0, "tile chunks must divide evenly among the threads");
#pragma unroll
  for (int i = 0; i < kTotal / kThreads; ++i) {
    const int c = tid + i * kThreads;
    const int r = c / kChunks, chunk = c % kChunks;
    const int gr = row0 + r;
    const bool valid = gr < rows_valid;
    const T* src = valid ? g + int64_t(gr) * row_stride + chunk * 8 : g;
    cp_async_16(smem_u32(s + swizzled<kHeadDim>(r, chunk)), src, valid);
  }
}

// ---- [SECTION] conversions and bench inputs ---------------------------------------------------------
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <class T>
__global__ void convert_from_float(const float* __restrict__ in, T* __restrict__ out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = from_float<T>(in[i]);
}
template <class T>
__global__ void convert_to_float(const T* __restrict__ in, float* __restrict__ out, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = float(in[i]);
}
// Uniform values in [-1, 1) from a hash of (seed, index): bench inputs, never zeros.
template <class T>
__global__ void fill_uniform(T* __restrict__ out, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 0x9E3779B1u ^ uint32_t(i >> 32) * 0x85EBCA77u ^ seed;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    out[i] = from_float<T>(float(x) * (2.0f / 4294967296.0f) - 1.0f);
  }
}

inline dim3 elementwise_grid(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  if (blocks < 1) blocks = 1;
  return dim3(unsigned(blocks));
}
// fill_uniform over out[0, n), launched and checked as `name` (cuda::launch): the benches' and recordings' inputs.
template <class T>
void launch_fill_uniform(const char* name, T* out, int64_t n, uint32_t seed) {
  cuda::launch(name, fill_uniform<T>, elementwise_grid(n), dim3(256), 0, 0, out, n, seed);
}

}  // namespace fast_detail

}  // namespace kl::flash_attention
