// Rung 6, fast variant, Hopper path: the deterministic mode's main kernel with its dQ adds in turn
// (fast_backward_ordered_dq: wgmma-tma, plain heads, d = 64 and 128, Lq and Lk from 512; the header's ordered_dq), in
// FlashAttention-3's warp roles: the wgmma-tma kernel's products, softmax (its mask tested once a step,
// softmax_p_split) and dQ staging (flash_attention_backward_fast_sm90.cuh) in two consumer warpgroups, and a
// producer warpgroup whose warp 0 loads Q_i,
// dO_i (bulk tensor copies), L_i and D_i (4-byte cp.async tracked by the same mbarrier) two stages ahead, and whose
// warps 1 and 2 add each step's staged dQ into the fp32 accumulator (bulk tensor reduce-adds), warp 1 consumer
// warpgroup 0's rows and warp 2 warpgroup 1's, each on its own turn counter per query tile: the adds when the counter
// reads this CTA's rank, then the wait for them to complete and the turn counted up (the tile's first in turn, rank 0,
// stores instead of adding: the accumulator is not zeroed, so the preprocess skips that write, 1.00x-1.07x on an H200;
// the two chains side by side, not one after the other in one warp, 1.10x at d = 128 from L = 2048 on an H100;
// docs/perf-log.md, 2026-12-07): the waits fall in those warps, not in a consumer (the wgmma-tma kernel waiting for
// turns in its issuing thread measured 0.77x-0.85x the dQ pass at d = 64, docs/perf-log.md). The producer gives its
// registers to the consumers (setmaxnreg 24 / 240). No block barrier per step: the consumers meet at a named barrier
// before and after dS goes to shared memory, a stage's Q_i / dO_i / L_i / D_i goes back to warp 0 on an mbarrier, and
// each warpgroup's dQ staging to its dQ warp and back on named barriers (per warpgroup and stage). The same warp roles
// in the atomic mode (no turns) measured 0.99x wgmma-tma's kernel over the d = 64 and 128 rows: not kept. Where a
// head's N K/V tiles fit the SMs the launch runs in gangs of N CTAs, each CTA taking its K/V tile of one head after
// another, so a head's CTAs start it together (one head a CTA, as SMs free, measured 0.96x-0.98x of gangs at d = 64,
// L = 2048 and 4096, 0.98x-1.01x at d = 128 and from 8192; docs/perf-log.md, 2026-12-07); under the mask (causal
// pairs) a CTA takes a light K/V tile at its even heads and the matching heavy one at its odd heads, walked back.
#pragma once
#include "kernels/rungs/flash_attention_backward_fast_sm90.cuh"

namespace kl::flash_attention_backward {
namespace sm90_bwd {

__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ int ld_acquire_gpu(const int* ptr) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_gpu_add(int* ptr, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(ptr), "r"(v) : "memory");
}
// The box at (x, y, z) of the 3-D tensor `map` (global, fp32) = the box at `src` in shared memory where `store`,
// else += it (bulk_tensor_reduce_add_3d), asynchronously (a bulk group of the issuing thread); elements outside the
// tensor are not written. One predicated asm block, not a branch: the issuing warp has 24 registers.
__device__ __forceinline__ void bulk_tensor_store_or_add_3d(const CUtensorMap* map, uint32_t src, int x, int y, int z,
                                                            bool store) {
#ifdef KL_FA_SM90A
  asm volatile(
      "{\n.reg .pred s;\nsetp.ne.b32 s, %5, 0;\n"
      "@s cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n"
      "@!s cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n}\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(x), "r"(y), "r"(z), "r"(int(store))
      : "memory");
#endif
}
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// Named barriers: 1, 2 the epilogue's (store_dk_dv_staged, per consumer warpgroup); 3 the consumers'; 4 + 2 cw + stage:
// consumer warpgroup cw's dQ staged (its 128 threads arrive, dQ warp 1 + cw waits); 8 + 2 cw + stage: the stage read
// by that warp's adds (it arrives, the warpgroup waits).
constexpr int kOrderedBarConsumers = 3, kOrderedBarDqFull = 4, kOrderedBarDqEmpty = 8;
constexpr int kOrderedThreads = 384, kOrderedProducerRegs = 24, kOrderedConsumerRegs = 240;

// kM80 (d = 128 from Lq, Lk = 2048 without the mask, from 4096 under it: fast_backward_steps80): 80 query rows a
// step as the atomic kernel's kM80 (dQ^T, one dQ stage, which the consumers stage into once the dQ warp's adds of the
// step before have read it).
template <class T, int kHeadDim, bool kM80 = false>
__device__ __forceinline__ void bwd_ordered_body(const FastBackwardParams& p, const CUtensorMap* tm_dq,
                                                 const CUtensorMap* tm_q, const CUtensorMap* tm_do, int* turns,
                                                 const OrderedDq& order) {
  using Tr = FastBackwardTraitsSm90<kHeadDim>;
  static_assert(!kM80 || kHeadDim == 128, "80 rows: d = 128");
  constexpr bool kWide = kHeadDim == 64;
  constexpr int D = kHeadDim, BM = kM80 ? Tr::kBlockM80 : Tr::kBlockMTma, BN = Tr::kBlockN;
  // The dQ staging: two stages (kM80: one, of two 80-row boxes a warpgroup), the boxes' size, the L and D padding.
  constexpr int kDqStages = kM80 ? 1 : 2;
  constexpr uint32_t kDqBox = kM80 ? Tr::kDqBoxBytes80 : Tr::kDqBoxBytes;
  constexpr uint32_t kDqStage = kM80 ? uint32_t(Tr::kDqStageBytes80) : uint32_t(Tr::kDqStageBytes);
  constexpr uint32_t kStatsBytes = 4 * BM * 4 + (kM80 ? uint32_t(Tr::kStatsPad80) : 0u);
  constexpr int kKq = BM / 16;
  constexpr uint32_t kQBytes = BM * D * 2, kKBytes = BN * D * 2, kDsBytes = BM * BN * 2;
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sK = (raw + 1023u) & ~1023u;
  const uint32_t sV = sK + kKBytes;
  const uint32_t sQ = sV + kKBytes;       // [2] stages
  const uint32_t sdO = sQ + 2 * kQBytes;  // [2] stages
  const uint32_t sdS = sdO + 2 * kQBytes;
  float* sLse = reinterpret_cast<float*>(smem_raw + (sdS + kDsBytes - raw));  // [2][BM]: L as stored, 0 past Lq
  float* sD = sLse + 2 * BM;                                                  // [2][BM]
  const uint32_t sdQ = sdS + kDsBytes + kStatsBytes;                          // [kDqStages] stages of kDqStage
  const uint32_t sBar = sdQ + kDqStages * kDqStage;
  auto full_bar = [&](int st) { return sBar + 8 * st; };        // Q_i, dO_i, L_i, D_i of a stage landed
  auto empty_bar = [&](int st) { return sBar + 16 + 8 * st; };  // the stage read by both consumer warpgroups

  // The CTA in the grid's order (its K/V tile reversed where the plan says: the waits then point at CTAs started
  // earlier), not bwd_main_cta's heaviest-first order, whose waits could point at CTAs not yet started. With gangs
  // (order.gang: grid (N, gangs)) CTA (j, g) takes K/V tile j of heads g, g + gangs, ... in turn, a head's N CTAs
  // side by side; else grid (N, H, B), one head. CausalPairs' gangs: column x takes tile x at its even heads and
  // N - 1 - x, walked back, at its odd ones (ordered_dq_tile).
  const int heads = p.B * p.H;
  const int bh_first = order.gang ? int(blockIdx.y) : int(blockIdx.z) * p.H + int(blockIdx.y);
  const int bh_stride = order.gang ? int(gridDim.y) : heads;
  const int my_heads = bh_first < heads ? (heads - 1 - bh_first) / bh_stride + 1 : 0;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int m_blocks = ceil_div(p.Lq, BM);
  // The K/V tile and the steps of the CTA's even heads (0, 2, ...) and of its odd ones (the same but in CausalPairs).
  const int j_even = ordered_dq_tile(order, int(blockIdx.x), 0, int(gridDim.x));
  const int j_odd = ordered_dq_tile(order, int(blockIdx.x), 1, int(gridDim.x));
  const int first_even = first_query_tile(j_even, p.Lq, p.Lk, BM, BN, p.causal);
  const int steps_even = m_blocks > first_even ? m_blocks - first_even : 0;
  const int first_odd = first_query_tile(j_odd, p.Lq, p.Lk, BM, BN, p.causal);
  const int steps_odd = m_blocks > first_odd ? m_blocks - first_odd : 0;
  // The CTA's steps over its heads: S counts them (stages, phases, turns).
  const int total = (my_heads >> 1) * (steps_even + steps_odd) + (my_heads & 1) * steps_even;
  auto steps_of = [&](int k) { return (k & 1) ? steps_odd : steps_even; };
  auto n_block_of = [&](int k) { return (k & 1) ? j_odd : j_even; };
  // The query tile of head k's step s: from ordered_dq_start, wrapping at m_blocks; CausalPairs' odd heads back.
  const int start = ordered_dq_start(order, j_even, first_even, m_blocks);
  auto tile_of = [&](int k, int s) { return ordered_dq_step_tile(start, ordered_dq_flipped(order, k), m_blocks, s); };
  auto bh_at = [&](int k) { return bh_first + k * bh_stride; };  // the CTA's k-th head

  if (tid == 0) {
    mbar_init(full_bar(0), 33);  // warp 0's first lane (with the copies' bytes) and its 32 lanes' cp.async
    mbar_init(full_bar(1), 33);
    mbar_init(empty_bar(0), 2);  // one thread of each consumer warpgroup
    mbar_init(empty_bar(1), 2);
    fence_mbar_init();
  }
  __syncthreads();

  if (wg == 0) {  // ---- the producer warpgroup
    setmaxnreg_dec<kOrderedProducerRegs>();
    if (warp == 0) {  // loads (the head's slices found again each step: this warp has 24 registers)
      for (int S = 0, k = 0, s = 0; S < total; ++S, ++s) {
        while (s == steps_of(k)) ++k, s = 0;  // the next head (a head may have no steps)
        const int st = S & 1, m = tile_of(k, s);
        const int bh = bh_at(k);
        if (S >= 2) mbar_wait(empty_bar(st), uint32_t(((S - 2) >> 1) & 1));
        // A head's first step also waits for the step before (the last of the head before, held until its dK, dV
        // staging, which spans both stages, was read): a head of one step (d = 64, the last K/V tile under the
        // mask, CausalPairs) holds only that stage, and S - 2 is then the head before's.
        if (s == 0 && S >= 1) mbar_wait(empty_bar(st ^ 1), uint32_t(((S - 1) >> 1) & 1));
        if (lane == 0) {
          mbar_arrive_expect_tx(full_bar(st), 2 * kQBytes);
#pragma unroll
          for (int c = 0; c < D / 64; ++c) {
            tma_load_4d(sQ + st * kQBytes + c * (BM * 128), tm_q, full_bar(st), 64 * c, m * BM, bh % p.H, bh / p.H);
            tma_load_4d(sdO + st * kQBytes + c * (BM * 128), tm_do, full_bar(st), 64 * c, m * BM, bh % p.H, bh / p.H);
          }
        }
        const int64_t row0 = int64_t(bh) * p.Lq;
#pragma unroll
        for (int r = lane; r < BM; r += 32) {
          const int i = m * BM + r;
          const bool in = i < p.Lq;  // rows past Lq: zeros (their Q and dO rows are zeros too)
          cp_async_4(smem_u32(sLse + st * BM + r), p.lse + row0 + (in ? i : 0), in);
          cp_async_4(smem_u32(sD + st * BM + r), p.drow + row0 + (in ? i : 0), in);
        }
        cp_async_mbar_arrive_noinc(full_bar(st));
      }
    } else if (warp == 1 || warp == 2) {  // dQ adds: warp 1 consumer warpgroup 0's, warp 2 warpgroup 1's
      // cw a compile-time constant: the 24-register warp keeps its barrier ids and staging offset as constants.
      auto dq_adds = [&](auto cw_constant) {
        constexpr int cw = decltype(cw_constant)::value;
        for (int S = 0, k = 0, s = 0; S < total; ++S, ++s) {
          while (s == steps_of(k)) ++k, s = 0;  // the next head (a head may have no steps)
          const int st = kM80 ? 0 : S & 1, mt = tile_of(k, s);
          const int bh = bh_at(k);
          // The tile's counter for this warpgroup's rows and this CTA's turn there.
          int* turn = turns + (int64_t(bh) * m_blocks + mt) * 2 + cw;
          const int rank = ordered_dq_rank(order, mt, n_block_of(k), p.Lq, p.Lk, BM, BN, ordered_dq_flipped(order, k));
          const int row0 = kWide ? mt * BM + 64 * cw : mt * BM;
          const bool added = row0 < p.Lq;  // kWide: the second warpgroup's rows may all lie past Lq (no add)
          named_bar_sync(kOrderedBarDqFull + 2 * cw + st, 160);
          if (lane == 0 && added) {
            while (ld_acquire_gpu(turn) != rank) {
            }
            fence_proxy_async_global();
            const uint32_t src = sdQ + uint32_t(st) * kDqStage + wgmma_frag::dq_stage_byte<kDqBox / 128>(cw, 0, 0);
            // The tile's first in turn (rank 0) stores: the accumulator is not zeroed before.
#pragma unroll
            for (int box = 0; box < 2; ++box)
              bulk_tensor_store_or_add_3d(tm_dq, src + box * kDqBox, kWide ? 32 * box : 64 * cw + 32 * box, row0, bh,
                                          rank == 0);
            bulk_commit();
            bulk_wait<0>();  // the adds completed (so the next in turn adds after them), then the turn counted up
            fence_proxy_async_global();
            red_release_gpu_add(turn, 1);
          }
          __syncwarp();
          // stage st free for step S + 2 (kM80: its one stage for step S + 1)
          if (S + kDqStages < total) named_bar_arrive(kOrderedBarDqEmpty + 2 * cw + st, 160);
        }
      };
      if (warp == 1)
        dq_adds(std::integral_constant<int, 0>{});
      else
        dq_adds(std::integral_constant<int, 1>{});
    }
    return;
  }

  // ---- the consumer warpgroups: cw owns keys n0 + 64 cw .. + 63
  setmaxnreg_inc<kOrderedConsumerRegs>();
  const int cw = wg - 1, ct = tid - 128, g = lane >> 2, t4 = lane & 3;
  const float scale_log2 = p.scale * kLog2e;
  float acc_dk[D / 2], acc_dv[D / 2];
  for (int k = 0, S = 0; k < my_heads; ++k) {  // S: the CTA's steps so far
    const int bh = bh_at(k), n_block = n_block_of(k), n0 = n_block * BN, steps = steps_of(k);
    const int key_row = n0 + 64 * cw + 16 * warp + g;
    const HeadsFor<false, T, D, true> hp(p, bh / p.H, bh % p.H);
    const bool more = k + 1 < my_heads;  // another head follows: its first stages wait for this one's epilogue
    zero(acc_dk);
    zero(acc_dv);
    if (steps > 0) {
      load_tile<T, BN, D, 256>(sK, hp.k, D, n0, p.Lk, ct);
      load_tile<T, BN, D, 256>(sV, hp.v, D, n0, p.Lk, ct);
      cp_async_commit();
      cp_async_wait<0>();
      fence_proxy_async();
      named_bar_sync(kOrderedBarConsumers, 256);
      const uint32_t sKw = sK + cw * 64 * 128, sVw = sV + cw * 64 * 128;
      for (int s = 0; s < steps; ++s, ++S) {
        const int st = S & 1, m = tile_of(k, s);
        mbar_wait(full_bar(st), uint32_t((S >> 1) & 1));
        const uint32_t sQs = sQ + st * kQBytes, sdOs = sdO + st * kQBytes;

        float acc_s[BM / 2], acc_dp[BM / 2];
        fence_regs(acc_s);
        fence_regs(acc_dp);
        wgmma_fence();
        issue_keys_by_queries<T, D, BM, BN>(acc_s, sKw, sQs);
        issue_keys_by_queries<T, D, BM, BN>(acc_dp, sVw, sdOs);
        wgmma_wait<1>();
        fence_regs(acc_s);
        const bool mask = backward_tile_needs_mask(m, n_block, p.Lq, p.Lk, BM, BN, p.causal);
        softmax_p_split<BM, true>(acc_s, sLse + st * BM, scale_log2, mask, m * BM, key_row, t4, p);
        wgmma_wait<0>();
        fence_regs(acc_dp);
        ds_from_dp<BM>(acc_dp, acc_s, sD + st * BM, t4);

        uint32_t p_frag[kKq][4], ds_frag[kKq][4];
        pack_p_ds<T, D, BM>(p_frag, ds_frag, acc_s, acc_dp, acc_dv, acc_dk);
        issue_dv_dk<T, D, BM>(acc_dv, acc_dk, p_frag, ds_frag, sdOs, sQs);

        // dS^T into sdS, once both warpgroups' previous dQ products (which read it) are done; then all of it there.
        named_bar_sync(kOrderedBarConsumers, 256);
        store_ds_transposed<BM>(sdS, ds_frag, cw, warp, lane);
        fence_proxy_async();
        named_bar_sync(kOrderedBarConsumers, 256);

        float acc_dq[kM80 ? BM / 2 : 32];
        if constexpr (kM80) {  // dV's and dK's products done first, so P^T's and dS^T's registers are free for dQ^T
          wgmma_wait<0>();
          fence_regs(acc_dv);
          fence_regs(acc_dk);
          fence_regs(p_frag);
          fence_regs(ds_frag);
        }
        fence_regs(acc_dq);
        if constexpr (kM80)
          issue_dq_t_product<T, BM, BN>(acc_dq, sdS, sK, cw);
        else
          issue_dq_product<T, D, BM, BN, kWide>(acc_dq, sdS, sK, cw);
        wgmma_wait<0>();
        fence_regs(acc_dq);
        fence_regs(acc_dv);
        fence_regs(acc_dk);
        fence_regs(p_frag);
        fence_regs(ds_frag);
        // This warpgroup is done with the stage's tiles; a head's last two stages hold its dK, dV staging below
        // where another head follows, so they go back after it.
        if ((ct & 127) == 0 && !(more && s + 2 >= steps)) mbar_arrive(empty_bar(st));

        // dQ staged in stage st, once dQ warp 1 + cw's adds of step S - 2 have read it (kM80: of step S - 1, in
        // the one stage); then handed to it.
        const int dst = kM80 ? 0 : st;
        if (S >= kDqStages) named_bar_sync(kOrderedBarDqEmpty + 2 * cw + dst, 160);
        if constexpr (kM80)
          stage_dq_t<BM>(sdQ, acc_dq, cw, warp, g, t4);
        else
          stage_dq(sdQ + uint32_t(st) * kDqStage, acc_dq, cw, warp, g, t4);
        named_bar_arrive(kOrderedBarDqFull + 2 * cw + dst, 160);
      }
      named_bar_sync(kOrderedBarConsumers, 256);  // both warpgroups past their last products' reads of the stages
    }
    static_assert(4 * kQBytes >= 2 * 2 * 64 * D * 2, "the Q_i and dO_i stages hold both warpgroups' dK, dV");
    store_dk_dv_staged<T, D>(hp.dk(p), hp.dv(p), acc_dk, acc_dv, n0 + 64 * cw, p.Lk, sQ + cw * (256 * D), cw, warp,
                             lane, p.scale);
    if (more) {  // the staging read by the whole warpgroup: the head's last stages back to warp 0
      named_bar_sync(1 + cw, 128);
      if ((ct & 127) == 0)
        for (int s = steps > 2 ? steps - 2 : 0; s < steps; ++s) mbar_arrive(empty_bar((S - steps + s) & 1));
    }
  }
}

template <class T, int kHeadDim, bool kM80 = false>
__global__ void __launch_bounds__(kOrderedThreads, 1)
    flash_bwd_ordered_kernel(const __grid_constant__ CUtensorMap tm_dq, const __grid_constant__ CUtensorMap tm_q,
                             const __grid_constant__ CUtensorMap tm_do, const FastBackwardParams p, int* turns,
                             const OrderedDq order) {
#ifdef KL_FA_SM90A
  bwd_ordered_body<T, kHeadDim, kM80>(p, &tm_dq, &tm_q, &tm_do, turns, order);
#endif
}

}  // namespace sm90_bwd
}  // namespace kl::flash_attention_backward
