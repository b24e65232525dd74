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
//     the TMA kernel (FastPath::Wgmma, WgmmaLate): a producer warpgroup issues bulk tensor copies (TMA) into
//       three stages on mbarriers and gives its registers to the two consumer warpgroups (setmaxnreg); no
//       block barrier after the start, and the consumers take turns on the tensor cores (ping-pong), so
//       one's softmax runs while the other's products do.
//     the persistent kernel (FastPath::WgmmaPersistent and its options): the TMA kernel made persistent
//       (its section below).
//     The default (FastPath::WgmmaByShape, fast_kernel_for in the header) picks one of them and their
//     options (two Q tiles, the late rescale, 192 rows at d = 64: FastTraitsSm90TmaOpt) by shape, as
//     measured on the H200 (docs/perf-log.md). (A first kernel, cp.async loads from all threads and a
//     block barrier per tile, was removed in issue 29; docs/perf-log.md, v2, has its figures.)
//
// Shared-memory layout, descriptors and fragment layouts: kernels/rungs/sm90_device.cuh.
//
// This header holds the kernels as templates and their launchers; two translation units instantiate them:
// flash_attention_fast_plain.sm90a.cu the plain kernels (the ones run_fast times), and
// flash_attention_fast_timeline.sm90a.cu the instrumented ones (issue 30: the *_traced_kernel entry points,
// which stamp the phases of chosen CTAs into a trace buffer, kernels/measure/timeline_trace.h). Both run the
// same body; its recorder (NoRecord or LaneRecorder, sm90_device.cuh) is a template argument, and NoRecord's
// marks compile to nothing, so the plain kernels' machine code is what it was before the marks existed.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/cuda_launch.cuh"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/rungs/flash_attention_fast_device.cuh"
#include "kernels/rungs/sm90_device.cuh"

namespace kl::flash_attention {
namespace sm90_detail {

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
        const float x = fmaf(acc_s[4 * j + e], scale_log2, -m_scaled[e >> 1]);
        const float pe = fast_exp2(x);
        acc_s[4 * j + e] = pe;
        rowsum[e >> 1] += pe;
      }
    l[0] = l[0] * alpha[0] + rowsum[0];
    l[1] = l[1] * alpha[1] + rowsum[1];
  }

  // The rescale step (O <- alpha O; l was rescaled in softmax), then P_t into the A fragments.
  __device__ __forceinline__ void rescale_and_pack() {
    rescale();
    pack();
  }
  __device__ __forceinline__ void rescale() {
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      acc_o[4 * j + 0] *= alpha[0];
      acc_o[4 * j + 1] *= alpha[0];
      acc_o[4 * j + 2] *= alpha[1];
      acc_o[4 * j + 3] *= alpha[1];
    }
  }
  __device__ __forceinline__ void pack() {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      p_frag[kk][0] = pack2<T>(acc_s[8 * kk + 0], acc_s[8 * kk + 1]);
      p_frag[kk][1] = pack2<T>(acc_s[8 * kk + 2], acc_s[8 * kk + 3]);
      p_frag[kk][2] = pack2<T>(acc_s[8 * kk + 4], acc_s[8 * kk + 5]);
      p_frag[kk][3] = pack2<T>(acc_s[8 * kk + 6], acc_s[8 * kk + 7]);
    }
  }

  // 1 / l of this thread's row r (0 or 1) over its quad, 0 where the row saw no key (its O is then 0).
  __device__ __forceinline__ float inv_row_sum(int r) const {
    const float lr = quad_sum(l[r]);
    return lr > 0.f ? 1.f / lr : 0.f;
  }
  // Epilogue: O / l (0 where the row saw nothing), rounded to T, rows < Lq stored. d >= 128: 8 bytes a lane
  // (store_row_pairs_v2, whole sectors); d = 64 keeps 4-byte stores, which measured 1-3% faster there causal
  // (docs/perf-log.md, 2026-12-05).
  // The same values into this warpgroup's 64 rows (wg) of the O tile at sO in shared memory, laid out as Q's
  // (64-column panels of kBlockM rows, 128-byte swizzle: chunk c of row r at c ^ (r % 8)), as a bulk tensor
  // store reads it. Each warp instruction writes 8 rows x 16 bytes, one 16-byte chunk per row on distinct banks.
  __device__ __forceinline__ void store_staged(uint32_t sO, int wg, int warp, int lane) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float inv_l = inv_row_sum(r);
      const int row = 64 * wg + 16 * warp + (lane >> 2) + 8 * r;  // in the tile
      const uint32_t srow = sO + uint32_t(row) * 128 + 4 * (lane & 3);
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j)
        st_shared_u32(srow + (j >> 3) * (kBlockM * 128) + (((j & 7) ^ (row & 7)) << 4),
                      pack2<T>(acc_o[4 * j + 2 * r] * inv_l, acc_o[4 * j + 2 * r + 1] * inv_l));
    }
  }
  __device__ __forceinline__ void store(T* o, const FastParams& p, int lane) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float inv_l = inv_row_sum(r);
      const int row = row_g + 8 * r;
      T* orow = o + int64_t(row) * p.o_row_stride;
      auto pair = [&](int j) { return pack2<T>(acc_o[4 * j + 2 * r] * inv_l, acc_o[4 * j + 2 * r + 1] * inv_l); };
      if constexpr (kHeadDim >= 128) {
        store_row_pairs_v2<kHeadDim / 8>(orow, row < p.Lq, pair, lane);
      } else if (row < p.Lq) {
#pragma unroll
        for (int j = 0; j < kHeadDim / 8; ++j) *reinterpret_cast<uint32_t*>(orow + j * 8 + 2 * (lane & 3)) = pair(j);
      }
    }
  }
};

// The registers each warp role keeps after the hand-over (setmaxnreg). The CTA holds kThreads x kLaunch
// registers from its launch (__launch_bounds__(kThreads, 1): 65536 / kThreads rounded down to 8, 168 for
// 384 threads, 128 for 512), and the hand-over only moves them between its warps, so 128 x kProducer +
// consumers x kConsumer must not exceed that (an increase waits until the registers are free: past the
// total it would wait for ever). The plain kernels keep Tr's split (24 / 240, 24 / 160: the whole pool); the
// instrumented ones give the producer 32 (its recorder and clock reads spilled under 24) and the consumers
// what is left: 232 with two consumer warpgroups, 160 with three.
template <class Tr, class Trace>
struct RegSplit {
  static constexpr bool kPlain = std::is_same<Trace, NoTrace>::value;
  static constexpr int kConsumerThreads = Tr::kNWarps * 32;
  static constexpr int kLaunch = 65536 / Tr::kThreads / 8 * 8;
  static constexpr int kProducer = kPlain ? Tr::kProducerRegs : 32;
  static constexpr int kLeft = (Tr::kThreads * kLaunch - 128 * kProducer) / kConsumerThreads / 8 * 8;
  static constexpr int kConsumer = kPlain || Tr::kConsumerRegs <= kLeft ? Tr::kConsumerRegs : kLeft;
  static_assert(128 * kProducer + kConsumerThreads * kConsumer <= Tr::kThreads * kLaunch,
                "the hand-over cannot give out more registers than the CTA holds");
};

// The TMA kernels' mbarriers, 8 bytes each from `base` (after the K/V stages in shared memory): full_q(0),
// then per stage full_k and full_v (one arrival and the copy's bytes) and empty_k and empty_v (one arrival
// per consumer warp), then empty_q(0), which only the persistent kernel initialises and uses, then with a
// second Q tile full_q(1) and empty_q(1).
template <int kStages, int kQBufs = 1>
struct TmaBarriers {
  static constexpr int kCount = 4 * kStages + 2 * kQBufs;
  uint32_t base;
  __device__ uint32_t full_q(int i = 0) const { return i == 0 ? base : base + 8 * (4 * kStages + 2 * i); }
  __device__ uint32_t full_k(int s) const { return base + 8 * (1 + s); }
  __device__ uint32_t full_v(int s) const { return base + 8 * (1 + kStages + s); }
  __device__ uint32_t empty_k(int s) const { return base + 8 * (1 + 2 * kStages + s); }
  __device__ uint32_t empty_v(int s) const { return base + 8 * (1 + 3 * kStages + s); }
  __device__ uint32_t empty_q(int i = 0) const { return base + 8 * (1 + 4 * kStages + 2 * i); }
};

// The TMA kernels' shared memory from a 1024-byte aligned start (the launch asks for 1 KiB of slack):
// Tr::kQBufs Q tiles, kStages K tiles, kStages V tiles, the O tile where Tr::kStoreOByTma, then the mbarriers
// (TmaBarriers).
template <class Tr>
struct TmaSmem {
  static constexpr int kQBufs = fast_q_tiles<Tr>(0), kStages = Tr::kStages;
  static constexpr uint32_t kQBytes = Tr::kBlockM * Tr::kHeadDim * 2, kKVBytes = Tr::kBlockN * Tr::kHeadDim * 2;
  uint32_t base;
  __device__ explicit TmaSmem(const unsigned char* raw) : base((smem_u32(raw) + 1023u) & ~1023u) {}
  __device__ uint32_t q(int i = 0) const { return base + i * kQBytes; }
  __device__ uint32_t k(int s = 0) const { return base + kQBufs * kQBytes + s * kKVBytes; }
  __device__ uint32_t v(int s = 0) const { return k(kStages) + s * kKVBytes; }
  __device__ uint32_t o() const { return v(kStages); }
  __device__ TmaBarriers<kStages, kQBufs> bars() const { return {o() + (fast_o_staged<Tr>(0) ? kQBytes : 0u)}; }
};

// The consumer warpgroups of the TMA kernel (below): wait for a stage, take the turn, issue, release.
// kPersistent (the persistent kernel, below): the tile's (h, b) and its first K/V load index `it0` (stage
// and phase continue across the block's tiles) come from the tile scheduler, and the warpgroups also
// release Q (after their last S) and the last V stage for the producer's next tile. Without it (the TMA kernel)
// it0 is 0 and q_phase 0, and the code is what it was before the persistent kernel existed. The tile reads
// Q tile qb (of Tr::kQBufs) and waits for its full_q in phase q_phase. rec marks the phases (timeline
// recording; NoRecord: nothing), `tile` naming the work tile (persistent_tile()'s index) and each mark's step
// the K/V tile the phase works on.
// tm_o: O's tensor map (boxes of fast_o_box_rows<Tr>() rows), read where the persistent kernel stores O by bulk
// tensor stores (Tr::kStoreOByTma).
template <class T, class Tr, bool kPersistent = false, class Rec = NoRecord>
__device__ __forceinline__ void consume(const FastParams& p, int m_block, int h, int b, int n_tiles, int it0, int qb,
                                        uint32_t q_phase, const TmaSmem<Tr>& sm, Rec& rec, int tile,
                                        const CUtensorMap* tm_o = nullptr) {
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  constexpr uint32_t kKVBytes = kBlockN * kHeadDim * 2;
  const auto bar = sm.bars();
  const uint32_t full_q = bar.full_q(qb), empty_q = bar.empty_q(qb);
  const uint32_t sQ = sm.q(qb), sK = sm.k(), sV = sm.v();
  constexpr bool kLate = Tr::kLateRescale;
  auto full_k = [&](int s) { return bar.full_k(s); };
  auto full_v = [&](int s) { return bar.full_v(s); };
  auto empty_k = [&](int s) { return bar.empty_k(s); };
  auto empty_v = [&](int s) { return bar.empty_v(s); };
  const int warp_id = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wg = warp_id >> 2, warp = warp_id & 3, t4 = lane & 3;
  const int m0 = m_block * kBlockM;

  T* o = static_cast<T*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;
  WarpgroupState<T, kHeadDim, kBlockM, kBlockN> w;
  w.init(m0 + wg * 64 + warp * 16 + (lane >> 2), p.scale);

  if (n_tiles > 0) {  // uniform across the block
    const uint32_t sQw = sQ + wg * 64 * 128;
    // Turns: warpgroup wg waits on named barrier 1 + wg before issuing, then lets the next one go (two
    // warpgroups alternate; three, Tr::kBlockM 192, go round a ring 0 -> 1 -> 2 -> 0). The last warpgroup
    // lets warpgroup 0 go first, and skips its very last release (counts stay balanced: n_tiles + 1 turns
    // each). The persistent kernel lets warpgroup 0 go first once per block and never skips a release
    // (the turns continue across tiles; warpgroup 0 takes the one left over at the end).
    constexpr int kWGs = Tr::kNWarps / 4;
    auto my_turn = [&] { named_bar_sync(1 + wg, 256); };
    auto their_turn = [&](bool last) {
      const int next = kWGs == 2 ? (wg ^ 1) : (wg + 1) % kWGs;
      if (kPersistent || !(wg == kWGs - 1 && last)) named_bar_arrive(1 + next, 256);
    };
    auto release = [&](uint32_t bar) {
      if (lane == 0) mbar_arrive(bar);
    };
    auto stage = [&](int t) { return (it0 + t) % kStages; };
    // O <- alpha O before the P V that adds to it: right after the softmax (wgmma), or with kLate
    // (Tr::kLateRescale) after the next S was issued, so the multiplies run while the tensor cores do S.
    auto rescale_and_pack = [&] {
      if (kLate)
        w.pack();
      else
        w.rescale_and_pack();
    };
    auto late_rescale = [&] {
      if (!kLate) return;
      w.rescale();
      fence_regs(w.acc_o);
      wgmma_fence();
    };
    auto phase = [&](int t) { return uint32_t((it0 + t) / kStages) & 1u; };
    if (!kPersistent && wg == kWGs - 1) named_bar_arrive(1, 256);
    using timeline::Phase;

    rec.mark(Phase::WaitQ, timeline::kNoStep, tile);
    mbar_wait(full_q, q_phase);
    rec.mark(Phase::WaitK, 0, tile);
    mbar_wait(full_k(stage(0)), phase(0));
    rec.mark(Phase::WaitTurn, 0, tile);
    my_turn();
    rec.mark(Phase::IssueS, 0, tile);
    fence_regs(w.acc_s);
    wgmma_fence();
    w.issue_s(sQw, sK + stage(0) * kKVBytes);
    their_turn(false);
    rec.mark(Phase::WaitS, 0, tile);
    wgmma_wait<0>();
    fence_regs(w.acc_s);
    release(empty_k(stage(0)));
    rec.mark(Phase::Softmax, 0, tile);
    w.softmax(p, m_block, 0, t4);
    rec.mark(kLate ? Phase::Pack : Phase::Rescale, 0, tile);  // what rescale_and_pack() does
    rescale_and_pack();
    for (int t = 1; t < n_tiles; ++t) {
      const int s = stage(t), sp = stage(t - 1);
      rec.mark(Phase::WaitK, t, tile);
      mbar_wait(full_k(s), phase(t));
      rec.mark(Phase::WaitV, t - 1, tile);
      mbar_wait(full_v(sp), phase(t - 1));
      rec.mark(Phase::WaitTurn, t, tile);
      my_turn();
      rec.mark(Phase::IssueS, t, tile);
      fence_regs(w.acc_s);
      fence_regs(w.acc_o);
      fence_regs(w.p_frag);
      wgmma_fence();
      w.issue_s(sQw, sK + s * kKVBytes);
      if (kLate) rec.mark(Phase::Rescale, t - 1, tile);
      late_rescale();
      rec.mark(Phase::IssuePV, t - 1, tile);
      w.issue_pv(sV + sp * kKVBytes);
      their_turn(false);
      rec.mark(Phase::WaitS, t, tile);
      wgmma_wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run while the softmax does
      fence_regs(w.acc_s);
      release(empty_k(s));
      rec.mark(Phase::Softmax, t, tile);
      w.softmax(p, m_block, t, t4);
      rec.mark(Phase::WaitPV, t - 1, tile);
      wgmma_wait<0>();
      fence_regs(w.acc_o);
      fence_regs(w.p_frag);
      release(empty_v(sp));
      rec.mark(kLate ? Phase::Pack : Phase::Rescale, t, tile);
      rescale_and_pack();
    }
    if (kPersistent) release(empty_q);  // every S of this tile has completed: Q may be overwritten
    const int sl = stage(n_tiles - 1);
    rec.mark(Phase::WaitV, n_tiles - 1, tile);
    mbar_wait(full_v(sl), phase(n_tiles - 1));
    rec.mark(Phase::WaitTurn, n_tiles, tile);
    my_turn();
    if (kLate) rec.mark(Phase::Rescale, n_tiles - 1, tile);
    if (kLate) w.rescale();
    rec.mark(Phase::IssuePV, n_tiles - 1, tile);
    fence_regs(w.acc_o);
    fence_regs(w.p_frag);
    wgmma_fence();
    w.issue_pv(sV + sl * kKVBytes);
    their_turn(true);
    rec.mark(Phase::WaitPV, n_tiles - 1, tile);
    wgmma_wait<0>();
    fence_regs(w.acc_o);
    if (kPersistent) release(empty_v(sl));
  }
  if constexpr (kPersistent && Tr::kStoreOByTma) {
    // O through this warpgroup's rows of the O tile and one bulk tensor store per 64-column panel, which nobody
    // waits for here: the next tile's epilogue waits until they have read the rows (and the block's end until
    // they completed), so the stores drain while the next tile's products run. On 192 rows each warp writes,
    // fences and stores its own 16 rows (its first lane issues), so a warp-level sync replaces the warpgroup's
    // barriers; on 128 rows the warpgroup's first thread stores its 64 rows after named barrier kWGs + 1 + wg
    // (1 .. kWGs are the turns). The recording splits it in three: the wait for the rows, O / l into them (the
    // epilogue), the stores' issue.
    constexpr int kWGs = Tr::kNWarps / 4, kBoxRows = fast_o_box_rows<Tr>();
    const bool issuer = (threadIdx.x & fast_o_issuer_mask<Tr>()) == 0;
    auto sync_rows = [&] {
      if constexpr (kBoxRows == 16)
        __syncwarp();
      else
        named_bar_sync(kWGs + 1 + wg, 128);
    };
    rec.mark(timeline::Phase::WaitOFree, timeline::kNoStep, tile);
    if (issuer) bulk_wait_read<0>();
    sync_rows();
    rec.mark(timeline::Phase::Epilogue, timeline::kNoStep, tile);
    w.store_staged(sm.o(), wg, warp, lane);
    fence_proxy_async();  // the stores (generic proxy) before the bulk copy (async proxy) reads them
    rec.mark(timeline::Phase::StoreO, timeline::kNoStep, tile);
    sync_rows();
    if (issuer) {
      const int row = 64 * wg + (kBoxRows == 16 ? 16 * warp : 0);  // the issuer's first row in the tile
#pragma unroll
      for (int cb = 0; cb < kHeadDim / 64; ++cb)
        tma_store_4d(tm_o, sm.o() + cb * kBlockM * 128 + row * 128, cb * 64, m0 + row, h, b);
      bulk_commit();
    }
  } else {
    rec.mark(timeline::Phase::Epilogue, timeline::kNoStep, tile);
    w.store(o, p, lane);
  }
}

// ---- [SECTION] the TMA kernel: bulk tensor copies, a producer, two consumer warpgroups in turn -----------
// Block: warpgroups 0 and 1 compute (64 query rows each); warpgroup 2 is the producer: it gives its
// registers to the consumers (setmaxnreg 24 / 240) and one lane of its first warp issues the
// bulk tensor copies of Q and of every K / V tile into kStages stages; each copy completes on the
// stage's "full" mbarrier (expected bytes), and the consumers release a stage on its "empty" mbarrier
// (one arrival per consumer warp) once the wgmma that read it has completed. No block-wide barrier after
// the start, so the two warpgroups run out of phase: named barriers 1 and 2 make them take turns issuing
// their wgmma (FlashAttention-3's "ping-pong"), so one warpgroup's softmax runs while the other's
// products occupy the tensor cores. Tiles past L arrive as zeros (the copy engine's out-of-bounds fill).
// Tr: FastTraitsSm90Tma<d>, or FastTraitsSm90TmaOpt<d, 1, true> for the late rescale (wgmma-late).
// The kernel's body, shared by the plain kernel (Trace = NoTrace) and the instrumented one (TraceArgs).
// Recorded lanes: consumer warpgroup wg is lane wg, the producer lane 2; the work tile is the CTA's linear
// index (persistent_tile()'s order).
template <class T, class Tr, class Trace>
__device__ __forceinline__ void fwd_tma_body(const CUtensorMap* tm_q, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                                             const FastParams& p, int kv_group, const Trace& trace) {
  constexpr int kHeadDim = Tr::kHeadDim;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  static_assert(kBlockM == 128 && Tr::kNWarps == 8, "two consumer warpgroups of 64 rows");
  constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2, kKVBytes = kBlockN * kHeadDim * 2;
  constexpr int kConsumerWarps = Tr::kNWarps;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const TmaSmem<Tr> sm(smem_raw);
  const uint32_t sQ = sm.q(), sK = sm.k(), sV = sm.v();
  const auto bar = sm.bars();
  const uint32_t full_q = bar.full_q();
  auto full_k = [&](int s) { return bar.full_k(s); };
  auto full_v = [&](int s) { return bar.full_v(s); };
  auto empty_k = [&](int s) { return bar.empty_k(s); };
  auto empty_v = [&](int s) { return bar.empty_v(s); };

  // The register hand-over and the turns need exactly this block shape; anything else would hang.
  if (blockDim.x != unsigned(Tr::kThreads)) __trap();
  const int m_block = p.causal ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);  // heaviest first
  const int h = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp_id = tid >> 5, lane = tid & 31;
  const int m0 = m_block * kBlockM;
  const int n_tiles = key_tiles_for_block(m_block, p.Lq, p.Lk, kBlockM, kBlockN, p.causal);
  using timeline::Phase;
  const bool producer = warp_id >= kConsumerWarps;
  const int rec_lane = producer ? kConsumerWarps / 4 : warp_id >> 2;
  typename RecorderFor<Trace>::type rec(trace, rec_lane, producer ? warp_id == kConsumerWarps && lane == 0 : (tid & 127) == 0);
  const int tile = int(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  rec.mark(Phase::Setup, timeline::kNoStep, tile);

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
    setmaxnreg_dec<RegSplit<Tr, Trace>::kProducer>();
    if (warp_id == kConsumerWarps && lane == 0 && n_tiles > 0) {
      const int h_kv = kv_head_of(h, kv_group);  // grouped-query attention: the K/V maps' head coordinate
      rec.mark(Phase::LoadQ, timeline::kNoStep, tile);
      mbar_arrive_expect_tx(full_q, kQBytes);
#pragma unroll
      for (int cb = 0; cb < kHeadDim / 64; ++cb) tma_load_4d(sQ + cb * kBlockM * 128, tm_q, full_q, cb * 64, m0, h, b);
      for (int t = 0; t < n_tiles; ++t) {
        const int s = t % kStages;
        const uint32_t parity = ((t / kStages) - 1) & 1;  // the release of tile t - kStages
        rec.mark(Phase::WaitKFree, t, tile);
        if (t >= kStages) mbar_wait(empty_k(s), parity);
        rec.mark(Phase::LoadK, t, tile);
        mbar_arrive_expect_tx(full_k(s), kKVBytes);
#pragma unroll
        for (int cb = 0; cb < kHeadDim / 64; ++cb)
          tma_load_4d(sK + s * kKVBytes + cb * kBlockN * 128, tm_k, full_k(s), cb * 64, t * kBlockN, h_kv, b);
        rec.mark(Phase::WaitVFree, t, tile);
        if (t >= kStages) mbar_wait(empty_v(s), parity);
        rec.mark(Phase::LoadV, t, tile);
        mbar_arrive_expect_tx(full_v(s), kKVBytes);
#pragma unroll
        for (int cb = 0; cb < kHeadDim / 64; ++cb)
          tma_load_4d(sV + s * kKVBytes + cb * kBlockN * 128, tm_v, full_v(s), cb * 64, t * kBlockN, h_kv, b);
      }
    }
  } else {  // ---- consumer warpgroups: 240 registers each thread (O, S, P and the softmax state)
    setmaxnreg_inc<RegSplit<Tr, Trace>::kConsumer>();
    consume<T, Tr>(p, m_block, h, b, n_tiles, 0, 0, 0, sm, rec, tile);
  }
  rec.finish(rec_lane);
}
template <class T, class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    flash_fwd_wgmma_tma_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                               const __grid_constant__ CUtensorMap tm_v, const FastParams p, const int kv_group) {
#ifdef KL_FA_SM90A
  fwd_tma_body<T, Tr>(&tm_q, &tm_k, &tm_v, p, kv_group, NoTrace{});
#endif
}
// The instrumented kernel (timeline recording): the same body, marking the phases of the CTAs `trace` names.
template <class T, class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    flash_fwd_wgmma_tma_traced_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                      const __grid_constant__ CUtensorMap tm_v, const FastParams p, const int kv_group,
                                      const timeline::TraceArgs trace) {
#ifdef KL_FA_SM90A
  fwd_tma_body<T, Tr>(&tm_q, &tm_k, &tm_v, p, kv_group, trace);
#endif
}

// ---- [SECTION] the persistent kernel: the TMA kernel made persistent (FastPath::WgmmaPersistent, options) --
// Grid = min(tiles, SMs) blocks of the TMA kernel's shape; block c takes tiles c, c + gridDim.x, ... of the
// order persistent_tile() defines (kernels/rungs/flash_attention_fast.h: the grid's order); causal tiles are
// handed out in a snake (persistent_index(): block c takes c, then 2G - 1 - c, ...), which evens out the
// blocks' work. The producer runs ahead across tiles: Q of the next tile is loaded as soon as both
// consumers released the current Q (after their last S), and K/V stages continue round the ring, so the
// next tile's first loads overlap the current tile's last P V and its epilogue, and no block pays the
// launch, mbarrier init and register hand-over per tile.
// One extra mbarrier per Q tile, empty_q (one arrival per consumer warp). With two Q tiles (Tr::kQBufs,
// wgmma-persistent-q2-late) the block's j-th tile with work reads Q tile j % 2, so the producer loads the next
// tile's Q while the current one is still read, and waits only for the release of the tile before.
template <class Tr, class Rec = NoRecord>
__device__ __forceinline__ void produce_persistent(const CUtensorMap* tm_q, const CUtensorMap* tm_k,
                                                   const CUtensorMap* tm_v, const FastParams& p, int kv_group,
                                                   const TmaSmem<Tr>& sm, Rec& rec) {
  using timeline::Phase;
  constexpr int kHeadDim = Tr::kHeadDim, kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  constexpr int kQBufs = TmaSmem<Tr>::kQBufs;
  constexpr uint32_t kQBytes = kBlockM * kHeadDim * 2, kKVBytes = kBlockN * kHeadDim * 2;
  const auto bar = sm.bars();
  const uint32_t sK = sm.k(), sV = sm.v();
  const int n_m = ceil_div(p.Lq, kBlockM), total = n_m * p.H * p.B;
  int it = 0, j = 0;  // K/V loads issued so far (stage ring position), tiles with work so far
  const bool snake = p.causal;  // the causal tiles differ in weight: balance them
  for (int k = 0; k * int(gridDim.x) < total; ++k) {
    const int tile = persistent_index(k, blockIdx.x, gridDim.x, snake);
    if (tile >= total) continue;
    rec.mark(Phase::Schedule, timeline::kNoStep, tile);
    const PersistentTile pt = persistent_tile(tile, n_m, p.H, p.B, p.causal);
    const int n_tiles = key_tiles_for_block(pt.m_block, p.Lq, p.Lk, kBlockM, kBlockN, p.causal);
    if (n_tiles == 0) continue;  // the consumers skip it too
    const int h_kv = kv_head_of(pt.h, kv_group);
    const int qb = j % kQBufs;
    const uint32_t full_q = bar.full_q(qb), sQ = sm.q(qb);
    rec.mark(Phase::WaitQFree, timeline::kNoStep, tile);
    if (j >= kQBufs) mbar_wait(bar.empty_q(qb), uint32_t(j / kQBufs - 1) & 1u);  // the release of tile j - kQBufs
    rec.mark(Phase::LoadQ, timeline::kNoStep, tile);
    mbar_arrive_expect_tx(full_q, kQBytes);
#pragma unroll
    for (int cb = 0; cb < kHeadDim / 64; ++cb)
      tma_load_4d(sQ + cb * kBlockM * 128, tm_q, full_q, cb * 64, pt.m_block * kBlockM, pt.h, pt.b);
    for (int t = 0; t < n_tiles; ++t) {
      const int g = it + t, s = g % kStages;
      const uint32_t parity = uint32_t(g / kStages - 1) & 1u;  // the release of load g - kStages
      rec.mark(Phase::WaitKFree, t, tile);
      if (g >= kStages) mbar_wait(bar.empty_k(s), parity);
      rec.mark(Phase::LoadK, t, tile);
      mbar_arrive_expect_tx(bar.full_k(s), kKVBytes);
#pragma unroll
      for (int cb = 0; cb < kHeadDim / 64; ++cb)
        tma_load_4d(sK + s * kKVBytes + cb * kBlockN * 128, tm_k, bar.full_k(s), cb * 64, t * kBlockN, h_kv, pt.b);
      rec.mark(Phase::WaitVFree, t, tile);
      if (g >= kStages) mbar_wait(bar.empty_v(s), parity);
      rec.mark(Phase::LoadV, t, tile);
      mbar_arrive_expect_tx(bar.full_v(s), kKVBytes);
#pragma unroll
      for (int cb = 0; cb < kHeadDim / 64; ++cb)
        tma_load_4d(sV + s * kKVBytes + cb * kBlockN * 128, tm_v, bar.full_v(s), cb * 64, t * kBlockN, h_kv, pt.b);
    }
    it += n_tiles;
    ++j;
  }
}

// Tr: FastTraitsSm90TmaOpt<d, kQBufs, kLate, kBlockM> (one or two Q tiles, 128 or 192 rows). The kernel's body,
// shared by the plain kernel (Trace = NoTrace) and the instrumented one (TraceArgs): consumer warpgroup wg is
// lane wg, the producer the last lane.
template <class T, class Tr, class Trace>
__device__ __forceinline__ void fwd_persistent_body(const CUtensorMap* tm_q, const CUtensorMap* tm_k,
                                                    const CUtensorMap* tm_v, const CUtensorMap* tm_o,
                                                    const FastParams& p, int kv_group, const Trace& trace) {
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kStages = Tr::kStages;
  static_assert((kBlockM == 128 || kBlockM == 192) && Tr::kNWarps == kBlockM / 16, "consumer warpgroups of 64 rows");
  constexpr int kConsumerWarps = Tr::kNWarps, kQBufs = TmaSmem<Tr>::kQBufs;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const TmaSmem<Tr> sm(smem_raw);

  if (blockDim.x != unsigned(Tr::kThreads)) __trap();  // the register hand-over needs this shape
  const int warp_id = threadIdx.x >> 5, lane = threadIdx.x & 31;
  using timeline::Phase;
  const bool producer = warp_id >= kConsumerWarps;
  const int rec_lane = producer ? kConsumerWarps / 4 : warp_id >> 2;
  typename RecorderFor<Trace>::type rec(trace, rec_lane,
                                        producer ? warp_id == kConsumerWarps && lane == 0 : (threadIdx.x & 127) == 0);
  rec.mark(Phase::Setup, timeline::kNoStep, -1);
  if (threadIdx.x == 0) {
    const auto bar = sm.bars();
    for (int i = 0; i < kQBufs; ++i) mbar_init(bar.full_q(i), 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bar.full_k(s), 1);
      mbar_init(bar.full_v(s), 1);
      mbar_init(bar.empty_k(s), kConsumerWarps);
      mbar_init(bar.empty_v(s), kConsumerWarps);
    }
    for (int i = 0; i < kQBufs; ++i) mbar_init(bar.empty_q(i), kConsumerWarps);
    fence_mbar_init();
  }
  __syncthreads();

  if (warp_id >= kConsumerWarps) {
    setmaxnreg_dec<RegSplit<Tr, Trace>::kProducer>();
    if (warp_id == kConsumerWarps && lane == 0) produce_persistent<Tr>(tm_q, tm_k, tm_v, p, kv_group, sm, rec);
  } else {
    setmaxnreg_inc<RegSplit<Tr, Trace>::kConsumer>();
    const int wg = warp_id >> 2;
    const int n_m = ceil_div(p.Lq, kBlockM), total = n_m * p.H * p.B;
    if (wg == kConsumerWarps / 4 - 1) named_bar_arrive(1, 256);  // warpgroup 0 takes the first turn, once per block
    int it = 0, j = 0;
    const bool snake = p.causal;  // the causal tiles differ in weight: balance them
    for (int k = 0; k * int(gridDim.x) < total; ++k) {
      const int tile = persistent_index(k, blockIdx.x, gridDim.x, snake);
      if (tile >= total) continue;
      rec.mark(Phase::Schedule, timeline::kNoStep, tile);
      const PersistentTile pt = persistent_tile(tile, n_m, p.H, p.B, p.causal);
      const int n_tiles = key_tiles_for_block(pt.m_block, p.Lq, p.Lk, kBlockM, kBlockN, p.causal);
      consume<T, Tr, true>(p, pt.m_block, pt.h, pt.b, n_tiles, it, j % kQBufs, uint32_t(j / kQBufs) & 1u, sm, rec,
                           tile, tm_o);
      if (n_tiles > 0) it += n_tiles, ++j;
    }
    if constexpr (Tr::kStoreOByTma) {
      // the last O stores (each issuer's), before the block's shared memory goes
      if ((threadIdx.x & fast_o_issuer_mask<Tr>()) == 0) bulk_wait<0>();
    }
    if (wg == 0) {
      rec.mark(Phase::WaitTurn, timeline::kNoStep, -1);
      named_bar_sync(1, 256);  // the turn the last warpgroup handed over after its last issue
    }
  }
  rec.finish(rec_lane);
}
template <class T, class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    flash_fwd_wgmma_persistent_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                                      const __grid_constant__ CUtensorMap tm_v,
                                      const __grid_constant__ CUtensorMap tm_o, const FastParams p, const int kv_group) {
#ifdef KL_FA_SM90A
  fwd_persistent_body<T, Tr>(&tm_q, &tm_k, &tm_v, &tm_o, p, kv_group, NoTrace{});
#endif
}
// The instrumented kernel (timeline recording): the same body, marking the phases of the CTAs `trace` names.
template <class T, class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    flash_fwd_wgmma_persistent_traced_kernel(const __grid_constant__ CUtensorMap tm_q,
                                             const __grid_constant__ CUtensorMap tm_k,
                                             const __grid_constant__ CUtensorMap tm_v,
                                             const __grid_constant__ CUtensorMap tm_o, const FastParams p,
                                             const int kv_group, const timeline::TraceArgs trace) {
#ifdef KL_FA_SM90A
  fwd_persistent_body<T, Tr>(&tm_q, &tm_k, &tm_v, &tm_o, p, kv_group, trace);
#endif
}

// A launch's name, as errors name it: flash_fwd_wgmma<kind>_d<d>_<fp16|bf16><options>.
inline std::string launch_name(const char* kind, int head_dim, bool half, const std::string& options = "") {
  return std::string("flash_fwd_wgmma") + kind + "_d" + std::to_string(head_dim) + (half ? "_fp16" : "_bf16") +
         options;
}

// Q's, K's and V's tensor maps for Tr's tiles (Q: kBlockM rows, K and V: kBlockN); false when one cannot be
// made for p's strides.
template <class Tr>
bool make_qkv_maps(const FastParams& p, CUtensorMap* mq, CUtensorMap* mk, CUtensorMap* mv) {
  return make_tensor_map(mq, p.q, p.dtype, p.d, p.Lq, p.H, p.B, p.q_row_stride, p.q_head_stride, p.q_batch_stride,
                         Tr::kBlockM) &&
         make_tensor_map(mk, p.k, p.dtype, p.d, p.Lk, kv_heads(p), p.B, p.k_row_stride, p.k_head_stride,
                         p.k_batch_stride, Tr::kBlockN) &&
         make_tensor_map(mv, p.v, p.dtype, p.d, p.Lk, kv_heads(p), p.B, p.v_row_stride, p.v_head_stride,
                         p.v_batch_stride, Tr::kBlockN);
}

// An instrumented kernel's registers at launch, checked against what its hand-over gives out (RegSplit):
// with fewer, the consumers' setmaxnreg.inc would wait for ever; a RuntimeError instead of a hang.
template <class Tr, class Kernel>
void check_register_pool(const char* name, Kernel* kernel) {
  cudaFuncAttributes attr{};
  KL_CUDA_CHECK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(kernel)));
  using Split = RegSplit<Tr, timeline::TraceArgs>;
  if (attr.numRegs < Split::kLaunch)
    throw RuntimeError(std::string(name) + ": " + std::to_string(attr.numRegs) + " registers a thread at launch, " +
                       "fewer than the " + std::to_string(Split::kLaunch) + " its register hand-over needs");
}

// The TMA kernel's grid: one block per (query tile, head, batch).
template <class Tr>
dim3 tma_grid(const FastParams& p) {
  return dim3(unsigned(ceil_div(p.Lq, Tr::kBlockM)), unsigned(p.H), unsigned(p.B));
}
template <class Tr>
std::string tma_launch_name(bool half) {
  return launch_name("_tma", Tr::kHeadDim, half, Tr::kLateRescale ? "_late" : "");
}

// Launches the TMA kernel on Tr's tiles for p's dtype; false (nothing launched) when a tensor map cannot be
// made. kTraced: the instrumented kernel (bf16 only; the caller checks p.dtype) with *trace.
template <class Tr, bool kTraced = false>
bool launch_tma(const FastParams& p, const timeline::TraceArgs* trace = nullptr) {
  CUtensorMap mq, mk, mv;
  if (!make_qkv_maps<Tr>(p, &mq, &mk, &mv)) return false;
  const dim3 grid = tma_grid<Tr>(p);
  const bool half = p.dtype == FastDtype::Fp16;
  const std::string name = tma_launch_name<Tr>(half);
  const size_t smem = size_t(fast_smem_bytes<Tr>()) + 1024 + 8 * (TmaBarriers<Tr::kStages>::kCount - 1);  // no empty_q
  if constexpr (kTraced) {
    check_register_pool<Tr>((name + "_traced").c_str(), flash_fwd_wgmma_tma_traced_kernel<__nv_bfloat16, Tr>);
    cuda::launch((name + "_traced").c_str(), flash_fwd_wgmma_tma_traced_kernel<__nv_bfloat16, Tr>, grid,
                 dim3(Tr::kThreads), smem, 0, mq, mk, mv, p, kv_group(p), *trace);
  } else {
    auto* kernel = half ? flash_fwd_wgmma_tma_kernel<__half, Tr> : flash_fwd_wgmma_tma_kernel<__nv_bfloat16, Tr>;
    cuda::launch(name.c_str(), kernel, grid, dim3(Tr::kThreads), smem, 0, mq, mk, mv, p, kv_group(p));
  }
  return true;
}
// The TMA kernel for p's head dim, with or without the late rescale.
template <int kHeadDim>
bool launch_tma_for(const FastParams& p, bool late) {
  return late ? launch_tma<FastTraitsSm90TmaOpt<kHeadDim, 1, true>>(p) : launch_tma<FastTraitsSm90Tma<kHeadDim>>(p);
}

// The device's SMs (probed once).
inline int device_sms() {
  static const int sms = [] {
    int dev = 0, n = 0;
    KL_CUDA_CHECK(cudaGetDevice(&dev));
    KL_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}
// The persistent kernel's work tiles and its grid: min(tiles, SMs) blocks.
template <class Tr>
int64_t persistent_tiles(const FastParams& p) {
  return int64_t(ceil_div(p.Lq, Tr::kBlockM)) * p.H * p.B;
}
template <class Tr>
unsigned persistent_grid(const FastParams& p) {
  return unsigned(std::min<int64_t>(persistent_tiles<Tr>(p), device_sms()));
}
template <class Tr>
std::string persistent_launch_name(bool half) {
  return launch_name("_persistent", Tr::kHeadDim, half,
                     std::string(TmaSmem<Tr>::kQBufs == 2 ? "_q2" : "") + (Tr::kLateRescale ? "_late" : "") +
                         (Tr::kBlockM == 192 ? "_m192" : "") + (Tr::kBlockN == 160 ? "_n160" : ""));
}

// Launches the persistent kernel on Tr's tiles for p's dtype; false (nothing launched) when a
// tensor map cannot be made. kTraced: the instrumented kernel (bf16 only; the caller checks) with *trace.
template <class Tr, bool kTraced = false>
bool launch_persistent(const FastParams& p, const timeline::TraceArgs* trace = nullptr) {
  CUtensorMap mq, mk, mv, mo{};  // mo: O's map in boxes of fast_o_box_rows<Tr>() rows, where the kernel stores O by it
  if (!make_qkv_maps<Tr>(p, &mq, &mk, &mv)) return false;
  if (Tr::kStoreOByTma && !make_tensor_map(&mo, p.o, p.dtype, p.d, p.Lq, p.H, p.B, p.o_row_stride, p.o_head_stride,
                                           p.o_batch_stride, fast_o_box_rows<Tr>()))
    return false;
  if (persistent_tiles<Tr>(p) > int64_t(INT32_MAX)) return false;  // the tile index is an int
  const dim3 grid(persistent_grid<Tr>(p));
  const bool half = p.dtype == FastDtype::Fp16;
  const std::string name = persistent_launch_name<Tr>(half);
  const size_t smem = size_t(fast_smem_bytes<Tr>()) + 1024 + 8 * TmaBarriers<Tr::kStages, TmaSmem<Tr>::kQBufs>::kCount;
  if constexpr (kTraced) {
    check_register_pool<Tr>((name + "_traced").c_str(), flash_fwd_wgmma_persistent_traced_kernel<__nv_bfloat16, Tr>);
    cuda::launch((name + "_traced").c_str(), flash_fwd_wgmma_persistent_traced_kernel<__nv_bfloat16, Tr>, grid,
                 dim3(Tr::kThreads), smem, 0, mq, mk, mv, mo, p, kv_group(p), *trace);
  } else {
    auto* kernel =
        half ? flash_fwd_wgmma_persistent_kernel<__half, Tr> : flash_fwd_wgmma_persistent_kernel<__nv_bfloat16, Tr>;
    cuda::launch(name.c_str(), kernel, grid, dim3(Tr::kThreads), smem, 0, mq, mk, mv, mo, p, kv_group(p));
  }
  return true;
}

}  // namespace sm90_detail
}  // namespace kl::flash_attention
