// Rung 6, fast variant, Hopper path: the dQ pass on wgmma (sm_90a), which the wgmma paths run beside their dK/dV
// kernel (each on a stream of its own, flash_attention_backward_fast.cu's launch_dkdv_and_dq_pass) in the
// deterministic mode, and at d = 256 in both modes (fast_backward_dq_by_pass; the mma.sync path keeps its own pass,
// flash_attention_backward_fast.cu). One writer per dQ element, no atomics: bitwise the same run
// after run. On the H200 the deterministic mode with it read 0.99x-1.28x its TFLOP/s with the mma.sync pass at
// d = 64 and 128, 1.26x-1.50x at d = 256 (docs/perf-log.md, "a dQ pass on wgmma").
//
// One CTA per query tile i of kBlockM = 128 rows (FastDqTraitsSm90; causal: the heaviest tiles first), two
// warpgroups; warpgroup wg owns rows 64 wg .. and keeps dQ_i (64 x d fp32) in registers. The CTA walks the K/V
// tiles j of kBlockN keys its rows see (key_tiles_for_block), K_j and V_j kStages deep by cp.async, one block
// barrier a tile; Q_i and dO_i stay in shared memory. Per tile, per warpgroup:
//   S  = Q_i K_j^T      wgmma.m64n{kBlockN}k16 ss (Q, K K-major)
//   dP = dO_i V_j^T     the same with dO, V
//   P  = exp2(S * scale*log2e - L * log2e), dS = P ∘ (dP - D)   (registers, fp32; masked pairs 0)
//   dQ_i += dS K_j      wgmma.m64n{d}k16 rs: dS rounded to 16 bits in the accumulator layout is the A layout
//                       (the forward's P V), K MN-major (keys = k)
// then dQ = scale * dQ_i, rounded, rows < Lq. Grouped-query attention (kGqa): K and V at the query head's kv head.
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

// 1 when the driver loaded this file's sm_90a build (the kernels here are real), else 0.
__global__ void bwd_dq_sm90a_probe(int* out) {
#ifdef KL_FA_SM90A
  *out = 1;
#else
  *out = 0;
#endif
}

template <class T, int kHeadDim, bool kGqa>
__device__ __forceinline__ void dq_wgmma_body(const FastBackwardParams& p) {
  using Tr = FastDqTraitsSm90<kHeadDim>;
  constexpr int D = kHeadDim, BM = Tr::kBlockM, BN = Tr::kBlockN, kStages = Tr::kStages, kThreads = Tr::kThreads;
  static_assert(BM == 128 && kThreads == 256 && kStages >= 2, "two warpgroups of 64 query rows");
  constexpr uint32_t kQBytes = BM * D * 2, kKBytes = BN * D * 2;
  constexpr float kLog2e = 1.4426950408889634f;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t sQ = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the launch asks for 1 KiB of slack
  const uint32_t sdO = sQ + kQBytes;
  const uint32_t sK = sdO + kQBytes;             // [kStages]
  const uint32_t sV = sK + kStages * kKBytes;    // [kStages]
  const int m_block = p.causal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const HeadsFor<kGqa, T, D, false> hp(p, b, h);  // kGqa: k, v at query head h's kv head
  const int m0 = m_block * BM;
  const int row = m0 + 64 * wg + 16 * warp + g;  // this thread's rows: row, row + 8
  const int n_tiles = flash_attention::key_tiles_for_block(m_block, p.Lq, p.Lk, BM, BN, p.causal);
  const float scale_log2 = p.scale * kLog2e;
  float acc_dq[D / 2];
  zero(acc_dq);
  if (n_tiles > 0) {  // uniform across the CTA
    // L * log2(e) (+inf past Lq or where the row sees nothing: P = 0) and D of this thread's two rows: row_stats'
    // values, written out (calling row_stats changes this pass's machine code, not yet run on a GPU).
    float l2[2], dr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = row + 8 * r;
      l2[r] = i < p.Lq ? lse_log2(hp.lse[i]) : INFINITY;
      dr[r] = i < p.Lq ? hp.drow[i] : 0.f;
    }
    load_tile<T, BM, D, kThreads>(sQ, hp.q, D, m0, p.Lq, tid);
    load_tile<T, BM, D, kThreads>(sdO, hp.dout, D, m0, p.Lq, tid);
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {  // one cp.async group per tile (maybe empty); Q, dO in the first
      if (st < n_tiles) {
        load_tile<T, BN, D, kThreads>(sK + st * kKBytes, hp.k, D, st * BN, p.Lk, tid);
        load_tile<T, BN, D, kThreads>(sV + st * kKBytes, hp.v, D, st * BN, p.Lk, tid);
      }
      cp_async_commit();
    }
    // This warpgroup's 64 rows of Q and dO: 8 swizzle atoms into each 64-column block.
    const uint32_t sQw = sQ + wg * 64 * 128, sdOw = sdO + wg * 64 * 128;
    for (int n = 0; n < n_tiles; ++n) {
      cp_async_wait<kStages - 2>();  // tile n's group landed; the next kStages - 2 may be in flight
      fence_proxy_async();
      __syncthreads();  // ... for every thread, and every warpgroup is done with tile n - 1's stage
      const int n_load = n + kStages - 1;  // into the stage tile n - 1 used
      if (n_load < n_tiles) {
        const uint32_t st = (n_load % kStages) * kKBytes;
        load_tile<T, BN, D, kThreads>(sK + st, hp.k, D, n_load * BN, p.Lk, tid);
        load_tile<T, BN, D, kThreads>(sV + st, hp.v, D, n_load * BN, p.Lk, tid);
      }
      cp_async_commit();  // always (maybe empty): one group per tile
      const uint32_t sKs = sK + (n % kStages) * kKBytes, sVs = sV + (n % kStages) * kKBytes;
      float acc_s[BN / 2], acc_dp[BN / 2];
      fence_regs(acc_s);
      fence_regs(acc_dp);
      wgmma_fence();
      auto issue_rows_kv = [&](float(&acc)[BN / 2], uint32_t s_rows, uint32_t s_kv) {  // acc = X_i KV_j^T, one group
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const uint32_t off_x = (kk >> 2) * (BM * 128) + (kk & 3) * 32;
          const uint32_t off_kv = (kk >> 2) * (BN * 128) + (kk & 3) * 32;
          wgmma_ss<T, BN>(acc, make_desc(s_rows + off_x, 16, 1024), make_desc(s_kv + off_kv, 16, 1024), kk > 0);
        }
        wgmma_commit();
      };
      issue_rows_kv(acc_s, sQw, sKs);   // S
      issue_rows_kv(acc_dp, sdOw, sVs);  // dP
      wgmma_wait<1>();  // S landed; dP may still run
      fence_regs(acc_s);
      // P: element 4j + e is row row + 8 (e / 2), key n * BN + 8j + 2 t4 + e % 2.
      const bool mask = flash_attention::tile_needs_mask(m_block, n, p.Lq, p.Lk, BM, BN, p.causal);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pv = fast_exp2(fmaf(acc_s[4 * j + e], scale_log2, -l2[e >> 1]));
          if (mask && !key_visible(row + 8 * (e >> 1), n * BN + 8 * j + 2 * t4 + (e & 1), p.Lq, p.Lk, p.causal))
            pv = 0.f;
          acc_s[4 * j + e] = pv;
        }
      wgmma_wait<0>();
      fence_regs(acc_dp);
      // dS, rounded to T as the A fragments of the key steps (frag[kk][r]: elements 8 kk + 2 r, + 1).
      uint32_t ds_frag[BN / 16][4];
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int x = 8 * kk + 2 * r;
          ds_frag[kk][r] = pack2<T>(acc_s[x] * (acc_dp[x] - dr[(r & 1)]), acc_s[x + 1] * (acc_dp[x + 1] - dr[(r & 1)]));
        }
      fence_regs(acc_dq);
      fence_regs(ds_frag);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        wgmma_rs<T, D>(acc_dq, ds_frag[kk], make_desc(sKs + kk * 16 * 128, BN * 128, 1024));
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(acc_dq);
      fence_regs(ds_frag);
    }
    cp_async_wait<0>();
  }
  store_dq_rows<T, D>(hp, p, row, t4, acc_dq);
}

template <class T, int kHeadDim, bool kGqa>
__global__ void __launch_bounds__(FastDqTraitsSm90<kHeadDim>::kThreads, 1)
    flash_bwd_dq_wgmma_kernel(const FastBackwardParams p) {
#ifdef KL_FA_SM90A
  dq_wgmma_body<T, kHeadDim, kGqa>(p);
#endif
}

template <class T, int D>
void launch_dq_typed(const FastBackwardParams& p, cudaStream_t stream) {
  using Tr = FastDqTraitsSm90<D>;
  const bool gqa = grouped_query(p);
  const dim3 grid(unsigned(ceil_div(p.Lq, Tr::kBlockM)), unsigned(p.H), unsigned(p.B));
  const std::string name = std::string("flash_bwd_dq_wgmma_d") + std::to_string(D) +
                           (std::is_same<T, __half>::value ? "_fp16" : "_bf16") + (gqa ? "_gqa" : "");
  cuda::launch(name.c_str(), gqa ? flash_bwd_dq_wgmma_kernel<T, D, true> : flash_bwd_dq_wgmma_kernel<T, D, false>,
               grid, dim3(Tr::kThreads), size_t(Tr::kSmemBytes), stream, p);
}
template <class T>
void launch_dq_for(const FastBackwardParams& p, cudaStream_t stream) {
  if (p.d == 64) launch_dq_typed<T, 64>(p, stream);
  else if (p.d == 128) launch_dq_typed<T, 128>(p, stream);
  else launch_dq_typed<T, 256>(p, stream);
}

}  // namespace sm90_bwd

void launch_wgmma_dq_pass(const FastBackwardParams& p, cudaStream_t stream) {
  static const bool loaded =
      flash_attention::sm90_detail::sm90a_probe_reads_one("flash_bwd_dq_sm90a_probe", sm90_bwd::bwd_dq_sm90a_probe);
  if (!loaded) throw RuntimeError("flash-attention-backward: the wgmma dQ pass's sm_90a code did not load here");
  if (p.dtype == FastDtype::Fp16) sm90_bwd::launch_dq_for<__half>(p, stream);
  else sm90_bwd::launch_dq_for<__nv_bfloat16>(p, stream);
}

}  // namespace kl::flash_attention_backward
