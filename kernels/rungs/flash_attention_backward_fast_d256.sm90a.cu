// Rung 6, fast variant, Hopper path at head dimension 256: the backward's dK/dV kernel on wgmma (sm_90a), the one
// both wgmma paths run at d = 256 (the kernels of flash_attention_backward_fast_sm90.cuh keep dK_j, dV_j of 64 keys
// x d per warpgroup in registers: 256 a thread at d = 256). The preprocess (D) is the mma.sync path's
// (flash_attention_backward_fast.cu); dQ comes after, from the wgmma dQ pass (flash_attention_backward_fast_dq.
// sm90a.cu), in both dQ modes: this kernel's own dQ by fp32 atomics, 64 KiB of adds a step whose bytes in L2 were
// its limit, measured 0.85x-0.90x of the two launches and was removed (docs/perf-log.md, "the backward at d = 256").
//
// One CTA per K/V tile j of kBlockN = 64 keys (FastBackwardTraitsSm90D256), two warpgroups that split the step by
// product, each over all 64 keys and the step's 64 queries: warpgroup 0 keeps dV_j, warpgroup 1 dK_j (64 x 256
// fp32, 128 registers a thread, for the whole CTA). The CTA walks the query tiles i of kBlockM = 64 rows as the
// other wgmma kernels do (causal: from first_query_tile, the diagonal tiles masked); Q_i, dO_i two stages deep by
// cp.async, L_i and D_i by 4-byte cp.async. Per step:
//   warpgroup 0: S^T  = K_j Q_i^T   wgmma.m64n64k16 ss (k = d), then P^T = exp2(S^T * scale*log2e - L_i * log2e)
//                (fp32, masked pairs 0) into shared memory for warpgroup 1 (a named barrier), then
//                dV_j += P^T dO_i   wgmma.m64n256k16 rs: P^T rounded to T from registers, dO MN-major
//   warpgroup 1: dP^T = V_j dO_i^T  wgmma.m64n64k16 ss, then dS^T = P^T o (dP^T - D_i) with warpgroup 0's P^T,
//                dK_j += dS^T Q_i   wgmma.m64n256k16 rs
// Against splitting by columns (each warpgroup S^T and dP^T for half the queries, dK_j and dV_j for half the
// columns, P^T and dS^T through shared memory as the A of both), a step reads 128 KiB of wgmma operands from shared
// memory for S^T and dP^T instead of 192 (K_j and V_j once, not once per warpgroup) and 64 KiB for dV_j, dK_j
// instead of 96, plus P^T's 32 KiB of hand-over (docs/perf-log.md).
// Shared memory (1024-byte aligned tiles, 128-byte swizzle, kernels/rungs/sm90_device.cuh's conventions): sK, sV
// [64][256]; sQ, sdO [2][64][256]; P^T [8 float4][128 threads] fp32; L, D [2][64] fp32: 210 KiB, one CTA per SM.
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
  constexpr int kBarP = 3;                     // warpgroup 0's P^T in sX (named barriers 1, 2: unused here)
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sK = (raw + 1023u) & ~1023u;  // the launch asks for 1 KiB of slack
  const uint32_t sV = sK + kTileBytes, sQ = sV + kTileBytes, sdO = sQ + 2 * kTileBytes;
  const uint32_t sX = sdO + 2 * kTileBytes;  // P^T, fp32, [8 float4][128 threads]: 16 KiB
  float* sLse = reinterpret_cast<float*>(smem_raw + (sX + Tr::kXBytes - raw));  // [2][BM]: L as stored, 0 past Lq
  float* sD = sLse + 2 * BM;                                                    // [2][BM]: D, 0 past Lq

  const BwdCta cta = main_cta(p);  // the launch order (bwd_main_cta): causal from Lq = 2048, heaviest tiles first
  const int n_block = cta.tile, h = cta.h, b = cta.b;
  const int tid = threadIdx.x, wg = tid >> 7, wt = tid & 127, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2,
            t4 = lane & 3;
  const HeadsFor<kGqa, T, D, true> hp(p, b, h);  // kGqa: h is the kv head; q, dout, L, D its group's first head's
  const int n0 = n_block * BN;
  const int key_row = n0 + 16 * warp + g;  // this thread's rows of S^T, dP^T and its accumulator: key_row, + 8
  const int m_first = first_query_tile(n_block, p.Lq, p.Lk, BM, BN, p.causal);
  const int m_blocks = ceil_div(p.Lq, BM);
  const float scale_log2 = p.scale * kLog2e;
  // Warpgroup 0 computes S^T = K_j Q_i^T, P^T and dV_j += P^T dO_i; warpgroup 1 dP^T = V_j dO_i^T, dS^T (with
  // warpgroup 0's P^T) and dK_j += dS^T Q_i: each operand tile read once a step, not once per warpgroup.
  const uint32_t sA = wg ? sV : sK;

  float acc[D / 2];  // warpgroup 0: dV_j, 1: dK_j (64 keys x 256 columns, fp32)
  zero(acc);

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
      __syncthreads();  // ... for every thread; both warpgroups are done with the previous step's tiles and sX
      if constexpr (kGqa) {  // the next step: this head's next tile, else the next head's first
        const bool same_head = m + 1 < m_blocks;
        const int gn = same_head ? gi : gi + 1, mn = same_head ? m + 1 : m_first;
        if (gn < group) load_q_do(int64_t(gn) * p.Lq, mn, stage ^ 1);
      } else if (m + 1 < m_blocks) {
        load_q_do(0, m + 1, stage ^ 1);
      }
      cp_async_commit();
      const uint32_t sQs = sQ + stage * kTileBytes, sdOs = sdO + stage * kTileBytes;

      // S^T (warpgroup 0) or dP^T (1): the 64 keys x the step's 64 queries (k = d: 16 steps of 16 columns).
      float acc_x[BM / 2];
      fence_regs(acc_x);
      wgmma_fence();
      {  // issue_keys_by_queries with each descriptor as base + offset / 16 (the tiles lie below 256 KiB, so the
         // address field never carries): the form measured; the helper's make_desc per step compiles otherwise
        const uint64_t da = make_desc(sA, 16, 1024), db = make_desc(wg ? sdOs : sQs, 16, 1024);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const uint32_t off_k = (kk >> 2) * (BN * 128) + (kk & 3) * 32, off_q = (kk >> 2) * (BM * 128) + (kk & 3) * 32;
          wgmma_ss<T, BM>(acc_x, da + (off_k >> 4), db + (off_q >> 4), kk > 0);
        }
        wgmma_commit();
      }
      wgmma_wait<0>();
      fence_regs(acc_x);

      // Element 4j + e: key key_row + 8 (e / 2), query m BM + 8j + 2 t4 + e % 2. Warpgroup 0: P^T (masked pairs 0:
      // the Lk tail, the causal diagonal), handed to warpgroup 1 through sX, which makes dS^T = P^T o (dP^T - D).
      if (wg == 0) {
        const bool mask = backward_tile_needs_mask(m, n_block, p.Lq, p.Lk, BM, BN, p.causal);
        softmax_p_split<BM, true>(acc_x, sLse + stage * BM, scale_log2, mask, m * BM, key_row, t4, p);
#pragma unroll
        for (int i = 0; i < BM / 8; ++i) {
          const float* x = acc_x + 4 * i;
          const uint4 v =
              make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]), __float_as_uint(x[3]));
          st_shared_v4(sX + (i * 128 + wt) * 16, v);
        }
        named_bar_arrive(kBarP, kThreads);
      } else {
        const float* d_s = sD + stage * BM;
        named_bar_sync(kBarP, kThreads);
#pragma unroll
        for (int i = 0; i < BM / 8; ++i) {
          const uint4 pv = ld_shared_v4(sX + (i * 128 + wt) * 16);
          const float2 d2 = *reinterpret_cast<const float2*>(d_s + 8 * i + 2 * t4);
          acc_x[4 * i] = __uint_as_float(pv.x) * (acc_x[4 * i] - d2.x);
          acc_x[4 * i + 1] = __uint_as_float(pv.y) * (acc_x[4 * i + 1] - d2.y);
          acc_x[4 * i + 2] = __uint_as_float(pv.z) * (acc_x[4 * i + 2] - d2.x);
          acc_x[4 * i + 3] = __uint_as_float(pv.w) * (acc_x[4 * i + 3] - d2.y);
        }
      }

      // dV_j += P^T dO_i (warpgroup 0) or dK_j += dS^T Q_i (1): A from registers (pack_a), B MN-major (all 256
      // columns), k = the step's 64 queries.
      uint32_t frag[BM / 16][4];
      pack_a<T>(frag, acc_x);
      const uint64_t dx = make_desc(wg ? sQs : sdOs, BM * 128, 1024);
      fence_regs(acc);
      fence_regs(frag);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk) wgmma_rs<T, D>(acc, frag[kk], dx + ((kk * 16 * 128) >> 4));
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc);
      if constexpr (kGqa) {  // after a head's last tile, the group's next head from its first tile
        ++step;
        if (m + 1 == m_blocks && ++gi < group) m = m_first - 1;
      }
    }
    cp_async_wait<0>();
  }

  // dV_j = sum P^T dO (warpgroup 0), dK_j = scale * sum dS^T Q (1); 0 for keys no query sees; keys < Lk.
  store_rows<T>(wg ? hp.dk(p) : hp.dv(p), acc, key_row, p.Lk, D, 0, t4, wg ? p.scale : 1.f);
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
