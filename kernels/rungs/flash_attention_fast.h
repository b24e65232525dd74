// Rung 5, fast variant: the FlashAttention-2 forward pass on the tensor cores (bf16 / fp16 in, float32
// accumulation and softmax statistics, bf16 / fp16 out). Same algorithm and names as the teaching
// variant (kernels/rungs/flash_attention.h): per query row a running max m, a running sum l and a partial
// output O, rescaled by alpha = exp(m_old - m_new) in one named function (`rescale`, .cu), O / l at the
// end. What makes it fast:
//   - S = Q K^T and O += P V on mma.sync.aligned.m16n8k16 (bf16 or fp16 operands, fp32 accumulate);
//     operands read from shared memory with ldmatrix.x4 (.trans for V, so V stays row-major).
//   - K/V tiles streamed with cp.async, two stages: tile j+1 is in flight while tile j is computed.
//     Shared memory rows are XOR-swizzled by 16-byte chunk (chunk ^ (row & 7)): ldmatrix and the
//     cp.async stores are bank-conflict free without padding.
//   - One warp owns 16 query rows: S, P, m and l never leave its registers; P is reused in registers
//     as the A operand of P V (the m16n8 accumulator layout is the m16k16 A layout, two tiles wide).
//   - exp2 with the softmax scale pre-multiplied by log2(e): p = exp2(S * scale * log2e - m * scale * log2e),
//     one FFMA and one MUFU.EX2 per score.
//   - Causal: bottom-right aligned (query i sees keys j <= i + Lk - Lq, as in FlashAttention >= 2.1);
//     key tiles entirely above the diagonal are never loaded; only tiles the diagonal or the Lk tail
//     crosses pay for the mask. Rows that see no key return 0 (never NaN).
// Two kernels, chosen at run time (run_fast; FastPath):
//   - wgmma (kernels/rungs/flash_attention_fast_sm90.cuh) on a compute-capability-9.0 GPU (H100/H200): one
//     warpgroup per 64 query rows, S = Q K^T and O += P V on wgmma.m64nNk16 (operands from 128-byte
//     swizzled shared memory through matrix descriptors, P from registers), the softmax of tile t
//     overlapped with P_{t-1} V_{t-1} on the tensor cores; Q/K/V tiles brought in by the bulk tensor
//     copy engine (TMA) from a producer warpgroup, three stages deep on mbarriers; the two consumer
//     warpgroups take turns on the tensor cores. (A first wgmma kernel, cp.async loads by all threads
//     and a block barrier per tile, was removed in issue 29: docs/perf-log.md, v2, has its figures.)
//   - mma.sync (this header's FastTraits, flash_attention_fast.cu) everywhere else, on sm_90 where no
//     tensor map can be made for the strides given, and when KL_FLASH_FAST_PATH=mma is set in the
//     environment (=wgmma or another wgmma path's name picks that kernel).
// Tile shapes (compile-time traits, FastTraits<kHeadDim> for mma.sync, FastTraitsSm90Tma<kHeadDim> for wgmma):
//   mma.sync d  64: kBlockM 128 (8 warps x 16 rows), kBlockN  64, 2 K/V stages, 48 KiB shared memory, 2 blocks/SM
//   mma.sync d 128: kBlockM 128 (8 warps x 16 rows), kBlockN  64, 2 K/V stages, 96 KiB shared memory, 1 block/SM
//   mma.sync d 256: kBlockM 128 (8 warps x 16 rows), kBlockN  32, 2 K/V stages, 128 KiB shared memory, 1 block/SM
//                (O is 16 x 256 fp32 per warp: 128 registers a thread; Q re-read from shared memory)
//   wgmma (TMA)  d 64, 128: kBlockM 128 (2 warpgroups x 64 rows + a producer warpgroup), kBlockN 128, 3 K/V stages,
//                112 / 224 KiB (+1 KiB alignment, mbarriers), 1 block/SM
//   wgmma (TMA)  d 256: kBlockM 128, kBlockN 80, 2 K/V stages: Q 64 KiB + 2 x (K 40 + V 40) KiB = 224 KiB
//                (d 128's kBlockN 128 x 3 stages would need 448 KiB; the limit is 227 KiB); O is 64 x 256 fp32
//                per warpgroup, 128 registers a thread (FlashAttention-3 uses the same 128 x 80 x 2 at d 256)
//   (the persistent paths' options, FastTraitsSm90TmaOpt below, change kBlockM at d 64 and the Q tiles at d 128)
// Layout: [B, H, L, d] with the last dimension contiguous (strides in FastParams, in elements).
// Grouped-query attention: k and v may have H_kv heads where H_kv divides H (the query heads); query
// head h reads kv head h / (H / H_kv) (kv_head_of, kernels/rungs/flash_attention.h). The same kernels:
// only the index map of the K/V pointers (and the K/V tensor maps' head coordinate) changes; H_kv = H
// is plain multi-head attention.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/measure/timeline_trace.h"
#include "kernels/rungs/flash_attention.h"  // kv_head_of, gqa_heads_message: grouped-query attention
#include "kernels/runtime/array.h"
#include "kernels/runtime/backend.h"
#include "kernels/measure/bench.h"
#include "kernels/runtime/errors.h"

#if defined(__CUDACC__)
#define KL_FA_HD __host__ __device__ __forceinline__
#else
#define KL_FA_HD inline
#endif

namespace kl::flash_attention {

enum class FastDtype { Bf16, Fp16 };

// A plain params struct (FlashAttention's Flash_fwd_params, cut down). Pointers are device pointers to
// elements of `dtype`; strides are in elements; row strides, head strides and batch strides must be
// multiples of 8 elements (16 bytes) and every pointer 16-byte aligned (cp.async moves 16 bytes).
struct FastParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  int B = 0, H = 0, Lq = 0, Lk = 0, d = 0;
  int H_kv = 0;  // heads of k and v (grouped-query attention), dividing H; 0 means H
  int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_row_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_row_stride = 0;
  int64_t o_batch_stride = 0, o_head_stride = 0, o_row_stride = 0;
  float scale = 0;  // softmax scale, usually 1/sqrt(d); finite and > 0
  bool causal = false;
  FastDtype dtype = FastDtype::Bf16;
};
using FlashParams = FastParams;

// The heads of k and v: H_kv, or H when H_kv is 0; and the query heads per kv head, H / H_kv, which
// the launchers pass to the kernels beside p (kv_head_of(h, group) in their pointer prologues).
inline int kv_heads(const FastParams& p) { return p.H_kv > 0 ? p.H_kv : p.H; }
inline int kv_group(const FastParams& p) { return p.H / kv_heads(p); }

// Fills the strides for contiguous tensors: q and o [B, H, Lq, d], k and v [B, H_kv, Lk, d].
inline void set_contiguous_strides(FastParams& p) {
  const int64_t d = p.d;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = d;
  p.q_head_stride = p.o_head_stride = int64_t(p.Lq) * d;
  p.k_head_stride = p.v_head_stride = int64_t(p.Lk) * d;
  p.q_batch_stride = p.o_batch_stride = int64_t(p.H) * p.Lq * d;
  p.k_batch_stride = p.v_batch_stride = int64_t(kv_heads(p)) * p.Lk * d;
}

// ---- [SECTION] tile shapes as compile-time traits ---------------------------------------------------
template <int kHeadDim_>
struct FastTraits;
template <>
struct FastTraits<64> {
  static constexpr int kHeadDim = 64, kBlockM = 128, kBlockN = 64, kNWarps = 8, kStages = 2;
  // Two blocks per SM (16 warps): 48 KiB smem each, registers capped at 128 per thread: O (32) + S (32)
  // and Q's A fragments re-read from shared memory each k-step (kQInRegs false); kBlockN = 128 or Q
  // held in registers spilled more under that cap. ptxas reported an 8-byte spill here (one 64-bit
  // value) until the grouped-query prologue (now 127 registers, no spill: the allocation moves with
  // small changes); kMinBlocksPerSm = 1 removed it then (163 registers, one block per SM): measure both.
  static constexpr int kMinBlocksPerSm = 2;
  static constexpr bool kQInRegs = false;
};
template <>
struct FastTraits<128> {
  static constexpr int kHeadDim = 128, kBlockM = 128, kBlockN = 64, kNWarps = 8, kStages = 2;
  // One block per SM (8 warps): O (64 regs) + S (32) + Q's A fragments held in registers (32).
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr bool kQInRegs = true;
};
template <>
struct FastTraits<256> {
  static constexpr int kHeadDim = 256, kBlockM = 128, kBlockN = 32, kNWarps = 8, kStages = 2;
  // One block per SM (8 warps, 128 KiB): O (128 regs) + S (16); Q's A fragments (64 more) would not fit
  // under 255, so they are re-read from shared memory each k-step (kQInRegs false). ptxas (nvcc 13,
  // sm_90): 250 registers, no spill; kBlockN = 64 spilled 216 bytes at 255.
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr bool kQInRegs = false;
};
// The wgmma kernel (sm_90a) with bulk tensor copies (TMA): two consumer warpgroups of 64 query rows
// (kNWarps = 8 compute warps) and a producer warpgroup (its registers handed to the consumers with
// setmaxnreg; one lane issues the copies): kThreads = 384. kBlockM 128 for every head dim; at d = 256 the shared-memory limit shrinks
// the K/V tiles to 80 keys and the stages to 2 (Q 64 KiB + 2 x 80 KiB = 224 KiB of the 227 KiB).
template <int kHeadDim_>
struct FastTraitsSm90Tma {
  static constexpr int kHeadDim = kHeadDim_, kBlockM = 128;
  static constexpr int kBlockN = kHeadDim_ == 256 ? 80 : 128, kStages = kHeadDim_ == 256 ? 2 : 3;
  static constexpr int kNWarps = 8;
  static constexpr int kThreads = kNWarps * 32 + 128;
  static constexpr int kQBufs = 1;
  static constexpr bool kLateRescale = false;
  static constexpr bool kStoreOByTma = false;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;  // setmaxnreg: 128 x 24 + 256 x 240 <= 64 Ki
};
// The TMA tiles with options, for the persistent paths and wgmma-late: kQBufs Q tiles in shared memory.
// Two (wgmma-persistent-q2-late) let the producer load the next tile's Q while the consumers still read
// the current one; at d = 128 the second Q takes the place of one K/V stage (Q 2 x 32 KiB + 2 x 64 KiB =
// 192 KiB); d = 256 has no room for it (Q 64 KiB + 2 x 80 KiB = 224 KiB already). kLateRescale (the -late
// paths): O is rescaled by the last softmax's alpha after S of the next tile is issued, while the tensor
// cores compute it, instead of before (FlashAttention-3's order); the same arithmetic in the same order on O.
// kBlockM_ 192 (wgmma-persistent-m192, d = 64 only, FlashAttention-3's tile there): three consumer warpgroups
// of 64 rows taking turns in a ring, 512 threads, setmaxnreg 24 / 160 (128 x 24 + 384 x 160 <= 64 Ki), and two
// Q tiles (2 x 24 KiB + 3 x 32 KiB = 144 KiB): with one, the next tile's Q could only load after the third
// warpgroup's last S, and the first warpgroup waited for it (0.2-1.5 us a tile in the recorded timeline).
template <int kHeadDim_, int kQBufs_ = 1, bool kLateRescale_ = false, int kBlockM_ = 128>
struct FastTraitsSm90TmaOpt : FastTraitsSm90Tma<kHeadDim_> {
  static_assert(kQBufs_ == 1 || (kQBufs_ == 2 && kHeadDim_ < 256), "d = 256 has shared memory for one Q tile");
  static_assert(kBlockM_ == 128 || (kBlockM_ == 192 && kHeadDim_ == 64), "192 query rows: d = 64 only");
  static constexpr int kQBufs = kQBufs_;
  static constexpr bool kLateRescale = kLateRescale_;
  // The persistent kernel writes O through a shared-memory tile of its own and bulk tensor stores, which the
  // consumers do not wait for: at d = 128 with two Q tiles, whose 192 KiB leave room for the 32 KiB, and on
  // 192 query rows at d = 64 (two Q tiles and three K/V stages, 144 KiB: room for O's 24 KiB).
  static constexpr bool kStoreOByTma = (kQBufs_ == 2 && kHeadDim_ == 128) || kBlockM_ == 192;
  static constexpr int kStages = kQBufs_ == 2 && kHeadDim_ == 128 ? 2 : FastTraitsSm90Tma<kHeadDim_>::kStages;
  static constexpr int kBlockM = kBlockM_, kNWarps = kBlockM_ / 16, kThreads = kNWarps * 32 + 128;
  static constexpr int kConsumerRegs = kBlockM_ == 192 ? 160 : 240;
};
// wgmma-persistent-q2-late-n160 (d = 128): Base's tiles on 160 keys a tile (its 2 stages), O stored from registers:
// Q 2 x 32 KiB + 2 x (40 + 40) KiB = 224 KiB leaves no room for O's 32 KiB tile.
template <class Base, int kBlockN_>
struct FastTraitsBlockN : Base {
  static constexpr int kBlockN = kBlockN_;
  static constexpr bool kStoreOByTma = false;
};
// kQBufs where the traits name it, else 1.
template <class Tr>
constexpr auto fast_q_tiles(int) -> decltype(Tr::kQBufs) { return Tr::kQBufs; }
template <class Tr>
constexpr int fast_q_tiles(long) { return 1; }
// Whether the traits write O through shared memory and bulk tensor stores (kStoreOByTma), else false.
template <class Tr>
constexpr auto fast_o_staged(int) -> decltype(Tr::kStoreOByTma) { return Tr::kStoreOByTma; }
template <class Tr>
constexpr bool fast_o_staged(long) { return false; }
// The rows of one bulk store of O: a warp's 16 on 192 rows (each warp stores its own), a warpgroup's 64 elsewhere.
template <class Tr>
constexpr int fast_o_box_rows() { return Tr::kBlockM == 192 ? 16 : 64; }
// The threads that issue those stores and wait for them, those whose index has these low bits clear: each warp's
// first lane on 192 rows, each warpgroup's first thread elsewhere.
template <class Tr>
constexpr int fast_o_issuer_mask() { return fast_o_box_rows<Tr>() == 16 ? 31 : 127; }
template <class Tr>
constexpr int64_t fast_smem_bytes() {
  // kQBufs x Q tile + kStages x (K tile + V tile) (+ the O tile where it is staged), 2-byte elements.
  return int64_t((fast_q_tiles<Tr>(0) + (fast_o_staged<Tr>(0) ? 1 : 0)) * Tr::kBlockM + 2 * Tr::kStages * Tr::kBlockN) *
         Tr::kHeadDim * 2;
}

// The head dimensions the fast kernels take.
constexpr const char* kFastHeadDimsText = "{64, 128, 256} for --variant fast";
inline bool fast_head_dim(int64_t d) { return d == 64 || d == 128 || d == 256; }

// The tile shapes at run time, for the panel and `list`. Throws InputError for an unsupported d.
struct FastTileShape {
  int head_dim = 0, block_m = 0, block_n = 0, warps = 0, stages = 0, q_tiles = 1;
  int64_t smem_bytes = 0;
  int o_tiles = 0;  // 1 where O goes out through a shared-memory tile (kStoreOByTma)
};
// Which kernel runs: wgmma on sm_90 (H100/H200), mma.sync elsewhere (fast_path() below says which). Each
// path a user can pick (KL_FLASH_FAST_PATH) is the by-shape default somewhere, or the baseline the timeline
// recordings compare against (docs/perf-log.md has the measurements; paths that were no shape's default
// were removed in issue 29, their figures kept there):
//   MmaSync (mma): the mma.sync kernel; off Hopper, and on sm_90 where no tensor map can be made for the
//     strides given.
//   Wgmma (wgmma): the bulk-tensor-copy (TMA) kernel with a producer warpgroup, one block per tile, O
//     rescaled right after each softmax: no shape's default, kept as the baseline the recordings of
//     "Inside the fast kernel" (docs/perf/timeline-h200.json) compare the defaults against.
//   WgmmaLate (wgmma-late): Wgmma with O rescaled while the next S runs on the tensor cores (kLateRescale):
//     long causal rows (Lq > 8192; d = 256: Lq > 4096) and d = 256 without the mask.
//   WgmmaPersistent (wgmma-persistent): the TMA kernel made persistent (one block per SM looping over tiles,
//     the next tile's loads under the current epilogue), in persistent_tile()'s order, causal tiles handed
//     out in a snake (persistent_index); Wgmma's tiles: d = 64 causal up to Lq = 8192.
//   WgmmaPersistentM192 (wgmma-persistent-m192): at d = 64 the persistent kernel on 192 query rows over
//     three consumer warpgroups and two Q tiles (elsewhere the same kernel as wgmma-persistent): d = 64 without
//     the mask.
//   WgmmaPersistentQ2Late (wgmma-persistent-q2-late): the persistent kernel with two Q tiles
//     (FastTraitsSm90TmaOpt; a tile's first S does not wait for its Q; d = 256: one Q tile) and the late
//     rescale: d = 128, but long causal rows and Lq > 2048 without the mask.
//   WgmmaPersistentQ2LateN160 (wgmma-persistent-q2-late-n160): at d = 128 q2-late on 160 keys a tile, O stored
//     from registers (no room for its tile; elsewhere q2-late's kernel): d = 128 without the mask past Lq = 2048.
//   WgmmaPersistentLate (wgmma-persistent-late): one Q tile, the late rescale: d = 256 causal up to Lq = 4096.
// WgmmaByShape (the default on sm_90a) is no kernel of its own: fast_kernel_for() below picks one of the
// others for each shape.
enum class FastPath {
  MmaSync,
  Wgmma,
  WgmmaPersistent,
  WgmmaPersistentQ2Late,
  WgmmaPersistentLate,
  WgmmaLate,
  WgmmaPersistentM192,
  WgmmaPersistentQ2LateN160,
  WgmmaByShape
};
inline const char* fast_path_name(FastPath path) {
  switch (path) {
    case FastPath::WgmmaByShape: return "wgmma-by-shape";
    case FastPath::Wgmma: return "wgmma";
    case FastPath::WgmmaPersistent: return "wgmma-persistent";
    case FastPath::WgmmaPersistentQ2Late: return "wgmma-persistent-q2-late";
    case FastPath::WgmmaPersistentLate: return "wgmma-persistent-late";
    case FastPath::WgmmaLate: return "wgmma-late";
    case FastPath::WgmmaPersistentM192: return "wgmma-persistent-m192";
    case FastPath::WgmmaPersistentQ2LateN160: return "wgmma-persistent-q2-late-n160";
    default: return "mma.sync";
  }
}
// The kernels KL_FLASH_FAST_PATH (and the timeline's --path) may name besides mma and auto (each needs the
// sm_90a code), in the order their messages list them: one block per tile, then the persistent kernels.
constexpr FastPath kNamedWgmmaPaths[] = {FastPath::Wgmma,
                                         FastPath::WgmmaLate,
                                         FastPath::WgmmaPersistent,
                                         FastPath::WgmmaPersistentQ2Late,
                                         FastPath::WgmmaPersistentLate,
                                         FastPath::WgmmaPersistentM192,
                                         FastPath::WgmmaPersistentQ2LateN160};
// True for the persistent kernels (built on the TMA kernel's tiles, FastTraitsSm90Tma).
inline bool fast_path_persistent(FastPath path) {
  return path == FastPath::WgmmaPersistent || path == FastPath::WgmmaPersistentQ2Late ||
         path == FastPath::WgmmaPersistentLate || path == FastPath::WgmmaPersistentM192 ||
         path == FastPath::WgmmaPersistentQ2LateN160;
}
// kNamedWgmmaPaths' names, joined by ", ".
inline std::string fast_named_paths_text() {
  std::string s;
  for (FastPath path : kNamedWgmmaPaths) s += (s.empty() ? "" : ", ") + std::string(fast_path_name(path));
  return s;
}
inline bool fast_path_tma(FastPath path) {
  return path == FastPath::Wgmma || path == FastPath::WgmmaLate || path == FastPath::WgmmaByShape ||
         fast_path_persistent(path);
}
// The kernel WgmmaByShape runs for p, as measured (docs/perf-log.md: "two Q tiles and the late rescale", H200,
// 2026-12-01; "192 query rows at d = 64", H200, 2026-12-02; the by-shape default checked in turn with cuDNN,
// 2026-12-06): long causal rows (Lq > 8192; d = 256: Lq > 4096), whose uneven tiles the hardware's block
// scheduler balances better than the persistent kernel's static order, take the one-block-per-tile TMA kernel
// with the late rescale (wgmma-late), as does d = 256 non-causal past Lq = 2048; elsewhere the persistent
// kernel:
//   d = 64: 192 query rows without the mask (1.04x to 1.17x over 128 rows; its two Q tiles and O by bulk stores
//     1.09x at Lq = 512, 1.04x at 1024, in turn with cuDNN, H100, 2026-12-06) and with it from Lq = 1025 to 4096
//     (1.07x at 4096 on both boards, about 1.01x at 2048); with the mask up to Lq = 512 two Q tiles and the
//     late rescale (1.05x), else 128 rows (192 rows read 0.87x to 0.99x of them there);
//   d = 128: two Q tiles and the late rescale (1.02x to 1.24x over the plain TMA kernel up to L = 8192), without
//     the mask past Lq = 2048 on 160 keys a tile (0.99x to 1.12x over 128 keys from L = 4096, geometric mean 1.04x
//     and 1.07x, in two passes in turn with cuDNN, H100, 2026-12-07; 1.01x to 1.02x at 2048, within the machine's
//     spread; 0.84x to 0.93x at 512 and 1024);
//   d = 256: the late rescale (one Q tile: no room for two), also without the mask up to Lq = 2048 (1.01x to
//     1.07x over wgmma-late).
// Other paths: themselves.
inline bool fast_persistent_pays(const FastParams& p) {
  return p.d == 256 ? p.Lq <= (p.causal ? 4096 : 2048) : !p.causal || p.Lq <= 8192;
}
inline FastPath fast_kernel_for(FastPath path, const FastParams& p) {
  if (path != FastPath::WgmmaByShape) return path;
  if (!fast_persistent_pays(p)) return FastPath::WgmmaLate;
  if (p.d == 64 && p.causal) {
    if (p.Lq <= 512) return FastPath::WgmmaPersistentQ2Late;
    return p.Lq > 1024 && p.Lq <= 4096 ? FastPath::WgmmaPersistentM192 : FastPath::WgmmaPersistent;
  }
  if (p.d == 64) return FastPath::WgmmaPersistentM192;
  if (p.d == 128 && !p.causal && p.Lq > 2048) return FastPath::WgmmaPersistentQ2LateN160;
  if (p.d == 128) return FastPath::WgmmaPersistentQ2Late;
  return FastPath::WgmmaPersistentLate;
}
// f(Tr{}) for the 128-row TMA tiles with options kQBufs, kLate at head dim d (64, 128 or 256; d = 256 has room
// for one Q tile only).
template <int kQBufs, bool kLate, class F>
auto with_tma_opt(int d, F&& f) {
  if (d == 64) return f(FastTraitsSm90TmaOpt<64, kQBufs, kLate>{});
  if (d == 128) return f(FastTraitsSm90TmaOpt<128, kQBufs, kLate>{});
  return f(FastTraitsSm90TmaOpt<256, 1, kLate>{});
}
// f(Tr{}) for the traits the persistent path `path` (one of fast_path_persistent()'s) runs at head dim d (64,
// 128 or 256): the one map from a persistent path to its kernel, which the launch (run_fast_wgmma_persistent)
// and the tile shapes below both take. Each option differs from the plain persistent kernel at the head dims
// it names.
template <class F>
auto with_persistent_traits(FastPath path, int d, F&& f) {
  switch (path) {
    case FastPath::WgmmaPersistentQ2Late: return with_tma_opt<2, true>(d, f);
    case FastPath::WgmmaPersistentLate: return with_tma_opt<1, true>(d, f);
    case FastPath::WgmmaPersistentM192:
      return d == 64 ? f(FastTraitsSm90TmaOpt<64, 2, false, 192>{}) : with_tma_opt<1, false>(d, f);
    case FastPath::WgmmaPersistentQ2LateN160:  // d = 128 only; elsewhere q2-late's kernel
      return d == 128 ? f(FastTraitsBlockN<FastTraitsSm90TmaOpt<128, 2, true>, 160>{}) : with_tma_opt<2, true>(d, f);
    default: return with_tma_opt<1, false>(d, f);
  }
}
inline FastTileShape fast_tile_shape(int d, FastPath path = FastPath::MmaSync) {
  auto make = [](auto tr) {
    using Tr = decltype(tr);
    return FastTileShape{Tr::kHeadDim, Tr::kBlockM, Tr::kBlockN, Tr::kNWarps, Tr::kStages, fast_q_tiles<Tr>(0),
                         fast_smem_bytes<Tr>(), fast_o_staged<Tr>(0) ? 1 : 0};
  };
  if (fast_path_persistent(path) && fast_head_dim(d)) return with_persistent_traits(path, d, make);
  const bool tma = fast_path_tma(path);
  if (d == 64) return tma ? make(FastTraitsSm90Tma<64>{}) : make(FastTraits<64>{});
  if (d == 128) return tma ? make(FastTraitsSm90Tma<128>{}) : make(FastTraits<128>{});
  if (d == 256) return tma ? make(FastTraitsSm90Tma<256>{}) : make(FastTraits<256>{});
  throw InputError(out_of_range_message("d", std::to_string(d), kFastHeadDimsText));
}

// ---- [SECTION] pure index logic, shared by the kernel and the CPU tests ------------------------------
// Bottom-right causal alignment: query i (0-based, of Lq) sees key j (of Lk) iff j <= i + (Lk - Lq).
KL_FA_HD bool key_visible(int i, int j, int Lq, int Lk, bool causal) {
  return j < Lk && (!causal || j <= i + (Lk - Lq));
}
KL_FA_HD int ceil_div(int a, int b) { return (a + b - 1) / b; }
// The same rule as one bound per row: key j is visible to query i iff j <= last_visible_key(i)
// (-1 or less when the row sees nothing). The kernel keeps this bound for its two rows in registers.
KL_FA_HD int last_visible_key(int i, int Lq, int Lk, bool causal) {
  const int diag = i + (Lk - Lq);
  return causal && diag < Lk - 1 ? diag : Lk - 1;
}

// Number of K/V tiles query block `m_block` visits: all ceil(Lk / block_n) without a mask; with the
// causal mask only up to the tile holding the last key its last row sees (0 when no row of the block
// sees any key: the block writes zeros). Tiles n >= this count hold no visible key for any row.
KL_FA_HD int key_tiles_for_block(int m_block, int Lq, int Lk, int block_m, int block_n, bool causal) {
  const int all = ceil_div(Lk, block_n);
  if (!causal) return all;
  const int last_key = m_block * block_m + block_m - 1 + (Lk - Lq);  // last row's last visible key
  if (last_key < 0) return 0;
  const int upto = last_key / block_n + 1;
  return upto < all ? upto : all;
}

// True when some (row, key) pair of tile (m_block, n_block) is masked: the Lk tail crosses the tile or
// (causal) the diagonal does. False means every key of the tile is visible to every row of the block.
KL_FA_HD bool tile_needs_mask(int m_block, int n_block, int Lq, int Lk, int block_m, int block_n, bool causal) {
  const int key_end = n_block * block_n + block_n;  // one past the tile's last key
  if (key_end > Lk) return true;
  // The first row of the block sees the fewest keys: up to m_block*block_m + Lk - Lq.
  return causal && key_end - 1 > m_block * block_m + (Lk - Lq);
}

// The persistent kernels' tile order: tile index idx in [0, n_m * H * B) to (query block, head, batch), the
// non-persistent grid's linear order (query blocks fastest, then heads, then batches; causal query blocks
// last-first inside each head, as the grid launches them). Which block takes which idx: persistent_index()
// below. (A longest-first order over all heads, and a quarter of the softmax's exp2 on the FMA pipe, were
// measured on the H200 and not taken: docs/perf-log.md.)
struct PersistentTile {
  int m_block, h, b;
};
KL_FA_HD PersistentTile persistent_tile(int idx, int n_m, int H, int B, bool causal) {
  PersistentTile t;
  const int m = idx % n_m, rest = idx / n_m;
  t.m_block = causal ? n_m - 1 - m : m;
  t.h = rest % H;
  t.b = rest / H;
  return t;
}
// Which tile block c (of G) takes in its k-th step: c + k G (static round robin) or, with snake, c in even
// steps and G - 1 - c in odd ones (k G + G - 1 - c): over a heaviest-first order the heavy and the light
// ends of consecutive steps pair up, so every block's total work comes out nearly equal (the plain round
// robin over the causal grid order gives block 0 the heaviest query blocks of each head and block 64 the
// lightest: 1568 against 544 K/V tiles at L = 16384, d = 128). Indices >= the tile count are skipped.
KL_FA_HD int persistent_index(int k, int c, int G, bool snake) { return k * G + (snake && (k & 1) ? G - 1 - c : c); }

// Checks a FastParams: InputError naming the parameter, its value and the allowed range.
inline void validate(const FastParams& p) {
  auto bad = [](const char* name, const std::string& value, const std::string& allowed) {
    throw InputError(out_of_range_message(name, value, allowed));
  };
  if (!fast_head_dim(p.d)) bad("d", std::to_string(p.d), kFastHeadDimsText);
  if (p.B < 1 || p.B > 65535) bad("B", std::to_string(p.B), "[1, 65535]");
  if (p.H < 1 || p.H > 65535) bad("H", std::to_string(p.H), "[1, 65535]");
  if (p.H_kv < 0 || p.H_kv > p.H || (p.H_kv > 0 && p.H % p.H_kv != 0))
    bad("H_kv", std::to_string(p.H_kv), "a divisor of H=" + std::to_string(p.H) + " (grouped-query attention), or 0 for H");
  constexpr int kMaxL = 1 << 30;
  if (p.Lq < 1 || p.Lq > kMaxL) bad("Lq", std::to_string(p.Lq), "[1, 2^30]");
  if (p.Lk < 1 || p.Lk > kMaxL) bad("Lk", std::to_string(p.Lk), "[1, 2^30]");
  if (!(std::isfinite(p.scale) && p.scale > 0)) bad("scale", std::to_string(p.scale), "finite and > 0");
  if (p.dtype != FastDtype::Bf16 && p.dtype != FastDtype::Fp16) bad("dtype", "?", "bf16, fp16");
  const void* ptrs[4] = {p.q, p.k, p.v, p.o};
  const char* names[4] = {"q", "k", "v", "o"};
  for (int i = 0; i < 4; ++i)
    if (!ptrs[i] || reinterpret_cast<uintptr_t>(ptrs[i]) % 16 != 0)
      bad(names[i], ptrs[i] ? "misaligned pointer" : "null", "a 16-byte aligned device pointer");
  const int64_t strides[12] = {p.q_batch_stride, p.q_head_stride, p.q_row_stride, p.k_batch_stride,
                               p.k_head_stride,  p.k_row_stride,  p.v_batch_stride, p.v_head_stride,
                               p.v_row_stride,   p.o_batch_stride, p.o_head_stride, p.o_row_stride};
  for (int i = 0; i < 12; ++i)
    if (strides[i] < 0 || strides[i] % 8 != 0)
      bad("stride", std::to_string(strides[i]), "a non-negative multiple of 8 elements (16 bytes)");
  for (int i = 2; i < 12; i += 3)
    if (strides[i] < p.d) bad("row stride", std::to_string(strides[i]), ">= d = " + std::to_string(p.d));
}

// Parses "bf16" / "fp16" (InputError otherwise).
inline FastDtype parse_fast_dtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return FastDtype::Bf16;
  if (s == "fp16" || s == "float16" || s == "half") return FastDtype::Fp16;
  throw InputError(out_of_range_message("dtype", s, "bf16, fp16"));
}

// Checks the shapes run_fast_host takes: q [.., Lq, d], k and v [.., Lk, d] with rank 2, 3 or 4
// ([L, d], [H, L, d], [B, H, L, d]) and equal batch; k and v's heads H_kv divide q's H (grouped-query
// attention). Fills B, H, H_kv, Lq, Lk, d.
inline void check_host_shapes(const Array& q, const Array& k, const Array& v, FastParams& p) {
  const size_t r = q.shape.size();
  if (r < 2 || r > 4)
    throw InputError("q has shape " + q.shape_text() + ": allowed [L, d], [H, L, d] or [B, H, L, d]");
  if (k.shape.size() != r || v.shape.size() != r)
    throw InputError("q " + q.shape_text() + ", k " + k.shape_text() + ", v " + v.shape_text() +
                     ": q, k and v must have the same rank");
  if (k.shape != v.shape)
    throw InputError("k " + k.shape_text() + " and v " + v.shape_text() + " must have the same shape");
  if (r == 4 && q.shape[0] != k.shape[0])
    throw InputError("q " + q.shape_text() + " and k " + k.shape_text() + " differ in the batch dimension");
  const int64_t h_kv = r >= 3 ? k.shape[r - 3] : 1, h_q = r >= 3 ? q.shape[r - 3] : 1;
  check_kv_heads(h_kv, h_q);
  if (q.shape[r - 1] != k.shape[r - 1])
    throw InputError("q " + q.shape_text() + " and k " + k.shape_text() + " differ in d");
  const int64_t d = q.shape[r - 1];
  if (!fast_head_dim(d)) throw InputError(out_of_range_message("d", std::to_string(d), kFastHeadDimsText));
  const int64_t B = r == 4 ? q.shape[0] : 1, H = r >= 3 ? q.shape[r - 3] : 1;
  const int64_t Lq = q.shape[r - 2], Lk = k.shape[r - 2];
  if (B < 1 || B > 65535) throw InputError(out_of_range_message("B", std::to_string(B), "[1, 65535]"));
  if (H < 1 || H > 65535) throw InputError(out_of_range_message("H", std::to_string(H), "[1, 65535]"));
  if (Lq < 1 || Lq > (1 << 30)) throw InputError(out_of_range_message("Lq", std::to_string(Lq), "[1, 2^30]"));
  if (Lk < 1 || Lk > (1 << 30)) throw InputError(out_of_range_message("Lk", std::to_string(Lk), "[1, 2^30]"));
  p.B = int(B), p.H = int(H), p.H_kv = int(h_kv), p.Lq = int(Lq), p.Lk = int(Lk), p.d = int(d);
}

// ---- [SECTION] the fast benches' shapes --------------------------------------------------------------
constexpr int kGqaBenchKvHeads = 2;  // bench_fast's grouped-query rows: H = 16 over 2 kv heads at d = 128

// One shape of the fast benches (this rung's bench_fast and rung 6's): H_kv = 0 is multi-head (k and v
// with H heads), else grouped-query (k and v with H_kv heads).
struct FastBenchShape {
  int B = 0, H = 0, H_kv = 0, L = 0, d = 0;
  bool causal = false;
};
// What both fast benches time, in their row order: B*L = `tokens` (16384; 1024 when quick) and H*d = 2048
// for every shape; for each d of `head_dims`, L in {512, ..., 16384} (512 only when quick), non-causal then
// causal. With `gqa`, then the grouped-query rows: d = 128, H = 16 over kGqaBenchKvHeads kv heads,
// L in {1024, 4096, 16384} (512 when quick), non-causal then causal.
struct FastBenchSpec {
  int64_t tokens = 0, width = 0;  // B * L and H * d
  std::vector<FastBenchShape> shapes;
  int64_t elements() const { return tokens * width; }  // of each [B, H, L, d] operand
};
inline FastBenchSpec fast_bench_spec(bool quick, const std::vector<int>& head_dims, bool gqa) {
  FastBenchSpec spec;
  spec.tokens = quick ? 1024 : 16384;
  spec.width = 2048;
  auto add = [&](int d, const std::vector<int>& lengths, int h_kv) {
    for (int L : lengths)
      for (bool causal : {false, true})
        spec.shapes.push_back(FastBenchShape{int(spec.tokens / L), int(spec.width / d), h_kv, L, d, causal});
  };
  const std::vector<int> lengths = quick ? std::vector<int>{512} : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384};
  for (int d : head_dims) add(d, lengths, 0);  // H = 2048 / d: 32, 16, 8 heads at d = 64, 128, 256
  // Grouped-query attention: H = 16 query heads over 2 kv heads at d = 128 (the ratio 8 of Llama-3-70B's
  // 64 query heads over 8), the same B*L and H*d as above: each row compares with the H = 16 d = 128 row
  // of the same L and mask.
  if (gqa) add(128, quick ? std::vector<int>{512} : std::vector<int>{1024, 4096, 16384}, kGqaBenchKvHeads);
  return spec;
}
// "B=.. H=.. [Hkv=..] L=.. d=.. causal|non-causal": the start of a fast bench row's shape.
inline std::string fast_bench_shape_text(const FastBenchShape& s) {
  return "B=" + std::to_string(s.B) + " H=" + std::to_string(s.H) +
         (s.H_kv > 0 ? " Hkv=" + std::to_string(s.H_kv) : std::string()) + " L=" + std::to_string(s.L) +
         " d=" + std::to_string(s.d) + (s.causal ? " causal" : " non-causal");
}
// The shapes a bench times when `list` (KL_FLASH_BENCH_SHAPES: comma-separated parts of row names, e.g.
// "Hkv=2 L=1024 d=128 non-causal,B=1 H=8 L=16384 d=256") is given: for each part in the list's order, the
// spec's shapes whose fast_bench_shape_text contains it, so an order (or a shape timed twice) can be asked
// for; an empty list keeps the spec. A part that names no shape is an InputError naming it.
inline FastBenchSpec select_bench_shapes(const FastBenchSpec& spec, const std::string& list) {
  if (list.empty()) return spec;
  FastBenchSpec out = spec;
  out.shapes.clear();
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string part = list.substr(start, comma - start);
    start = comma + 1;
    size_t found = 0;
    for (const FastBenchShape& s : spec.shapes)
      if (!part.empty() && fast_bench_shape_text(s).find(part) != std::string::npos) out.shapes.push_back(s), ++found;
    if (found == 0)
      throw InputError("KL_FLASH_BENCH_SHAPES: \"" + part + "\" names none of this bench's " +
                       std::to_string(spec.shapes.size()) + " shapes (parts of its row names, e.g. \"" +
                       (spec.shapes.empty() ? std::string() : fast_bench_shape_text(spec.shapes.back())) +
                       "\"; comma-separated)");
  }
  return out;
}
// select_bench_shapes with the environment's KL_FLASH_BENCH_SHAPES (unset: every shape).
inline FastBenchSpec bench_shapes_from_env(const FastBenchSpec& spec) {
  const char* list = std::getenv("KL_FLASH_BENCH_SHAPES");
  return select_bench_shapes(spec, list ? list : "");
}

// ---- [SECTION] entry points (CUDA backend only) ------------------------------------------------------

#ifdef KL_HAS_CUDA
// InputError "<what> needs a CUDA device: <why>" where the process sees none (both fast variants' check).
void require_cuda_device(const std::string& what);

// Runs the forward pass on the current device, default stream, asynchronously. Validates first.
// Takes the kernel fast_path() names.
void run_fast(const FastParams& p);
// The same with the kernel `path` names (WgmmaByShape: fast_kernel_for's pick), the environment not read;
// a path that cannot run here is an InputError, as fast_path() gives for the environment's.
void run_fast_path(const FastParams& p, FastPath path);

// ---- timeline recording (issue 30): the instrumented kernels (flash_attention_fast_timeline.sm90a.cu) ----
// The instrumented build covers the bulk-tensor-copy kernels: Wgmma, WgmmaLate and every persistent path, bf16,
// d = 64 and 128. What a recorded launch of `path` (not WgmmaByShape: resolve it with fast_kernel_for) makes for
// p: its CTAs, the lanes each records (lane w: consumer warpgroup w; the last: the producer), its tiles, whether
// it is persistent, and the launch's name. InputError for another path, d, dtype, or where the instrumented
// kernels cannot run (the message says which).
struct FastTracedShape {
  int ctas = 0, lanes = 0, block_m = 0, block_n = 0;
  bool persistent = false;
  std::string launch;
};
FastTracedShape fast_traced_shape(const FastParams& p, FastPath path);
// Runs the instrumented kernel of `path` on the default stream, asynchronously: its output is the plain
// kernel's, and the CTAs trace names stamp their phases into trace.buf (kernels/measure/timeline_trace.h).
void run_fast_traced(const FastParams& p, FastPath path, const timeline::TraceArgs& trace);

// The kernel run_fast takes on the current device: WgmmaByShape on compute capability 9.0 when the sm_90a
// build was loaded, else MmaSync; KL_FLASH_FAST_PATH=mma|wgmma|wgmma-persistent|wgmma-persistent-q2-late|
// wgmma-persistent-late|wgmma-late|wgmma-persistent-m192|wgmma-persistent-q2-late-n160 in the environment
// overrides, auto (or unset) is the default (InputError when a wgmma kernel is asked for where it cannot run,
// or for another value: one line naming KL_FLASH_FAST_PATH, the value and the allowed values).
FastPath fast_path();
// The kernels directly (all validate first); run_fast_wgmma needs fast_wgmma_kernels_loaded(). It runs the
// TMA kernel (with late_rescale: wgmma-late's) where tensor maps can be made for p's strides and returns true,
// else the mma.sync kernel (false).
void run_fast_mma_sync(const FastParams& p);
bool run_fast_wgmma(const FastParams& p, bool late_rescale = false);
// The persistent kernel as `path` (one of fast_path_persistent()'s) names it: true when it ran, false when
// no tensor map could be made for p's strides (then run_fast runs run_fast_wgmma(p) instead).
bool run_fast_wgmma_persistent(const FastParams& p, FastPath path);
// True when the device is sm_90 and the driver loaded the sm_90a code (probed once, cached).
bool fast_wgmma_kernels_loaded();

// float32 host arrays in ([L, d], [H, L, d] or [B, H, L, d]; k and v may have fewer heads, dividing q's), converted to `dtype` ("bf16" | "fp16") on
// the device, the fast kernel, float32 out (shape of q). InputError for unsupported d, shapes, dtype,
// scale, or no CUDA device.
Array run_fast_host(const Array& q, const Array& k, const Array& v, bool causal, float scale,
                    const std::string& dtype);

// `bench flash-attention` rows for the fast variant: bf16, d in {64, 128, 256}, L in {512, ..., 16384} with
// B*L = 16384 and H*d = 2048 (H = 32, 16, 8), causal and not; TFLOP/s counting 4*B*H*Lq*Lk*d (halved for causal).
// Then grouped-query rows: d = 128, H = 16 query heads over kGqaBenchKvHeads kv heads ("Hkv=2" in the
// shape), L in {1024, 4096, 16384}, causal and not.
// `quick`: L = 512 only, few iterations. The CPU backend has no fast variant: no rows.
std::vector<bench::Row> bench_fast(Backend b, bool quick);
#else
inline FastPath fast_path() { return FastPath::MmaSync; }
inline void run_fast(const FastParams&) {
  throw InputError("flash-attention --variant fast needs the CUDA backend: this build has no CUDA");
}
inline Array run_fast_host(const Array& q, const Array& k, const Array& v, bool, float, const std::string& dtype) {
  FastParams p;
  check_host_shapes(q, k, v, p);
  parse_fast_dtype(dtype);
  throw InputError("flash-attention --variant fast needs the CUDA backend: this build has no CUDA");
}
inline std::vector<bench::Row> bench_fast(Backend, bool) { return {}; }
#endif

}  // namespace kl::flash_attention
