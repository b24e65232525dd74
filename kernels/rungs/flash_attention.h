// Rung 5: FlashAttention's tiled online softmax (the `teaching` variant), out = softmax(Q K^T * scale) V
// without ever holding all of K and V on chip. Same inputs, masks and conventions as rung 4
// (kernels/rungs/attention.h: Shape, Options, bottom-right causal alignment, rows that see nothing give 0),
// plus grouped-query attention: k and v may have Hkv heads where Hkv divides q's Hq, and query head h
// reads kv head h / (Hq / Hkv) (kv_head_of; Shape::kv_heads). Hkv = Hq is rung 4's multi-head case.
//
// One program (CUDA block) owns BLOCK_M query rows of one (batch, head) and streams K/V in tiles of
// BLOCK_N keys. Per query row it keeps a running max m, a running sum l and a partial output O
// (FlashAttention-2, Algorithm 1, in the paper's notation):
//     S      = Q_i K_j^T * scale                        (masked: -inf; tails past Lk and causal)
//     m_new  = max(m_old, rowmax(S))
//     alpha  = exp(m_old - m_new)
//     P      = exp(S - m_new)
//     l_new  = alpha * l_old + rowsum(P)
//     O_new  = alpha * O_old + P V_j
// and at the end out = O / l (0 where l = 0). Shared memory is fixed by the tile shape, not by Lk:
//     smem_bytes(BM, BN, d) = 4 * (BM*d [Q] + 2*BN*d [K, V] + BM*BN [S/P] + BM*d [O] + 3*BM [m, l, alpha])
// so there is no wall in Lk (tested to Lk = 65536 at d = 128). With causal masking, K/V tiles that no
// row of the block can see are skipped (never loaded); the trace marks them.
//
// Versions:
//   reference float64 on the host: rung 4's reference (attention::reference) per query head, on its kv head.
//   teaching  (CPU and CUDA) the loop above with plain loops over shared memory, 128 threads per block:
//             the editable source kernels/editable/sources/flash_attention.cu (kernel flash_teaching),
//             launched through editable::launch (nvcc's build on CUDA; on the CPU the same source against
//             the CPU prelude, the grid's programs in turn, a block's threads as fibers), or an edited
//             copy of it (run_teaching's `src`). Instrumented: an optional FlashTrace is stored by the
//             kernel, for every query row and every K/V tile step, m before/after, alpha, l before/after
//             and the tile's row sum, and for one chosen query block the S and P tiles and the partial O
//             after every step.
//   fast      (CUDA, separate files kernels/flash_attention_fast*) tensor cores; not in this file.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/rungs/attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/registry.h"

namespace kl::flash_attention {

using attention::Options;

// [SECTION] Shapes, with grouped-query attention ------------------------------------------------------
// Rung 4's shape (batch, heads = Hq, lq, lk, d) and the heads of k and v. Made implicitly from a rung-4
// shape (kv_heads 0: as many as q). Buffers: q and out [batch, heads, lq, d], k and v [batch, kv(), lk, d].
struct Shape : attention::Shape {
  int64_t kv_heads = 0;  // Hkv, dividing heads; 0 means heads (multi-head attention)
  Shape() = default;
  Shape(const attention::Shape& s) : attention::Shape(s) {}  // implicit: Hkv = Hq
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t kv_bh() const { return batch * kv(); }
  int64_t group() const { return heads / kv(); }  // query heads per kv head, Hq / Hkv
  std::string text() const;                        // rung 4's, with " Hkv=N" when Hkv != Hq
};

// Grouped-query attention's index map: query head h reads kv head h / group, group = Hq / Hkv >= 1 (1: h
// itself), computed once on the host so a kernel pays one unsigned division in its prologue. Both
// teaching backends and the fast kernels call it (host and device).
KL_ATTN_HD inline int kv_head_of(int h, int group) { return int(unsigned(h) / unsigned(group)); }
// The same on a flattened (batch, head) index bh = b * heads + h: the kv buffer's b * Hkv + h / group.
KL_ATTN_HD inline int64_t kv_bh_of(int64_t bh, int64_t heads, int64_t group) {
  return (bh / heads) * (heads / group) + kv_head_of(int(bh % heads), int(group));
}

// The one line that refuses kv heads not dividing q's: names Hkv, its value and the rule.
std::string gqa_heads_message(int64_t kv_heads, int64_t q_heads);
// Throws InputError (gqa_heads_message) unless 1 <= kv_heads <= heads and kv_heads divides heads.
void check_kv_heads(int64_t kv_heads, int64_t heads);

// The head dimensions this rung takes: rung 4's (16, 32, 64, 128) and 256 (its tiles then shrink to fit
// shared memory: smem_bytes below; rung 4's K/V wall does not apply here).
bool supported_head_dim(int d);
const char* head_dims_text();  // "16, 32, 64, 128, 256"

// Parses q ([L, d] or [B, Hq, L, d]) and k, v ([Lk, d] or [B, Hkv, Lk, d], Hkv dividing Hq) into a shape;
// otherwise rung 4's checks and messages (attention::shape_from_arrays), d as supported_head_dim.
Shape shape_from_arrays(const Array& q, const Array& k, const Array& v);

// float64 reference (grouped-query attention included): out [batch*heads, lq, d].
void reference(const float* q, const float* k, const float* v, const Shape& s, const Options& o, double* out);

constexpr int kMinBlock = 16, kMaxBlock = 128;  // BLOCK_M, BLOCK_N: powers of two in [16, 128]
constexpr int kThreads = 128;                   // threads per CUDA block (4 warps)
constexpr int kDefaultBlockM = 64, kDefaultBlockN = 64;
// The tile `run` takes when neither block_m nor block_n is given: 64 x 64, and 64 x 32 at d = 256, where
// 64 x 64 needs smem_bytes(64, 64, 256) = 279296 bytes, past the 227 KiB a block may have (H100/H200).
std::pair<int, int> default_tiles(int d);

// [SECTION] Tile shapes -------------------------------------------------------------------------------
int64_t smem_bytes(int block_m, int block_n, int d);
// The (BLOCK_M, BLOCK_N) pairs of powers of two in [16, 128] whose smem fits `limit` at head dim d.
std::vector<std::pair<int, int>> offered_tiles(int d, int64_t limit);
// Throws InputError (block_m / block_n not a power of two in [16, 128], or the tile's smem past the
// limit of backend b: names the bytes, the limit and a pair that fits).
void check_tiles(Backend b, int block_m, int block_n, int d);
// check_tiles for a rung whose program needs smem(block_m, block_n, d) bytes (rung 6's teaching variant
// too): the InputError starts "<rung>: tile ..." and suggests "block_m=M/2 <joiner> block_n=N/2".
void check_tiles_for(Backend b, const char* rung, int64_t (*smem)(int, int, int), const char* joiner, int block_m,
                     int block_n, int d);

// [SECTION] The trace ---------------------------------------------------------------------------------
enum : uint8_t { kTileComputed = 1, kTileSkipped = 2, kTileNotRun = 0xFF };

// Raw pointers where the trace lives (host or device), as the kernel writes it.
//   rows = batch*heads*Lq (row r = bh*Lq + i), steps = ceil(Lk / BLOCK_N); arrays are [rows, steps].
//   A step the kernel skipped (causal) carries the state forward (m_after = m_before, alpha = 1,
//   rowsum = 0) and is marked kTileSkipped in tile_state [bh * q_blocks, steps].
struct FlashTraceView {
  float* m_before = nullptr;
  float* m_after = nullptr;
  float* alpha = nullptr;
  float* l_before = nullptr;
  float* l_after = nullptr;
  float* rowsum = nullptr;      // rowsum(P) of the tile
  uint8_t* tile_state = nullptr;
  int64_t rows = 0, steps = 0, q_blocks = 0;
  int block_m = 0, block_n = 0, d = 0;
  // The chosen query block (o_qblock < 0: none). Per step, for its BLOCK_M rows:
  int64_t o_bh = 0, o_qblock = -1;
  float* o_partial = nullptr;  // [steps, BLOCK_M, d]: O (not yet divided by l) after the step
  float* s_tile = nullptr;     // [steps, BLOCK_M, BLOCK_N]: S of the step (-inf masked)
  float* p_tile = nullptr;     // [steps, BLOCK_M, BLOCK_N]: P = exp(S - m_new) of the step (0 masked)
};

// A trace owned where the backend runs. reset() poisons every float with NaN and tile states with
// kTileNotRun, so whatever the kernel does not write shows.
struct FlashTrace {
  Buffer<float> m_before, m_after, alpha, l_before, l_after, rowsum, o_partial, s_tile, p_tile;
  Buffer<uint8_t> tile_state;
  int64_t rows = 0, steps = 0, q_blocks = 0;
  int block_m = 0, block_n = 0, d = 0;
  int64_t o_bh = 0, o_qblock = -1;

  void reset(Backend b, const Shape& s, int block_m, int block_n, int64_t chosen_bh = 0,
             int64_t chosen_qblock = -1);
  FlashTraceView view();
};

// For the views: the chosen query block's attention weights as they stand after `step` K/V tiles
// (1 <= step <= steps), composed from the recorded trace alone:
//     W_t[r, j] = P_k[r, j] * alpha_{k+1} * ... * alpha_{t-1} / l_{t-1}[r]      (k = j / BLOCK_N < t)
// each tile's P rescaled by every later alpha (the online softmax's rescaling, made visible) and
// divided by the running sum. At step = steps this is the final softmax. Keys of tiles not yet reached
// and masked keys: value 0, state kCellMasked; rows past Lq: kCellMasked. dst holds BLOCK_M x lk cells of
// `channels` floats (value, then state when channels >= 2) and lives where the trace lives.
void compose_weights(Backend b, const FlashTraceView& t, int64_t lq, int64_t lk, int64_t step, float* dst,
                     int channels);

// [SECTION] Running it ------------------------------------------------------------------------------
// The teaching kernel on backend b; pointers live there. q, out [bh, lq, d]; k, v [kv_bh, lk, d] (grouped-
// query attention: each program loads the K/V of its query head's kv head). `trace` (optional) must have
// been reset() for this shape and tile on the same backend. Throws InputError for bad shapes/tiles.
// `src`: an edited copy of kernels/editable/sources/flash_attention.cu run instead of the shipped build
// (in the worker; CompileError when it does not compile); returns its first fault (kind None: it ran
// cleanly). The shipped build's fault, which would be a bug here, throws RuntimeError.
editable::Fault run_teaching(Backend b, const float* q, const float* k, const float* v, float* out, const Shape& s,
                             const Options& o, int block_m, int block_n, FlashTraceView* trace = nullptr,
                             const editable::Source* src = nullptr);

// `flash-attention` for the command line. The variants list is open: where kernels/rungs/flash_attention_fast.h
// exists, `--variant fast` is listed and routed to its run_fast_host() (CUDA backend only; param dtype),
// and `bench` adds its bench_fast() rows.
KernelEntry entry();

// The parameters of this rung's kernels, one spec each (name, range, default, help): the registry
// (`run`, `list`), the panel and the study all take them from here.
namespace param {
ParamSpec causal();  // attention's: the same mask
ParamSpec scale();   // attention's
ParamSpec block_m();
ParamSpec block_n();
ParamSpec dtype();   // --variant fast only
}  // namespace param

namespace detail {
// The launch run_teaching makes (the editable kernel's arguments in signature order).
editable::Launch teaching_launch(const float* q, const float* k, const float* v, float* out, const Shape& s,
                                 float scale, bool causal, int block_m, int block_n, FlashTraceView* t);
#ifdef KL_HAS_CUDA
void compose_weights_cuda(const FlashTraceView& t, int64_t lq, int64_t lk, int64_t step, float* dst,
                          int channels);
#endif
// Number of K/V tiles program (q block qb) computes; the rest (causal) it skips. The editable kernel has
// its own copy (tiles_to_run in kernels/editable/sources/flash_attention.cu); the study counts with this.
KL_ATTN_HD inline int64_t tiles_to_run(int64_t qb, int block_m, int block_n, int64_t lq, int64_t lk,
                                       bool causal) {
  const int64_t n_tiles = (lk + block_n - 1) / block_n;
  if (!causal) return n_tiles;
  const int64_t q_last = (qb + 1) * block_m < lq ? (qb + 1) * block_m - 1 : lq - 1;
  const int64_t n_keys = attention::visible_keys(q_last, lq, lk, true);  // the last row sees most
  const int64_t n = (n_keys + block_n - 1) / block_n;
  return n < n_tiles ? n : n_tiles;
}
}  // namespace detail

}  // namespace kl::flash_attention
