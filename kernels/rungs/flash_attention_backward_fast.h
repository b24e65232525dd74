// Rung 6, fast variant: FlashAttention-2's backward pass on the tensor cores (bf16 / fp16 in, float32
// accumulation, bf16 / fp16 dQ, dK, dV out), CUDA only. Same algorithm and names as the teaching variant
// (kernels/rungs/flash_attention_backward.h); what differs is how it runs:
//   1. preprocess (one warp per query row): D = rowsum(dO ∘ O) in fp32 and, in the default mode, the
//      fp32 dQ accumulator set to 0.
//   2. the main kernel: one CTA per (K/V tile j of kBlockN keys, batch, head; started in bwd_main_cta's order,
//      under the causal mask from Lq = 2048 heaviest tiles first); K_j, V_j stay in shared
//      memory while the CTA walks the query tiles i of kBlockM rows (causal: from the first tile that
//      sees a key of tile j; the tiles entirely above the diagonal are never loaded), Q_i and dO_i
//      streamed with cp.async, two stages (tile i+1 in flight while tile i is computed). Per step, on
//      mma.sync.m16n8k16 (ldmatrix operands from XOR-swizzled shared memory, as rung 5's fast forward):
//          S = Q_i K_j^T                        P = exp2(S * scale*log2e - L_i * log2e)   (L: the forward's)
//          dP = dO_i V_j^T                      dS = P ∘ (dP - D_i)
//          dV_j += P^T dO_i                     dK_j += dS^T Q_i
//          dQ_i += dS K_j                       (fp32 atomicAdd into the accumulator)
//      P and dS go through shared memory (rounded to bf16 / fp16) because dV and dK need them transposed;
//      dK_j and dV_j stay in registers and are written once, dK scaled by `scale`.
//   3. convert: dQ = scale * accumulator, rounded to bf16 / fp16.
// dQ's two modes (FastBackwardParams::deterministic, `--set deterministic=1` on the command line):
//   atomics (the default, as FlashAttention): every K/V CTA adds its dS K_j into dQ_i with fp32
//            atomicAdd. The order of the adds varies between runs, so dQ may differ in its last bits
//            from run to run; dK and dV do not. Where Lq and Lk are from 512 to 2047 (d = 64 under the causal
//            mask: to 4095) on wgmma-tma with plain heads it runs the ordered kernel below instead
//            (fast_backward_default_runs_ordered: faster there).
//   deterministic: bitwise the same run after run, two ways. The main kernel skips dQ, and a separate pass (one
//            CTA per query tile, looping over the K/V tiles it sees in order) recomputes S, P, dP, dS and keeps
//            dQ_i in registers: no atomics, at the price of computing S and dP twice. Or, on wgmma-tma with plain
//            heads at d = 64 and 128 from Lq, Lk = 512 (fast_backward_ordered_dq), the warp-role kernel adds dQ
//            in one fixed order per query tile (FlashAttention-3's way; ordered_dq below).
//   At d = 256 both modes run the second way (fast_backward_dq_by_pass): there the wgmma dQ pass after the dK/dV
//            kernel measured 1.12x-1.17x the kernel that added dQ by atomics (docs/perf-log.md).
// Causal masks are bottom-right aligned (query i sees key j <= i + Lk - Lq); rows that see no key have
// L = -inf and zero gradient. Tile shapes (compile-time, FastBackwardTraits):
//   main kernel:  kBlockN 64 keys per CTA, kBlockM 64 query rows per step, 8 warps (warp w: rows / keys
//                 16 (w % 4).., columns half w / 4); shared memory d 64: 64 KiB, d 128: 112 KiB
//   dQ pass:      kBlockM 64 query rows per CTA (4 warps x 16 rows), kBlockN 64 keys per step, K/V two stages
//                 (the mma.sync path's; the wgmma paths run their own, FastDqTraitsSm90)
// Three main kernels (FastBackwardPath; the preprocess, convert and dQ passes are shared):
//   mma.sync (above; the default where the wgmma kernel cannot run)
//   wgmma (kernels/rungs/flash_attention_backward_fast_sm90.cuh; compute capability 9.0 with the sm_90a build
//            loaded): FlashAttention-3's structure, kBlockN 128 keys per CTA (two warpgroups of 64 keys, dK_j
//            and dV_j in registers), kBlockM 64 query rows per step, the five products on wgmma
//            (S^T = K Q^T, dP^T = V dO^T from shared memory; dV += P^T dO, dK += dS^T Q with P^T, dS^T in
//            registers; dQ_i = dS K from shared memory, then fp32 atomics; in the deterministic mode the wgmma
//            dQ pass, flash_attention_backward_fast_dq.sm90a.cu, FastDqTraitsSm90).
//   wgmma-tma (the same file, a template flag; the default where it runs, atomic mode): the wgmma kernel with
//            Q_i and dO_i loaded by bulk tensor copies that one thread issues (an mbarrier per stage) instead of
//            cp.async from all 256 threads, dS^T stored by stmatrix.trans instead of 16-bit stores, and dQ_i
//            staged in shared memory (fp32, swizzled) and added by bulk tensor reduce-adds (d = 128: two 8 KiB
//            boxes per warpgroup and step; d = 64: one, each warpgroup 32 columns of dQ_i over all 128 keys;
//            issued by one thread, one step later, so they overlap the next step's products) instead of
//            per-thread atomics; L_i and D_i by 4-byte cp.async; dK_j and dV_j written out through shared memory
//            with 16-byte stores (1.00x-1.11x, geometric mean 1.04x). At d = 128 it takes 80 query rows a step
//            (kBlockM80, dQ computed transposed; the ordered kernel too, without the mask from Lq, Lk = 2048, under
//            it from 4096: fast_backward_steps80). In the deterministic mode it runs this kernel without its dQ
//            part (its loads: 1.00x-1.07x the wgmma kernel's there) and, beside it, the wgmma dQ pass; from Lq,
//            Lk = 512 on plain heads the ordered kernel instead (fast_backward_ordered_dq).
//   d = 256 (flash_attention_backward_fast_d256.sm90a.cu, FastBackwardTraitsSm90D256): both wgmma paths run a
//            dK/dV kernel of its own, kBlockN 64 keys per CTA whose two warpgroups split the step by product
//            (S^T, P^T, dV_j; dP^T, dS^T, dK_j; P^T handed over in shared memory: 1.03x-1.08x the split by
//            columns), and beside it the wgmma dQ pass, in both dQ modes. Its dQ by fp32 atomics (per thread, or
//            bulk tensor reduce-adds at 0.978x of those) measured 0.85x-0.90x of that: the adds' bytes in L2,
//            64 KiB a step, were the limit (docs/perf-log.md). The mma.sync path has no d = 256 kernel (an
//            InputError naming d).
//   Chosen per call: FastBackwardParams::path, or for Auto the environment's KL_FLASH_BWD_PATH=mma|wgmma|wgmma-tma
//   (unset or auto: wgmma-tma where it runs, else mma.sync; on the H200 wgmma-tma measured 1.15x-1.39x the
//   wgmma kernel's TFLOP/s in the atomic mode before its dQ wait moved and the d = 64 split (1.03x and, at
//   d = 64, 1.07x-1.12x more), which measured 1.3x-2.0x mma.sync's at d = 128,
//   docs/perf-log.md); a wgmma path asked for where it cannot run is an InputError.
// Grouped-query attention (FastBackwardParams::H_kv < H; k, v, dk, dv with H_kv heads dividing H, query head h
// reads kv head h / (H / H_kv)): every path and both dQ modes, by kernels of their own (a compile-time flag,
// kGqa, in the same bodies; the kernels for H_kv = H are the ones they were, byte for byte, and only run when
// H_kv = H). The main kernels' grid is (K/V tiles, H_kv, B): the CTA of K/V tile j of kv head g loads K_j, V_j
// once and walks the query tiles of each of its group's H / H_kv query heads in turn (heads g * group ..
// + group - 1, contiguous in q: one stream of group * Lq rows, the Q/dO pipeline running straight across the
// head boundaries), so dK_j and dV_j, summed over the group, stay in registers and are written once: no
// atomics on dK/dV, deterministic, and K_j, V_j read once per group instead of once per query head. dQ is
// per query head as without the group: the atomic mode adds each step's dS K_j into that head's rows of the
// accumulator; the deterministic dQ pass keeps its grid (query tiles, H, B) and reads K and V at the query
// head's kv head. The preprocess and the convert pass index query heads only and are unchanged. The price:
// H / H_kv times fewer, longer main-kernel CTAs (not yet measured: at the forward bench's grouped shapes,
// H = 16 over H_kv = 2 with B * L = 16384, the wgmma grid is 256 CTAs of 128 keys, about two per SM).
// Layout: contiguous [B, H, L, d] (q, o, dout, dq [B, H, Lq, d]; k, v, dk, dv [B, H_kv, Lk, d]; lse, D
// [B, H, Lq]); every pointer 16-byte aligned.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/measure/bench.h"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/runtime/array.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"

struct CUstream_st;  // cudaStream_t is a CUstream_st*

namespace kl::flash_attention_backward {

using flash_attention::FastDtype;

template <int kHeadDim_>
struct FastBackwardTraits {
  static constexpr int kHeadDim = kHeadDim_, kBlockM = 64, kBlockN = 64, kNWarps = 8;
  static constexpr int kThreads = kNWarps * 32;
  // Shared memory: K_j, V_j [kBlockN][d]; two stages of Q_i, dO_i [kBlockM][d]; P, dS [kBlockM][kBlockN].
  static constexpr int64_t kSmemBytes = int64_t(2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim + 2 * kBlockM * kBlockN) * 2;
};
template <int kHeadDim_>
struct FastDqTraits {  // the mma.sync path's deterministic dQ pass (the wgmma paths': FastDqTraitsSm90)
  static constexpr int kHeadDim = kHeadDim_, kBlockM = 64, kBlockN = 64, kNWarps = 4;
  static constexpr int kThreads = kNWarps * 32;
  // Q_i, dO_i [kBlockM][d]; two stages of K_j, V_j [kBlockN][d].
  static constexpr int64_t kSmemBytes = int64_t(2 * kBlockM * kHeadDim + 4 * kBlockN * kHeadDim) * 2;
};

// The wgmma kernel's tiles (sm_90a): two warpgroups of 64 keys each, 256 threads, one CTA per SM.
template <int kHeadDim_>
struct FastBackwardTraitsSm90 {
  static constexpr int kHeadDim = kHeadDim_, kBlockM = 64, kBlockN = 128, kNWarps = 8;
  static constexpr int kThreads = kNWarps * 32;
  // At `block_m` query rows a step: K_j, V_j [kBlockN][d]; two stages of Q_i, dO_i [block_m][d]; dS
  // [block_m][kBlockN]; two stages of L and D (fp32, block_m each); plus 1 KiB to align the tiles to 1024 bytes
  // (the 128-byte swizzle's period).
  static constexpr int64_t tile_bytes(int block_m) {
    return int64_t(2 * kBlockN * kHeadDim + 4 * block_m * kHeadDim + block_m * kBlockN) * 2 + 4 * block_m * 4 + 1024;
  }
  static constexpr int64_t kSmemBytes = tile_bytes(kBlockM);
  // The wgmma-tma kernels (their tiles at kBlockMTma rows) add two stages of dQ staging: per warpgroup 64 rows of
  // 64 fp32 columns as two boxes of 32 columns (128-byte rows, 128-byte swizzle: the layout the bulk tensor copy
  // reads), so the 8 rows a warp's float2 stores touch fall on 8 different 16-byte chunks; then the two stages'
  // mbarriers (8 bytes each, 64 reserved). d = 64: 195 KiB, d = 128: 210 KiB (of 227).
  // At d = 64 the wgmma-tma kernels take kBlockMTma = 128 query rows a step (FlashAttention-3's tile there), so
  // each warpgroup's S^T and dP^T are 64 keys x 128 queries and its dQ part 64 query rows x 64 columns over all
  // 128 keys; at d = 128 the registers (dK_j, dV_j: 128 a thread) leave no room for that, and they keep 64.
  static constexpr int kBlockMTma = kHeadDim == 64 ? 128 : 64;
  static constexpr int kDqBoxRows = 64, kDqBoxBytes = kDqBoxRows * 128;
  static constexpr int64_t kDqStageBytes = int64_t(2) * 2 * kDqBoxBytes;  // both warpgroups, two boxes each
  static constexpr int64_t kSmemBytesTma = tile_bytes(kBlockMTma) + 2 * kDqStageBytes + 64;
  // The atomic wgmma-tma kernel at d = 128 takes kBlockM80 = 80 query rows a step (FlashAttention-3's tile without the
  // mask; 1.08x-1.10x the 64-row kernel from L = 2048 on an H100, docs/perf-log.md, the nineteenth session; under the
  // mask 1.03x-1.08x, and the ordered kernel without it 1.01x-1.07x from L = 2048, the twentieth session; under it
  // 1.02x from 4096, the twenty-first): dQ computed transposed (dQ^T = K^T dS^T, the head dimension as the wgmma's
  // M, 64 columns a warpgroup), one dQ stage of two 80-row boxes a warpgroup (two would pass the 227 KiB), the L and
  // D stages padded to 2 KiB so the dQ stage stays 1024-byte aligned: 207 KiB.
  static constexpr int kBlockM80 = 80, kDqBoxBytes80 = kBlockM80 * 128;
  static constexpr int64_t kDqStageBytes80 = int64_t(2) * 2 * kDqBoxBytes80;
  static constexpr int64_t kStatsPad80 = 2048 - 4 * kBlockM80 * 4;
  static constexpr int64_t kSmemBytesTma80 = tile_bytes(kBlockM80) + kStatsPad80 + kDqStageBytes80 + 64;
  static_assert(kSmemBytesTma <= 227 * 1024 && (kHeadDim != 128 || kSmemBytesTma80 <= 227 * 1024),
                "a block's shared memory on an H100/H200");
};

// The wgmma dK/dV kernel at d = 256 (flash_attention_backward_fast_d256.sm90a.cu): a warpgroup holding dK_j and
// dV_j for 64 keys x 256 columns would need 256 accumulator registers a thread, so the CTA takes kBlockN = 64
// keys and its two warpgroups split the work by product: warpgroup 0 computes S^T, P^T and dV_j, warpgroup 1 dP^T,
// dS^T and dK_j (128 accumulator registers each), both over all 64 keys and the step's 64 queries, so each operand
// tile is read from shared memory once a step. P^T goes from warpgroup 0 to 1 through shared memory (fp32).
struct FastBackwardTraitsSm90D256 {
  static constexpr int kHeadDim = 256, kBlockM = 64, kBlockN = 64, kNWarps = 8;
  static constexpr int kThreads = kNWarps * 32;
  static constexpr int64_t kXBytes = int64_t(kBlockN) * kBlockM * 4;  // P^T, fp32
  // K_j, V_j [kBlockN][256]; two stages of Q_i, dO_i [kBlockM][256]; P^T (fp32); two stages of L and D (fp32);
  // 1 KiB to align the tiles: 210 KiB of the H100's 227.
  static constexpr int64_t kSmemBytes =
      int64_t(2 * kBlockN * kHeadDim + 4 * kBlockM * kHeadDim) * 2 + kXBytes + 4 * kBlockM * 4 + 1024;
};

// The wgmma paths' dQ pass (flash_attention_backward_fast_dq.sm90a.cu; the deterministic mode, and both modes at
// d = 256): one CTA per kBlockM = 128 query rows, two warpgroups of 64 rows, walking the K/V tiles of kBlockN keys
// the rows see, kStages deep with one block barrier a tile; per tile S and dP (wgmma ss), dS in registers as the A
// of dQ_i += dS K_j (wgmma rs, K transposed), so neither P nor dS touches shared memory. kBlockN keeps the
// registers under 240 a thread (dQ_i: d / 2; S, dP: kBlockN / 2 each) and the shared memory (Q_i, dO_i and the
// stages of K_j, V_j) at 128, 160 and 225 KiB. Three stages measured 1.004x-1.039x two with a second barrier a
// tile; one warpgroup of 64 rows a CTA (two CTAs an SM) 0.88x-1.06x (docs/perf-log.md). At d = 256, 48 keys in two
// stages (the same 96 KiB as 32 in three): S and dP of 32 keys read 3 KiB of shared memory per 16-step of each
// wgmma (Q_i's or dO_i's 64 rows, the keys') for 64 x 32 x 16 products, more than the 128 bytes a clock an SM
// reads at the tensor cores' rate; 48 keys read 3.5 KiB for 1.5 times the products: the d = 256 backward 1.024x-1.072x
// (geometric means 1.046x, 1.043x of two pairs in turn on an H100, the twenty-first session).
template <int kHeadDim_>
struct FastDqTraitsSm90 {
  static constexpr int kHeadDim = kHeadDim_, kBlockM = 128, kThreads = 256, kStages = kHeadDim == 256 ? 2 : 3;
  static constexpr int kBlockN = kHeadDim == 64 ? 128 : kHeadDim == 128 ? 64 : 48;
  static constexpr int64_t kSmemBytes = int64_t(2 * kBlockM * kHeadDim + 2 * kStages * kBlockN * kHeadDim) * 2 + 1024;
};

// Which main kernel runs; Auto: KL_FLASH_BWD_PATH from the environment, else WgmmaTma where it runs, else
// MmaSync. WgmmaTma (the header's wgmma-tma): 1.29x wgmma's TFLOP/s over the atomic-mode rows on the H200
// (docs/perf-log.md); in the deterministic mode each runs its own dK/dV kernel (wgmma-tma's with bulk-copy loads)
// and beside it the wgmma dQ pass where the ordered kernel does not run; at d = 256 both run the same kernels.
// The path between them (dQ by bulk adds with cp.async loads, wgmma-bulk) is gone: its measurements stay in the
// perf log.
// The name of the path the default (Auto) takes on an H100/H200, as the timeline recordings name paths.
constexpr const char* kFastBackwardDefaultSm90 = "wgmma-tma";
enum class FastBackwardPath { Auto, MmaSync, Wgmma, WgmmaTma };
// The paths that run the wgmma main kernel (each needs the sm_90a code).
inline bool fast_backward_path_wgmma(FastBackwardPath path) {
  return path == FastBackwardPath::Wgmma || path == FastBackwardPath::WgmmaTma;
}
// Whether `path` has a main kernel at head dimension d: every path at 64 and 128, only the wgmma paths at 256.
inline bool fast_backward_path_runs_d(FastBackwardPath path, int d) {
  return d != 256 || fast_backward_path_wgmma(path);
}
inline const char* fast_backward_path_name(FastBackwardPath path) {
  return path == FastBackwardPath::Wgmma       ? "wgmma"
         : path == FastBackwardPath::WgmmaTma  ? "wgmma-tma"
         : path == FastBackwardPath::MmaSync   ? "mma.sync"
                                               : "auto";
}
// The main kernel `path` runs at head dimension d, as the bench's rows and bench/ladder_c_api.cpp name it: at d = 256
// "wgmma-d256", the one kernel both wgmma paths run there.
inline const char* fast_backward_kernel_name(FastBackwardPath path, int d) {
  return d == 256 ? "wgmma-d256" : fast_backward_path_name(path);
}

struct FastBackwardParams {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dout = nullptr;  // dtype
  const float* lse = nullptr;  // the forward's L = m + log l (natural log, scaled scores), -inf: sees nothing
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;  // dtype, written
  float* dq_accum = nullptr;  // fp32 [B, H, Lq, d] workspace (atomic mode, ordered adds; unused with a dQ pass)
  float* drow = nullptr;      // fp32 [B, H, Lq] workspace: D
  int B = 0, H = 0, Lq = 0, Lk = 0, d = 0;
  float scale = 0;  // finite and > 0
  bool causal = false;
  bool deterministic = false;  // false: dQ by atomics (the default; fast_backward_default_runs_ordered)
  FastDtype dtype = FastDtype::Bf16;
  FastBackwardPath path = FastBackwardPath::Auto;
  // Heads of k, v, dk, dv (grouped-query attention), dividing H; 0 means H. Last, so that the fields the
  // kernels for H_kv = H read keep their offsets in the kernel parameters (the struct stays 128 bytes).
  int H_kv = 0;
};

// The heads of k and v (H_kv, or H when 0), and whether p is grouped-query attention (H_kv < H: the GQA
// kernels run).
KL_FA_HD int kv_heads(const FastBackwardParams& p) { return p.H_kv > 0 ? p.H_kv : p.H; }
KL_FA_HD bool grouped_query(const FastBackwardParams& p) { return kv_heads(p) < p.H; }
// Whether the deterministic mode adds dQ in turn (ordered_dq below; flash_attention_backward_fast_ordered_sm90.cuh)
// instead of by the dQ pass: on wgmma-tma (p.path as run_fast resolves it), plain heads, d = 64 and 128, Lq and
// Lk from kBwdOrderedFromL, where the caller gave the accumulator. There it measured 1.05x-1.16x the pass on an
// H100 at L = 512 and 1024 (the seventeenth session, both masks, d = 64 and 128; before the dQ adds moved to warps
// of their own and the causal pairs it read 0.84x-1.03x there) and 0.97x-1.21x from L = 2048 (docs/perf-log.md).
// Shorter rows, never measured, keep the pass.
constexpr int kBwdOrderedFromL = 512;
inline bool fast_backward_ordered_dq(const FastBackwardParams& p) {
  return p.deterministic && p.d != 256 && !grouped_query(p) && p.path == FastBackwardPath::WgmmaTma &&
         p.dq_accum != nullptr && p.Lq >= kBwdOrderedFromL && p.Lk >= kBwdOrderedFromL;
}
// Whether the default mode runs the ordered kernel too (run_fast sets p.deterministic for it; launch_wgmma_main, which
// the timeline's recorder calls, does not): where the deterministic mode would run it and Lq and Lk are below
// kBwdAtomicFromL. At L = 512 it measured 1.03x-1.09x the atomic kernel on an H100 (both masks, d = 64 and 128, two
// pairs in turn; most of it the accumulator the atomic mode's preprocess zeroes and the ordered kernel's first turn
// stores over), at L = 1024 1.005x-1.065x (geometric means 1.034x and 1.033x in two runs, the nineteenth session, after
// its mask split), at 2048 0.96x-1.05x (geometric means 1.001x and 1.000x: the atomic kernel stays from there;
// docs/perf-log.md). At d = 64 under the causal mask it read 1.04x-1.05x at 2048 (four runs in two sessions, its
// light and heavy K/V tiles paired) and 0.98x-0.99x at 4096, so those rows stay on it below kBwdAtomicFromLCausal64
// (at d = 128 the atomic kernel's 80-row steps read 1.02x-1.03x over it there, the twentieth session). There the
// default mode is bitwise repeatable too.
constexpr int kBwdAtomicFromL = 2048, kBwdAtomicFromLCausal64 = 4096;
inline bool fast_backward_default_runs_ordered(const FastBackwardParams& p) {
  FastBackwardParams det = p;
  det.deterministic = true;
  const int top = p.causal && p.d == 64 ? kBwdAtomicFromLCausal64 : kBwdAtomicFromL;
  return !p.deterministic && p.Lq < top && p.Lk < top && fast_backward_ordered_dq(det);
}
// Whether wgmma-tma takes 80 query rows a step (kBlockM80) on a launch whose Q and dO maps were made (`tma`: its
// atomic or ordered kernel, not the refused maps' fallback): d = 128 on plain heads; the atomic kernel at every length
// under both masks, the ordered one (fast_backward_ordered_dq) where Lq and Lk are from kBwdAtomicFromL, under the mask
// from kBwdOrdered80CausalFromL. On shorter rows the ordered kernel's 80 rows read 0.89x (L = 512) and 0.99x (1024) of
// its 64 on an H100 without the mask, and 0.95x at 2048 under it (docs/perf-log.md, the twentieth and twenty-first
// sessions).
constexpr int kBwdOrdered80CausalFromL = 4096;
inline bool fast_backward_steps80(const FastBackwardParams& p, bool tma) {
  if (!tma || p.d != 128 || grouped_query(p)) return false;
  const int from = p.causal ? kBwdOrdered80CausalFromL : kBwdAtomicFromL;
  return !fast_backward_ordered_dq(p) || (p.Lq >= from && p.Lk >= from);
}
// Whether dQ comes from its own pass, without atomics (bitwise repeatable): the deterministic mode where its adds
// are not ordered, and both modes at d = 256, where that measured 1.12x-1.17x the d = 256 kernel that added dQ by
// atomics (docs/perf-log.md).
inline bool fast_backward_dq_by_pass(const FastBackwardParams& p) {
  return p.d == 256 || (p.deterministic && !fast_backward_ordered_dq(p));
}

// ---- [SECTION] pure index logic, shared by the kernels and the CPU tests ------------------------------
// The first query tile (of block_m rows) with a row that sees a key of K/V tile n_block (causal,
// bottom-right): the first row that sees key n_block*block_n is n_block*block_n - (Lk - Lq). 0 without
// the mask; ceil(Lq / block_m) when no row does. Every later tile sees the block too.
KL_FA_HD int first_query_tile(int n_block, int Lq, int Lk, int block_m, int block_n, bool causal) {
  if (!causal) return 0;
  const int64_t first_row = int64_t(n_block) * block_n - (int64_t(Lk) - Lq);
  if (first_row <= 0) return 0;
  if (first_row >= Lq) return flash_attention::ceil_div(Lq, block_m);
  return int(first_row / block_m);
}

// The order the dK/dV kernels' CTAs start in under the causal mask, from Lq = 2048 (FlashAttention-3's longest-first
// backward schedule, SingleTileBwdLPTScheduler). The hardware starts CTAs in linear block order. In the grid's own
// order (tile fastest, then head, then batch) each head's CTAs start together, its heaviest (tile 0, which sees
// every query tile) first, so near the end the last heads' heaviest CTAs start with little work left beside them
// and run on alone: 3% to 7% over the work spread evenly, in a greedy model of 132 SMs at the bench's causal
// shapes. Instead the linear index walks sections of `section` units (a unit: one (batch, kv head) of the grid),
// the tile the slow index inside a section: every unit's tile 0 first, so each section ends on its lightest tiles
// (the model: within 2%), and a section holds few enough units (bwd_l2_section) that the Q, dO and dQ accumulator
// rows their CTAs share stay in the L2. Measured on an H100 (docs/perf-log.md, 2026-12-06): 1.01x-1.06x at d = 128
// causal from L = 2048 to 8192 in two calls; at L = 512 and 1024 the order lost 3% to 9% (those CTAs run a few
// steps each, and the section's heaviest tiles then all start together), so shorter rows keep the grid's order
// (section = 1), as does every row without the mask (its CTAs all alike).
struct BwdCtaAt {
  int tile, unit;  // the tile index along the grid's x, and the unit: y + gridDim.y z
};
KL_FA_HD BwdCtaAt bwd_cta_in_order(int linear, int tiles, int units, int section) {
  const int per = section * tiles, s = linear / per, r = linear - s * per;
  const int first = s * section, n = units - first < section ? units - first : section;  // the last may be short
  return {r / n, first + r % n};
}
// The units a section takes: the largest power of two (at most `units`) whose shared bytes, unit_bytes each, fit
// 40 MiB of the L2 (FlashAttention-3's figure for the H100's 50 MiB); at least 1.
KL_FA_HD int bwd_l2_section(int64_t unit_bytes, int units) {
  constexpr int64_t kBudget = int64_t(40) << 20;
  int s = 1;
  while (2 * s <= units && 2 * s * unit_bytes <= kBudget) s *= 2;
  return s;
}
constexpr int kBwdOrderFromLq = 2048;  // causal rows from this length take the sections' order
// Whether the dK/dV kernels take the sections' order for p (else the grid's).
KL_FA_HD bool bwd_main_reorders(const FastBackwardParams& p) { return p.causal && p.Lq >= kBwdOrderFromLq; }
// The dK/dV kernels' CTA at linear block index `linear` of their grid (tiles, kv heads, B): its K/V tile, (kv) head
// and batch. A unit's shared bytes: its query heads' Q and dO (2 bytes) and fp32 dQ accumulator rows.
struct BwdCta {
  int tile, h, b;
};
KL_FA_HD BwdCta bwd_main_cta(const FastBackwardParams& p, int linear, int tiles, int heads, int batches) {
  const int units = heads * batches;
  const int64_t unit_bytes = int64_t(p.H / heads) * p.Lq * p.d * (2 + 2 + 4);
  const int section = bwd_main_reorders(p) ? bwd_l2_section(unit_bytes, units) : 1;
  const BwdCtaAt at = bwd_cta_in_order(linear, tiles, units, section);
  return {at.tile, at.unit % heads, at.unit / heads};
}

// True when some (row, key) pair of query tile m_block and K/V tile n_block that exists (row < Lq) is
// masked: the Lk tail or (causal) the diagonal crosses the pair. Rows past Lq need no mask (their L is
// taken as +inf, so P = 0).
KL_FA_HD bool backward_tile_needs_mask(int m_block, int n_block, int Lq, int Lk, int block_m, int block_n,
                                       bool causal) {
  return flash_attention::tile_needs_mask(m_block, n_block, Lq, Lk, block_m, block_n, causal);
}

// ---- [SECTION] the deterministic mode's ordered dQ adds (pure index logic, CPU-tested) ---------------------
// FlashAttention-3's deterministic mode: the main kernel keeps its dQ adds (bulk tensor reduce-adds of each step's
// dS K_j) and every query tile's adds arrive in one fixed order of the K/V CTAs, so the fp32 sums, and dQ, are the
// same bits run after run. Each query tile has a turn counter per consumer warpgroup; the CTA whose rank at tile m
// is r waits until the counter reads r, adds (stores where r = 0: the accumulator is not zeroed beforehand, but for
// ordered_dq_unreached_rows), waits for its adds to complete and counts it up; the warp-role
// kernel (flash_attention_backward_fast_ordered_sm90.cuh) does this in a warp of its own. The order is the order in
// which the CTAs reach the tile when they run side by side:
//   causal pairs (under the mask, a head's K/V tiles no more than the SMs, more than one): gangs as rotated's
//           (below), grid column x taking K/V tile x at its even heads in the causal order (next) and tile N - 1 - x
//           at its odd heads, walked back from the last query tile: there every key tile before j sees every query
//           tile j sees, so ascending j (rank j). A CTA's two heads together take the same steps, so the launch
//           ends without a tail of heavy CTAs, and at either parity a CTA reaches a tile as many steps after the one
//           before it in turn as in the causal order (over it, the causal rows from L = 2048: 1.028x and 1.035x at
//           d = 128, 1.016x and 1.022x at d = 64, two runs on an H100; docs/perf-log.md, the sixteenth session).
//   causal (under the mask otherwise): every CTA starts at its first tile (first_query_tile), later key tiles later
//           down the rows, so at each tile the highest key tile arrives first: descending j (FlashAttention-3's
//           order).
//   rotated (no mask, a head's K/V tiles no more than the SMs, at least as many query tiles): CTA j starts at
//           query tile shift * j (shift = M / N) and wraps around, so at each tile the CTAs arrive one after
//           another `shift` steps apart: the rank is the number of CTAs that reached it at an earlier step.
//   ascending (no mask otherwise): every CTA from tile 0, ascending j: each waits for the one before.
// Rotated launches gangs (`gang` = SMs / N of them, all resident at once): CTA (j, g) takes K/V tile j of heads g,
// g + gangs, ..., so a head's N CTAs start it together as they finish the head before, where one head a CTA
// (grid (N, H, B)) starts them as SMs free, and a head's early CTAs wait at their turns for its late ones (gangs
// measured 1.02x-1.05x at d = 64, L = 2048 and 4096, 0.99x-1.03x elsewhere, on an H100: docs/perf-log.md).
// A CTA only waits for CTAs that reach the tile at an earlier step; the hardware starts CTAs in the order of their
// index, so the waits cannot close a cycle as long as a head's CTAs run side by side (the gangs) or start in the
// order they wait: causal launches them last key tile first (`reverse`: light CTAs first, so that the heavy ones
// wait only for CTAs started earlier; in the grid's order they waited at every tile for light CTAs not yet started,
// 0.75x of the atomic mode at d = 64, L = 16384 on an H100, docs/perf-log.md, 2026-12-07). The gangs rely on a
// head's N CTAs being resident together (N <= the SMs), as FlashAttention-3's deterministic mode does: on a GPU
// whose SMs other work holds (another kernel beside it, an MPS limit) such a launch waits until they free.
enum class OrderedDqMode : int { Ascending = 0, Rotated = 1, Causal = 2, CausalPairs = 3 };
struct OrderedDq {
  OrderedDqMode mode = OrderedDqMode::Ascending;
  int shift = 0;    // Rotated: CTA j starts at query tile (shift * j) mod M
  int reverse = 0;  // Causal: grid column x computes K/V tile N - 1 - x
  int gang = 0;     // Rotated, CausalPairs: the launch's gangs of N CTAs (sms / N), each taking heads in turn; 0: one
                    // head a CTA
};
// The plan for a launch of N = ceil(Lk / block_n) K/V tiles and M = ceil(Lq / block_m) query tiles per head on a
// device of `sms` multiprocessors (one CTA each).
KL_FA_HD OrderedDq ordered_dq_plan(int Lq, int Lk, int block_m, int block_n, bool causal, int sms) {
  const int N = flash_attention::ceil_div(Lk, block_n), M = flash_attention::ceil_div(Lq, block_m);
  OrderedDq o;
  if (causal && N <= sms && N > 1) {
    o.mode = OrderedDqMode::CausalPairs;
    o.gang = sms / N;
  } else if (causal) {
    o.mode = OrderedDqMode::Causal;
    o.reverse = 1;
  } else if (N <= sms && M >= N && N > 1) {
    o.mode = OrderedDqMode::Rotated;
    o.shift = M / N;
    o.gang = sms / N;
  }
  return o;
}
// The query rows no CTA adds into, 0 .. this - 1 of every head (causal with Lq > Lk: the tiles before K/V tile 0's
// first, whose rows see no key; every later tile has tile 0 among its adders). A tile's first adder stores its dQ
// instead of adding it, so the launch zeroes only these rows of the accumulator.
KL_FA_HD int ordered_dq_unreached_rows(int Lq, int Lk, int block_m, int block_n, bool causal) {
  const int64_t rows = int64_t(first_query_tile(0, Lq, Lk, block_m, block_n, causal)) * block_m;
  return int(rows < Lq ? rows : Lq);
}
// The query tile CTA j starts at (its first; m_first: first_query_tile's) and walks from, wrapping at M.
KL_FA_HD int ordered_dq_start(const OrderedDq& o, int j, int m_first, int M) {
  return o.mode == OrderedDqMode::Rotated ? (o.shift * j) % M : m_first;
}
// Whether a CTA's k-th head is walked back (CausalPairs' odd heads), and the K/V tile grid column x computes there
// (of N a head).
KL_FA_HD bool ordered_dq_flipped(const OrderedDq& o, int k) {
  return o.mode == OrderedDqMode::CausalPairs && (k & 1) != 0;
}
KL_FA_HD int ordered_dq_tile(const OrderedDq& o, int x, int k, int N) {
  return o.reverse || ordered_dq_flipped(o, k) ? N - 1 - x : x;
}
// The query tile of step s of a head: from ordered_dq_start, wrapping at M; walked back: M - 1 - s.
KL_FA_HD int ordered_dq_step_tile(int start, bool flipped, int M, int s) {
  if (flipped) return M - 1 - s;
  const int m = start + s;
  return m >= M ? m - M : m;
}
// The rank of K/V tile j among the CTAs that add into query tile m: its turn, 0 for the first. `flipped`: a head
// walked back, whose order is ascending j (every key tile before j sees every query tile j sees).
KL_FA_HD int ordered_dq_rank(const OrderedDq& o, int m, int j, int Lq, int Lk, int block_m, int block_n,
                             bool flipped = false) {
  const int N = flash_attention::ceil_div(Lk, block_n), M = flash_attention::ceil_div(Lq, block_m);
  if (flipped) return j;
  // Causal: contributors 0 .. jmax (the key tiles some row of tile m sees), descending.
  if (o.mode == OrderedDqMode::Causal || o.mode == OrderedDqMode::CausalPairs) {
    const int64_t last_row = (int64_t(m) + 1) * block_m < Lq ? (int64_t(m) + 1) * block_m : int64_t(Lq);
    const int64_t seen = last_row + Lk - Lq;  // keys 0 .. seen - 1 are seen by a row of the tile
    const int64_t tiles = (seen + block_n - 1) / block_n;
    return int((tiles < N ? tiles : N) - 1 - j);
  }
  if (o.mode == OrderedDqMode::Ascending) return j;
  // Rotated: CTA k reaches tile m at step (m - s k) mod M; count the k whose step comes before j's, i.e. whose
  // start s k lies in the cyclic interval (s j, s j + a] where a is j's step.
  const int s = o.shift, a = ((m - s * j) % M + M) % M, hi = s * j + a;
  const int end = hi < M - 1 ? hi : M - 1;
  int rank = (end / s < N - 1 ? end / s : N - 1) - j;
  if (rank < 0) rank = 0;
  if (hi >= M) rank += ((hi - M) / s + 1 < N ? (hi - M) / s + 1 : N);
  return rank;
}

// ---- [SECTION] fragment addressing: where each lane points ldmatrix.x4 (pure index logic, CPU-tested) ----
// Offsets in elements into an XOR-swizzled row-major tile of row_len columns (rung 5's layout: chunk c of
// row r at chunk position c ^ (r & 7)). Matrix i of an ldmatrix.x4 takes its 8 row addresses from lanes
// 8i .. 8i+7.
namespace frag {
KL_FA_HD int swizzled(int row_len, int row, int chunk) { return row * row_len + ((chunk ^ (row & 7)) << 3); }
// A (16 rows x k16 step kk) of a 16-row slice starting a multiple of 8 rows into the tile (offset from it):
// matrices (rows +0, k +0) (rows +8, k +0) (rows +0, k +8) (rows +8, k +8) = a0 a1 a2 a3.
KL_FA_HD int a_offset(int row_len, int lane, int kk) { return swizzled(row_len, lane & 15, kk * 2 + (lane >> 4)); }
// A of X^T for X the tile: m = X's columns col0 .. col0+15, k = X's rows kk*16 .. +15, read with .trans:
// matrix i covers X rows kk*16 + 8 (i / 2).., columns col0 + 8 (i % 2)...
KL_FA_HD int a_trans_offset(int row_len, int lane, int kk, int col0) {
  const int i = lane >> 3;
  return swizzled(row_len, kk * 16 + (lane & 7) + ((i >> 1) << 3), (col0 >> 3) + (i & 1));
}
// B of two n8 tiles (n = columns col0.., col0+8..) where the tile's rows are k (V in P V), read with .trans:
// matrices (k +0, n +0) (k +8, n +0) (k +0, n +8) (k +8, n +8) = b0 b1 of the first n8 tile, b0 b1 of the second.
KL_FA_HD int b_rows_are_k_offset(int row_len, int lane, int kk, int col0) {
  return swizzled(row_len, kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), (col0 >> 3) + (lane >> 4));
}
// B of two n8 tiles (n = the tile's rows row0.., row0+8..) where the tile's columns are k (K in Q K^T):
// matrices (n +0, k +0) (n +0, k +8) (n +8, k +0) (n +8, k +8).
KL_FA_HD int b_rows_are_n_offset(int row_len, int lane, int kk, int row0) {
  return swizzled(row_len, row0 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1));
}
}  // namespace frag

// ---- [SECTION] the wgmma kernel's dS store (pure index logic, CPU-tested) ---------------------------------
// The wgmma kernel holds dS^T (keys x queries) in accumulator registers and stores it as dS [64 queries][128
// keys] (wgmma-tma at d = 64: 128 queries) into a 128-byte-swizzled tile (kernels/rungs/sm90_device.cuh: 64-key
// column blocks of 64 rows x 128 bytes; chunk c of row r at chunk position c ^ (r & 7)), the K-major A operand of
// dQ = dS K.
namespace wgmma_frag {
// Byte offset of element `col` of row `row` in a swizzled tile of `rows` rows of 16-bit elements.
KL_FA_HD uint32_t swizzled_byte(int rows, int row, int col) {
  const int chunk = col >> 3;
  return uint32_t((chunk >> 3) * (rows * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4) + (col & 7) * 2);
}
// Thread (wg, warp, lane) packs its accumulator elements 8kk + 2r + {0, 1} into ds_frag[kk][r] (the A layout):
// element 4j + e is key 64 wg + 16 warp + lane/4 + 8 (e / 2), query 8j + 2 (lane % 4) + e % 2. The half hh of
// ds_frag[kk][r] goes to this byte of the dS tile.
KL_FA_HD uint32_t ds_store_byte(int wg, int warp, int lane, int kk, int r, int hh) {
  const int key = 64 * wg + 16 * warp + (lane >> 2) + 8 * (r & 1);
  const int query = 8 * (2 * kk + (r >> 1)) + 2 * (lane & 3) + hh;
  return swizzled_byte(64, query, key);
}
// The same store by stmatrix.x4.trans (wgmma-tma): ds_frag[kk][0..3] are four 8 x 8 matrices (keys +8 (i % 2),
// queries 16 kk + 8 (i / 2)) of which each lane holds (key lane/4, queries 2 (lane % 4), +1); .trans writes
// each matrix's query q as one 16-byte row of 8 keys, whose address lane 8i + q gives. This is that address, in a
// tile of `rows` queries (the step's: 64, or 128 at d = 64).
KL_FA_HD uint32_t ds_stmatrix_byte(int wg, int warp, int lane, int kk, int rows = 64) {
  const int i = lane >> 3;
  const int key = 64 * wg + 16 * warp + 8 * (i & 1);
  const int query = 16 * kk + 8 * (i >> 1) + (lane & 7);
  return swizzled_byte(rows, query, key);
}
// The wgmma-tma kernel's dQ staging: byte offset of (query row < kRows, column col < 64) of warpgroup wg's block in
// one stage: box col / 32 (kRows rows of 128 bytes), its 16-byte chunk (col % 32) / 4 swizzled by row % 8. The
// 80-row steps (kRows = 80) stage their dQ^T here as dQ.
template <int kRows = FastBackwardTraitsSm90<64>::kDqBoxRows>  // the same for every d
KL_FA_HD uint32_t dq_stage_byte(int wg, int row, int col) {
  constexpr int kBox = kRows * 128;
  const int c = col & 31;
  return uint32_t(wg * 2 * kBox + (col >> 5) * kBox + row * 128 + ((((c >> 2) ^ row) & 7) << 4) + (c & 3) * 4);
}
}  // namespace wgmma_frag

// Checks a FastBackwardParams: InputError naming the parameter, its value and the allowed range.
inline void validate_fast(const FastBackwardParams& p) {
  auto bad = [](const char* name, const std::string& value, const std::string& allowed) {
    throw InputError(out_of_range_message(name, value, allowed));
  };
  if (p.d != 64 && p.d != 128 && p.d != 256) bad("d", std::to_string(p.d), "{64, 128, 256} for --variant fast");
  if (p.B < 1 || p.B > 65535) bad("B", std::to_string(p.B), "[1, 65535]");
  if (p.H < 1 || p.H > 65535) bad("H", std::to_string(p.H), "[1, 65535]");
  if (p.H_kv < 0 || p.H_kv > p.H || (p.H_kv > 0 && p.H % p.H_kv != 0))
    bad("H_kv", std::to_string(p.H_kv),
        "a divisor of H=" + std::to_string(p.H) + " (grouped-query attention), or 0 for H");
  if (p.Lq < 1 || p.Lq > (1 << 30)) bad("Lq", std::to_string(p.Lq), "[1, 2^30]");
  if (p.Lk < 1 || p.Lk > (1 << 30)) bad("Lk", std::to_string(p.Lk), "[1, 2^30]");
  if (!(std::isfinite(p.scale) && p.scale > 0)) bad("scale", std::to_string(p.scale), "finite and > 0");
  if (p.dtype != FastDtype::Bf16 && p.dtype != FastDtype::Fp16) bad("dtype", "?", "bf16, fp16");
  const void* ptrs[11] = {p.q, p.k, p.v, p.o, p.dout, p.lse, p.dq, p.dk, p.dv, p.drow,
                          fast_backward_dq_by_pass(p) ? p.drow : static_cast<const void*>(p.dq_accum)};
  const char* names[11] = {"q", "k", "v", "o", "dout", "lse", "dq", "dk", "dv", "drow", "dq_accum"};
  for (int i = 0; i < 11; ++i)
    if (!ptrs[i] || reinterpret_cast<uintptr_t>(ptrs[i]) % 16 != 0)
      bad(names[i], ptrs[i] ? "misaligned pointer" : "null", "a 16-byte aligned device pointer");
}

#ifdef KL_HAS_CUDA
// The three launches (atomic mode: preprocess, main kernel, convert; fast_backward_dq_by_pass: preprocess, main
// kernel without dQ, dQ pass) on the default stream, asynchronously; on the wgmma paths the last two of the
// second kind side by side on two streams of their own, which the default stream waits for. Validates first.
void run_fast(const FastBackwardParams& p);

// The main kernel run_fast takes for `requested`: MmaSync as given; Wgmma and WgmmaTma when the device is
// compute capability 9.0 and the sm_90a build loaded (InputError otherwise); Auto reads KL_FLASH_BWD_PATH
// (mma, wgmma, wgmma-tma, auto or unset; another value is an InputError) and, unset or auto, takes
// WgmmaTma where fast_backward_wgmma_available(), else MmaSync.
FastBackwardPath fast_backward_path(FastBackwardPath requested = FastBackwardPath::Auto);
// True when the wgmma kernel can run here (compute capability 9.0, sm_90a code loaded).
bool fast_backward_wgmma_available();
// The wgmma main kernel alone (flash_attention_backward_fast_sm90.cuh): dK, dV and, with atomic_dq, the
// fp32 dQ accumulator's adds (p.path WgmmaTma: bulk tensor reduce-adds, else per-thread atomics).
// run_fast wraps it with the preprocess and the convert (or dQ) pass.
// `stream`: the CUDA stream the launches go to (null: the default stream).
void launch_wgmma_main(const FastBackwardParams& p, bool atomic_dq, CUstream_st* stream = nullptr);
// At d = 256 both wgmma paths run a dK/dV kernel of their own (flash_attention_backward_fast_d256.sm90a.cu);
// launch_wgmma_main sends it there (atomic_dq must be false: dQ comes from the dQ pass).
void launch_wgmma_dkdv_d256(const FastBackwardParams& p, CUstream_st* stream = nullptr);
// The wgmma paths' dQ pass (FastDqTraitsSm90): the deterministic mode, and both modes at d = 256.
void launch_wgmma_dq_pass(const FastBackwardParams& p, CUstream_st* stream = nullptr);

// ---- timeline recording (issue 30): the instrumented wgmma main kernel ---------------------------------
// (flash_attention_backward_fast_timeline.sm90a.cu; bf16, d = 64 and 128). What a recorded launch makes: its
// CTAs, the lanes each records (lane w: warpgroup w), its tiles (keys per CTA, query rows per step) and the
// launch's name. InputError for fp16 or where the kernel cannot run here.
struct FastBackwardTracedShape {
  int ctas = 0, lanes = 0, block_m = 0, block_n = 0;
  std::string launch;
};
FastBackwardTracedShape fast_backward_traced_shape(const FastBackwardParams& p, bool atomic_dq);
// As launch_wgmma_main(p, atomic_dq), instrumented: the CTAs trace names stamp their phases into trace.buf.
void launch_wgmma_main_traced(const FastBackwardParams& p, bool atomic_dq, const timeline::TraceArgs& trace);
// What a recording of the main kernel alone needs around it: the preprocess (D into p.drow, and in the atomic
// mode the fp32 dQ accumulator zeroed), and the forward's O (p.dtype, written to o) and L (lse) for p.q, p.k,
// p.v, as run_fast_host computes them (rung 5's teaching forward in float32 on the rounded inputs).
void run_fast_preprocess(const FastBackwardParams& p);
void fast_forward_state(const FastBackwardParams& p, void* o, float* lse);

// float32 host arrays in ([L, d], [H, L, d] or [B, H, L, d]): q, k, v, dout converted to `dtype` on the
// device; o and lse the forward's (both nullptr: computed by rung 5's teaching forward, float32, from the
// rounded q, k, v; o is then rounded to `dtype`). Returns dq, dk, dv as float32 (shapes of q, k, v).
struct FastHostResult {
  Array dq, dk, dv;
};
FastHostResult run_fast_host(const Array& q, const Array& k, const Array& v, const Array& dout, const Array* o,
                             const Array* lse, bool causal, float scale, const std::string& dtype, bool deterministic,
                             FastBackwardPath path = FastBackwardPath::Auto);

// `bench flash-attention-backward` rows for the fast variant: bf16, d in {64, 128, 256}, L in {512, ..., 16384}
// with B*L = 16384 and H*d = 2048, causal and not, both dQ modes (at d = 256, where both run the same launches,
// one row: dq=deterministic; "dq=atomic" names the default mode, which at L = 512 runs the ordered kernel as
// dq=deterministic does, fast_backward_default_runs_ordered); the backward alone is timed (the forward's O and L are
// computed once per shape, before). TFLOP/s count 2.5 x the forward's 4*B*H*L*L*d
// (halved for causal), the FlashAttention papers' convention. `quick`: L = 512, B*L = 1024. The main kernel
// is fast_backward_path()'s (KL_FLASH_BWD_PATH), named at the end of each shape ("mma.sync", "wgmma" or
// "wgmma-tma"; at d = 256 "wgmma-d256", the kernel both wgmma paths run there; on the mma.sync path, which has
// no d = 256 kernel, the d = 256 shapes are left out).
std::vector<bench::Row> bench_fast(Backend b, bool quick);
#else
inline void run_fast(const FastBackwardParams& p) {
  validate_fast(p);
  throw InputError("flash-attention-backward --variant fast needs the CUDA backend: this build has no CUDA");
}
inline std::vector<bench::Row> bench_fast(Backend, bool) { return {}; }
#endif

}  // namespace kl::flash_attention_backward
