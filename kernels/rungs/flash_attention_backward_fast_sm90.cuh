// Rung 6, fast variant, Hopper path: the FlashAttention backward's main kernel on wgmma (sm_90a), chosen per
// call (FastBackwardParams::path, or KL_FLASH_BWD_PATH=wgmma; the default where it runs: on the H200 it measured
// 1.3x-2.0x the mma.sync kernel's TFLOP/s at d = 128, docs/perf-log.md). The preprocess (D), the convert pass and the deterministic mode's dQ pass
// are the mma.sync path's (flash_attention_backward_fast.cu); only the main kernel differs.
//
// One CTA per K/V tile j of kBlockN = 128 keys, 8 warps = 2 warpgroups; warpgroup wg owns keys
// n0 + 64 wg .. + 63 and keeps their dK_j, dV_j (64 x d fp32 each) in registers for the whole CTA. The CTA
// walks the query tiles i of kBlockM = 64 rows (causal: from first_query_tile; the diagonal tiles masked,
// bottom-right aligned), Q_i, dO_i, L_i, D_i two stages deep by cp.async (all threads, a block barrier per
// step). Per step, in FlashAttention-3's transposed form (the keys are the wgmma's M):
//   S^T  = K_j Q_i^T       wgmma.m64n64k16 ss: K (A) and Q (B) K-major from shared memory
//   dP^T = V_j dO_i^T      wgmma.m64n64k16 ss: V (A), dO (B)
//   P^T  = exp2(S^T * scale*log2e - L_i * log2e),  dS^T = P^T ∘ (dP^T - D_i)   (registers, fp32)
//   dV_j += P^T dO_i       wgmma.m64n{d}k16 rs: P^T from registers (the accumulator layout rounded to 16 bits
//   dK_j += dS^T Q_i       is the A layout), dO and Q MN-major from shared memory (d contiguous, queries = k)
//   dQ_i += dS K_j         dS^T stored transposed into shared memory as dS [query][key] (K-major A), K MN-major
//                          (B, keys = k): wgmma.m64n64k16 ss with B transposed; d = 128: warpgroup wg takes
//                          columns 64 wg .. (all 128 keys); d = 64: all columns over its own 64 keys (both add).
//                          The result goes into the fp32 accumulator with atomics (deterministic mode: skipped).
// wgmma-tma (kTma; the default; the deterministic mode runs its loads without its dQ part), FlashAttention-3's
// loads and dQ adds: Q_i and dO_i arrive by bulk tensor copies (TMA) that one thread issues, each stage's arrival
// on an mbarrier, instead of cp.async from all 256 threads; dS^T goes to sdS by stmatrix.x4.trans (4 per thread
// per step instead of 32 16-bit stores); each warpgroup stages its dQ_i part (64 rows x 64 fp32) in shared memory
// as two 64 x 32 boxes in the 128-byte swizzle (conflict-free float2 stores), two stages, and after the next
// step's first barrier the warpgroup's first thread adds both boxes into the fp32 accumulator with two bulk
// tensor reduce-adds (cp.reduce.async.bulk.tensor .add through a map of dq_accum, atomic per element in L2; rows
// past Lq are clipped by the map), so the adds overlap the next step's products. Before a stage is rewritten its
// issuer waits for its previous adds to have read it (wait_group.read, at the step's start, before it issues the
// next adds); after the last step a barrier, the last adds, the epilogue, and wait_group 0 before the CTA exits.
// dK_j += dS^T Q_i is issued with dV's (queued behind dQ's product instead, FlashAttention-3's order, it measured
// 0.97x-1.01x: docs/perf-log.md). dK_j and dV_j leave through shared memory (store_dk_dv_staged: stmatrix into the
// free Q_i / dO_i stages, then 16-byte stores along rows). At d = 64 a step takes 128 query rows (kBlockMTma,
// FlashAttention-3's tile there): S^T and dP^T are m64n128k16 (64 registers each), dV and dK take 8 k16 steps a
// step, and warpgroup wg computes dQ_i's rows 64 wg .. (all 64 columns over all 128 keys: A from dS's rows 64 wg ..)
// and adds them as its two boxes; half the steps, so half the barriers, waits and issues per query row. At d = 128
// a step takes 80 (kM80, FlashAttention-3's tile without the mask, its dQ_swapAB): S^T and dP^T are m64n80k16
// (40 registers each), dV and dK take 5 k16 steps, and as 80 rows do not split into the wgmma's M of 64 warpgroup
// wg computes dQ_i^T = K_j^T dS^T for its 64 columns (M = the head dimension, N = the 80 queries; 246 registers),
// staged by 4-byte stores as two 80 x 32 boxes in one stage (1.08x-1.10x the 64-row kernel from L = 2048 on an
// H100, 1.03x-1.08x under the mask; the instrumented build takes them too).
// Shared memory: + 2 x 32 KiB and two mbarriers: d = 64: 195 KiB, d = 128: 210 KiB (80 rows: 207 KiB; of 227).
// Measured against the kernel above and the steps between (dQ by 256-byte bulk adds per row; by tensor reduce-adds
// with cp.async loads): docs/perf-log.md.
// Shared memory (1024-byte aligned tiles, 128-byte swizzle; the layout and descriptor conventions are at the
// top of kernels/rungs/sm90_device.cuh): sK, sV [128][d]; sQ, sdO [2][64][d]; sdS [64][128]; L, D [2][64]
// fp32. d = 64: 81 KiB, d = 128: 145 KiB (+1 KiB alignment).
//
// This header holds the kernel as a template and its launcher; five translation units instantiate it:
// flash_attention_backward_fast_plain.sm90a.cu the plain kernels at d = 128, flash_attention_backward_fast_m80.sm90a.cu
// the 80-row one (kM80), flash_attention_backward_fast_gqa.sm90a.cu the grouped-query ones (kGqa:
// flash_bwd_wgmma_gqa_kernel), flash_attention_backward_fast_d64.sm90a.cu both kinds at d = 64,
// flash_attention_backward_fast_timeline.sm90a.cu
// the instrumented ones (issue 30: flash_bwd_wgmma_traced_kernel, which stamps each warpgroup's phases for the
// CTAs a trace names; kernels/measure/timeline_trace.h). Both run the same body with a recorder as template
// argument (sm90_device.cuh): NoRecord's marks compile to nothing, so the plain kernels' code is unchanged.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/rungs/flash_attention_backward_fast_device.cuh"
#include "kernels/rungs/flash_attention_fast_device.cuh"
#include "kernels/rungs/sm90_device.cuh"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

using flash_attention::ceil_div;
using flash_attention::fast_exp2;
using flash_attention::key_visible;
using flash_attention::pack2;
using namespace flash_attention::sm90_detail;

__device__ __forceinline__ void st_shared_v2_f32(uint32_t addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}

__device__ __forceinline__ void st_shared_u16(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(addr), "h"(static_cast<unsigned short>(v & 0xFFFFu)) : "memory");
}

// stmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8; r[i] is this lane's (row lane/4, columns
// 2 (lane%4), +1) of matrix i (the accumulator fragment's layout), written as it is (sm_90).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// stmatrix.x4.trans: lane l gives the address of row l % 8 of matrix l / 8; r[i] is this lane's (row lane/4,
// columns 2 (lane%4), +1) of matrix i, written transposed (sm_90).
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// The box at (x, y, z) of the 3-D tensor `map` (global, fp32) += the box at `src` in shared memory (laid out
// as the map's swizzle says), asynchronously, atomically per element in L2; elements outside the tensor
// (rows past Lq) are not touched. One thread issues it.
__device__ __forceinline__ void bulk_tensor_reduce_add_3d(const CUtensorMap* map, uint32_t src, int x, int y, int z) {
#ifdef KL_FA_SM90A
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(x), "r"(y), "r"(z)
               : "memory");
#endif
}

// 4 bytes from global to shared memory, asynchronously (cp.async group); valid false: 4 zero bytes, nothing read.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
// dst[0] += a, dst[1] += b in global memory (one 8-byte vector atomic; dst even).
__device__ __forceinline__ void add_pair(float* dst, float a, float b) {
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(a, b));
}

template <int N>
__device__ __forceinline__ void zero(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i] = 0.f;
}

// The accumulator of a 64 x 16 K product (rows: this thread's keys, columns: queries 16 kk ..) rounded to T as
// the A fragments of the K k16 steps over the queries (the forward's P packing).
template <class T, int K>
__device__ __forceinline__ void pack_a(uint32_t (&frag)[K][4], const float (&acc)[8 * K]) {
#pragma unroll
  for (int kk = 0; kk < K; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) frag[kk][r] = pack2<T>(acc[8 * kk + 2 * r], acc[8 * kk + 2 * r + 1]);
}

// The wgmma and d = 256 kernels' epilogue, once for dK and once for dV: this thread's keys `key` and key + 8 (those
// < Lk) of one accumulator times f, rounded to T, at columns col0 + 8j + 2 t4 (+1) of rows d elements long, with
// 4-byte stores (the accumulator layout: element 4j + 2r (+1) is key + 8r).
template <class T, int N>
__device__ __forceinline__ void store_rows(T* out, const float (&acc)[N], int key, int Lk, int d, int col0, int t4,
                                           float f) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key + 8 * r >= Lk) continue;
#pragma unroll
    for (int j = 0; j < N / 4; ++j)
      *reinterpret_cast<uint32_t*>(out + int64_t(key + 8 * r) * d + col0 + j * 8 + 2 * t4) =
          pack2<T>(acc[4 * j + 2 * r] * f, acc[4 * j + 2 * r + 1] * f);
  }
}

// wgmma-tma's epilogue (1.00x-1.11x the backward with store_rows', docs/perf-log.md): warpgroup wg's keys (64
// rows) of dK = scale * acc_dk and dV = acc_dv, rounded to T, into shared memory at `stage` (dK then dV, each d / 64
// blocks of 64 rows x 128 bytes in the 128-byte swizzle) by stmatrix, then read back 16 bytes a thread, consecutive
// threads along a row, and written out with 16-byte stores (rows < Lk): whole 32-byte sectors instead of the 4-byte
// stores' half sectors from 8 rows at once. `stage` is this warpgroup's 256 d bytes, free of other readers (the
// caller's barrier); the warpgroup's own named barrier (1 + wg) orders its stores before its reads.
// Keep the alignment test `v4`: nvcc writes either branch's store as four 4-byte stores in PTX, and the test is,
// most likely, what lets ptxas make them one 16-byte store. Without it (the store alone, unconditional) the same
// epilogue measured 0.92x-0.97x at L = 512 and 0.96x-0.99x at L = 2048 and 4096 (docs/perf-log.md).
template <class T, int D, int N>
__device__ __forceinline__ void store_dk_dv_staged(T* dk, T* dv, const float (&acc_dk)[N], const float (&acc_dv)[N],
                                                   int key0, int Lk, uint32_t stage, int wg, int warp, int lane,
                                                   float scale) {
  static_assert(N == D / 2, "a warpgroup's 64 rows x d, 4 d / 8 accumulator registers per thread");
  constexpr uint32_t kArray = 64 * D * 2;  // one array's bytes
  const int mi = lane >> 3, rr = lane & 7, row = 16 * warp + 8 * (mi & 1) + rr;
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    const float(&acc)[N] = a == 0 ? acc_dk : acc_dv;
    const float f = a == 0 ? scale : 1.f;
#pragma unroll
    for (int jp = 0; jp < D / 16; ++jp) {  // column groups j = 2 jp, 2 jp + 1; matrices (rows +0/+8) x (j, j + 1)
      uint32_t r[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = 4 * (2 * jp + (i >> 1)) + 2 * (i & 1);
        r[i] = pack2<T>(acc[e] * f, acc[e + 1] * f);
      }
      const int c = 2 * jp + (mi >> 1);  // this lane's 16-byte column chunk
      stmatrix_x4(stage + a * kArray + (c >> 3) * 8192 + row * 128 + (((c & 7) ^ rr) << 4), r);
    }
  }
  named_bar_sync(1 + wg, 128);
  constexpr int kChunks = D / 8, kRowsPerPass = 128 / kChunks;
  const int wt = (threadIdx.x & 127), c = wt % kChunks;
  const bool v4 = ((reinterpret_cast<uintptr_t>(dk) | reinterpret_cast<uintptr_t>(dv)) & 15) == 0;
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    T* out = a == 0 ? dk : dv;
#pragma unroll
    for (int pass = 0; pass < 64 / kRowsPerPass; ++pass) {
      const int rw = pass * kRowsPerPass + wt / kChunks;
      const uint4 v = ld_shared_v4(stage + a * kArray + (c >> 3) * 8192 + rw * 128 + (((c & 7) ^ (rw & 7)) << 4));
      if (key0 + rw >= Lk) continue;
      T* dst = out + int64_t(key0 + rw) * D + 8 * c;
      if (v4) {
        *reinterpret_cast<uint4*>(dst) = v;
      } else {
        uint32_t* d32 = reinterpret_cast<uint32_t*>(dst);
        d32[0] = v.x, d32[1] = v.y, d32[2] = v.z, d32[3] = v.w;
      }
    }
  }
}

// ---- [SECTION] a step's pieces (the main kernel below and the ordered kernel of
// flash_attention_backward_fast_ordered_sm90.cuh): warpgroup wg's 64 keys against a step of BM query rows -------
// acc (64 keys x BM queries) = A_w B^T over k = D, committed as one group: S^T from this warpgroup's K_j rows (sA)
// and the stage's Q_i (sB), dP^T from V_j and dO_i. The caller fences acc and the wgmma queue before.
template <class T, int D, int BM, int BN>
__device__ __forceinline__ void issue_keys_by_queries(float (&acc)[BM / 2], uint32_t sA, uint32_t sB) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t off_k = (kk >> 2) * (BN * 128) + (kk & 3) * 32, off_q = (kk >> 2) * (BM * 128) + (kk & 3) * 32;
    wgmma_ss<T, BM>(acc, make_desc(sA + off_k, 16, 1024), make_desc(sB + off_q, 16, 1024), kk > 0);
  }
  wgmma_commit();
}

// P^T = exp2(S^T * scale log2(e) - L log2(e)) in place; pairs that `mask` and key_visible rule out are 0 (the Lk
// tail, the causal diagonal). lse_s: the stage's L, as stored (kRawL: converted here, lse_log2) or already
// L log2(e); row0: the step's first query row; key_row: this thread's first key. The wgmma and wgmma-tma kernels'
// form: the test written per element, which their build branches to a second, masked softmax on the steps that
// need it (softmax_p_split measured 0.997x of it in the atomic kernel over the 24 rows of d = 64 and 128, 0.96x-1.01x
// at d = 128 without the mask, two pairs in turn with cuDNN on an H100: docs/perf-log.md, the eighteenth session).
template <int BM, bool kRawL>
__device__ __forceinline__ void softmax_p(float (&acc_s)[BM / 2], const float* lse_s, float scale_log2, bool mask,
                                          int row0, int key_row, int t4, const FastBackwardParams& p) {
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
    float2 l2 = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t4);
    if constexpr (kRawL) l2 = make_float2(lse_log2(l2.x), lse_log2(l2.y));
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float pv = fast_exp2(fmaf(acc_s[4 * j + e], scale_log2, -((e & 1) ? l2.y : l2.x)));
      if (mask && !key_visible(row0 + 8 * j + 2 * t4 + (e & 1), key_row + 8 * (e >> 1), p.Lq, p.Lk, p.causal))
        pv = 0.f;
      acc_s[4 * j + e] = pv;
    }
  }
}
// softmax_p with `mask` tested once, so the steps that need no mask (all but a K/V tile's diagonal and tail) run no
// per-element test: the ordered kernel's, where ptxas had made softmax_p's tests predicated selects on every step
// (918 instructions a step per consumer warp against the atomic kernel's 713, Nsight Compute's source counters).
// It measured 1.03x softmax_p in the deterministic mode over the 24 rows of d = 64 and 128, 1.05x-1.12x at d = 128
// causal from L = 2048 (docs/perf-log.md, the eighteenth session).
template <int BM, bool kRawL>
__device__ __forceinline__ void softmax_p_split(float (&acc_s)[BM / 2], const float* lse_s, float scale_log2, bool mask,
                                                int row0, int key_row, int t4, const FastBackwardParams& p) {
  if (mask)
    softmax_p<BM, kRawL>(acc_s, lse_s, scale_log2, true, row0, key_row, t4, p);
  else
    softmax_p<BM, kRawL>(acc_s, lse_s, scale_log2, false, row0, key_row, t4, p);
}

// dS^T = P^T o (dP^T - D) in place of dP^T (d_s: the stage's D).
template <int BM>
__device__ __forceinline__ void ds_from_dp(float (&acc_dp)[BM / 2], const float (&acc_s)[BM / 2], const float* d_s,
                                           int t4) {
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
    const float2 d2 = *reinterpret_cast<const float2*>(d_s + 8 * j + 2 * t4);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dp[4 * j + e] = acc_s[4 * j + e] * (acc_dp[4 * j + e] - ((e & 1) ? d2.y : d2.x));
  }
}

// P^T and dS^T rounded to T as the A fragments of dV's and dK's products (pack_a), and every register those products
// touch fenced, so the compiler keeps them in place while the products run.
template <class T, int D, int BM>
__device__ __forceinline__ void pack_p_ds(uint32_t (&p_frag)[BM / 16][4], uint32_t (&ds_frag)[BM / 16][4],
                                          const float (&acc_s)[BM / 2], const float (&acc_dp)[BM / 2],
                                          float (&acc_dv)[D / 2], float (&acc_dk)[D / 2]) {
  pack_a<T>(p_frag, acc_s);
  pack_a<T>(ds_frag, acc_dp);
  fence_regs(acc_dv);
  fence_regs(acc_dk);
  fence_regs(p_frag);
  fence_regs(ds_frag);
}

// dV_j += P^T dO_i, dK_j += dS^T Q_i (k = the step's BM queries; dO, Q MN-major), fenced and committed as one group.
template <class T, int D, int BM>
__device__ __forceinline__ void issue_dv_dk(float (&acc_dv)[D / 2], float (&acc_dk)[D / 2],
                                            const uint32_t (&p_frag)[BM / 16][4], const uint32_t (&ds_frag)[BM / 16][4],
                                            uint32_t sdOs, uint32_t sQs) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BM / 16; ++kk)
    wgmma_rs<T, D>(acc_dv, p_frag[kk], make_desc(sdOs + kk * 16 * 128, BM * 128, 1024));
#pragma unroll
  for (int kk = 0; kk < BM / 16; ++kk)
    wgmma_rs<T, D>(acc_dk, ds_frag[kk], make_desc(sQs + kk * 16 * 128, BM * 128, 1024));
  wgmma_commit();
}

// dS^T's registers into sdS as dS [query][key] (K-major for the A of dS K) by four transposing 8 x 8 matrix stores
// per k-step: ds_frag[kk][r] holds (key +8 (r & 1), queries 8 (2 kk + r / 2) + 2t, +1).
template <int BM>
__device__ __forceinline__ void store_ds_transposed(uint32_t sdS, const uint32_t (&ds_frag)[BM / 16][4], int wg,
                                                    int warp, int lane) {
#pragma unroll
  for (int kk = 0; kk < BM / 16; ++kk)
    stmatrix_x4_trans(sdS + wgmma_frag::ds_stmatrix_byte(wg, warp, lane, kk, BM), ds_frag[kk]);
}

// This warpgroup's part of dQ_i = dS K_j (64 x 64 fp32, committed as one group): kWide (d = 64, 128 rows a step)
// rows 64 wg .. (A: dS's rows from 64 wg, in both 64-key blocks), all 64 columns over all 128 keys; d = 128 columns
// 64 wg .. over all 128 keys; d = 64 at 64 rows all 64 columns over this warpgroup's 64 keys (k-steps 4 wg ..).
template <class T, int D, int BM, int BN, bool kWide>
__device__ __forceinline__ void issue_dq_product(float (&acc_dq)[32], uint32_t sdS, uint32_t sK, int wg) {
  wgmma_fence();
  if constexpr (kWide) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma_ss_tb<T, 64>(acc_dq, make_desc(sdS + (kk >> 2) * (BM * 128) + wg * (64 * 128) + (kk & 3) * 32, 16, 1024),
                         make_desc(sK + kk * 16 * 128, BN * 128, 1024), kk > 0);
  } else if constexpr (D == 128) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma_ss_tb<T, 64>(acc_dq, make_desc(sdS + (kk >> 2) * (BM * 128) + (kk & 3) * 32, 16, 1024),
                         make_desc(sK + wg * (BN * 128) + kk * 16 * 128, BN * 128, 1024), kk > 0);
  } else {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_ss_tb<T, 64>(acc_dq, make_desc(sdS + wg * (BM * 128) + kk * 32, 16, 1024),
                         make_desc(sK + (4 * wg + kk) * 16 * 128, BN * 128, 1024), kk > 0);
  }
  wgmma_commit();
}

// This warpgroup's dQ_i part staged at st_base (a dQ stage) for the bulk reduce-adds: column group j at the j-th
// store, straight from the accumulator (no selects): a half-warp's stores (rows g .. g + 3) meet two to a bank
// (WgmmaTmaDqStagingLayout); then fenced for the bulk copies' reads.
__device__ __forceinline__ void stage_dq(uint32_t st_base, const float (&acc_dq)[32], int wg, int warp, int g, int t4) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      st_shared_v2_f32(st_base + wgmma_frag::dq_stage_byte(wg, 16 * warp + g + 8 * r, 8 * j + 2 * t4),
                       acc_dq[4 * j + 2 * r], acc_dq[4 * j + 2 * r + 1]);
  fence_proxy_async();
}

// kM80 (d = 128, 80 query rows a step): this warpgroup's part of dQ_i^T = K_j^T dS^T (columns
// 64 wg .. as the wgmma's M, the step's 80 queries as N, k = all 128 keys; committed as one group): A is K_j's column
// block wg read MN-major (the descriptor dQ's B had at 64 rows), B dS [query][key] K-major (the A it had).
template <class T, int BM, int BN>
__device__ __forceinline__ void issue_dq_t_product(float (&acc_dq)[BM / 2], uint32_t sdS, uint32_t sK, int wg) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
    wgmma_ss_ta<T, BM>(acc_dq, make_desc(sK + wg * (BN * 128) + kk * 16 * 128, BN * 128, 1024),
                       make_desc(sdS + (kk >> 2) * (BM * 128) + (kk & 3) * 32, 16, 1024), kk > 0);
  wgmma_commit();
}
// ... and staged as dQ [query][column] for the reduce-adds: element 4j + 2r + e is column 16 warp + g + 8r of the
// warpgroup's 64 (box column / 32), query 8j + 2 t4 + e. One 4-byte store each: a warp's 32 stores of one (j, r, e)
// cover 4 rows x 8 columns, 8 distinct 16-byte chunks after the swizzle, so 32 distinct banks. Fenced for the bulk
// copies' reads.
template <int BM>
__device__ __forceinline__ void stage_dq_t(uint32_t st_base, const float (&acc_dq)[BM / 2], int wg, int warp, int g,
                                           int t4) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      // Query 8j + 2 t4 + e lies 8j rows (j swizzle periods of 1024 bytes) past query 2 t4 + e.
      const uint32_t at = st_base + wgmma_frag::dq_stage_byte<BM>(wg, 2 * t4 + e, 16 * warp + g + 8 * r);
#pragma unroll
      for (int j = 0; j < BM / 8; ++j) st_shared_u32(at + j * 1024, __float_as_uint(acc_dq[4 * j + 2 * r + e]));
    }
  fence_proxy_async();
}

// ---- [SECTION] the main kernel ---------------------------------------------------------------------------
// Grid (ceil(Lk / 128), H, B), 256 threads. Thread (wg, warp, lane): keys n0 + 64 wg + 16 warp + g (+8), the
// accumulator columns 8j + 2t (+1) (g = lane / 4, t = lane % 4; sm90_device.cuh's fragment layout).
// kTma (wgmma-tma, with kAtomicDq): Q_i and dO_i by bulk tensor copies, dS^T stored by stmatrix, dQ_i staged in
// shared memory and added by bulk tensor reduce-adds one step later (see the header's wgmma-tma entry); kTma
// without kAtomicDq (flash_bwd_wgmma_dkdv_tma_kernel, the deterministic mode's): the copies only, no dQ part.
// The kernel's body, shared by the plain kernel (Trace = NoTrace) and the instrumented one (TraceArgs): the
// recorded lanes are the two warpgroups (lane wg), the work tile the CTA's linear index, the step the query tile.
// kGqa (grouped-query attention, flash_attention_backward_fast.h's design): grid (ceil(Lk / 128), H_kv, B); the
// CTA walks the query tiles of its kv head's group of query heads in turn (head gi of the group, tiles m_first ..
// m_blocks - 1 each; `step` numbers the steps across the heads and its parity is the stage), K_j, V_j loaded
// once, dK_j, dV_j summed over the group; the L/D and dQ rows of query head gi are rows gi * Lq .. of the
// group's first head's slices (GroupHeadPointers). The recorder's step is the tile m (no instrumented kGqa
// kernel exists).
// kTma's maps: maps.q and maps.dout (4-D maps of [B, H, Lq, d]; kGqa: at the query head the step computes) for
// the loads that thread 0 issues, each stage's arrival on an mbarrier (after the dQ staging), maps.dq for the adds;
// K_j, V_j, L_i and D_i are loaded as without it. The other kernels take no maps (null).
struct BwdMaps {
  const CUtensorMap *dq, *q, *dout;
};
// kTma: dK_j and dV_j written out through shared memory (store_dk_dv_staged, into the Q_i and dO_i stages, which
// are exactly the 512 d bytes it needs).
// kM80 (kTma, kAtomicDq, d = 128, plain heads): 80 query rows a step, dQ^T (issue_dq_t_product), one dQ stage (the
// adds of a step's dQ read it before the next step's dS barrier); where it runs: fast_backward_steps80.
template <class T, int kHeadDim, bool kAtomicDq, bool kTma, bool kGqa, class Trace, bool kM80 = false>
__device__ __forceinline__ void bwd_wgmma_body(const FastBackwardParams& p, const BwdMaps& maps, const Trace& trace) {
  const CUtensorMap* tm_dq = maps.dq;
  using Tr = FastBackwardTraitsSm90<kHeadDim>;
  // kTma at d = 64: 128 query rows a step (kWide); each warpgroup then computes dQ_i's rows 64 wg .. (all 64
  // columns over all 128 keys) and adds them as two boxes, so the two warpgroups do not both add the whole tile
  // (each its keys' part) as the other kernels do.
  constexpr bool kWide = kTma && kHeadDim == 64;
  static_assert(!kM80 || (kTma && kAtomicDq && !kGqa && kHeadDim == 128), "80 rows: the atomic d = 128 kernel");
  constexpr int D = kHeadDim, BN = Tr::kBlockN, kThreads = Tr::kThreads;
  constexpr int BM = kM80 ? Tr::kBlockM80 : kTma ? Tr::kBlockMTma : Tr::kBlockM;
  static_assert((BM == 64 || (kWide && BM == 128) || kM80) && BN == 128 && kThreads == 256,
                "two warpgroups of 64 keys, 64 query rows a step (128 at d = 64 on wgmma-tma, 80 on kM80)");
  constexpr int kKq = BM / 16;  // the k16 steps over queries
  constexpr uint32_t kQBytes = BM * D * 2, kKBytes = BN * D * 2, kDsBytes = BM * BN * 2;
  constexpr float kLog2e = 1.4426950408889634f;  // exp(x) = exp2(x * log2(e))
  constexpr int kDqRegs = kM80 ? BM / 2 : 32;
  // kTma's dQ staging: two stages (kM80: one, of two 80-row boxes a warpgroup) and the boxes' size.
  constexpr uint32_t kDqStages = kM80 ? 1 : 2, kDqBox = kM80 ? Tr::kDqBoxBytes80 : Tr::kDqBoxBytes;
  constexpr uint32_t kDqStage = kM80 ? uint32_t(Tr::kDqStageBytes80) : uint32_t(Tr::kDqStageBytes);
  constexpr uint32_t kStatsBytes = 4 * BM * 4 + (kM80 ? uint32_t(Tr::kStatsPad80) : 0u);

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sK = (raw + 1023u) & ~1023u;  // the launch asks for 1 KiB of slack
  const uint32_t sV = sK + kKBytes;
  const uint32_t sQ = sV + kKBytes;   // [2] stages
  const uint32_t sdO = sQ + 2 * kQBytes;  // [2] stages
  const uint32_t sdS = sdO + 2 * kQBytes;
  // [2][BM]: L * log2(e) (+inf: P = 0); kTma: L as stored (converted where read, lse_log2), 0 past Lq
  float* sLse = reinterpret_cast<float*>(smem_raw + (sdS + kDsBytes - raw));
  float* sD = sLse + 2 * BM;                                                   // [2][BM]: D
  const uint32_t sdQ = sdS + kDsBytes + kStatsBytes;  // kTma: [kDqStages] stages of kDqStage bytes (dQ, fp32)
  const uint32_t sBar = sdQ + kDqStages * kDqStage;   // kTma: [2] mbarriers, Q_i and dO_i of a stage

  const BwdCta cta = main_cta(p);  // the launch order (bwd_main_cta): causal from Lq = 2048, heaviest tiles first
  const int n_block = cta.tile, h = cta.h, b = cta.b;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  using timeline::Phase;
  typename RecorderFor<Trace>::type rec(trace, wg, (tid & 127) == 0);
  const int tile = linear_block();
  rec.mark(Phase::Setup, timeline::kNoStep, tile);
  const HeadsFor<kGqa, T, D, true> hp(p, b, h);  // kGqa: h is the kv head; q, dout, L, D its group's first head's
  const int n0 = n_block * BN;
  const int key_row = n0 + 64 * wg + 16 * warp + g;  // this thread's keys: key_row, key_row + 8
  const int m_first = first_query_tile(n_block, p.Lq, p.Lk, BM, BN, p.causal);
  const int m_blocks = ceil_div(p.Lq, BM);
  const float scale_log2 = p.scale * kLog2e;

  float acc_dk[D / 2], acc_dv[D / 2];
  zero(acc_dk);
  zero(acc_dv);

  // kTma: the first thread of warpgroup wg adds its two staged boxes of query tile mt (stage st) into the
  // accumulator rows of query head `head` (its index b * H + h in dq_accum; gqa: the group's head gi): d = 128
  // the tile's 64 rows at columns 64 wg ..; d = 64 (kWide) rows 64 wg .. of the tile's 128 (none past Lq: no add).
  const bool dq_issuer = (tid & 127) == 0;
  auto issue_dq = [&](int64_t head, int mt, int st) {
    const uint32_t src = sdQ + uint32_t(kM80 ? 0 : st) * kDqStage + wgmma_frag::dq_stage_byte<kDqBox / 128>(wg, 0, 0);
    if constexpr (kWide) {
      const int row0 = mt * BM + 64 * wg;
      if (row0 < p.Lq)
#pragma unroll
        for (int box = 0; box < 2; ++box)
          bulk_tensor_reduce_add_3d(tm_dq, src + box * kDqBox, 32 * box, row0, int(head));
    } else {
#pragma unroll
      for (int box = 0; box < 2; ++box)
        bulk_tensor_reduce_add_3d(tm_dq, src + box * kDqBox, 64 * wg + 32 * box, mt * BM, int(head));
    }
    bulk_commit();
  };

  // L and D of query tile m into stage s (plain stores by the first 64 threads; the next barrier publishes).
  // kTma: 4-byte asynchronous copies instead (copy_stats), so no thread waits for them before its products.
  auto copy_stats = [&](int64_t head, int m, int s) {
    if (tid < BM) {
      const int i = m * BM + tid;
      const bool in = i < p.Lq;  // rows past Lq: zeros (their Q and dO rows are zeros too: no part in dK, dV)
      cp_async_4(smem_u32(sLse + s * BM + tid), hp.lse + head + (in ? i : 0), in);
      cp_async_4(smem_u32(sD + s * BM + tid), hp.drow + head + (in ? i : 0), in);
    }
  };
  auto load_stats = [&](int m, int s) {
    if constexpr (kTma) {
      copy_stats(0, m, s);
      return;
    }
    if (tid < BM) {
      const int i = m * BM + tid;
      const float L = i < p.Lq ? hp.lse[i] : -INFINITY;
      sLse[s * BM + tid] = L == -INFINITY ? INFINITY : L * kLog2e;
      sD[s * BM + tid] = i < p.Lq ? hp.drow[i] : 0.f;
    }
  };
  // kGqa: the same for query head gi of the group.
  auto load_stats_g = [&](int gi, int m, int s) {
    if constexpr (kTma) {
      copy_stats(int64_t(gi) * p.Lq, m, s);
      return;
    }
    if (tid < BM) {
      const int i = m * BM + tid;
      const int64_t head = int64_t(gi) * p.Lq;
      const float L = i < p.Lq ? hp.lse[head + i] : -INFINITY;
      sLse[s * BM + tid] = L == -INFINITY ? INFINITY : L * kLog2e;
      sD[s * BM + tid] = i < p.Lq ? hp.drow[head + i] : 0.f;
    }
  };

  // kTma: Q_i and dO_i of query tile m of query head qh into stage s, D / 64 boxes of BM rows x 128 bytes each
  // (the tiles' swizzled layout; rows past Lq arrive as zeros), by thread 0.
  auto issue_q_do = [&](int qh, int m, int s) {
    const uint32_t bar = sBar + 8 * s;
    mbar_arrive_expect_tx(bar, 2 * kQBytes);
#pragma unroll
    for (int c = 0; c < D / 64; ++c) {
      tma_load_4d(sQ + s * kQBytes + c * (BM * 128), maps.q, bar, 64 * c, m * BM, qh, b);
      tma_load_4d(sdO + s * kQBytes + c * (BM * 128), maps.dout, bar, 64 * c, m * BM, qh, b);
    }
  };
  const int qh0 = kGqa ? h * kv_group(p) : h;  // the query head of the first step (kGqa: the group's first)
  if constexpr (kTma) {
    if (tid == 0) {
      mbar_init(sBar, 1);
      mbar_init(sBar + 8, 1);
      fence_mbar_init();
    }
    __syncthreads();
  }

  if (m_first < m_blocks) {  // uniform across the CTA
    rec.mark(Phase::LoadTiles, m_first, tile);
    load_tile<T, BN, D, kThreads>(sK, hp.k, D, n0, p.Lk, tid);
    load_tile<T, BN, D, kThreads>(sV, hp.v, D, n0, p.Lk, tid);
    if constexpr (kTma) {
      if (tid == 0) issue_q_do(qh0, m_first, 0);
    } else {
      load_tile<T, BM, D, kThreads>(sQ, hp.q, D, m_first * BM, p.Lq, tid);
      load_tile<T, BM, D, kThreads>(sdO, hp.dout, D, m_first * BM, p.Lq, tid);
    }
    load_stats(m_first, 0);
    cp_async_commit();
    // This warpgroup's 64 keys of K and V: 64 rows (8 swizzle atoms) into each 64-column block.
    const uint32_t sKw = sK + wg * 64 * 128, sVw = sV + wg * 64 * 128;

    int gi = 0, step = 0;  // kGqa: the group's query head this step computes, and the step's number
    const int group = kGqa ? kv_group(p) : 1;
    for (int m = m_first; m < m_blocks; ++m) {
      int stage = (m - m_first) & 1;
      if constexpr (kGqa) stage = step & 1;
      rec.mark(Phase::WaitTiles, m, tile);
      cp_async_wait<0>();  // this step's Q_i, dO_i (and K_j, V_j) landed
      if constexpr (kTma)  // Q_i, dO_i: the stage's (use count)-th arrival, use count = step / 2
        mbar_wait(sBar + 8 * stage, uint32_t((((kGqa ? step : m - m_first)) >> 1) & 1));
      fence_proxy_async();
      __syncthreads();  // ... for every thread; every warpgroup is done with the previous step's tiles
      rec.mark(Phase::LoadTiles, m + 1, tile);
      if constexpr (kGqa) {  // the next step: this head's next tile, else the next head's first
        const bool same_head = m + 1 < m_blocks;
        const int gn = same_head ? gi : gi + 1, mn = same_head ? m + 1 : m_first;
        if (gn < group) {
          if constexpr (kTma) {
            if (tid == 0) issue_q_do(qh0 + gn, mn, stage ^ 1);
          } else {
            const int64_t head = int64_t(gn) * p.Lq * D;
            load_tile<T, BM, D, kThreads>(sQ + (stage ^ 1) * kQBytes, hp.q + head, D, mn * BM, p.Lq, tid);
            load_tile<T, BM, D, kThreads>(sdO + (stage ^ 1) * kQBytes, hp.dout + head, D, mn * BM, p.Lq, tid);
          }
          load_stats_g(gn, mn, stage ^ 1);
        }
      } else if (m + 1 < m_blocks) {  // the next step's tiles into the other stage while this one computes
        if constexpr (kTma) {
          if (tid == 0) issue_q_do(h, m + 1, stage ^ 1);  // every thread is past its reads of that stage (barrier)
        } else {
          load_tile<T, BM, D, kThreads>(sQ + (stage ^ 1) * kQBytes, hp.q, D, (m + 1) * BM, p.Lq, tid);
          load_tile<T, BM, D, kThreads>(sdO + (stage ^ 1) * kQBytes, hp.dout, D, (m + 1) * BM, p.Lq, tid);
        }
        load_stats(m + 1, stage ^ 1);
      }
      cp_async_commit();
      if constexpr (kTma && kAtomicDq) {
        // The previous step's dQ (stage ^ 1, staged and fenced by every thread before the barrier above) into
        // the accumulator, issued without waiting (this step's stage is waited for before the dS barrier).
        rec.mark(Phase::AddDQ, m - 1, tile);
        if constexpr (kGqa) {  // the previous step: this head's tile m - 1, or the previous head's last
          if (dq_issuer && step > 0) {
            if (m > m_first) issue_dq(hp.bh + gi, m - 1, stage ^ 1);
            else issue_dq(hp.bh + gi - 1, m_blocks - 1, stage ^ 1);
          }
        } else if (dq_issuer && m > m_first) {
          issue_dq(hp.bh, m - 1, stage ^ 1);
        }
      }
      const uint32_t sQs = sQ + stage * kQBytes, sdOs = sdO + stage * kQBytes;

      // S^T = K_j Q_i^T and dP^T = V_j dO_i^T (64 keys x BM queries each, k = d).
      float acc_s[BM / 2], acc_dp[BM / 2];
      rec.mark(Phase::IssueS, m, tile);
      fence_regs(acc_s);
      fence_regs(acc_dp);
      wgmma_fence();
      issue_keys_by_queries<T, D, BM, BN>(acc_s, sKw, sQs);
      rec.mark(Phase::IssueDP, m, tile);
      issue_keys_by_queries<T, D, BM, BN>(acc_dp, sVw, sdOs);
      rec.mark(Phase::WaitS, m, tile);
      wgmma_wait<1>();  // S^T landed; dP^T may still run
      fence_regs(acc_s);
      rec.mark(Phase::Softmax, m, tile);

      // P^T (masked pairs 0: the Lk tail, the causal diagonal; rows past Lq have L = +inf).
      const float* lse_s = sLse + stage * BM;
      const float* d_s = sD + stage * BM;
      const bool mask = backward_tile_needs_mask(m, n_block, p.Lq, p.Lk, BM, BN, p.causal);
      softmax_p<BM, kTma>(acc_s, lse_s, scale_log2, mask, m * BM, key_row, t4, p);
      rec.mark(Phase::WaitDP, m, tile);
      wgmma_wait<0>();
      fence_regs(acc_dp);
      rec.mark(Phase::DS, m, tile);
      ds_from_dp<BM>(acc_dp, acc_s, d_s, t4);

      // dV_j += P^T dO_i, dK_j += dS^T Q_i (k = the step's BM queries; dO, Q MN-major).
      uint32_t p_frag[kKq][4], ds_frag[kKq][4];
      pack_p_ds<T, D, BM>(p_frag, ds_frag, acc_s, acc_dp, acc_dv, acc_dk);
      rec.mark(Phase::IssueDVDK, m, tile);
      issue_dv_dk<T, D, BM>(acc_dv, acc_dk, p_frag, ds_frag, sdOs, sQs);

      if constexpr (kAtomicDq) {
        // dS^T's registers into sdS as dS [query][key] (K-major for the A of dS K): ds_frag[kk][r] holds (key +8
        // (r & 1), queries 8 (2 kk + r / 2) + 2t, +1). kTma: four transposing 8 x 8 matrix stores per k-step;
        // else one 16-bit element each.
        rec.mark(Phase::StoreDS, m, tile);
        if constexpr (kTma) {
          store_ds_transposed<BM>(sdS, ds_frag, wg, warp, lane);
        } else {
#pragma unroll
          for (int kk = 0; kk < 4; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
              for (int hh = 0; hh < 2; ++hh)
                st_shared_u16(sdS + wgmma_frag::ds_store_byte(wg, warp, lane, kk, r, hh), ds_frag[kk][r] >> (16 * hh));
        }
        rec.mark(Phase::WaitDS, m, tile);
        // kTma: this step stages its dQ in `stage` after the barrier below; the adds issued from that stage two
        // steps ago have read it once all but the issuer's newest bulk group (last step's, the other stage) have.
        // Waiting here, not before this step's products, gives them most of a step more.
        // kM80 (one stage): the adds issued at this step's start from it have read it.
        if constexpr (kTma)
          if (dq_issuer) bulk_wait_read<kM80 ? 0 : 1>();
        fence_proxy_async();
        __syncthreads();  // all of dS is in shared memory

        float acc_dq[kDqRegs];
        rec.mark(Phase::IssueDQ, m, tile);
        fence_regs(acc_dq);
        if constexpr (kM80)
          issue_dq_t_product<T, BM, BN>(acc_dq, sdS, sK, wg);
        else
          issue_dq_product<T, D, BM, BN, kWide>(acc_dq, sdS, sK, wg);
        rec.mark(Phase::WaitDQ, m, tile);
        wgmma_wait<0>();
        fence_regs(acc_dq);
        fence_regs(acc_dv);
        fence_regs(acc_dk);
        fence_regs(p_frag);  // the A operands of dV and dK stay untouched until those products completed
        fence_regs(ds_frag);
        rec.mark(Phase::AddDQ, m, tile);
        if constexpr (kTma) {
          // Staged in this step's stage (its previous adds have read it: the issuers waited before the dS
          // barrier); the next step's first barrier publishes it, and its issuers add it. kWide: the same stores,
          // the warpgroup's block being its 64 rows of the tile's 128 (all 64 columns).
          if constexpr (kM80)
            stage_dq_t<BM>(sdQ, acc_dq, wg, warp, g, t4);
          else
            stage_dq(sdQ + uint32_t(stage) * kDqStage, acc_dq, wg, warp, g, t4);
        } else {
          const int col0 = D == 128 ? 64 * wg : 0;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = m * BM + 16 * warp + g + 8 * r;
            if (row >= p.Lq) continue;
            float* dst = hp.dq_accum_at(p, row, col0 + 2 * t4);
            if constexpr (kGqa) dst = hp.dq_accum_at(p, int64_t(gi) * p.Lq + row, col0 + 2 * t4);
#pragma unroll
            for (int j = 0; j < 8; ++j) add_pair(dst + 8 * j, acc_dq[4 * j + 2 * r], acc_dq[4 * j + 2 * r + 1]);
          }
        }
      } else {
        rec.mark(Phase::WaitDVDK, m, tile);
        wgmma_wait<0>();
        fence_regs(acc_dv);
        fence_regs(acc_dk);
        fence_regs(p_frag);
        fence_regs(ds_frag);
      }
      if constexpr (kGqa) {  // after a head's last tile, the group's next head from its first tile
        ++step;
        if (m + 1 == m_blocks && ++gi < group) m = m_first - 1;
      }
    }
    cp_async_wait<0>();
    if constexpr (kTma && kAtomicDq) {
      rec.mark(Phase::WaitTiles, m_blocks, tile);
      __syncthreads();  // the last step's dQ staged (and fenced) by every thread
      rec.mark(Phase::AddDQ, m_blocks - 1, tile);
      if (dq_issuer) {
        bulk_wait_read<0>();
        if constexpr (kGqa) issue_dq(hp.bh + group - 1, m_blocks - 1, (step - 1) & 1);
        else issue_dq(hp.bh, m_blocks - 1, (m_blocks - 1 - m_first) & 1);
      }
    }
  }

  // dK_j = scale * sum dS^T Q, dV_j = sum P^T dO (0 for keys no query sees), rounded to T, keys < Lk.
  rec.mark(Phase::Epilogue, timeline::kNoStep, tile);
  if constexpr (kTma) {
    static_assert(4 * kQBytes >= 2 * 2 * 64 * D * 2, "the Q_i and dO_i stages hold both warpgroups' dK, dV");
    // Every warpgroup is past its last products' reads of the stages: the atomic kernel's barrier after the loop
    // (or no loop ran); the dK/dV kernel has none, so it waits here.
    if constexpr (!kAtomicDq) __syncthreads();
    store_dk_dv_staged<T, D>(hp.dk(p), hp.dv(p), acc_dk, acc_dv, n0 + 64 * wg, p.Lk, sQ + wg * (256 * D), wg, warp,
                             lane, p.scale);
    // The issuers' adds complete before the CTA (and its shared memory) goes; waited for after the epilogue, which
    // their warpgroups run with them (the adds read the dQ stages, not the Q_i / dO_i stages it writes).
    if constexpr (kAtomicDq) bulk_wait<0>();
  } else {
    store_rows<T>(hp.dk(p), acc_dk, key_row, p.Lk, D, 0, t4, p.scale);  // the wgmma kernel: dK = scale acc_dk,
    store_rows<T>(hp.dv(p), acc_dv, key_row, p.Lk, D, 0, t4, 1.f);      // dV = acc_dv, from registers
  }
  rec.finish(wg);
}
template <class T, int kHeadDim, bool kAtomicDq>
__global__ void __launch_bounds__(FastBackwardTraitsSm90<kHeadDim>::kThreads, 1)
    flash_bwd_wgmma_kernel(const FastBackwardParams p) {
#ifdef KL_FA_SM90A
  bwd_wgmma_body<T, kHeadDim, kAtomicDq, false, false>(p, BwdMaps{nullptr, nullptr, nullptr}, NoTrace{});
#endif
}
// wgmma-tma (kTma): kGqa: grid (ceil(Lk / 128), H_kv, B), instantiated by flash_attention_backward_fast_gqa.sm90a.cu
// only. kM80: the 80-row steps (bwd_wgmma_body).
template <class T, int kHeadDim, bool kGqa, bool kM80 = false>
__global__ void __launch_bounds__(FastBackwardTraitsSm90<kHeadDim>::kThreads, 1)
    flash_bwd_wgmma_tma_kernel(const __grid_constant__ CUtensorMap tm_dq, const __grid_constant__ CUtensorMap tm_q,
                               const __grid_constant__ CUtensorMap tm_do, const FastBackwardParams p) {
#ifdef KL_FA_SM90A
  bwd_wgmma_body<T, kHeadDim, true, true, kGqa, NoTrace, kM80>(p, BwdMaps{&tm_dq, &tm_q, &tm_do}, NoTrace{});
#endif
}
// The deterministic mode's dK/dV kernel on wgmma-tma's path: its loads (Q_i, dO_i by TMA), no dQ part
// (1.00x-1.07x the cp.async kernel's, docs/perf-log.md). kGqa as above.
template <class T, int kHeadDim, bool kGqa>
__global__ void __launch_bounds__(FastBackwardTraitsSm90<kHeadDim>::kThreads, 1)
    flash_bwd_wgmma_dkdv_tma_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_do,
                                    const FastBackwardParams p) {
#ifdef KL_FA_SM90A
  bwd_wgmma_body<T, kHeadDim, false, true, kGqa, NoTrace>(p, BwdMaps{nullptr, &tm_q, &tm_do}, NoTrace{});
#endif
}
// Grouped-query attention (p.H_kv < p.H), grid (ceil(Lk / 128), H_kv, B); instantiated by
// flash_attention_backward_fast_gqa.sm90a.cu only.
template <class T, int kHeadDim, bool kAtomicDq>
__global__ void __launch_bounds__(FastBackwardTraitsSm90<kHeadDim>::kThreads, 1)
    flash_bwd_wgmma_gqa_kernel(const FastBackwardParams p) {
#ifdef KL_FA_SM90A
  bwd_wgmma_body<T, kHeadDim, kAtomicDq, false, true>(p, BwdMaps{nullptr, nullptr, nullptr}, NoTrace{});
#endif
}
// The instrumented kernel (timeline recording): the same body, marking the phases of the CTAs `trace` names; the
// maps are kTma's (zeroed for the others). kM80: the 80-row steps, where the plain launch takes them.
template <class T, int kHeadDim, bool kAtomicDq, bool kTma, bool kM80 = false>
__global__ void __launch_bounds__(FastBackwardTraitsSm90<kHeadDim>::kThreads, 1)
    flash_bwd_wgmma_traced_kernel(const __grid_constant__ CUtensorMap tm_dq, const __grid_constant__ CUtensorMap tm_q,
                                  const __grid_constant__ CUtensorMap tm_do, const FastBackwardParams p,
                                  const timeline::TraceArgs trace) {
#ifdef KL_FA_SM90A
  bwd_wgmma_body<T, kHeadDim, kAtomicDq, kTma, false, timeline::TraceArgs, kM80>(p, BwdMaps{&tm_dq, &tm_q, &tm_do},
                                                                                 trace);
#endif
}

// wgmma-tma's map of the fp32 dQ accumulator: 3-D (d, Lq, B * H), boxes of 32 columns (128 bytes) x `rows` rows,
// 128-byte swizzle. False when the driver refuses it or B * H passes a tensor coordinate's range.
inline bool make_dq_accum_map(CUtensorMap* map, const FastBackwardParams& p,
                              int rows = FastBackwardTraitsSm90<64>::kDqBoxRows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  const int64_t heads = int64_t(p.B) * p.H;
  if (!encode || !p.dq_accum || heads > INT32_MAX) return false;
  const cuuint64_t dims[3] = {cuuint64_t(p.d), cuuint64_t(p.Lq), cuuint64_t(heads)};
  const cuuint64_t strides[2] = {cuuint64_t(p.d) * 4, cuuint64_t(p.Lq) * cuuint64_t(p.d) * 4};
  const cuuint32_t box[3] = {32, cuuint32_t(rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, p.dq_accum, dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The main kernel a launch runs: DkDv (the deterministic mode on wgmma: no dQ part, cp.async loads), Atomic
// (wgmma: dQ by per-thread atomics, cp.async loads), Tma (wgmma-tma), DkDvTma (the deterministic mode on
// wgmma-tma: its loads, no dQ part). main_kind_asked: what p.path asks for; choose_main: what runs, with the maps it
// needs made (where the driver refuses one, wgmma-tma falls back to Atomic, its deterministic mode to DkDv).
enum class MainKind { DkDv, Atomic, Tma, DkDvTma };
struct MainChoice {
  MainKind kind = MainKind::DkDv;
  CUtensorMap dq{}, q{}, dout{};
  bool m80 = false;  // Tma on 80-row steps (fast_backward_steps80; the instrumented kernel too)
};
inline MainKind main_kind_asked(const FastBackwardParams& p, bool atomic_dq) {
  if (!atomic_dq) return p.path == FastBackwardPath::WgmmaTma ? MainKind::DkDvTma : MainKind::DkDv;
  return p.path == FastBackwardPath::WgmmaTma ? MainKind::Tma : MainKind::Atomic;
}
template <int D>
MainChoice choose_main(const FastBackwardParams& p, bool atomic_dq) {
  MainChoice c;
  c.kind = main_kind_asked(p, atomic_dq);
  if (c.kind != MainKind::Tma && c.kind != MainKind::DkDvTma) return c;
  // Q and dO: [B, H, Lq, d], boxes of 64 columns x a step's rows (the tiles' layout); the dQ accumulator's boxes: a
  // whole 80-row step (dQ^T), else kDqBoxRows.
  using Tr = FastBackwardTraitsSm90<D>;
  const int64_t row = D, head = int64_t(p.Lq) * D, batch = int64_t(p.H) * p.Lq * D;
  c.m80 = fast_backward_steps80(p, c.kind == MainKind::Tma);
  const int rows = c.m80 ? Tr::kBlockM80 : Tr::kBlockMTma, dq_rows = c.m80 ? Tr::kBlockM80 : Tr::kDqBoxRows;
  const bool dq_map = c.kind == MainKind::DkDvTma || make_dq_accum_map(&c.dq, p, dq_rows);
  if (!(dq_map && make_tensor_map(&c.q, p.q, p.dtype, D, p.Lq, p.H, p.B, row, head, batch, rows) &&
        make_tensor_map(&c.dout, p.dout, p.dtype, D, p.Lq, p.H, p.B, row, head, batch, rows)))
    c = MainChoice{c.kind == MainKind::Tma ? MainKind::Atomic : MainKind::DkDv, {}, {}, {}};
  return c;
}

// The main kernel's launch name: flash_bwd_wgmma_[dkdv_|tma_]d{64,128}_{bf16,fp16}.
template <int D>
std::string main_launch_name(bool half, MainKind kind) {
  const char* part = kind == MainKind::DkDv      ? "dkdv_"
                     : kind == MainKind::DkDvTma ? "dkdv_tma_"
                     : kind == MainKind::Tma     ? "tma_"
                                                 : "";
  return std::string("flash_bwd_wgmma_") + part + (D == 64 ? "d64" : "d128") + (half ? "_fp16" : "_bf16");
}
template <int D, bool kGqa = false>  // kGqa: one CTA row per kv head
dim3 main_grid(const FastBackwardParams& p) {
  return dim3(unsigned(ceil_div(p.Lk, FastBackwardTraitsSm90<D>::kBlockN)), unsigned(kGqa ? kv_heads(p) : p.H),
              unsigned(p.B));
}
template <int D>
size_t main_smem(MainKind kind, bool m80 = false) {
  using Tr = FastBackwardTraitsSm90<D>;
  if (m80) return size_t(Tr::kSmemBytesTma80);
  return size_t(kind == MainKind::Tma || kind == MainKind::DkDvTma ? Tr::kSmemBytesTma : Tr::kSmemBytes);
}

// The deterministic mode's kernel with its dQ adds in turn (fast_backward_ordered_dq(p); c: wgmma-tma's maps),
// flash_attention_backward_fast_ordered.sm90a.cu.
void launch_ordered_main(const FastBackwardParams& p, const MainChoice& c, cudaStream_t stream);
// The atomic wgmma-tma kernel on 80-row steps (c.m80; c: its maps), d = 128,
// flash_attention_backward_fast_m80.sm90a.cu (a translation unit of its own, so the others compile as before).
void launch_m80_main(const FastBackwardParams& p, const MainChoice& c, cudaStream_t stream);

// The main kernel launch_wgmma_main runs, as choose_main picks it. kGqa (p.H_kv < p.H): grid (ceil(Lk / 128),
// H_kv, B), the grouped-query kernels, the launch named as the others with "_gqa" appended; instantiated by
// flash_attention_backward_fast_gqa.sm90a.cu only.
template <class T, int D, bool kGqa>
void launch_main_kernel(const FastBackwardParams& p, bool atomic_dq, cudaStream_t stream) {
  const dim3 grid = main_grid<D, kGqa>(p), block(FastBackwardTraitsSm90<D>::kThreads);
  const MainChoice c = choose_main<D>(p, atomic_dq);
  const std::string name = main_launch_name<D>(std::is_same<T, __half>::value, c.kind) + (kGqa ? "_gqa" : "");
  const size_t smem = main_smem<D>(c.kind, c.m80);
  auto launch_cp_async = [&](auto kernel) { cuda::launch(name.c_str(), kernel, grid, block, smem, stream, p); };
  const bool ordered = !kGqa && fast_backward_ordered_dq(p);  // the preprocess left the accumulator as it was
  if (ordered && c.kind != MainKind::Tma)                     // the maps refused: the atomic adds need it zeroed
    KL_CUDA_CHECK(cudaMemsetAsync(p.dq_accum, 0, size_t(p.B) * p.H * p.Lq * D * sizeof(float), stream));
  if (ordered && c.kind == MainKind::Tma) {
    launch_ordered_main(p, c, stream);
    return;
  }
  if (c.m80) {
    launch_m80_main(p, c, stream);
    return;
  }
  if (c.kind == MainKind::Tma)
    cuda::launch(name.c_str(), flash_bwd_wgmma_tma_kernel<T, D, kGqa>, grid, block, smem, stream, c.dq, c.q, c.dout, p);
  else if (c.kind == MainKind::DkDvTma)
    cuda::launch(name.c_str(), flash_bwd_wgmma_dkdv_tma_kernel<T, D, kGqa>, grid, block, smem, stream, c.q, c.dout, p);
  else if constexpr (kGqa)
    launch_cp_async(c.kind == MainKind::Atomic ? flash_bwd_wgmma_gqa_kernel<T, D, true>
                                               : flash_bwd_wgmma_gqa_kernel<T, D, false>);
  else
    launch_cp_async(c.kind == MainKind::Atomic ? flash_bwd_wgmma_kernel<T, D, true> : flash_bwd_wgmma_kernel<T, D, false>);
}
// launch_wgmma_main for p with H_kv < H at d = 128 (flash_attention_backward_fast_gqa.sm90a.cu), and for d = 64
// (flash_attention_backward_fast_d64.sm90a.cu).
void launch_wgmma_main_gqa(const FastBackwardParams& p, bool atomic_dq, cudaStream_t stream);
void launch_wgmma_main_d64(const FastBackwardParams& p, bool atomic_dq, cudaStream_t stream);

// The instrumented main kernel (bf16; the caller checks p.dtype), as launch_main_kernel chooses it; named as it with
// "_traced" appended.
template <int D>
void launch_traced(const FastBackwardParams& p, bool atomic_dq, const timeline::TraceArgs& trace) {
  using T = __nv_bfloat16;
  const dim3 grid = main_grid<D>(p), block(FastBackwardTraitsSm90<D>::kThreads);
  const MainChoice c = choose_main<D>(p, atomic_dq);
  const std::string name = main_launch_name<D>(false, c.kind) + (c.m80 ? "_m80" : "") + "_traced";
  const size_t smem = main_smem<D>(c.kind, c.m80);
  if constexpr (D == 128)
    if (c.m80) {
      cuda::launch(name.c_str(), flash_bwd_wgmma_traced_kernel<T, D, true, true, true>, grid, block, smem, 0, c.dq, c.q,
                   c.dout, p, trace);
      return;
    }
  if (c.kind == MainKind::Tma)
    cuda::launch(name.c_str(), flash_bwd_wgmma_traced_kernel<T, D, true, true>, grid, block, smem, 0, c.dq, c.q,
                 c.dout, p, trace);
  else if (c.kind == MainKind::DkDvTma)
    cuda::launch(name.c_str(), flash_bwd_wgmma_traced_kernel<T, D, false, true>, grid, block, smem, 0, c.dq, c.q,
                 c.dout, p, trace);
  else if (c.kind == MainKind::Atomic)
    cuda::launch(name.c_str(), flash_bwd_wgmma_traced_kernel<T, D, true, false>, grid, block, smem, 0, c.dq, c.q,
                 c.dout, p, trace);
  else
    cuda::launch(name.c_str(), flash_bwd_wgmma_traced_kernel<T, D, false, false>, grid, block, smem, 0, c.dq, c.q,
                 c.dout, p, trace);
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
