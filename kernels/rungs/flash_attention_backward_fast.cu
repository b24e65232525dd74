// Rung 6, fast variant, CUDA side: FlashAttention-2's backward with mma.sync m16n8k16 (the design, the
// tile shapes and the two dQ modes are in flash_attention_backward_fast.h), and the dispatch between it and
// the wgmma main kernel (flash_attention_backward_fast_sm90.cuh; run_fast, fast_backward_path). Paper notation
// (FlashAttention-2, Algorithm 2); the PTX wrappers, the swizzled tiles and the fragment layouts are rung
// 5's (flash_attention_fast_device.cuh; the layouts are spelled out at the top of flash_attention_fast.cu):
//   A (16 x 16, row-major):  a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B (16 x 8, "col"):       b0 (k = 2t..2t+1, n = g)  b1 (k = 2t+8.., n = g)
//   C/D (16 x 8, fp32):      c0 c1 (g, 2t..2t+1)  c2 c3 (g+8, 2t..2t+1)        g = lane / 4, t = lane % 4
// The GEMMs of one step (query tile i, K/V tile j), with which operand comes from where:
//   S = Q K^T, dP = dO V^T      A: Q, dO rows (ldmatrix)       B: K, V rows (ldmatrix, keys are n)
//   dV += P^T dO, dK += dS^T Q  A: P, dS stored [query][key], read transposed (ldmatrix.trans)
//                               B: dO, Q rows (ldmatrix.trans, queries are k)
//   dQ += dS K                  A: dS (ldmatrix, or the registers in the dQ pass)   B: K (ldmatrix.trans)
#include "kernels/rungs/flash_attention_backward_fast.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/rungs/flash_attention_backward_fast_device.cuh"
#include "kernels/rungs/flash_attention_fast_device.cuh"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/cuda_launch.cuh"

namespace kl::flash_attention_backward {

// H_kv came last so that the kernels for H_kv = H see the parameters they saw before (offsets, size).
static_assert(offsetof(FastBackwardParams, path) == 120 && offsetof(FastBackwardParams, H_kv) == 124 &&
                  sizeof(FastBackwardParams) == 128,
              "FastBackwardParams' layout: the fields before H_kv where they were");

namespace fast_bwd {

using flash_attention::ceil_div;
using flash_attention::fast_exp2;
using flash_attention::key_tiles_for_block;
using flash_attention::key_visible;
using flash_attention::pack2;
using namespace flash_attention::fast_detail;

constexpr float kLog2e = 1.4426950408889634f;

// ---- [SECTION] fragments ------------------------------------------------------------------------------
// ldmatrix.x4 at the addresses frag:: gives (the header says which operand each one is).
template <int kRowLen, class T>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const T* slice, int lane, int kk) {
  ldmatrix_x4(a, smem_u32(slice + frag::a_offset(kRowLen, lane, kk)));
}
template <int kRowLen, class T>
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const T* tile, int lane, int kk, int col0) {
  ldmatrix_x4_trans(a, smem_u32(tile + frag::a_trans_offset(kRowLen, lane, kk, col0)));
}
template <int kRowLen, class T>
__device__ __forceinline__ void load_b_rows_are_k(uint32_t (&b)[4], const T* tile, int lane, int kk, int col0) {
  ldmatrix_x4_trans(b, smem_u32(tile + frag::b_rows_are_k_offset(kRowLen, lane, kk, col0)));
}
template <int kRowLen, class T>
__device__ __forceinline__ void load_b_rows_are_n(uint32_t (&b)[4], const T* tile, int lane, int kk, int row0) {
  ldmatrix_x4(b, smem_u32(tile + frag::b_rows_are_n_offset(kRowLen, lane, kk, row0)));
}

template <int kTiles>
__device__ __forceinline__ void zero(float (&acc)[kTiles][4]) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
}

// S -> P = exp2(S * scale*log2e - L*log2e) and dP -> dS = P (dP - D), in place, for kTiles n8 tiles of keys
// starting at key0 (this thread's keys key0 + 8j + 2t + {0, 1}); masked pairs (kMask) give P = dS = 0.
template <bool kMask, int kTiles>
__device__ __forceinline__ void softmax_grad(float (&s)[kTiles][4], float (&dp)[kTiles][4], const float (&lse2)[2],
                                             const float (&dr)[2], float scale_log2, int row, int key0, int t,
                                             const FastBackwardParams& p) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float pv = fast_exp2(fmaf(s[j][e], scale_log2, -lse2[e >> 1]));
      if (kMask && !key_visible(row + 8 * (e >> 1), key0 + j * 8 + 2 * t + (e & 1), p.Lq, p.Lk, p.causal)) pv = 0.f;
      s[j][e] = pv;
      dp[j][e] = pv * (dp[j][e] - dr[e >> 1]);
    }
}

// dst[0] += a, dst[1] += b in global memory (fp32 atomics; one 8-byte vector atomic on sm_90, dst even).
__device__ __forceinline__ void add_pair(float* dst, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(a, b));
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#endif
}

// ---- [SECTION] preprocess and convert -----------------------------------------------------------------
// D = rowsum(dO o O) in fp32 and, in the atomic mode, the dQ accumulator's row set to 0. Both this and the convert
// below are memory-bound (at the bench's sizes 469 MB between them), so every access is 16 bytes wide: d / 8
// threads a row (8, 16 or 32: aligned groups within a warp), each with one load of 8 values of O and of dO and two
// float4 stores of zeros; the group's partial sums added by shuffles. Every pointer is 16-byte aligned (the
// params' check) and d is a multiple of 8. No thread leaves early: the shuffles need the whole warp.
template <class T>
__global__ void bwd_preprocess(const T* __restrict__ o, const T* __restrict__ dout, float* __restrict__ drow,
                               float* __restrict__ dq_accum, int64_t rows, int d) {
  const int per_row = d / 8;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = t / per_row;
  const int c = int(t % per_row) * 8;
  float acc = 0.f;
  if (row < rows) {
    const uint4 ov = __ldg(reinterpret_cast<const uint4*>(o + row * d + c));
    const uint4 dv = __ldg(reinterpret_cast<const uint4*>(dout + row * d + c));
    const T* oe = reinterpret_cast<const T*>(&ov);
    const T* de = reinterpret_cast<const T*>(&dv);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc = fmaf(float(de[i]), float(oe[i]), acc);
    if (dq_accum) {
      float4* z = reinterpret_cast<float4*>(dq_accum + row * d + c);
      z[0] = make_float4(0.f, 0.f, 0.f, 0.f);
      z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  for (int off = per_row / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (row < rows && c == 0) drow[row] = acc;
}

// dQ = scale * accumulator, rounded to T: four values a thread and step, a float4 load and an 8-byte store
// (n4 = elements / 4; the element count is a multiple of d).
template <class T>
__global__ void bwd_convert_dq(const float4* __restrict__ acc, T* __restrict__ dq, float scale, int64_t n4) {
  struct alignas(8) Four { T v[4]; };
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 a = acc[i];
    Four f;
    f.v[0] = from_float<T>(scale * a.x);
    f.v[1] = from_float<T>(scale * a.y);
    f.v[2] = from_float<T>(scale * a.z);
    f.v[3] = from_float<T>(scale * a.w);
    reinterpret_cast<Four*>(dq)[i] = f;
  }
}

// ---- [SECTION] the main kernel: one CTA per K/V tile ---------------------------------------------------
// Grid (ceil(Lk / kBlockN), H, B), 8 warps. Warp w: wr = w % 4, wc = w / 4.
//   S, dP, P, dS:  query rows 16 wr.. of the step's tile, keys 32 wc.. of the CTA's tile
//   dV_j, dK_j:    keys 16 wr.., columns (d/2) wc..      (registers for the whole CTA)
//   dQ_i:          query rows 16 wr.., columns (d/2) wc.. (kAtomicDq; added into the accumulator)
// Shared memory: sK, sV [kBlockN][d]; sQ, sdO [2][kBlockM][d]; sP, sdS [kBlockM][kBlockN]; all swizzled.
// kGqa (grouped-query attention, the header's design): grid (ceil(Lk / kBlockN), H_kv, B); the CTA walks its
// kv head's group of query heads in turn (query head gi of the group, tiles m_first .. m_blocks - 1 each), the
// steps numbered `step` across the heads (the Q/dO stage is step's parity); dK_j, dV_j sum over the group.
// The kernel's body, shared by flash_bwd_kernel (kGqa false: the kernel as it was) and flash_bwd_gqa_kernel.
template <class T, int kHeadDim, bool kAtomicDq, bool kGqa>
__device__ __forceinline__ void bwd_body(const FastBackwardParams& p) {
  using Tr = FastBackwardTraits<kHeadDim>;
  constexpr int D = kHeadDim, BM = Tr::kBlockM, BN = Tr::kBlockN, kThreads = Tr::kThreads;
  constexpr int kHalf = D / 2, kHalfTiles = kHalf / 8;
  static_assert(BM == 64 && BN == 64 && Tr::kNWarps == 8, "the warp layout below is written for 64 x 64 and 8 warps");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ = sV + BN * D;
  T* sdO = sQ + 2 * BM * D;
  T* sP = sdO + 2 * BM * D;
  T* sdS = sP + BM * BN;

  const BwdCta cta = main_cta(p);  // kGqa: h is the kv head; the launch order: bwd_main_cta
  const int n_block = cta.tile, h = cta.h, b = cta.b;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wr = warp & 3, wc = warp >> 2, g = lane >> 2, t = lane & 3;
  const HeadsFor<kGqa, T, D, true> hp(p, b, h);  // kGqa: q, dout, lse, drow at the group's first query head
  const int n0 = n_block * BN;
  const int m_first = first_query_tile(n_block, p.Lq, p.Lk, BM, BN, p.causal);
  const int m_blocks = ceil_div(p.Lq, BM);
  const float scale_log2 = p.scale * kLog2e;

  float acc_dk[kHalfTiles][4], acc_dv[kHalfTiles][4];
  zero(acc_dk);
  zero(acc_dv);

  if (m_first < m_blocks) {  // uniform across the CTA
    load_tile_async<T, BN, D, kThreads>(sK, hp.k, D, n0, p.Lk, tid);
    load_tile_async<T, BN, D, kThreads>(sV, hp.v, D, n0, p.Lk, tid);
    load_tile_async<T, BM, D, kThreads>(sQ, hp.q, D, m_first * BM, p.Lq, tid);
    load_tile_async<T, BM, D, kThreads>(sdO, hp.dout, D, m_first * BM, p.Lq, tid);
    cp_async_commit();
    int gi = 0, step = 0;  // kGqa: the group's query head this step computes, and the step's number
    const int group = kGqa ? kv_group(p) : 1;
    for (int m = m_first; m < m_blocks; ++m) {
      int stage = (m - m_first) & 1;
      if constexpr (kGqa) stage = step & 1;
      T* sQs = sQ + stage * BM * D;
      T* sdOs = sdO + stage * BM * D;
      cp_async_wait<0>();  // this step's Q_i, dO_i (and K_j, V_j) have landed
      __syncthreads();     // ... for every thread; and every warp is done with the previous step
      if constexpr (kGqa) {  // the next step: this head's next tile, else the next head's first
        const bool same_head = m + 1 < m_blocks;
        const int gn = same_head ? gi : gi + 1, mn = same_head ? m + 1 : m_first;
        if (gn < group) {
          const int64_t head = int64_t(gn) * p.Lq * D;
          load_tile_async<T, BM, D, kThreads>(sQ + (stage ^ 1) * BM * D, hp.q + head, D, mn * BM, p.Lq, tid);
          load_tile_async<T, BM, D, kThreads>(sdO + (stage ^ 1) * BM * D, hp.dout + head, D, mn * BM, p.Lq, tid);
        }
      } else if (m + 1 < m_blocks) {  // the next step's Q, dO into the other stage, while this one computes
        load_tile_async<T, BM, D, kThreads>(sQ + (stage ^ 1) * BM * D, hp.q, D, (m + 1) * BM, p.Lq, tid);
        load_tile_async<T, BM, D, kThreads>(sdO + (stage ^ 1) * BM * D, hp.dout, D, (m + 1) * BM, p.Lq, tid);
      }
      cp_async_commit();

      // S = Q_i K_j^T and dP = dO_i V_j^T: rows 16 wr.., keys 32 wc.. (4 n8 tiles).
      float acc_s[4][4], acc_dp[4][4];
      zero(acc_s);
      zero(acc_dp);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t aq[4], ado[4];
        load_a<D>(aq, sQs + wr * 16 * D, lane, kk);
        load_a<D>(ado, sdOs + wr * 16 * D, lane, kk);
#pragma unroll
        for (int nn = 0; nn < 2; ++nn) {
          uint32_t bk[4], bv[4];
          load_b_rows_are_n<D>(bk, sK, lane, kk, wc * 32 + nn * 16);
          load_b_rows_are_n<D>(bv, sV, lane, kk, wc * 32 + nn * 16);
          mma_16816<T>(acc_s[2 * nn], aq, bk[0], bk[1]);
          mma_16816<T>(acc_s[2 * nn + 1], aq, bk[2], bk[3]);
          mma_16816<T>(acc_dp[2 * nn], ado, bv[0], bv[1]);
          mma_16816<T>(acc_dp[2 * nn + 1], ado, bv[2], bv[3]);
        }
      }

      // P and dS, then into shared memory (rounded to T): dV and dK read them transposed.
      const int row = m * BM + wr * 16 + g;
      float lse2[2], dr[2];
      if constexpr (kGqa) row_stats(hp.lse + int64_t(gi) * p.Lq, hp.drow + int64_t(gi) * p.Lq, row, p.Lq, lse2, dr);
      else row_stats(hp.lse, hp.drow, row, p.Lq, lse2, dr);
      if (backward_tile_needs_mask(m, n_block, p.Lq, p.Lk, BM, BN, p.causal))
        softmax_grad<true>(acc_s, acc_dp, lse2, dr, scale_log2, row, n0 + wc * 32, t, p);
      else
        softmax_grad<false>(acc_s, acc_dp, lse2, dr, scale_log2, row, n0 + wc * 32, t, p);
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int srow = wr * 16 + g + 8 * r, col = wc * 32 + j * 8 + 2 * t;
          const int off = frag::swizzled(BN, srow, col >> 3) + (col & 7);
          *reinterpret_cast<uint32_t*>(sP + off) = pack2<T>(acc_s[j][2 * r], acc_s[j][2 * r + 1]);
          *reinterpret_cast<uint32_t*>(sdS + off) = pack2<T>(acc_dp[j][2 * r], acc_dp[j][2 * r + 1]);
        }
      __syncthreads();

      // dV_j += P^T dO_i and dK_j += dS^T Q_i: keys 16 wr.., columns kHalf wc.. (k = the tile's 64 queries).
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk) {
        uint32_t ap[4], ads[4];
        load_a_trans<BN>(ap, sP, lane, kk, wr * 16);
        load_a_trans<BN>(ads, sdS, lane, kk, wr * 16);
#pragma unroll
        for (int dn = 0; dn < kHalf / 16; ++dn) {
          uint32_t bdo[4], bq[4];
          load_b_rows_are_k<D>(bdo, sdOs, lane, kk, wc * kHalf + dn * 16);
          load_b_rows_are_k<D>(bq, sQs, lane, kk, wc * kHalf + dn * 16);
          mma_16816<T>(acc_dv[2 * dn], ap, bdo[0], bdo[1]);
          mma_16816<T>(acc_dv[2 * dn + 1], ap, bdo[2], bdo[3]);
          mma_16816<T>(acc_dk[2 * dn], ads, bq[0], bq[1]);
          mma_16816<T>(acc_dk[2 * dn + 1], ads, bq[2], bq[3]);
        }
      }

      // dQ_i += dS K_j: query rows 16 wr.., columns kHalf wc.. (k = the CTA's 64 keys), fp32 atomics.
      if constexpr (kAtomicDq) {
        float acc_dq[kHalfTiles][4];
        zero(acc_dq);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          uint32_t a[4];
          load_a<BN>(a, sdS + wr * 16 * BN, lane, kk);
#pragma unroll
          for (int dn = 0; dn < kHalf / 16; ++dn) {
            uint32_t bk[4];
            load_b_rows_are_k<D>(bk, sK, lane, kk, wc * kHalf + dn * 16);
            mma_16816<T>(acc_dq[2 * dn], a, bk[0], bk[1]);
            mma_16816<T>(acc_dq[2 * dn + 1], a, bk[2], bk[3]);
          }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (row + 8 * r >= p.Lq) continue;
          float* dst = hp.dq_accum_at(p, row + 8 * r, wc * kHalf + 2 * t);
          if constexpr (kGqa) dst = hp.dq_accum_at(p, int64_t(gi) * p.Lq + row + 8 * r, wc * kHalf + 2 * t);
#pragma unroll
          for (int j = 0; j < kHalfTiles; ++j) add_pair(dst + j * 8, acc_dq[j][2 * r], acc_dq[j][2 * r + 1]);
        }
      }
      if constexpr (kGqa) {  // after a head's last tile, the group's next head from its first tile
        ++step;
        if (m + 1 == m_blocks && ++gi < group) m = m_first - 1;
      }
    }
    cp_async_wait<0>();
  }

  // dK_j = scale * sum dS^T Q, dV_j = sum P^T dO (0 for keys no query sees), rounded to T, keys < Lk.
  T* dk = hp.dk(p);
  T* dv = hp.dv(p);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = n0 + wr * 16 + g + 8 * r;
    if (key >= p.Lk) continue;
#pragma unroll
    for (int j = 0; j < kHalfTiles; ++j) {
      const int64_t off = int64_t(key) * D + wc * kHalf + j * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(dk + off) = pack2<T>(acc_dk[j][2 * r] * p.scale, acc_dk[j][2 * r + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(dv + off) = pack2<T>(acc_dv[j][2 * r], acc_dv[j][2 * r + 1]);
    }
  }
}
template <class T, int kHeadDim, bool kAtomicDq>
__global__ void __launch_bounds__(FastBackwardTraits<kHeadDim>::kThreads, kHeadDim == 64 ? 2 : 1)
    flash_bwd_kernel(const FastBackwardParams p) {
  bwd_body<T, kHeadDim, kAtomicDq, false>(p);
}
// Grouped-query attention (p.H_kv < p.H), grid (ceil(Lk / kBlockN), H_kv, B).
template <class T, int kHeadDim, bool kAtomicDq>
__global__ void __launch_bounds__(FastBackwardTraits<kHeadDim>::kThreads, kHeadDim == 64 ? 2 : 1)
    flash_bwd_gqa_kernel(const FastBackwardParams p) {
  bwd_body<T, kHeadDim, kAtomicDq, true>(p);
}

// ---- [SECTION] the mma.sync path's deterministic dQ pass: one CTA per query tile -----------------------
// Grid (ceil(Lq / kBlockM), H, B), 4 warps; warp w owns query rows 16 w.. and walks the K/V tiles the tile
// sees in order (K/V two stages, as rung 5's forward): S, dP, P, dS recomputed in registers, dQ_i += dS K_j
// with dS as the A operand straight from the accumulators. One writer per dQ element: no atomics.
// kGqa (grouped-query attention): the same grid over query heads; K and V are the query head's kv head's.
// The body, shared by flash_bwd_dq_kernel (kGqa false: the kernel as it was) and flash_bwd_dq_gqa_kernel.
template <class T, int kHeadDim, bool kGqa>
__device__ __forceinline__ void dq_body(const FastBackwardParams& p) {
  using Tr = FastDqTraits<kHeadDim>;
  constexpr int D = kHeadDim, BM = Tr::kBlockM, BN = Tr::kBlockN, kThreads = Tr::kThreads;
  constexpr int kNTiles = BN / 8;
  static_assert(BM == Tr::kNWarps * 16, "one warp per 16 query rows");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sdO = sQ + BM * D;
  T* sK = sdO + BM * D;  // [2][BN][D]
  T* sV = sK + 2 * BN * D;

  // Causal: the heaviest query tiles (the last ones) start first.
  const int m_block = p.causal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const HeadsFor<kGqa, T, D, false> hp(p, b, h);  // kGqa: k, v at query head h's kv head
  const T *k = hp.k, *v = hp.v;  // local copies: used as hp.k, hp.v, nvcc orders the loop's K/V address adds otherwise
  const int m0 = m_block * BM, row = m0 + warp * 16 + g;
  const int n_tiles = key_tiles_for_block(m_block, p.Lq, p.Lk, BM, BN, p.causal);
  const float scale_log2 = p.scale * kLog2e;

  float acc_dq[D / 8][4];
  zero(acc_dq);
  if (n_tiles > 0) {  // uniform across the CTA
    float lse2[2], dr[2];
    row_stats(hp.lse, hp.drow, row, p.Lq, lse2, dr);
    load_tile_async<T, BM, D, kThreads>(sQ, hp.q, D, m0, p.Lq, tid);
    load_tile_async<T, BM, D, kThreads>(sdO, hp.dout, D, m0, p.Lq, tid);
    load_tile_async<T, BN, D, kThreads>(sK, k, D, 0, p.Lk, tid);
    load_tile_async<T, BN, D, kThreads>(sV, v, D, 0, p.Lk, tid);
    cp_async_commit();
    if (n_tiles > 1) {
      load_tile_async<T, BN, D, kThreads>(sK + BN * D, k, D, BN, p.Lk, tid);
      load_tile_async<T, BN, D, kThreads>(sV + BN * D, v, D, BN, p.Lk, tid);
    }
    cp_async_commit();
    for (int n = 0; n < n_tiles; ++n) {
      cp_async_wait<1>();  // tile n's group (and Q, dO) have landed; tile n+1's may be in flight
      __syncthreads();
      const T* sKs = sK + (n & 1) * BN * D;
      const T* sVs = sV + (n & 1) * BN * D;
      float acc_s[kNTiles][4], acc_dp[kNTiles][4];
      zero(acc_s);
      zero(acc_dp);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t aq[4], ado[4];
        load_a<D>(aq, sQ + warp * 16 * D, lane, kk);
        load_a<D>(ado, sdO + warp * 16 * D, lane, kk);
#pragma unroll
        for (int nn = 0; nn < BN / 16; ++nn) {
          uint32_t bk[4], bv[4];
          load_b_rows_are_n<D>(bk, sKs, lane, kk, nn * 16);
          load_b_rows_are_n<D>(bv, sVs, lane, kk, nn * 16);
          mma_16816<T>(acc_s[2 * nn], aq, bk[0], bk[1]);
          mma_16816<T>(acc_s[2 * nn + 1], aq, bk[2], bk[3]);
          mma_16816<T>(acc_dp[2 * nn], ado, bv[0], bv[1]);
          mma_16816<T>(acc_dp[2 * nn + 1], ado, bv[2], bv[3]);
        }
      }
      if (backward_tile_needs_mask(m_block, n, p.Lq, p.Lk, BM, BN, p.causal))
        softmax_grad<true>(acc_s, acc_dp, lse2, dr, scale_log2, row, n * BN, t, p);
      else
        softmax_grad<false>(acc_s, acc_dp, lse2, dr, scale_log2, row, n * BN, t, p);
      // dQ_i += dS K_j: dS's accumulator tiles 2kk, 2kk+1 are the A fragment of key step kk (rounded to T).
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const uint32_t a[4] = {pack2<T>(acc_dp[2 * kk][0], acc_dp[2 * kk][1]),
                               pack2<T>(acc_dp[2 * kk][2], acc_dp[2 * kk][3]),
                               pack2<T>(acc_dp[2 * kk + 1][0], acc_dp[2 * kk + 1][1]),
                               pack2<T>(acc_dp[2 * kk + 1][2], acc_dp[2 * kk + 1][3])};
#pragma unroll
        for (int dn = 0; dn < D / 16; ++dn) {
          uint32_t bk[4];
          load_b_rows_are_k<D>(bk, sKs, lane, kk, dn * 16);
          mma_16816<T>(acc_dq[2 * dn], a, bk[0], bk[1]);
          mma_16816<T>(acc_dq[2 * dn + 1], a, bk[2], bk[3]);
        }
      }
      __syncthreads();  // every warp is done with this stage before it is refilled
      if (n + 2 < n_tiles) {
        load_tile_async<T, BN, D, kThreads>(const_cast<T*>(sKs), k, D, (n + 2) * BN, p.Lk, tid);
        load_tile_async<T, BN, D, kThreads>(const_cast<T*>(sVs), v, D, (n + 2) * BN, p.Lk, tid);
      }
      cp_async_commit();  // always (maybe empty): one group per tile
    }
    cp_async_wait<0>();
  }
  store_dq_rows<T, D>(hp, p, row, t, &acc_dq[0][0]);
}
template <class T, int kHeadDim>
__global__ void __launch_bounds__(FastDqTraits<kHeadDim>::kThreads) flash_bwd_dq_kernel(const FastBackwardParams p) {
  dq_body<T, kHeadDim, false>(p);
}
template <class T, int kHeadDim>
__global__ void __launch_bounds__(FastDqTraits<kHeadDim>::kThreads)
    flash_bwd_dq_gqa_kernel(const FastBackwardParams p) {
  dq_body<T, kHeadDim, true>(p);
}

// ---- [SECTION] launches --------------------------------------------------------------------------------
// D = rowsum(dO o O) into p.drow and, where dQ is added by atomics, the dQ accumulator zeroed.
template <class T>
void launch_preprocess(const FastBackwardParams& p) {
  const int64_t rows = int64_t(p.B) * p.H * p.Lq;
  const bool bf16 = std::is_same<T, __nv_bfloat16>::value;
  const int64_t threads = rows * (p.d / 8);
  cuda::launch(bf16 ? "flash_bwd_fast_preprocess_bf16" : "flash_bwd_fast_preprocess_fp16", bwd_preprocess<T>,
               dim3(unsigned((threads + 255) / 256)), dim3(256), 0, 0, static_cast<const T*>(p.o),
               static_cast<const T*>(p.dout), p.drow,
               fast_backward_dq_by_pass(p) || fast_backward_ordered_dq(p) ? nullptr : p.dq_accum, rows, p.d);
}

// The mma.sync main kernel (atomic_dq: with its dQ part) and the deterministic mode's dQ pass; the grouped-query
// kernels (grid over kv heads for the main kernel) when p has H_kv < H, the kernels for H_kv = H otherwise.
template <class T, int D>
void launch_mma_main(const FastBackwardParams& p, bool atomic_dq) {
  using Tr = FastBackwardTraits<D>;
  const dim3 grid(unsigned(ceil_div(p.Lk, Tr::kBlockN)), unsigned(p.H), unsigned(p.B));
  if (grouped_query(p)) {
    const dim3 gqa_grid(grid.x, unsigned(kv_heads(p)), grid.z);
    if (atomic_dq)
      cuda::launch(D == 64 ? "flash_bwd_fast_gqa_d64" : "flash_bwd_fast_gqa_d128", flash_bwd_gqa_kernel<T, D, true>,
                   gqa_grid, dim3(Tr::kThreads), size_t(Tr::kSmemBytes), 0, p);
    else
      cuda::launch(D == 64 ? "flash_bwd_fast_dkdv_gqa_d64" : "flash_bwd_fast_dkdv_gqa_d128",
                   flash_bwd_gqa_kernel<T, D, false>, gqa_grid, dim3(Tr::kThreads), size_t(Tr::kSmemBytes), 0, p);
  } else if (atomic_dq) {
    cuda::launch(D == 64 ? "flash_bwd_fast_d64" : "flash_bwd_fast_d128", flash_bwd_kernel<T, D, true>, grid,
                 dim3(Tr::kThreads), size_t(Tr::kSmemBytes), 0, p);
  } else {
    cuda::launch(D == 64 ? "flash_bwd_fast_dkdv_d64" : "flash_bwd_fast_dkdv_d128", flash_bwd_kernel<T, D, false>,
                 grid, dim3(Tr::kThreads), size_t(Tr::kSmemBytes), 0, p);
  }
}
template <class T, int D>
void launch_dq_pass(const FastBackwardParams& p) {
  using Dq = FastDqTraits<D>;
  const dim3 dq_grid(unsigned(ceil_div(p.Lq, Dq::kBlockM)), unsigned(p.H), unsigned(p.B));
  const bool gqa = grouped_query(p);
  const std::string name = std::string("flash_bwd_fast_dq_") + (gqa ? "gqa_" : "") + "d" + std::to_string(D);
  cuda::launch(name.c_str(), gqa ? flash_bwd_dq_gqa_kernel<T, D> : flash_bwd_dq_kernel<T, D>, dq_grid,
               dim3(Dq::kThreads), size_t(Dq::kSmemBytes), 0, p);
}

// The wgmma paths' dK/dV kernel and dQ pass side by side: both read only the inputs and the preprocess's D and
// write disjoint outputs, so each goes to a stream of its own, after the preprocess (an event on the default
// stream) and before whatever the caller enqueues next (the default stream waits for both). The block scheduler
// starts the second kernel's CTAs as the first one's last wave leaves SMs free, instead of after it has drained:
// on the H200 0.99x-1.06x the two launches one after the other (geometric means 1.012x, 1.020x, 1.021x at
// d = 64, 128, 256; d = 256 causal at L = 2048 and 4096 1.05x-1.06x), the pass enqueued first
// (docs/perf-log.md, "side by side").
void launch_dkdv_and_dq_pass(const FastBackwardParams& p) {
  struct Side {
    cudaStream_t dkdv = nullptr, dq = nullptr;
    cudaEvent_t ready = nullptr, dkdv_done = nullptr, dq_done = nullptr;
  };
  static const Side s = [] {  // made once (an exception leaves it to the next call)
    Side x;
    KL_CUDA_CHECK(cudaStreamCreateWithFlags(&x.dkdv, cudaStreamNonBlocking));
    KL_CUDA_CHECK(cudaStreamCreateWithFlags(&x.dq, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&x.ready, &x.dkdv_done, &x.dq_done})
      KL_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    return x;
  }();
  KL_CUDA_CHECK(cudaEventRecord(s.ready, 0));
  KL_CUDA_CHECK(cudaStreamWaitEvent(s.dkdv, s.ready, 0));
  KL_CUDA_CHECK(cudaStreamWaitEvent(s.dq, s.ready, 0));
  launch_wgmma_dq_pass(p, s.dq);
  launch_wgmma_main(p, false, s.dkdv);
  KL_CUDA_CHECK(cudaEventRecord(s.dkdv_done, s.dkdv));
  KL_CUDA_CHECK(cudaEventRecord(s.dq_done, s.dq));
  KL_CUDA_CHECK(cudaStreamWaitEvent(0, s.dkdv_done, 0));
  KL_CUDA_CHECK(cudaStreamWaitEvent(0, s.dq_done, 0));
}

template <class T, int D>
void launch_all(const FastBackwardParams& p) {
  const int64_t rows = int64_t(p.B) * p.H * p.Lq;
  launch_preprocess<T>(p);
  const bool wgmma = fast_backward_path_wgmma(p.path);  // run_fast's
  if (fast_backward_dq_by_pass(p)) {
    if (wgmma) {
      launch_dkdv_and_dq_pass(p);
    } else if constexpr (D != 256) {  // d = 256: wgmma only (run_fast checks)
      launch_mma_main<T, D>(p, false);
      launch_dq_pass<T, D>(p);
    }
    return;
  }
  if (wgmma) launch_wgmma_main(p, true);
  else if constexpr (D != 256) launch_mma_main<T, D>(p, true);
  cuda::launch("flash_bwd_fast_convert_dq", bwd_convert_dq<T>, elementwise_grid(rows * D / 4), dim3(256), 0, 0,
               reinterpret_cast<const float4*>(p.dq_accum), static_cast<T*>(p.dq), p.scale, rows * D / 4);
}

template <class T>
void run_typed(const FastBackwardParams& p) {
  if (p.d == 64) launch_all<T, 64>(p);
  else if (p.d == 128) launch_all<T, 128>(p);
  else launch_all<T, 256>(p);
}

template <class T>
void convert_in(const std::vector<float>& host, Buffer<float>& staging, Buffer<T>& dst) {
  staging.upload(host);
  dst.resize(Backend::Cuda, host.size());
  cuda::launch("flash_bwd_fast_convert_in", convert_from_float<T>, elementwise_grid(int64_t(host.size())), dim3(256),
               0, 0, staging.data(), dst.data(), int64_t(host.size()));
}

template <class T>
void to_float(const Buffer<T>& src, Buffer<float>& dst) {
  dst.resize(Backend::Cuda, src.size());
  cuda::launch("flash_bwd_fast_convert_out", convert_to_float<T>, elementwise_grid(int64_t(src.size())), dim3(256),
               0, 0, src.data(), dst.data(), int64_t(src.size()));
}

// The forward's O (rounded to T) and L for inputs already in T: rung 5's teaching forward in float32 on
// the rounded values (the tiles it offers at d: 64 x 64, or 32 x 32 where 64 x 64 does not fit).
// From device pointers (q [B, H, Lq, d], k and v [B, H_kv, Lk, d] in T; o written in T, lse [B, H, Lq]).
template <class T>
void forward_state_into(const T* q, const T* k, const T* v, T* o, float* lse, const FastBackwardParams& p) {
  Shape s;
  s.batch = p.B, s.heads = p.H, s.kv_heads = p.H_kv, s.lq = p.Lq, s.lk = p.Lk, s.d = p.d;
  Options opt;
  opt.causal = p.causal;
  opt.scale = p.scale;
  const int64_t nq = s.bh() * s.lq * s.d, nk = s.kv_bh() * s.lk * s.d;
  Buffer<float> qf(Backend::Cuda, size_t(nq)), kf(Backend::Cuda, size_t(nk)), vf(Backend::Cuda, size_t(nk)),
      of(Backend::Cuda, size_t(nq));
  auto to_f = [](const T* src, Buffer<float>& dst, int64_t n) {
    cuda::launch("flash_bwd_fast_convert_out", convert_to_float<T>, elementwise_grid(n), dim3(256), 0, 0, src,
                 dst.data(), n);
  };
  to_f(q, qf, nq);
  to_f(k, kf, nk);
  to_f(v, vf, nk);
  int tile = kDefaultBlockM;
  try {
    flash_attention::check_tiles(Backend::Cuda, tile, tile, p.d);
  } catch (const InputError&) {
    tile = 32;
  }
  forward(Backend::Cuda, qf.data(), kf.data(), vf.data(), of.data(), lse, s, opt, tile, tile);
  cuda::launch("flash_bwd_fast_convert_in", convert_from_float<T>, elementwise_grid(nq), dim3(256), 0, 0, of.data(),
               o, nq);
  mem::synchronize(Backend::Cuda);  // the float copies are freed on return
}
template <class T>
void forward_state(const Buffer<T>& q, const Buffer<T>& k, const Buffer<T>& v, Buffer<T>& o, Buffer<float>& lse,
                   const FastBackwardParams& p) {
  lse.resize(Backend::Cuda, size_t(int64_t(p.B) * p.H * p.Lq));
  o.resize(Backend::Cuda, q.size());
  forward_state_into(q.data(), k.data(), v.data(), o.data(), lse.data(), p);
}

template <class T>
FastHostResult run_host_typed(const Array& q, const Array& k, const Array& v, const Array& dout, const Array* o,
                              const Array* lse, FastBackwardParams p) {
  Buffer<float> staging(Backend::Cuda, 0);
  Buffer<T> tq, tk, tv, tdo, to;
  convert_in(q.data, staging, tq);
  convert_in(k.data, staging, tk);
  convert_in(v.data, staging, tv);
  convert_in(dout.data, staging, tdo);
  Buffer<float> tlse(Backend::Cuda, 0);
  if (o) {
    convert_in(o->data, staging, to);
    tlse.upload(lse->data);
  } else {
    forward_state(tq, tk, tv, to, tlse, p);
  }
  const size_t nq = q.data.size(), nk = k.data.size(), rows = nq / size_t(p.d);
  Buffer<float> drow(Backend::Cuda, rows), accum(Backend::Cuda, p.d == 256 ? 0 : nq);
  Buffer<T> dq(Backend::Cuda, nq), dk(Backend::Cuda, nk), dv(Backend::Cuda, nk);
  for (Buffer<T>* b : {&dq, &dk, &dv}) b->fill_bytes(0xFF);  // 0xFFFF is NaN in bf16 and fp16
  p.q = tq.data(), p.k = tk.data(), p.v = tv.data(), p.o = to.data(), p.dout = tdo.data(), p.lse = tlse.data();
  p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data(), p.drow = drow.data();
  p.dq_accum = p.d == 256 ? nullptr : accum.data();
  accum.fill_bytes(0xFF);  // NaN (0xFFFFFFFF): rows the launches neither zero nor write show in dQ
  run_fast(p);
  Buffer<float> fq, fk, fv;
  to_float(dq, fq);
  to_float(dk, fk);
  to_float(dv, fv);
  mem::synchronize(Backend::Cuda);
  return FastHostResult{Array{q.shape, fq.to_host()}, Array{k.shape, fk.to_host()}, Array{v.shape, fv.to_host()}};
}

}  // namespace fast_bwd

// ---- [SECTION] entry points ----------------------------------------------------------------------------
FastBackwardPath fast_backward_path(FastBackwardPath requested) {
  std::string source = "path=wgmma";
  if (requested == FastBackwardPath::Auto) {
    const char* env = std::getenv("KL_FLASH_BWD_PATH");
    const std::string want = env ? env : "";
    if (want == "mma") return FastBackwardPath::MmaSync;
    if (want.empty() || want == "auto")  // the default: wgmma-tma where it runs (measured fastest on the H200)
      return fast_backward_wgmma_available() ? FastBackwardPath::WgmmaTma : FastBackwardPath::MmaSync;
    if (want != "wgmma" && want != "wgmma-tma")
      throw InputError(out_of_range_message("KL_FLASH_BWD_PATH", want, "mma, wgmma, wgmma-tma or auto (unset)"));
    requested = want == "wgmma" ? FastBackwardPath::Wgmma : FastBackwardPath::WgmmaTma;
    source = "KL_FLASH_BWD_PATH=" + want;
  } else if (requested == FastBackwardPath::WgmmaTma) {
    source = std::string("path=") + fast_backward_path_name(requested);
  }
  if (fast_backward_path_wgmma(requested) && !fast_backward_wgmma_available())
    throw InputError(source + ": flash-attention-backward's wgmma kernel needs an H100/H200 (compute capability 9.0) "
                     "with the sm_90a build loaded; this device or build is not one");
  return requested;
}

void run_fast(const FastBackwardParams& p) {
  validate_fast(p);
  FastBackwardParams r = p;
  r.path = fast_backward_path(p.path);
  if (!fast_backward_path_runs_d(r.path, r.d))  // no mma.sync kernel at d = 256
    throw InputError(out_of_range_message(
        "d", "256",
        std::string("{64, 128} on the ") + fast_backward_path_name(r.path) +
            " path; d = 256 runs on the wgmma kernel only (an H100/H200 with the sm_90a build)"));
  if (fast_backward_default_runs_ordered(r)) r.deterministic = true;
  if (r.dtype == FastDtype::Bf16) fast_bwd::run_typed<__nv_bfloat16>(r);
  else fast_bwd::run_typed<__half>(r);
}

void run_fast_preprocess(const FastBackwardParams& p) {
  validate_fast(p);
  if (p.dtype == FastDtype::Bf16) fast_bwd::launch_preprocess<__nv_bfloat16>(p);
  else fast_bwd::launch_preprocess<__half>(p);
}

void fast_forward_state(const FastBackwardParams& p, void* o, float* lse) {
  validate_fast(p);
  if (p.dtype == FastDtype::Bf16)
    fast_bwd::forward_state_into(static_cast<const __nv_bfloat16*>(p.q), static_cast<const __nv_bfloat16*>(p.k),
                                 static_cast<const __nv_bfloat16*>(p.v), static_cast<__nv_bfloat16*>(o), lse, p);
  else
    fast_bwd::forward_state_into(static_cast<const __half*>(p.q), static_cast<const __half*>(p.k),
                                 static_cast<const __half*>(p.v), static_cast<__half*>(o), lse, p);
}

FastHostResult run_fast_host(const Array& q, const Array& k, const Array& v, const Array& dout, const Array* o,
                             const Array* lse, bool causal, float scale, const std::string& dtype, bool deterministic,
                             FastBackwardPath path) {
  flash_attention::FastParams shape;
  flash_attention::check_host_shapes(q, k, v, shape);
  if (dout.shape != q.shape)
    throw InputError("--in do: shape " + dout.shape_text() + " must be " + q.shape_text() + " (q's shape)");
  if ((o == nullptr) != (lse == nullptr))
    throw InputError("--in o, --in lse: give both (the forward's O and L = m + log l) or neither");
  if (o) {
    if (o->shape != q.shape)
      throw InputError("--in o: shape " + o->shape_text() + " must be " + q.shape_text() + " (q's shape)");
    Array want;
    want.shape.assign(q.shape.begin(), q.shape.end() - 1);
    if (lse->shape != want.shape)
      throw InputError("--in lse: shape " + lse->shape_text() + " must be " + want.shape_text() +
                       " (q's shape without d)");
  }
  FastBackwardParams p;
  p.B = shape.B, p.H = shape.H, p.H_kv = shape.H_kv, p.Lq = shape.Lq, p.Lk = shape.Lk, p.d = shape.d;
  p.dtype = flash_attention::parse_fast_dtype(dtype);
  p.causal = causal;
  p.scale = scale;
  p.deterministic = deterministic;
  p.path = path;
  if (!(std::isfinite(scale) && scale > 0))
    throw InputError(out_of_range_message("scale", std::to_string(scale), "finite and > 0"));
  flash_attention::require_cuda_device("flash-attention-backward --variant fast");
  if (p.dtype == FastDtype::Bf16) return fast_bwd::run_host_typed<__nv_bfloat16>(q, k, v, dout, o, lse, p);
  return fast_bwd::run_host_typed<__half>(q, k, v, dout, o, lse, p);
}

std::vector<bench::Row> bench_fast(Backend b, bool quick) {
  using namespace fast_bwd;
  std::vector<bench::Row> rows;
  if (b != Backend::Cuda) return rows;  // no CPU implementation of the fast variant
  flash_attention::require_cuda_device("flash-attention-backward --variant fast");
  const flash_attention::FastBenchSpec spec =
      flash_attention::bench_shapes_from_env(flash_attention::fast_bench_spec(quick, {64, 128, 256}, false));
  const int64_t n = spec.elements();
  Buffer<__nv_bfloat16> q(Backend::Cuda, size_t(n)), k(Backend::Cuda, size_t(n)), v(Backend::Cuda, size_t(n)),
      dout(Backend::Cuda, size_t(n)), o(Backend::Cuda, size_t(n)), dq(Backend::Cuda, size_t(n)),
      dk(Backend::Cuda, size_t(n)), dv(Backend::Cuda, size_t(n));
  Buffer<float> lse(Backend::Cuda, size_t(n / 64)), drow(Backend::Cuda, size_t(n / 64)), accum(Backend::Cuda, size_t(n));
  launch_fill_uniform("flash_bwd_fast_fill", q.data(), n, 1u);
  launch_fill_uniform("flash_bwd_fast_fill", k.data(), n, 2u);
  launch_fill_uniform("flash_bwd_fast_fill", v.data(), n, 3u);
  launch_fill_uniform("flash_bwd_fast_fill", dout.data(), n, 4u);
  const FastBackwardPath path = fast_backward_path();  // KL_FLASH_BWD_PATH; named in each row
  for (const flash_attention::FastBenchShape& s : spec.shapes) {
    const int L = s.L, d = s.d;
    if (!fast_backward_path_runs_d(path, d)) continue;  // no mma.sync kernel at d = 256
    FastBackwardParams p;
    p.path = path;
    p.B = s.B, p.H = s.H, p.Lq = p.Lk = L, p.d = d;
    p.scale = 1.0f / std::sqrt(float(d));
    p.causal = s.causal;
    p.dtype = FastDtype::Bf16;
    forward_state(q, k, v, o, lse, p);  // O and L of these inputs, once per shape, not timed
    p.q = q.data(), p.k = k.data(), p.v = v.data(), p.o = o.data(), p.dout = dout.data(), p.lse = lse.data();
    p.dq = dq.data(), p.dk = dk.data(), p.dv = dv.data(), p.drow = drow.data(), p.dq_accum = accum.data();
    for (bool det : {false, true}) {
      p.deterministic = det;
      if (!det && fast_backward_dq_by_pass(p)) continue;  // d = 256: both modes run the same launches, one row
      const bench::Timing t =
          quick ? bench::time(b, [&] { run_fast(p); }, 1, 3) : bench::time(b, [&] { run_fast(p); }, 5, 30);
      const double flops = 2.5 * 4.0 * p.B * p.H * double(L) * L * d * (s.causal ? 0.5 : 1.0);
      bench::Row r;
      r.kernel = "flash-attention-backward";
      r.variant = "fast";
      r.shape = flash_attention::fast_bench_shape_text(s) + " bf16 dq=" + (det ? "deterministic" : "atomic") + " " +
                fast_backward_kernel_name(path, d);
      r.ms = t.median_ms;
      r.tflops = bench::tflops(flops, t.median_ms);
      // Q, K, V, O, dO read once, dQ, dK, dV written once (bf16): the fewest bytes.
      r.gbs = t.median_ms > 0 ? 8.0 * double(p.B) * p.H * L * d * 2 / (t.median_ms * 1e-3) / 1e9 : 0;
      r.ratio = 0;  // the peers (PyTorch's flash and cuDNN backward) are timed by bench/torch_flash_backward.py
      r.baseline = "torch: bench/torch_flash_backward.py";
      rows.push_back(r);
    }
  }
  mem::synchronize(Backend::Cuda);
  return rows;
}

}  // namespace kl::flash_attention_backward
