// Hopper (sm_90a) device building blocks shared by the wgmma kernels: PTX wrappers (cp.async, mbarriers,
// bulk tensor copies, setmaxnreg, wgmma with its matrix descriptors), swizzled tile offsets and loads, and the
// host-side tensor-map encoder. Included by *.sm90a.cu files only (compiled for sm_90a as well as sm_90).
//
// Shared-memory layout: the 128-byte swizzle of the wgmma descriptors (and of TMA's SWIZZLE_128B). A tile
// of `rows` x d 16-bit elements is cut into d/64 column blocks of 64 elements (128 bytes a row); block cb
// holds rows 0..rows-1 at 128 bytes each; the 16-byte chunk c (0..7) of row r sits at chunk position
// c ^ (r & 7). Every tile starts 1024-byte aligned, so the hardware's swizzle (address bits [4,7) XOR
// [7,10)) is exactly this formula.
// Descriptors (PTX ISA, "Matrix Descriptor Format"; 64 bits): start address >> 4 in bits [0,14),
// leading-dimension byte offset (LBO) >> 4 in [16,30), stride-dimension byte offset (SBO) >> 4 in [32,46),
// base offset 0 in [49,52), layout 1 = 128-byte swizzle in [62,64).
//   - Q (A) and K (B of S = Q K^T) are K-major (d contiguous): rows 128 bytes apart inside a swizzle
//     atom of 8 rows, SBO = 1024 (the next 8 rows), LBO unused (a k16 step is 32 bytes, inside one
//     128-byte row). k-step kk starts at column block kk/4, byte 32*(kk%4) of the row.
//   - V (B of O += P V) is MN-major (d contiguous, keys = the k dimension): canonical
//     ((64 elements, m),(8 rows, k)) : ((1, LBO), (128 B, SBO)): LBO = the distance between 64-column
//     blocks of d (rows * 128 bytes), SBO = 1024 (the next 8 keys). k-step kk starts at key row 16*kk.
// Fragment layouts (PTX ISA, "Register Fragments", m64nNk16; warp w of the warpgroup, g = lane/4,
// t = lane%4): accumulator element 4j+e is row 16w + g + 8*(e>=2), column 8j + 2t + (e&1) (the m16n8
// layout of mma.sync, per warp); A in registers is the m16k16 A layout of mma.sync, per warp.
#pragma once

#include <cuda.h>  // CUtensorMap and the driver types (no -lcuda: the encoder comes through the runtime)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "kernels/measure/timeline_trace.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/flash_attention_fast.h"

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

// mbarriers (shared::cta, 8 bytes): init with an arrival count; arrive; arrive and expect `bytes` of
// bulk copies to complete on it; wait until the phase of the given parity has completed.
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_mbar_init() {
#ifdef KL_FA_SM90A
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Bulk tensor copy of one box (coordinates innermost first) into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2,
                                            int c3) {
#ifdef KL_FA_SM90A
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#endif
}
// The box at (c0, c1, c2, c3) of the 4-D tensor `map` (global) = the box at `src` in shared memory (laid out as
// the map's swizzle says), asynchronously (a bulk group of the issuing thread); elements outside the tensor are
// not written.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3) {
#ifdef KL_FA_SM90A
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk groups but the newest N have finished reading shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// This thread's bulk groups but the newest N have completed (their global writes done).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
// Moves registers between warpgroups (needs the kernel's register cap at entry: __launch_bounds__(n, 1)).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#ifdef KL_FA_SM90A
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#ifdef KL_FA_SM90A
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
// Named barriers 1.. among `count` threads: sync waits (and counts itself), arrive only counts.
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
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
// D (64 x N, fp32) = A B (+ D when scale_d != 0); A K-major, B MN-major (transposed), both from shared memory
// (the backward's dQ = dS K: K stays row-major [keys][d], keys the k dimension).
template <class T, int N>
__device__ __forceinline__ void wgmma_ss_tb(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);
// D (64 x N, fp32) = A B (+ D when scale_d != 0); A MN-major (transposed), B K-major, both from shared memory
// (the backward's dQ^T = K^T dS^T: K stays row-major [keys][d], d the M dimension).
template <class T, int N>
__device__ __forceinline__ void wgmma_ss_ta(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);

#ifdef KL_FA_SM90A
// One specialisation per shape and type: inline asm takes one operand per accumulator register, and the
// PTX type (bf16 or f16) is part of the instruction text. The macros below write the operand lists once.
#define KL_ACC8(d, i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define KL_ACC32(d) KL_ACC8(d, 0), KL_ACC8(d, 8), KL_ACC8(d, 16), KL_ACC8(d, 24)
#define KL_ACC64(d) KL_ACC32(d), KL_ACC8(d, 32), KL_ACC8(d, 40), KL_ACC8(d, 48), KL_ACC8(d, 56)
#define KL_ACC40(d) KL_ACC32(d), KL_ACC8(d, 32)
#define KL_ACC128(d)                                                                                      \
  KL_ACC64(d), KL_ACC8(d, 64), KL_ACC8(d, 72), KL_ACC8(d, 80), KL_ACC8(d, 88), KL_ACC8(d, 96), KL_ACC8(d, 104), \
      KL_ACC8(d, 112), KL_ACC8(d, 120)
#define KL_REGS_0_31 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define KL_REGS_32_63 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define KL_REGS_32_39 "%32, %33, %34, %35, %36, %37, %38, %39"
#define KL_REGS_64_79 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define KL_REGS_64_95 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define KL_REGS_96_127 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// D (64 x 128) = A B (+ D when scale_d != 0), A and B from shared memory; TB: B transposed (imm-trans-b 1).
#define KL_WGMMA_SS_N128(NAME, T, PTX_T, TRANS_B)                                                         \
  template <>                                                                                             \
  __device__ __forceinline__ void NAME<T, 128>(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX_T "." PTX_T                          \
                 " {" KL_REGS_0_31 ", " KL_REGS_32_63 "}, %64, %65, p, 1, 1, 0, " TRANS_B ";\n}\n"     \
                 : KL_ACC64(d)                                                                            \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                               \
  }
// D (64 x 32) = A B (+ D when scale_d != 0), from shared memory; TB: B transposed (imm-trans-b 1).
#define KL_WGMMA_SS_N32(NAME, T, PTX_T, TRANS_B)                                                          \
  template <>                                                                                             \
  __device__ __forceinline__ void NAME<T, 32>(float (&d)[16], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." PTX_T "." PTX_T                           \
                 " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, " \
                 TRANS_B ";\n}\n"                                                                          \
                 : KL_ACC8(d, 0), KL_ACC8(d, 8)                                                           \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                               \
  }
// D (64 x 48) = A B (+ D when scale_d != 0), from shared memory: S and dP in the dQ pass at d = 256.
#define KL_WGMMA_SS_N48(NAME, T, PTX_T)                                                                   \
  template <>                                                                                             \
  __device__ __forceinline__ void NAME<T, 48>(float (&d)[24], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n48k16.f32." PTX_T "." PTX_T                           \
                 " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
                 "%20, %21, %22, %23}, %24, %25, p, 1, 1, 0, 0;\n}\n"                                          \
                 : KL_ACC8(d, 0), KL_ACC8(d, 8), KL_ACC8(d, 16)                                           \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                               \
  }
// D (64 x 128) += A B, A in registers, B transposed from shared memory.
#define KL_WGMMA_RS_N128(T, PTX_T)                                                                        \
  template <>                                                                                             \
  __device__ __forceinline__ void wgmma_rs<T, 128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX_T "." PTX_T                          \
                 " {" KL_REGS_0_31 ", " KL_REGS_32_63 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"   \
                 : KL_ACC64(d)                                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));                      \
  }
// D (64 x 64) += A B, A in registers, B transposed from shared memory.
#define KL_WGMMA_RS_N64(T, PTX_T)                                                                         \
  template <>                                                                                             \
  __device__ __forceinline__ void wgmma_rs<T, 64>(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX_T "." PTX_T                           \
                 " {" KL_REGS_0_31 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                     \
                 : KL_ACC32(d)                                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));                      \
  }

// D (64 x 80) = A B (+ D when scale_d != 0), A and B from shared memory: S at d = 256 (kBlockN 80), and S^T, dP^T
// and dQ^T in the backward's 80-row steps; TRANS_AB: imm-trans-a, imm-trans-b.
#define KL_WGMMA_SS_N80(NAME, T, PTX_T, TRANS_AB)                                                         \
  template <>                                                                                             \
  __device__ __forceinline__ void NAME<T, 80>(float (&d)[40], uint64_t desc_a, uint64_t desc_b,           \
                                              int scale_d) {                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n80k16.f32." PTX_T "." PTX_T                           \
                 " {" KL_REGS_0_31 ", " KL_REGS_32_39 "}, %40, %41, p, 1, 1, " TRANS_AB ";\n}\n"       \
                 : KL_ACC40(d)                                                                            \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                               \
  }
// D (64 x 160) = A B (+ D when scale_d != 0), A and B from shared memory: S on 160 keys a tile (the forward's
// default at d = 128 without the mask past L = 2048).
#define KL_WGMMA_SS_N160(NAME, T, PTX_T)                                                                  \
  template <>                                                                                             \
  __device__ __forceinline__ void NAME<T, 160>(float (&d)[80], uint64_t desc_a, uint64_t desc_b,          \
                                               int scale_d) {                                              \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n160k16.f32." PTX_T "." PTX_T                          \
                 " {" KL_REGS_0_31 ", " KL_REGS_32_63 ", " KL_REGS_64_79 "}, %80, %81, p, 1, 1, 0, 0;\n}\n" \
                 : KL_ACC64(d), KL_ACC8(d, 64), KL_ACC8(d, 72)                                            \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                               \
  }
// D (64 x 256) += A B, A in registers, B transposed from shared memory: O += P V at d = 256.
#define KL_WGMMA_RS_N256(T, PTX_T)                                                                        \
  template <>                                                                                             \
  __device__ __forceinline__ void wgmma_rs<T, 256>(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                           \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." PTX_T "." PTX_T                          \
                 " {" KL_REGS_0_31 ", " KL_REGS_32_63 ", " KL_REGS_64_95 ", " KL_REGS_96_127 "}, "        \
                 "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"                                       \
                 : KL_ACC128(d)                                                                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));                      \
  }

// D (64 x 64) = A B (+ D when scale_d != 0), from shared memory; TB: B transposed (imm-trans-b 1).
#define KL_WGMMA_SS_N64(NAME, T, PTX_T, TRANS_B)                                                          \
  template <>                                                                                             \
  __device__ __forceinline__ void NAME<T, 64>(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX_T "." PTX_T                           \
                 " {" KL_REGS_0_31 "}, %32, %33, p, 1, 1, 0, " TRANS_B ";\n}\n"                         \
                 : KL_ACC32(d)                                                                            \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                               \
  }
KL_WGMMA_SS_N64(wgmma_ss, __nv_bfloat16, "bf16", "0")
KL_WGMMA_SS_N64(wgmma_ss, __half, "f16", "0")
KL_WGMMA_SS_N64(wgmma_ss_tb, __nv_bfloat16, "bf16", "1")
KL_WGMMA_SS_N64(wgmma_ss_tb, __half, "f16", "1")
#undef KL_WGMMA_SS_N64
KL_WGMMA_SS_N128(wgmma_ss, __nv_bfloat16, "bf16", "0")
KL_WGMMA_SS_N128(wgmma_ss, __half, "f16", "0")
KL_WGMMA_SS_N128(wgmma_ss_tb, __nv_bfloat16, "bf16", "1")
KL_WGMMA_SS_N128(wgmma_ss_tb, __half, "f16", "1")
KL_WGMMA_SS_N32(wgmma_ss, __nv_bfloat16, "bf16", "0")
KL_WGMMA_SS_N32(wgmma_ss, __half, "f16", "0")
KL_WGMMA_SS_N32(wgmma_ss_tb, __nv_bfloat16, "bf16", "1")
KL_WGMMA_SS_N32(wgmma_ss_tb, __half, "f16", "1")
#undef KL_WGMMA_SS_N32
KL_WGMMA_SS_N48(wgmma_ss, __nv_bfloat16, "bf16")
KL_WGMMA_SS_N48(wgmma_ss, __half, "f16")
#undef KL_WGMMA_SS_N48
KL_WGMMA_RS_N128(__nv_bfloat16, "bf16")
KL_WGMMA_RS_N128(__half, "f16")
KL_WGMMA_RS_N64(__nv_bfloat16, "bf16")
KL_WGMMA_RS_N64(__half, "f16")
KL_WGMMA_SS_N80(wgmma_ss, __nv_bfloat16, "bf16", "0, 0")
KL_WGMMA_SS_N80(wgmma_ss, __half, "f16", "0, 0")
KL_WGMMA_SS_N80(wgmma_ss_ta, __nv_bfloat16, "bf16", "1, 0")
KL_WGMMA_SS_N80(wgmma_ss_ta, __half, "f16", "1, 0")
KL_WGMMA_RS_N256(__nv_bfloat16, "bf16")
KL_WGMMA_RS_N256(__half, "f16")
KL_WGMMA_SS_N160(wgmma_ss, __nv_bfloat16, "bf16")
KL_WGMMA_SS_N160(wgmma_ss, __half, "f16")
#undef KL_WGMMA_SS_N80
#undef KL_WGMMA_SS_N160
#undef KL_WGMMA_RS_N256
#undef KL_REGS_32_39
#undef KL_REGS_64_79
#undef KL_REGS_64_95
#undef KL_REGS_96_127
#undef KL_ACC40
#undef KL_ACC128
#undef KL_WGMMA_SS_N128
#undef KL_WGMMA_RS_N128
#undef KL_WGMMA_RS_N64
#undef KL_REGS_0_31
#undef KL_REGS_32_63
#undef KL_ACC64
#undef KL_ACC32
#undef KL_ACC8
#else
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&)[N / 2], uint64_t, uint64_t, int) {}
template <class T, int N>
__device__ __forceinline__ void wgmma_rs(float (&)[N / 2], const uint32_t (&)[4], uint64_t) {}
template <class T, int N>
__device__ __forceinline__ void wgmma_ss_tb(float (&)[N / 2], uint64_t, uint64_t, int) {}
template <class T, int N>
__device__ __forceinline__ void wgmma_ss_ta(float (&)[N / 2], uint64_t, uint64_t, int) {}
#endif


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
// The driver's tensor-map encoder, reached through the runtime (no -lcuda); null when unavailable.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    KL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    return q == cudaDriverEntryPointSuccess ? reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f) : nullptr;
  }();
  return fn;
}

// A 4-D map over [B, H, L, d] (innermost first: d, L, H, B; H = H_kv for k and v), boxes of 64 columns (128 bytes) x `rows`
// rows, 128-byte swizzle, zeros outside. False when the driver refuses (e.g. unusual strides).
inline bool make_tensor_map(CUtensorMap* map, const void* ptr, FastDtype dtype, int d, int L, int H, int B,
                            int64_t row_stride, int64_t head_stride, int64_t batch_stride, int rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) return false;
  const cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(L), cuuint64_t(H), cuuint64_t(B)};
  const cuuint64_t strides[3] = {cuuint64_t(row_stride) * 2, cuuint64_t(head_stride) * 2, cuuint64_t(batch_stride) * 2};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r =
      encode(map, dtype == FastDtype::Bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
             const_cast<void*>(ptr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// Launches a one-thread probe kernel that writes 1 where the driver loaded this file's sm_90a build (0 in
// the plain sm_90 one) and returns whether it did; `name` names the launch in errors.
inline bool sm90a_probe_reads_one(const char* name, void (*probe)(int*)) {
  int* d = nullptr;
  KL_CUDA_CHECK(cudaMalloc(&d, sizeof(int)));
  int h = 0;
  try {
    cuda::launch(name, probe, dim3(1), dim3(1), 0, 0, d);
    KL_CUDA_CHECK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(d);
    throw;
  }
  KL_CUDA_CHECK(cudaFree(d));
  return h == 1;
}


// ---- [SECTION] timeline recording (issue 30; the layout: kernels/measure/timeline_trace.h) --------------
// The kernels take a recorder per thread: NoRecord in the plain kernels (every call compiles to nothing,
// so their code is what it was), LaneRecorder in the instrumented ones. mark(phase, step, tile) stamps the
// moment a phase begins. It has no branch: every thread of the warp reads the clock and only the recording
// thread's store is enabled (a predicate), so the control flow around the wgmma pipeline stays the plain
// kernel's. Threads that do not record, and CTAs that are not recorded, keep a capacity of 0.
struct NoTrace {};  // the plain kernels' trace argument: none

struct NoRecord {
  __device__ __forceinline__ NoRecord(const NoTrace&, int, bool) {}
  __device__ __forceinline__ void mark(timeline::Phase, int, int) {}
  __device__ __forceinline__ void finish(int) {}
};

__device__ __forceinline__ uint64_t read_clock64() {
  uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;\n" : "=l"(c));
  return c;
}
__device__ __forceinline__ uint64_t read_globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t read_smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;\n" : "=r"(s));
  return s;
}
// *p = {a, b, c, d} where `on` (a predicated store: no branch).
__device__ __forceinline__ void store_record_if(void* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d, bool on) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.u32 p, %5, 0;\n@p st.global.v4.u32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(p),
      "r"(a), "r"(b), "r"(c), "r"(d), "r"(uint32_t(on)));
}

// Its state is two 32-bit record indices (the buffer's base is read from the kernel parameter at each
// mark): the recorder lives in the consumers' registers beside O, S and P, and in the producer's 24.
struct LaneRecorder {
  const timeline::TraceArgs* args;  // the kernel's parameter
  uint32_t next;                    // the record the next mark writes (absolute index into args->buf)
  uint32_t end;                     // one past this lane's last event record; 0 where this thread does not record

  // `records`: this thread is its CTA's recording thread for lane `lane_id`; the CTA is recorded when its
  // linear index is in a.ctas (or a.n_ctas < 0). Stamps the start anchor.
  __device__ __forceinline__ LaneRecorder(const timeline::TraceArgs& a, int lane_id, bool records)
      : args(&a), next(0), end(0) {
    const int cta = int(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    int slot = a.n_ctas < 0 ? cta : -1;
#pragma unroll
    for (int i = 0; i < timeline::kMaxTracedCtas; ++i)
      if (i < a.n_ctas && a.ctas[i] == cta) slot = i;
    if (!records || slot < 0) return;
    const uint32_t base = (uint32_t(slot) * uint32_t(a.lanes) + uint32_t(lane_id)) *
                          uint32_t(timeline::kHeaderRecords + a.capacity);
    next = base + timeline::kHeaderRecords;
    end = next + uint32_t(a.capacity);
    const uint64_t t = read_globaltimer(), c = read_clock64();
    static_cast<uint4*>(a.buf)[base + 1] = make_uint4(uint32_t(t), uint32_t(t >> 32), uint32_t(c), uint32_t(c >> 32));
  }
  __device__ __forceinline__ void mark(timeline::Phase phase, int step, int tile) {
    const uint64_t c = read_clock64();
    store_record_if(static_cast<uint4*>(args->buf) + next, uint32_t(c), uint32_t(c >> 32),
                    uint32_t(phase) | (uint32_t(step) << 8), uint32_t(tile), next < end);
    ++next;
  }
  // The Done event, the end anchor, then the header (written last: the host reads a lane as recorded when
  // its header's magic is there). lane_id as at the start.
  __device__ __forceinline__ void finish(int lane_id) {
    mark(timeline::Phase::Done, timeline::kNoStep, -1);
    if (end == 0) return;
    uint4* const region = static_cast<uint4*>(args->buf) + (end - uint32_t(args->capacity) - timeline::kHeaderRecords);
    const uint32_t events = next - (end - uint32_t(args->capacity));
    const uint64_t t = read_globaltimer(), c = read_clock64();
    region[2] = make_uint4(uint32_t(t), uint32_t(t >> 32), uint32_t(c), uint32_t(c >> 32));
    region[0] = make_uint4(events, read_smid(), timeline::kLaneMagic, uint32_t(lane_id));
  }
};

// The recorder a kernel instantiated with trace argument type Trace uses.
template <class Trace>
struct RecorderFor {
  using type = NoRecord;
};
template <>
struct RecorderFor<timeline::TraceArgs> {
  using type = LaneRecorder;
};

}  // namespace sm90_detail
}  // namespace kl::flash_attention
