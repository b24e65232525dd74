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
//   - Two kernels share that warpgroup code (WarpgroupState):
//     kernel 1 (FastPath::WgmmaCpAsync): K and V tiles by cp.async from all threads, three stages, K two
//       tiles ahead and V one (V_{t-1} is read one iteration later than K_{t-1}); a block barrier per tile.
//     kernel 2 (FastPath::Wgmma, the default): a producer warpgroup issues bulk tensor copies (TMA) into
//       three stages on mbarriers and gives its registers to the two consumer warpgroups (setmaxnreg);
//       no block barrier after the start, and the consumers take turns on the tensor cores (ping-pong),
//       so one's softmax runs while the other's products do. Measured on the H200 in docs/perf-log.md.
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
#include <cuda.h>  // CUtensorMap and the driver types (no -lcuda: the encoder comes through the runtime)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/rungs/flash_attention_fast_device.cuh"

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
#define KL_REGS_64_95 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define KL_REGS_96_127 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// D (64 x 128) = A B (+ D when scale_d != 0), A and B from shared memory.
#define KL_WGMMA_SS_N128(T, PTX_T)                                                                        \
  template <>                                                                                             \
  __device__ __forceinline__ void wgmma_ss<T, 128>(float (&d)[64], uint64_t desc_a, uint64_t desc_b,      \
                                                   int scale_d) {                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX_T "." PTX_T                          \
                 " {" KL_REGS_0_31 ", " KL_REGS_32_63 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"               \
                 : KL_ACC64(d)                                                                            \
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

// D (64 x 80) = A B (+ D when scale_d != 0), A and B from shared memory: S at d = 256 (kBlockN 80).
#define KL_WGMMA_SS_N80(T, PTX_T)                                                                         \
  template <>                                                                                             \
  __device__ __forceinline__ void wgmma_ss<T, 80>(float (&d)[40], uint64_t desc_a, uint64_t desc_b,       \
                                                  int scale_d) {                                           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n80k16.f32." PTX_T "." PTX_T                           \
                 " {" KL_REGS_0_31 ", " KL_REGS_32_39 "}, %40, %41, p, 1, 1, 0, 0;\n}\n"               \
                 : KL_ACC40(d)                                                                            \
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

KL_WGMMA_SS_N128(__nv_bfloat16, "bf16")
KL_WGMMA_SS_N128(__half, "f16")
KL_WGMMA_RS_N128(__nv_bfloat16, "bf16")
KL_WGMMA_RS_N128(__half, "f16")
KL_WGMMA_RS_N64(__nv_bfloat16, "bf16")
KL_WGMMA_RS_N64(__half, "f16")
KL_WGMMA_SS_N80(__nv_bfloat16, "bf16")
KL_WGMMA_SS_N80(__half, "f16")
KL_WGMMA_RS_N256(__nv_bfloat16, "bf16")
KL_WGMMA_RS_N256(__half, "f16")
#undef KL_WGMMA_SS_N80
#undef KL_WGMMA_RS_N256
#undef KL_REGS_32_39
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

// ---- [SECTION] one warpgroup's state and steps (shared by both kernels) ---------------------------------
// Warpgroup wg owns query rows m0 + 64 wg .. + 63; this thread holds rows row_g and row_g + 8.
template <class T, int kHeadDim, int kBlockM, int kBlockN>
struct WarpgroupState {
  float acc_o[kHeadDim / 2];         // O, 64 x d per warpgroup, fp32
  float acc_s[kBlockN / 2];          // S_t, then P_t (fp32) until it is packed
  uint32_t p_frag[kBlockN / 16][4];  // P_{t-1} rounded to T, as the A fragments of P V (one per k16 step)
  float m[2], l[2];                  // running max (raw-score units), running sum (this thread's columns)
  float alpha[2];                    // the rescale factor of the last softmax step
  int row_g;
  float scale_log2;

  __device__ __forceinline__ void init(int row, float scale) {
#pragma unroll
    for (int i = 0; i < kHeadDim / 2; ++i) acc_o[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    row_g = row;
    scale_log2 = scale * 1.4426950408889634f;  // exp(x) = exp2(x * log2(e))
  }

  // S_t = Q K_t^T: d/16 k-steps of wgmma.m64n128k16, both operands K-major from shared memory.
  __device__ __forceinline__ void issue_s(uint32_t sQw, uint32_t sKs) {
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint32_t a = sQw + (kk >> 2) * (kBlockM * 128) + (kk & 3) * 32;
      const uint32_t b = sKs + (kk >> 2) * (kBlockN * 128) + (kk & 3) * 32;
      wgmma_ss<T, kBlockN>(acc_s, make_desc(a, 16, 1024), make_desc(b, 16, 1024), kk > 0);
    }
    wgmma_commit();
  }
  // O += P V: kBlockN/16 k-steps of wgmma.m64n{d}k16, P from registers, V MN-major from shared memory.
  __device__ __forceinline__ void issue_pv(uint32_t sVs) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
      wgmma_rs<T, kHeadDim>(acc_o, p_frag[kk], make_desc(sVs + kk * 16 * 128, kBlockN * 128, 1024));
    wgmma_commit();
  }

  // Mask (only on tiles the diagonal or the Lk tail crosses), m_new, alpha, P_t = exp(S_t - m_new) in
  // acc_s, l <- alpha l + rowsum(P_t). O is rescaled later (rescale_and_pack), once P_{t-1} V_{t-1} landed.
  __device__ __forceinline__ void softmax(const FastParams& p, int m_block, int t, int t4) {
    if (tile_needs_mask(m_block, t, p.Lq, p.Lk, kBlockM, kBlockN, p.causal)) {
      const int key_base = t * kBlockN;
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
  }

  // The rescale step (O <- alpha O; l was rescaled in softmax), then P_t into the A fragments.
  __device__ __forceinline__ void rescale_and_pack() {
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
  }

  // Epilogue: O / l (0 where the row saw nothing), rounded to T, rows < Lq stored.
  __device__ __forceinline__ void store(T* o, const FastParams& p, int t4) {
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
  }
};

// ---- [SECTION] kernel 1: cp.async loads, all threads compute ---------------------------------------------
// Grid (ceil(Lq / kBlockM), H, B); kBlockM / 64 warpgroups. Shared memory (1024-byte aligned):
// sQ [kBlockM x d], sK [kStages][kBlockN x d], sV [kStages][kBlockN x d].
template <class T, int kHeadDim>
__global__ void __launch_bounds__(FastTraitsSm90<kHeadDim>::kNWarps * 32, 1)
    flash_fwd_wgmma_kernel(const FastParams p, const int kv_group) {
#ifdef KL_FA_SM90A
  using Tr = FastTraitsSm90<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  constexpr int kThreads = Tr::kNWarps * 32;
  static_assert(kBlockN == 128 && kStages == 3, "the pipeline below is written for kBlockN 128, 3 stages");
  static_assert(kBlockM % 64 == 0 && Tr::kNWarps == kBlockM / 16, "one warpgroup per 64 query rows");
  constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2, kKVBytes = kBlockN * kHeadDim * 2;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the launch asks for 1 KiB of slack
  const uint32_t sK = sQ + kQBytes;
  const uint32_t sV = sK + kStages * kKVBytes;

  const int m_block = p.causal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);  // heaviest first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int t4 = lane & 3;
  const int m0 = m_block * kBlockM;

  const int h_kv = kv_head_of(h, kv_group);  // grouped-query attention: h / (H / H_kv)

  const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + h_kv * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + h_kv * p.v_head_stride;
  T* o = static_cast<T*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;

  const int n_tiles = key_tiles_for_block(m_block, p.Lq, p.Lk, kBlockM, kBlockN, p.causal);
  WarpgroupState<T, kHeadDim, kBlockM, kBlockN> w;
  w.init(m0 + wg * 64 + warp * 16 + (lane >> 2), p.scale);

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

    next_tile(0);  // t = 0: S_0 only
    fence_regs(w.acc_s);
    wgmma_fence();
    w.issue_s(sQw, sK);
    wgmma_wait<0>();
    fence_regs(w.acc_s);
    w.softmax(p, m_block, 0, t4);
    w.rescale_and_pack();
    for (int t = 1; t < n_tiles; ++t) {  // steady state: S_t and P_{t-1} V_{t-1} in flight together
      next_tile(t);
      fence_regs(w.acc_s);
      fence_regs(w.acc_o);
      fence_regs(w.p_frag);
      wgmma_fence();
      w.issue_s(sQw, sK + (t % kStages) * kKVBytes);
      w.issue_pv(sV + ((t - 1) % kStages) * kKVBytes);
      wgmma_wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run while the softmax does
      fence_regs(w.acc_s);
      w.softmax(p, m_block, t, t4);
      wgmma_wait<0>();
      fence_regs(w.acc_o);
      fence_regs(w.p_frag);
      w.rescale_and_pack();
    }
    next_tile(n_tiles);  // t = n_tiles: the last P V only
    fence_regs(w.acc_o);
    fence_regs(w.p_frag);
    wgmma_fence();
    w.issue_pv(sV + ((n_tiles - 1) % kStages) * kKVBytes);
    wgmma_wait<0>();
    fence_regs(w.acc_o);
    cp_async_wait<0>();
  }
  w.store(o, p, t4);
#endif
}

// The consumer warpgroups of the TMA kernel (below): wait for a stage, take the turn, issue, release.
template <class T, int kHeadDim>
__device__ __forceinline__ void consume(const FastParams& p, int m_block, int n_tiles, uint32_t sQ, uint32_t sK,
                                        uint32_t sV, uint32_t bars) {
  using Tr = FastTraitsSm90Tma<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  constexpr uint32_t kKVBytes = kBlockN * kHeadDim * 2;
  const uint32_t full_q = bars;
  auto full_k = [&](int s) { return bars + 8 * (1 + s); };
  auto full_v = [&](int s) { return bars + 8 * (1 + kStages + s); };
  auto empty_k = [&](int s) { return bars + 8 * (1 + 2 * kStages + s); };
  auto empty_v = [&](int s) { return bars + 8 * (1 + 3 * kStages + s); };
  const int h = blockIdx.y, b = blockIdx.z;
  const int warp_id = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wg = warp_id >> 2, warp = warp_id & 3, t4 = lane & 3;
  const int m0 = m_block * kBlockM;

  T* o = static_cast<T*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;
  WarpgroupState<T, kHeadDim, kBlockM, kBlockN> w;
  w.init(m0 + wg * 64 + warp * 16 + (lane >> 2), p.scale);

  if (n_tiles > 0) {  // uniform across the block
    const uint32_t sQw = sQ + wg * 64 * 128;
    // Turns: warpgroup wg waits on named barrier 1 + wg before issuing, then lets the other one go.
    // Warpgroup 1 lets warpgroup 0 go first, and skips its very last release (counts stay balanced:
    // n_tiles + 1 turns each).
    auto my_turn = [&] { named_bar_sync(1 + wg, 256); };
    auto their_turn = [&](bool last) {
      if (!(wg == 1 && last)) named_bar_arrive(1 + (wg ^ 1), 256);
    };
    auto release = [&](uint32_t bar) {
      if (lane == 0) mbar_arrive(bar);
    };
    if (wg == 1) named_bar_arrive(1, 256);

    mbar_wait(full_q, 0);
    mbar_wait(full_k(0), 0);
    my_turn();
    fence_regs(w.acc_s);
    wgmma_fence();
    w.issue_s(sQw, sK);
    their_turn(false);
    wgmma_wait<0>();
    fence_regs(w.acc_s);
    release(empty_k(0));
    w.softmax(p, m_block, 0, t4);
    w.rescale_and_pack();
    for (int t = 1; t < n_tiles; ++t) {
      const int s = t % kStages, sp = (t - 1) % kStages;
      mbar_wait(full_k(s), (t / kStages) & 1);
      mbar_wait(full_v(sp), ((t - 1) / kStages) & 1);
      my_turn();
      fence_regs(w.acc_s);
      fence_regs(w.acc_o);
      fence_regs(w.p_frag);
      wgmma_fence();
      w.issue_s(sQw, sK + s * kKVBytes);
      w.issue_pv(sV + sp * kKVBytes);
      their_turn(false);
      wgmma_wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run while the softmax does
      fence_regs(w.acc_s);
      release(empty_k(s));
      w.softmax(p, m_block, t, t4);
      wgmma_wait<0>();
      fence_regs(w.acc_o);
      fence_regs(w.p_frag);
      release(empty_v(sp));
      w.rescale_and_pack();
    }
    const int sl = (n_tiles - 1) % kStages;
    mbar_wait(full_v(sl), ((n_tiles - 1) / kStages) & 1);
    my_turn();
    fence_regs(w.acc_o);
    fence_regs(w.p_frag);
    wgmma_fence();
    w.issue_pv(sV + sl * kKVBytes);
    their_turn(true);
    wgmma_wait<0>();
    fence_regs(w.acc_o);
  }
  w.store(o, p, t4);
}

// ---- [SECTION] kernel 2: bulk tensor copies (TMA), a producer, two consumer warpgroups in turn -----------
// Block: warpgroups 0 and 1 compute (64 query rows each); warpgroup 2 is the producer: it gives its
// registers to the consumers (setmaxnreg 24 / 240) and one lane of its first warp issues the
// bulk tensor copies of Q and of every K / V tile into kStages stages; each copy completes on the
// stage's "full" mbarrier (expected bytes), and the consumers release a stage on its "empty" mbarrier
// (one arrival per consumer warp) once the wgmma that read it has completed. No block-wide barrier after
// the start, so the two warpgroups run out of phase: named barriers 1 and 2 make them take turns issuing
// their wgmma (FlashAttention-3's "ping-pong"), so one warpgroup's softmax runs while the other's
// products occupy the tensor cores. Tiles past L arrive as zeros (the copy engine's out-of-bounds fill).
template <class T, int kHeadDim>
__global__ void __launch_bounds__(FastTraitsSm90Tma<kHeadDim>::kThreads, 1)
    flash_fwd_wgmma_tma_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                               const __grid_constant__ CUtensorMap tm_v, const FastParams p, const int kv_group) {
#ifdef KL_FA_SM90A
  using Tr = FastTraitsSm90Tma<kHeadDim>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  static_assert(kBlockM == 128 && Tr::kNWarps == 8, "two consumer warpgroups of 64 rows");
  constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2, kKVBytes = kBlockN * kHeadDim * 2;
  constexpr int kConsumerWarps = Tr::kNWarps;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the launch asks for 1 KiB of slack
  const uint32_t sK = sQ + kQBytes;
  const uint32_t sV = sK + kStages * kKVBytes;
  const uint32_t bars = sV + kStages * kKVBytes;  // mbarriers, 8 bytes each
  const uint32_t full_q = bars;
  auto full_k = [&](int s) { return bars + 8 * (1 + s); };
  auto full_v = [&](int s) { return bars + 8 * (1 + kStages + s); };
  auto empty_k = [&](int s) { return bars + 8 * (1 + 2 * kStages + s); };
  auto empty_v = [&](int s) { return bars + 8 * (1 + 3 * kStages + s); };

  // The register hand-over and the turns need exactly this block shape; anything else would hang.
  if (blockDim.x != unsigned(Tr::kThreads)) __trap();
  const int m_block = p.causal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);  // heaviest first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp_id = tid >> 5, lane = tid & 31;
  const int m0 = m_block * kBlockM;
  const int n_tiles = key_tiles_for_block(m_block, p.Lq, p.Lk, kBlockM, kBlockN, p.causal);

  if (tid == 0) {
    mbar_init(full_q, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_k(s), 1);
      mbar_init(full_v(s), 1);
      mbar_init(empty_k(s), kConsumerWarps);
      mbar_init(empty_v(s), kConsumerWarps);
    }
    fence_mbar_init();
  }
  __syncthreads();

  if (warp_id >= kConsumerWarps) {  // ---- producer warpgroup: one lane works, 24 registers suffice
    setmaxnreg_dec<24>();
    if (warp_id == kConsumerWarps && lane == 0 && n_tiles > 0) {
      const int h_kv = kv_head_of(h, kv_group);  // grouped-query attention: the K/V maps' head coordinate
      mbar_arrive_expect_tx(full_q, kQBytes);
#pragma unroll
      for (int cb = 0; cb < kHeadDim / 64; ++cb) tma_load_4d(sQ + cb * kBlockM * 128, &tm_q, full_q, cb * 64, m0, h, b);
      for (int t = 0; t < n_tiles; ++t) {
        const int s = t % kStages;
        const uint32_t parity = ((t / kStages) - 1) & 1;  // the release of tile t - kStages
        if (t >= kStages) mbar_wait(empty_k(s), parity);
        mbar_arrive_expect_tx(full_k(s), kKVBytes);
#pragma unroll
        for (int cb = 0; cb < kHeadDim / 64; ++cb)
          tma_load_4d(sK + s * kKVBytes + cb * kBlockN * 128, &tm_k, full_k(s), cb * 64, t * kBlockN, h_kv, b);
        if (t >= kStages) mbar_wait(empty_v(s), parity);
        mbar_arrive_expect_tx(full_v(s), kKVBytes);
#pragma unroll
        for (int cb = 0; cb < kHeadDim / 64; ++cb)
          tma_load_4d(sV + s * kKVBytes + cb * kBlockN * 128, &tm_v, full_v(s), cb * 64, t * kBlockN, h_kv, b);
      }
    }
  } else {  // ---- consumer warpgroups: 240 registers each thread (O, S, P and the softmax state)
    setmaxnreg_inc<240>();
    consume<T, kHeadDim>(p, m_block, n_tiles, sQ, sK, sV, bars);
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
               size_t(fast_smem_bytes<Tr>() + 1024), 0, p, kv_group(p));
}

// The driver's tensor-map encoder, reached through the runtime (no -lcuda); null when unavailable.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
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
bool make_tensor_map(CUtensorMap* map, const void* ptr, FastDtype dtype, int d, int L, int H, int B,
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

// Launches the TMA kernel; false (nothing launched) when a tensor map cannot be made.
template <class T, int kHeadDim>
bool launch_tma(const FastParams& p) {
  using Tr = FastTraitsSm90Tma<kHeadDim>;
  CUtensorMap mq, mk, mv;
  if (!make_tensor_map(&mq, p.q, p.dtype, p.d, p.Lq, p.H, p.B, p.q_row_stride, p.q_head_stride, p.q_batch_stride,
                       Tr::kBlockM) ||
      !make_tensor_map(&mk, p.k, p.dtype, p.d, p.Lk, kv_heads(p), p.B, p.k_row_stride, p.k_head_stride, p.k_batch_stride,
                       Tr::kBlockN) ||
      !make_tensor_map(&mv, p.v, p.dtype, p.d, p.Lk, kv_heads(p), p.B, p.v_row_stride, p.v_head_stride, p.v_batch_stride,
                       Tr::kBlockN))
    return false;
  const dim3 grid(unsigned(ceil_div(p.Lq, Tr::kBlockM)), unsigned(p.H), unsigned(p.B));
  const bool half = std::is_same<T, __half>::value;
  const char* name = kHeadDim == 64    ? (half ? "flash_fwd_wgmma_tma_d64_fp16" : "flash_fwd_wgmma_tma_d64_bf16")
                     : kHeadDim == 128 ? (half ? "flash_fwd_wgmma_tma_d128_fp16" : "flash_fwd_wgmma_tma_d128_bf16")
                                       : (half ? "flash_fwd_wgmma_tma_d256_fp16" : "flash_fwd_wgmma_tma_d256_bf16");
  const size_t smem = size_t(fast_smem_bytes<Tr>()) + 1024 + 8 * (1 + 4 * Tr::kStages);
  cuda::launch(name, flash_fwd_wgmma_tma_kernel<T, kHeadDim>, grid, dim3(Tr::kThreads), smem, 0, mq, mk, mv,
               p, kv_group(p));
  return true;
}

}  // namespace sm90_detail

bool fast_wgmma_kernels_loaded() {
  static const bool loaded = [] {
    if (cuda_device_count() == 0) return false;  // no device: the caller reports that, not this probe
    int dev = 0, major = 0, minor = 0;
    KL_CUDA_CHECK(cudaGetDevice(&dev));
    KL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    KL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major != 9 || minor != 0) return false;  // sm_90a code runs on compute capability 9.0 only
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

bool run_fast_wgmma(const FastParams& p, bool tma) {
  validate(p);
  const bool half = p.dtype == FastDtype::Fp16;
  if (p.d == 256) {  // the TMA kernel only (the cp.async one has no d = 256 tiles): else mma.sync
    if (!tma) throw InputError(wgmma_cpasync_d256_message());
    if (half ? sm90_detail::launch_tma<__half, 256>(p) : sm90_detail::launch_tma<__nv_bfloat16, 256>(p)) return true;
    run_fast_mma_sync(p);
    return false;
  }
  if (tma) {
    const bool ok = p.d == 64 ? (half ? sm90_detail::launch_tma<__half, 64>(p) : sm90_detail::launch_tma<__nv_bfloat16, 64>(p))
                              : (half ? sm90_detail::launch_tma<__half, 128>(p)
                                      : sm90_detail::launch_tma<__nv_bfloat16, 128>(p));
    if (ok) return true;
  }
  if (p.d == 64)
    half ? sm90_detail::launch<__half, 64>(p) : sm90_detail::launch<__nv_bfloat16, 64>(p);
  else
    half ? sm90_detail::launch<__half, 128>(p) : sm90_detail::launch<__nv_bfloat16, 128>(p);
  return false;
}

}  // namespace kl::flash_attention
