// Rung 6, fast variant, Hopper path at head dimension 256: the backward's dK/dV kernel on wgmma (sm_90a), the one
// both wgmma paths run at d = 256 (the kernels of flash_attention_backward_fast_sm90.cuh keep dK_j, dV_j of 64 keys
// x d per warpgroup in registers: 256 a thread at d = 256). The preprocess (D) is the mma.sync path's
// (flash_attention_backward_fast.cu); dQ comes after, from the wgmma dQ pass (flash_attention_backward_fast_dq.
// sm90a.cu), in both dQ modes: this kernel's own dQ by fp32 atomics, 64 KiB of adds a step whose bytes in L2 were
// its limit, measured 0.85x-0.90x of the two launches and was removed (docs/perf-log.md, "the backward at d = 256").
//
// One CTA per K/V tile j of kBlockN = 64 keys (FastBackwardTraitsSm90D256), two warpgroups; warpgroup wg takes
// columns c0 = 128 wg .. of dK_j, dV_j (64 x 128 fp32 each, in registers for the whole CTA). The CTA
// walks the query tiles i of kBlockM = 64 rows as the other wgmma kernels do (causal: from first_query_tile, the
// diagonal tiles masked); Q_i, dO_i two stages deep by cp.async, L_i and D_i by 4-byte cp.async. Per step:
//   S^T  = K_j Q_i^T   wgmma.m64n32k16 ss: all 64 keys x the warpgroup's 32 queries q0 = 32 wg .. (k = d)
//   dP^T = V_j dO_i^T  the same with V, dO
//   P^T = exp2(S^T * scale*log2e - L_i * log2e), dS^T = P^T ∘ (dP^T - D_i)   (registers, fp32)
//   P^T, dS^T into shared memory [key][query] (K-major A); a block barrier: each warpgroup now reads both halves
//   of the queries.
//   dV_j += P^T dO_i   wgmma.m64n128k16 ss, B transposed: dO's columns c0 .. (k = the step's 64 queries)
//   dK_j += dS^T Q_i   the same with Q
// Shared memory (1024-byte aligned tiles, 128-byte swizzle, kernels/rungs/sm90_device.cuh's conventions): sK, sV
// [64][256]; sQ, sdO [2][64][256]; sPt, sdSt [64 keys][64 queries]; L, D [2][64] fp32: 210 KiB, one CTA per SM.
// Grouped-query attention (kGqa): grid (K/V tiles, H_kv, B) and the walk over the group's query heads of the other
// main kernels (flash_attention_backward_fast.h).
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

// 1 when the driver loaded this file's sm_90a build (the kernels here are real), else 0.
__global__ void bwd_d256_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

template <class T, bool kGqa>
__device__ __forceinline__ void bwd_d256_body(const FastBackwardParams& p) {
  using Tr = FastBackwardTraitsSm90D256;
  constexpr int D = Tr::kHeadDim, BM = Tr::kBlockM, BN = Tr::kBlockN, kThreads = Tr::kThreads;
  static_assert(BM == 64 && BN == 64 && kThreads == 256, "two warpgroups over 64 keys and 64 query rows a step");
  constexpr uint32_t kTileBytes = BM * D * 2;  // K_j, V_j and one stage of Q_i or dO_i (64 rows each)
  constexpr uint32_t kSqBytes = BM * BN * 2;   // P^T, dS^T
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sK = (raw + 1023u) & ~1023u;  // the launch asks for 1 KiB of slack
  const uint32_t sV = sK + kTileBytes, sQ = sV + kTileBytes, sdO = sQ + 2 * kTileBytes;
  const uint32_t sPt = sdO + 2 * kTileBytes, sdSt = sPt + kSqBytes;
  float* sLse = reinterpret_cast<float*>(smem_raw + (sdSt + kSqBytes - raw));  // [2][BM]: L as stored, 0 past Lq
  float* sD = sLse + 2 * BM;                                                  // [2][BM]: D, 0 past Lq

  const BwdCta cta = main_cta(p);  // the launch order (bwd_main_cta): causal from Lq = 2048, heaviest tiles first
  const int n_block = cta.tile, h = cta.h, b = cta.b;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const HeadsFor<kGqa, T, D, true> hp(p, b, h);  // kGqa: h is the kv head; q, dout, L, D its group's first head's
  const int n0 = n_block * BN;
  const int key_l = 16 * warp + g;  // this thread's rows of S^T, dK, dV: keys n0 + key_l, + 8
  const int q0 = 32 * wg;           // this warpgroup's queries of S^T and dP^T in the step's tile
  const int c0 = 128 * wg;          // this warpgroup's columns of dK, dV
  const int m_first = first_query_tile(n_block, p.Lq, p.Lk, BM, BN, p.causal);
  const int m_blocks = ceil_div(p.Lq, BM);
  const float scale_log2 = p.scale * kLog2e;

  float acc_dk[64], acc_dv[64];
  zero(acc_dk);
  zero(acc_dv);

  // Q, dO, L and D of query tile m into stage s; `head`: the query head's first row counted from the group's first
  // head's (0 without kGqa). Rows past Lq are zeros (their L too: P = 1 there, but their dO and D are zeros, so they
  // add nothing to dK, dV).
  auto copy_stats = [&](int64_t head, int m, int s) {
    if (tid < BM) {
      const int i = m * BM + tid;
      const bool in = i < p.Lq;
      cp_async_4(smem_u32(sLse + s * BM + tid), hp.lse + head + (in ? i : 0), in);
      cp_async_4(smem_u32(sD + s * BM + tid), hp.drow + head + (in ? i : 0), in);
    }
  };
  auto load_q_do = [&](int64_t head, int m, int s) {
    load_tile<T, BM, D, kThreads>(sQ + s * kTileBytes, hp.q + head * D, D, m * BM, p.Lq, tid);
    load_tile<T, BM, D, kThreads>(sdO + s * kTileBytes, hp.dout + head * D, D, m * BM, p.Lq, tid);
    copy_stats(head, m, s);
  };

  if (m_first < m_blocks) {  // uniform across the CTA
    load_tile<T, BN, D, kThreads>(sK, hp.k, D, n0, p.Lk, tid);
    load_tile<T, BN, D, kThreads>(sV, hp.v, D, n0, p.Lk, tid);
    load_q_do(0, m_first, 0);
    cp_async_commit();

    int gi = 0, step = 0;  // kGqa: the group's query head this step computes, and the step's number
    const int group = kGqa ? kv_group(p) : 1;
    for (int m = m_first; m < m_blocks; ++m) {
      const int stage = kGqa ? (step & 1) : ((m - m_first) & 1);
      cp_async_wait<0>();  // this step's Q_i, dO_i, L_i, D_i (and K_j, V_j) landed
      fence_proxy_async();
      __syncthreads();  // ... for every thread; every warpgroup is done with the previous step's tiles
      if constexpr (kGqa) {  // the next step: this head's next tile, else the next head's first
        const bool same_head = m + 1 < m_blocks;
        const int gn = same_head ? gi : gi + 1, mn = same_head ? m + 1 : m_first;
        if (gn < group) load_q_do(int64_t(gn) * p.Lq, mn, stage ^ 1);
      } else if (m + 1 < m_blocks) {
        load_q_do(0, m + 1, stage ^ 1);
      }
      cp_async_commit();
      const uint32_t sQs = sQ + stage * kTileBytes, sdOs = sdO + stage * kTileBytes;

      // S^T and dP^T: the 64 keys x queries q0 .. q0 + 31 (k = d: 16 steps of 16 columns).
      float acc_s[16], acc_dp[16];
      fence_regs(acc_s);
      fence_regs(acc_dp);
      wgmma_fence();
      auto issue_transposed = [&](float(&acc)[16], uint32_t s_kv, uint32_t s_rows) {  // acc = KV_j X_i^T, one group
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const uint32_t off_kv = (kk >> 2) * (BN * 128) + (kk & 3) * 32;
          const uint32_t off_x = (kk >> 2) * (BM * 128) + q0 * 128 + (kk & 3) * 32;
          wgmma_ss<T, 32>(acc, make_desc(s_kv + off_kv, 16, 1024), make_desc(s_rows + off_x, 16, 1024), kk > 0);
        }
        wgmma_commit();
      };
      issue_transposed(acc_s, sK, sQs);
      issue_transposed(acc_dp, sV, sdOs);
      wgmma_wait<1>();  // S^T landed; dP^T may still run
      fence_regs(acc_s);

      // P^T (masked pairs 0: the Lk tail, the causal diagonal). Element 4j + e: key key_l + 8 (e / 2), query
      // q0 + 8j + 2 t4 + e % 2.
      const float* lse_s = sLse + stage * BM + q0;
      const float* d_s = sD + stage * BM + q0;
      const bool mask = backward_tile_needs_mask(m, n_block, p.Lq, p.Lk, BM, BN, p.causal);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 l = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t4);
        const float l2[2] = {lse_log2(l.x), lse_log2(l.y)};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pv = fast_exp2(fmaf(acc_s[4 * j + e], scale_log2, -l2[e & 1]));
          if (mask && !key_visible(m * BM + q0 + 8 * j + 2 * t4 + (e & 1), n0 + key_l + 8 * (e >> 1), p.Lq, p.Lk,
                                   p.causal))
            pv = 0.f;
          acc_s[4 * j + e] = pv;
        }
      }
      wgmma_wait<0>();
      fence_regs(acc_dp);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 d2 = *reinterpret_cast<const float2*>(d_s + 8 * j + 2 * t4);
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_dp[4 * j + e] = acc_s[4 * j + e] * (acc_dp[4 * j + e] - ((e & 1) ? d2.y : d2.x));
      }

      // P^T and dS^T as [key][query] (the A of dV and dK, K-major): 4-byte pairs, the 8 rows of a warp's store on
      // 8 different 16-byte chunks (the swizzle), no bank conflict (WgmmaD256StoreLayouts).
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const uint32_t off = wgmma_frag::d256_pt_store_byte(wg, warp, lane, j, hh);
          st_shared_u32(sPt + off, pack2<T>(acc_s[4 * j + 2 * hh], acc_s[4 * j + 2 * hh + 1]));
          st_shared_u32(sdSt + off, pack2<T>(acc_dp[4 * j + 2 * hh], acc_dp[4 * j + 2 * hh + 1]));
        }
      fence_proxy_async();
      __syncthreads();  // P^T, dS^T whole in shared memory

      // dV_j += P^T dO_i and dK_j += dS^T Q_i: columns c0 .. (dO, Q MN-major: blocks 2 wg, 2 wg + 1).
      fence_regs(acc_dv);
      fence_regs(acc_dk);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
        wgmma_ss_tb<T, 128>(acc_dv, make_desc(sPt + kk * 32, 16, 1024),
                            make_desc(sdOs + 2 * wg * (BM * 128) + kk * 16 * 128, BM * 128, 1024), 1);
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
        wgmma_ss_tb<T, 128>(acc_dk, make_desc(sdSt + kk * 32, 16, 1024),
                            make_desc(sQs + 2 * wg * (BM * 128) + kk * 16 * 128, BM * 128, 1024), 1);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc_dv);
      fence_regs(acc_dk);
      if constexpr (kGqa) {  // after a head's last tile, the group's next head from its first tile
        ++step;
        if (m + 1 == m_blocks && ++gi < group) m = m_first - 1;
      }
    }
    cp_async_wait<0>();
  }

  // dK_j = scale * sum dS^T Q, dV_j = sum P^T dO (0 for keys no query sees), rounded to T, keys < Lk.
  store_dk_dv<T>(hp.dk(p), hp.dv(p), acc_dk, acc_dv, n0 + key_l, p.Lk, D, c0, t4, p.scale);
}

template <class T, bool kGqa>
__global__ void __launch_bounds__(FastBackwardTraitsSm90D256::kThreads, 1)
    flash_bwd_wgmma_dkdv_d256_kernel(const FastBackwardParams p) {
#ifdef KL_FA_SM90A
  bwd_d256_body<T, kGqa>(p);
#endif
}

template <class T>
void launch_d256_typed(const FastBackwardParams& p, cudaStream_t stream) {
  using Tr = FastBackwardTraitsSm90D256;
  const bool gqa = grouped_query(p);
  const dim3 grid(unsigned(ceil_div(p.Lk, Tr::kBlockN)), unsigned(gqa ? kv_heads(p) : p.H), unsigned(p.B));
  const std::string name = std::string("flash_bwd_wgmma_dkdv_d256") +
                           (std::is_same<T, __half>::value ? "_fp16" : "_bf16") + (gqa ? "_gqa" : "");
  void (*kernel)(const FastBackwardParams) =
      gqa ? flash_bwd_wgmma_dkdv_d256_kernel<T, true> : flash_bwd_wgmma_dkdv_d256_kernel<T, false>;
  cuda::launch(name.c_str(), kernel, grid, dim3(Tr::kThreads), size_t(Tr::kSmemBytes), stream, p);
}

}  // namespace sm90_bwd

void launch_wgmma_dkdv_d256(const FastBackwardParams& p, cudaStream_t stream) {
  // run_fast chose a wgmma path where the other wgmma kernels' sm_90a code runs; this file's must run too.
  static const bool loaded =
      flash_attention::sm90_detail::sm90a_probe_reads_one("flash_bwd_d256_sm90a_probe", sm90_bwd::bwd_d256_sm90a_probe);
  if (!loaded)
    throw RuntimeError("flash-attention-backward: the d = 256 wgmma kernel's sm_90a code did not load here");
  if (p.dtype == FastDtype::Fp16) sm90_bwd::launch_d256_typed<__half>(p, stream);
  else sm90_bwd::launch_d256_typed<__nv_bfloat16>(p, stream);
}

}  // namespace kl::flash_attention_backward
