// Rung 5, fast variant, Hopper path: the FlashAttention forward pass on wgmma (sm_90a), chosen at run time
// on a compute-capability-9.0 device (run_fast in flash_attention_fast.cu); the mma.sync kernel stays the
// fallback. Same algorithm and names as the mma.sync kernel and the teaching variant: running max m,
// running sum l, partial output O, `rescale` by alpha = exp(m_old - m_new), O / l at the end.
//
// What differs from the mma.sync kernel:
//   - One warpgroup (4 warps, 128 threads) owns 64 query rows. S = Q K^T is wgmma.m64n128k16 with both
//     operands read by the tensor cores straight from shared memory (matrix descriptors, no ldmatrix);
//     O += P V is wgmma.m64n{d}k16 with P in registers (the accumulator layout of S, rounded to 16 bits, is
//     the A-operand layout) and V from shared memory, transposed by the descriptor (V stays row-major).
//   - Overlap inside a warpgroup (FlashAttention-3's "intra-warpgroup pipelining"): iteration t issues
//     S_t = Q K_t^T and O += P_{t-1} V_{t-1} back to back, waits only for S_t, computes the softmax of S_t
//     while P_{t-1} V_{t-1} still runs on the tensor cores, then waits for it and rescales O.
//   - K and V tiles: cp.async, three stages; K runs two tiles ahead, V one (V_{t-1} is read one
//     iteration later than K_{t-1}).
//
// Shared-memory layout: the 128-byte swizzle of the wgmma descriptors (and of TMA's SWIZZLE_128B). A tile
// of `rows` x d 16-bit elements is cut into d/64 column blocks of 64 elements (128 bytes a row); block cb
// holds rows 0..rows-1 at 128 bytes each; the 16-byte chunk c (0..7) of row r sits at chunk position
// c ^ (r & 7). Every tile starts 1024-byte aligned, so the hardware's swizzle (address bits [4,7) XOR
// [7,10)) is exactly this formula.
// Descriptors (PTX ISA, "Matrix Descriptor Format"; 64 bits): start address >> 4 in bits [0,14),
// leading-dimension byte offset (LBO) >> 4 in [16,30), stride-dimension byte offset (SBO) >> 4 in [32,46),
// base offset 0 in [49,52), layout 1 = 128-byte swizzle in [62,64).
//   - Q (A) and K (B of S = Q K^T) are K-major (d contiguous): canonical ((8,m),(8,2)) : ((128 B, SBO),
//     (16 B-chunk... )): SBO = 1024 (the next 8 rows), LBO unused (a k16 step is 32 bytes, inside one
//     128-byte row). k-step kk starts at column block kk/4, byte 32*(kk%4) of the row.
//   - V (B of O += P V) is MN-major (d contiguous, keys = the k dimension): canonical
//     ((64 elements, m),(8 rows, k)) : ((1, LBO), (128 B, SBO)): LBO = the distance between 64-column
//     blocks of d (rows * 128 bytes), SBO = 1024 (the next 8 keys). k-step kk starts at key row 16*kk.
// Fragment layouts (PTX ISA, "Register Fragments", m64nNk16; warp w of the warpgroup, g = lane/4,
// t = lane%4): accumulator element 4j+e is row 16w + g + 8*(e>=2), column 8j + 2t + (e&1) (the m16n8
// layout of mma.sync, per warp); A in registers is the m16k16 A layout of mma.sync, per warp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cuda_launch.cuh"
#include "kernels/flash_attention_fast.h"

// Defined by nvcc only in the device pass for sm_90a: the kernels below are empty in the plain sm_90
// pass, and the probe kernel tells the host which of the two the driver loaded.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KL_FA_SM90A 1
#endif

namespace kl::flash_attention {
namespace sm90_detail {

// ---- [SECTION] PTX wrappers --------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;  // 0: writes 16 zero bytes, reads nothing (tails)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Shared memory written through the generic proxy (cp.async, plain stores) and read next by wgmma (the
// async proxy) needs this fence in each writing thread before the barrier.
__device__ __forceinline__ void fence_proxy_async() {
#ifdef KL_FA_SM90A
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_fence() {
#ifdef KL_FA_SM90A
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef KL_FA_SM90A
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef KL_FA_SM90A
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Keeps the compiler from moving reads or writes of accumulator registers across a wgmma issue or wait
// (the tensor cores write them asynchronously).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// Matrix descriptor for a 128-byte-swizzled operand (see the top of the file).
__device__ __forceinline__ uint64_t make_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

// D (64 x N, fp32) = A B (+ D when scale_d != 0); A and B K-major from shared memory.
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);
// D += A B; A (64 x 16) in registers, B MN-major (transposed) from shared memory.
template <class T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b);

#ifdef KL_FA_SM90A
// Written out per shape and type (inline asm takes one operand per accumulator register).
template <>
__device__ __forceinline__ void wgmma_ss<__nv_bfloat16, 128>(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                   int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<__nv_bfloat16, 128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_ss<__half, 128>(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                   int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
template <>
__device__ __forceinline__ void wgmma_rs<__half, 128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_rs<__nv_bfloat16, 64>(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
template <>
__device__ __forceinline__ void wgmma_rs<__half, 64>(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
#else
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&)[N / 2], uint64_t, uint64_t, int) {}
template <class T, int N>
__device__ __forceinline__ void wgmma_rs(float (&)[N / 2], const uint32_t (&)[4], uint64_t) {}
#endif

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
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ---- [SECTION] tiles ----------------------------------------------------------------------------------
// Byte offset of 16-byte chunk `chunk` (0 .. d/8-1) of row `r` in a swizzled tile of kRows rows.
template <int kRows>
__device__ __forceinline__ uint32_t tile_offset(int r, int chunk) {
  return uint32_t((chunk >> 3) * (kRows * 128) + r * 128 + (((chunk & 7) ^ (r & 7)) << 4));
}

// Rows [row0, row0 + kRows) of a [L, d] matrix into a swizzled tile; rows >= rows_valid become zeros.
template <class T, int kRows, int kHeadDim, int kThreads>
__device__ __forceinline__ void load_tile(uint32_t s, const T* g, int64_t row_stride, int row0, int rows_valid,
                                          int tid) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kTotal = kRows * kChunks;
#pragma unroll
  for (int i = 0; i < (kTotal + kThreads - 1) / kThreads; ++i) {
    const int c = tid + i * kThreads;
    if (kTotal % kThreads == 0 || c < kTotal) {
      const int r = c / kChunks, chunk = c % kChunks;
      const int gr = row0 + r;
      const bool valid = gr < rows_valid;
      const T* src = valid ? g + int64_t(gr) * row_stride + chunk * 8 : g;
      cp_async_16(s + tile_offset<kRows>(r, chunk), src, valid);
    }
  }
}

// ---- [SECTION] the kernel ---------------------------------------------------------------------------
// Grid (ceil(Lq / kBlockM), H, B); kBlockM / 64 warpgroups; warpgroup wg owns rows m0 + 64 wg .. + 63.
// Shared memory (1024-byte aligned): sQ [kBlockM x d], sK [kStages][kBlockN x d], sV [kStages][kBlockN x d].
template <class T, int kHeadDim>
__global__ void __launch_bounds__(FastTraitsSm90<kHeadDim>::kNWarps * 32, 1)
    flash_fwd_wgmma_kernel(const FastParams p) {
#ifdef KL_FA_SM90A
  using Tr = FastTraitsSm90<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  constexpr int kThreads = Tr::kNWarps * 32;
  static_assert(kBlockN == 128 && kStages == 3, "the pipeline below is written for kBlockN 128, 3 stages");
  static_assert(kBlockM % 64 == 0 && Tr::kNWarps == kBlockM / 16, "one warpgroup per 64 query rows");
  constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2, kKVBytes = kBlockN * kHeadDim * 2;
  constexpr int kSRegs = kBlockN / 2, kORegs = kHeadDim / 2;  // accumulator registers per thread

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sQ = (raw + 1023u) & ~1023u;  // the launch asks for 1 KiB of slack
  const uint32_t sK = sQ + kQBytes;
  const uint32_t sV = sK + kStages * kKVBytes;

  const int m_block = p.causal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);  // heaviest first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int m0 = m_block * kBlockM;

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + h * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride;
  T* o = static_cast<T*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;

  const int n_tiles = key_tiles_for_block(m_block, p.Lq, p.Lk, kBlockM, kBlockN, p.causal);
  const float scale_log2 = p.scale * 1.4426950408889634f;  // exp(x) = exp2(x * log2(e))
  const int row_g = m0 + wg * 64 + warp * 16 + g;  // this thread's rows: row_g and row_g + 8

  float acc_o[kORegs];
  float acc_s[kSRegs];
  uint32_t p_frag[kBlockN / 16][4];  // P of the previous tile as A fragments, one per k16 step
#pragma unroll
  for (int i = 0; i < kORegs; ++i) acc_o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  if (n_tiles > 0) {  // uniform across the block
    // Commit groups: G_{-2} = {Q, K_0}, G_{-1} = {K_1, V_0}, and in iteration t, G_t = {K_{t+2}, V_{t+1}}.
    // Iteration t needs K_t and V_{t-1}, both in G_{t-2}: waiting until one group is pending suffices.
    load_tile<T, kBlockM, kHeadDim, kThreads>(sQ, q, p.q_row_stride, m0, p.Lq, tid);
    load_tile<T, kBlockN, kHeadDim, kThreads>(sK, k, p.k_row_stride, 0, p.Lk, tid);
    cp_async_commit();
    if (n_tiles > 1) load_tile<T, kBlockN, kHeadDim, kThreads>(sK + kKVBytes, k, p.k_row_stride, kBlockN, p.Lk, tid);
    load_tile<T, kBlockN, kHeadDim, kThreads>(sV, v, p.v_row_stride, 0, p.Lk, tid);
    cp_async_commit();

    const uint32_t sQw = sQ + wg * 64 * 128;  // this warpgroup's 64 rows: 8 swizzle atoms further on

    // Iteration t (0 .. n_tiles): wait for G_{t-2}, barrier, issue G_t; then S_t (t < n_tiles) and
    // P_{t-1} V_{t-1} (t >= 1) on the tensor cores. The first and the last are peeled off so that the
    // steady state has no branch around the wgmma issue and waits (ptxas then keeps them asynchronous).
    auto next_tile = [&](int t) {
      cp_async_wait<1>();
      fence_proxy_async();
      __syncthreads();  // K_t and V_{t-1} landed for all threads; K_{t-1}, V_{t-2} no longer read
      if (t + 2 < n_tiles)
        load_tile<T, kBlockN, kHeadDim, kThreads>(sK + ((t + 2) % kStages) * kKVBytes, k, p.k_row_stride,
                                                  (t + 2) * kBlockN, p.Lk, tid);
      if (t + 1 < n_tiles)
        load_tile<T, kBlockN, kHeadDim, kThreads>(sV + ((t + 1) % kStages) * kKVBytes, v, p.v_row_stride,
                                                  (t + 1) * kBlockN, p.Lk, tid);
      cp_async_commit();  // always (maybe empty): one group per iteration
    };
    auto issue_s = [&](int t) {  // S_t = Q K_t^T, d/16 k-steps
      const uint32_t sKs = sK + (t % kStages) * kKVBytes;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 16; ++kk) {
        const uint32_t a = sQw + (kk >> 2) * (kBlockM * 128) + (kk & 3) * 32;
        const uint32_t bk = sKs + (kk >> 2) * (kBlockN * 128) + (kk & 3) * 32;
        wgmma_ss<T, kBlockN>(acc_s, make_desc(a, 16, 1024), make_desc(bk, 16, 1024), kk > 0);
      }
      wgmma_commit();
    };
    auto issue_pv = [&](int t) {  // O += P_t V_t, kBlockN/16 k-steps of 16 keys
      const uint32_t sVs = sV + (t % kStages) * kKVBytes;
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
        wgmma_rs<T, kHeadDim>(acc_o, p_frag[kk], make_desc(sVs + kk * 16 * 128, kBlockN * 128, 1024));
      wgmma_commit();
    };
    // Mask, m_new, alpha, P_t = exp(S_t - m_new) in acc_s, l <- alpha l + rowsum(P_t).
    auto softmax = [&](int t, float (&alpha)[2]) {
      const int key_base = t * kBlockN;
      if (tile_needs_mask(m_block, t, p.Lq, p.Lk, kBlockM, kBlockN, p.causal)) {
        const int last_key[2] = {last_visible_key(row_g, p.Lq, p.Lk, p.causal),
                                 last_visible_key(row_g + 8, p.Lq, p.Lk, p.causal)};
#pragma unroll
        for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (key_base + j * 8 + 2 * t4 + (e & 1) > last_key[e >> 1]) acc_s[4 * j + e] = -INFINITY;
      }
      float m_new[2] = {m[0], m[1]};
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        m_new[0] = fmaxf(m_new[0], fmaxf(acc_s[4 * j + 0], acc_s[4 * j + 1]));
        m_new[1] = fmaxf(m_new[1], fmaxf(acc_s[4 * j + 2], acc_s[4 * j + 3]));
      }
      float m_scaled[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m_new[r] = quad_max(m_new[r]);
        // alpha = exp(m_old - m_new); 1 while the row has seen only masked keys (no -inf - -inf).
        alpha[r] = m_new[r] == -INFINITY ? 1.f : fast_exp2((m[r] - m_new[r]) * scale_log2);
        m_scaled[r] = m_new[r] == -INFINITY ? 0.f : m_new[r] * scale_log2;
        m[r] = m_new[r];
      }
      float rowsum[2] = {0.f, 0.f};
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float pe = fast_exp2(fmaf(acc_s[4 * j + e], scale_log2, -m_scaled[e >> 1]));
          acc_s[4 * j + e] = pe;
          rowsum[e >> 1] += pe;
        }
      l[0] = l[0] * alpha[0] + rowsum[0];
      l[1] = l[1] * alpha[1] + rowsum[1];
    };
    // The rescale step (O <- alpha O, l was rescaled in softmax) and P_t into the A fragments.
    auto rescale_and_pack = [&](const float (&alpha)[2]) {
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        acc_o[4 * j + 0] *= alpha[0];
        acc_o[4 * j + 1] *= alpha[0];
        acc_o[4 * j + 2] *= alpha[1];
        acc_o[4 * j + 3] *= alpha[1];
      }
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        p_frag[kk][0] = pack2<T>(acc_s[8 * kk + 0], acc_s[8 * kk + 1]);
        p_frag[kk][1] = pack2<T>(acc_s[8 * kk + 2], acc_s[8 * kk + 3]);
        p_frag[kk][2] = pack2<T>(acc_s[8 * kk + 4], acc_s[8 * kk + 5]);
        p_frag[kk][3] = pack2<T>(acc_s[8 * kk + 6], acc_s[8 * kk + 7]);
      }
    };

    float alpha[2];
    next_tile(0);  // t = 0: S_0 only
    fence_regs(acc_s);
    wgmma_fence();
    issue_s(0);
    wgmma_wait<0>();
    fence_regs(acc_s);
    softmax(0, alpha);
    rescale_and_pack(alpha);
    for (int t = 1; t < n_tiles; ++t) {  // steady state: S_t and P_{t-1} V_{t-1} in flight together
      next_tile(t);
      fence_regs(acc_s);
      fence_regs(acc_o);
      fence_regs(p_frag);
      wgmma_fence();
      issue_s(t);
      issue_pv(t - 1);
      wgmma_wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run while the softmax does
      fence_regs(acc_s);
      softmax(t, alpha);
      wgmma_wait<0>();
      fence_regs(acc_o);
      fence_regs(p_frag);
      rescale_and_pack(alpha);
    }
    next_tile(n_tiles);  // t = n_tiles: the last P V only
    fence_regs(acc_o);
    fence_regs(p_frag);
    wgmma_fence();
    issue_pv(n_tiles - 1);
    wgmma_wait<0>();
    fence_regs(acc_o);
    cp_async_wait<0>();
  }

  // Epilogue: O / l (0 where the row saw nothing), rounded to T, rows < Lq stored.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float lr = quad_sum(l[r]);
    const float inv_l = lr > 0.f ? 1.f / lr : 0.f;
    const int row = row_g + 8 * r;
    if (row < p.Lq) {
      T* orow = o + int64_t(row) * p.o_row_stride;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j)
        *reinterpret_cast<uint32_t*>(orow + j * 8 + 2 * t4) =
            pack2<T>(acc_o[4 * j + 2 * r] * inv_l, acc_o[4 * j + 2 * r + 1] * inv_l);
    }
  }
#endif
}

// 1 when the driver loaded the sm_90a build of this file (the wgmma kernels are real), else 0.
__global__ void sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

template <class T, int kHeadDim>
void launch(const FastParams& p) {
  using Tr = FastTraitsSm90<kHeadDim>;
  const dim3 grid(unsigned(ceil_div(p.Lq, Tr::kBlockM)), unsigned(p.H), unsigned(p.B));
  const bool half = std::is_same<T, __half>::value;
  const char* name = kHeadDim == 64 ? (half ? "flash_fwd_wgmma_d64_fp16" : "flash_fwd_wgmma_d64_bf16")
                                    : (half ? "flash_fwd_wgmma_d128_fp16" : "flash_fwd_wgmma_d128_bf16");
  cuda::launch(name, flash_fwd_wgmma_kernel<T, kHeadDim>, grid, dim3(Tr::kNWarps * 32),
               size_t(fast_smem_bytes<Tr>() + 1024), 0, p);
}

}  // namespace sm90_detail

bool fast_wgmma_kernels_loaded() {
  static const bool loaded = [] {
    int* d = nullptr;
    KL_CUDA_CHECK(cudaMalloc(&d, sizeof(int)));
    int h = 0;
    try {
      cuda::launch("flash_fwd_sm90a_probe", sm90_detail::sm90a_probe, dim3(1), dim3(1), 0, 0, d);
      KL_CUDA_CHECK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
    } catch (...) {
      cudaFree(d);
      throw;
    }
    KL_CUDA_CHECK(cudaFree(d));
    return h == 1;
  }();
  return loaded;
}

void run_fast_wgmma(const FastParams& p) {
  validate(p);
  const bool half = p.dtype == FastDtype::Fp16;
  if (p.d == 64)
    half ? sm90_detail::launch<__half, 64>(p) : sm90_detail::launch<__nv_bfloat16, 64>(p);
  else
    half ? sm90_detail::launch<__half, 128>(p) : sm90_detail::launch<__nv_bfloat16, 128>(p);
}

}  // namespace kl::flash_attention
