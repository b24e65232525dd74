// Rung 6: the backward pass of attention, dQ, dK, dV from dO, for out = softmax(Q K^T * scale) V.
// Same inputs, masks and conventions as rungs 4 and 5 (kernels/rungs/attention.h: Options, bottom-right
// causal alignment, rows that see nothing give 0 and have zero gradient), and rung 5's shape with
// grouped-query attention (flash_attention::Shape): k and v may have Hkv heads dividing q's Hq, query head h
// reads kv head h / (Hq / Hkv) (kv_head_of), and dK, dV of a kv head are the sums over the Hq / Hkv query
// heads that read it (in every variant).
//
// With P = softmax(S), S = Q K^T * scale, the chain rule gives (FlashAttention-2, Algorithm 2):
//     dV = P^T dO        dP = dO V^T        D_i = rowsum(dO_i ∘ O_i) = rowsum(P_i ∘ dP_i)
//     dS = P ∘ (dP - D)  dQ = scale * dS K  dK = scale * dS^T Q
// The question is what the forward saves for this. The naive backward keeps P itself: Lq x Lk floats
// per (batch, head), and it needs dP of the same size beside it. FlashAttention keeps one number per
// query row, the log-sum-exp L = m + log l of the forward's online softmax, and recomputes P tile by
// tile as exp(S - L): the same P, bit for bit in exact arithmetic, without the Lq x Lk matrix.
//
// Versions:
//   naive     (CPU and CUDA) materialises P and dP [bh, Lq, Lk] in global memory (the backward's wall:
//             refused before allocating when 2 * bh * Lq * Lk * 4 bytes exceed the device's free memory
//             on CUDA, the host's available memory on the CPU, with the bytes named). Seven elementwise
//             steps, one thread per output cell, written once (naive_* below) for both backends.
//   teaching  (CPU and CUDA) FlashAttention-2's backward, the editable source
//             kernels/editable/sources/flash_attention_backward.cu (backward_teaching), the same source
//             on both backends (editable::launch): D = rowsum(dO ∘ O) first (on the host on the CPU, a
//             small kernel on CUDA), then one program (CUDA block, 128 threads) per K/V tile j of
//             BLOCK_N keys, for one (batch, kv head), looping over the query heads that read that kv head
//             (Hq / Hkv of them, 1 without grouped-query attention) and, per query head, over the query
//             tiles i of BLOCK_M rows that can see tile j (causal: the others skipped):
//                 S = Q_i K_j^T * scale,  P = exp(S - L_i),  dV_j += P^T dO_i,  dP = dO_i V_j^T,
//                 dS = P ∘ (dP - D_i),  dK_j += scale * dS^T Q_i,  dQ_i += scale * dS K_j
//             dK_j and dV_j stay in shared memory across the whole group and are written once, already
//             summed over the query heads (no second pass, no atomics); dQ_i is shared by every
//             program, so it is accumulated in global memory with Tensor::atomic_add (fp32 atomicAdd on
//             CUDA, the default and only mode today): the order of the adds differs between runs, so
//             dQ can differ in its last bits from run to run; dK and dV are deterministic. The CPU
//             prelude runs the same grid block by block, in order, so its dQ is deterministic.
//             O and L come from rung 5's teaching forward (kernels/rungs/flash_attention.h) when the
//             caller does not give them: L = m + log l read from its trace's last step.
//             An optional BackwardTrace records what the views need (see below), as more of the
//             kernel's tensors. An edited copy of the source runs in the worker instead (src).
//   reference float64 on the host, the chain rule row by row; the ground truth.
//   fast      (CUDA only, bf16/fp16, d 64 and 128; d = 256 on an H100/H200) FlashAttention-2/3's backward on
//             the tensor cores (wgmma on an H100/H200, else mma.sync): kernels/rungs/flash_attention_backward_fast.h.
//             dQ by fp32 atomics by default (at d = 256 by the separate pass, and on an H100/H200 at L from 512
//             to 2047, at d = 64 under the causal mask to 4095, in a fixed order, which measured faster there);
//             `--set deterministic=1` makes dQ bitwise repeatable: added in a fixed order per query tile from
//             L = 512 on an H100/H200, else computed in a separate pass per query tile, no atomics.
//             Grouped-query attention by kernels of its own (one CTA per K/V tile and kv head).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/rungs/attention.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/registry.h"

namespace kl::flash_attention_backward {

using attention::Options;
// Rung 5's shape: rung 4's (batch, heads = Hq, lq, lk, d) and kv_heads = Hkv (0: Hq). q, o, dout, dq are
// [batch, heads, lq, d]; k, v, dk, dv [batch, kv(), lk, d]; lse [batch, heads, lq].
using flash_attention::Shape;

constexpr int kMinBlock = 16, kMaxBlock = 128;  // BLOCK_M, BLOCK_N: powers of two in [16, 128]
constexpr int kThreads = 128;                   // threads per CUDA block of the teaching kernel
constexpr int kDefaultBlockM = 64, kDefaultBlockN = 64;

// [SECTION] Saved state and the wall -------------------------------------------------------------------
// Bytes the naive backward keeps: P and dP, float32, [bh, Lq, Lk] each.
uint64_t naive_state_bytes(const Shape& s);
// Bytes FlashAttention's forward saves for its backward: L, float32, [bh, Lq] (and O, which both keep).
uint64_t lse_bytes(const Shape& s);
struct Wall {
  uint64_t need = 0;        // naive_state_bytes
  uint64_t available = 0;   // free device memory (CUDA) or available host memory (CPU)
  uint64_t total = 0;       // device memory in total (CUDA; 0 on the CPU)
  bool fits() const { return need <= available; }
};
Wall naive_wall(Backend b, const Shape& s);
// Throws InputError naming the bytes asked, the bytes free and the teaching variant's L bytes.
void check_naive_wall(Backend b, const Shape& s);

// [SECTION] Tile shapes ----------------------------------------------------------------------------------
// Shared memory of one teaching program: K, V, dK, dV [BN, d]; Q, dO [BM, d]; P, dS [BM, BN]; L, D [BM].
int64_t smem_bytes(int block_m, int block_n, int d);
// Throws InputError (not a power of two in [16, 128], or past backend b's shared-memory limit).
void check_tiles(Backend b, int block_m, int block_n, int d);
// Checks d, Lq, Lk, batch*heads and Hkv (a divisor of Hq: flash_attention::check_kv_heads); throws
// InputError in rung 5's wording.
void check_shape(const Shape& s);

// [SECTION] The trace ------------------------------------------------------------------------------------
enum : uint8_t { kTileComputed = 1, kTileSkipped = 2, kTileNotRun = 0xFF };

// Raw pointers where the trace lives, indexed by query (batch, head) bh as everywhere else. The program
// of K/V tile kb for bh's kv head visits, for bh (and every other query head of its group), query tiles
// qb = 0..q_blocks-1; tile_state [bh, k_blocks, q_blocks] says which it computed and which causality
// skipped. For the chosen program (the one of K/V tile c_kblock serving query head c_bh), per query step
// qb of query head c_bh:
//   p_tile, ds_tile [q_blocks, BM, BN]: P = exp(S - L) recomputed, and dS (0 where masked or skipped)
//   dk_partial, dv_partial [q_blocks, BN, d]: dK_j, dV_j after the step (skipped steps carry them); with
//     grouped-query attention they include the query heads before c_bh in the group (the program's order)
// For the chosen query tile (c_bh, c_qblock), per K/V program kb:
//   dq_contrib [k_blocks, BM, d]: scale * dS K_j, what program kb added to dQ_i (0 where skipped)
struct BackwardTraceView {
  uint8_t* tile_state = nullptr;
  int64_t k_blocks = 0, q_blocks = 0;
  int block_m = 0, block_n = 0, d = 0;
  int64_t c_bh = 0, c_kblock = -1, c_qblock = -1;
  float* p_tile = nullptr;
  float* ds_tile = nullptr;
  float* dk_partial = nullptr;
  float* dv_partial = nullptr;
  float* dq_contrib = nullptr;
};

// A trace owned where the backend runs; reset() poisons floats with NaN and states with kTileNotRun.
struct BackwardTrace {
  Buffer<uint8_t> tile_state;
  Buffer<float> p_tile, ds_tile, dk_partial, dv_partial, dq_contrib;
  int64_t k_blocks = 0, q_blocks = 0;
  int block_m = 0, block_n = 0, d = 0;
  int64_t c_bh = 0, c_kblock = -1, c_qblock = -1;

  void reset(Backend b, const Shape& s, int block_m, int block_n, int64_t chosen_bh = 0,
             int64_t chosen_kblock = -1, int64_t chosen_qblock = -1);
  BackwardTraceView view();
};

// [SECTION] Reference (float64) ----------------------------------------------------------------------------
// The chain rule row by row in double: P_i = softmax(S_i), dP_i = dO_i V^T, D_i = P_i . dP_i,
// dS_i = P_i ∘ (dP_i - D_i), dQ_i = scale dS_i K, dK += scale dS_i^T Q_i, dV += P_i^T dO_i.
// q, dout [bh, Lq, d]; k, v [batch * kv(), Lk, d]; outputs sized like them. Grouped-query attention is
// written apart from the kernels' index map: K and V repeated to one head per query head (PyTorch's
// repeat_interleave), the multi-head chain rule on the copies, and each copy's dK, dV summed back onto
// its kv head.
void reference(const float* q, const float* k, const float* v, const float* dout, const Shape& s, const Options& opt,
               double* dq, double* dk, double* dv);

// [SECTION] Running it -----------------------------------------------------------------------------------
// Pointers live on backend b. q, o, dout, dq [bh, Lq, d]; k, v, dk, dv [batch * kv(), Lk, d]; lse [bh, Lq].

// The forward that saves what the backward needs: rung 5's teaching kernel (block_m x block_n tiles),
// O and L = m + log l from its trace's last step (-inf for rows that see no key).
void forward(Backend b, const float* q, const float* k, const float* v, float* o, float* lse, const Shape& s,
             const Options& opt, int block_m = kDefaultBlockM, int block_n = kDefaultBlockN);

// Naive: P and dP in global memory. Throws InputError at the wall before allocating anything.
void run_naive(Backend b, const float* q, const float* k, const float* v, const float* dout, float* dq,
               float* dk, float* dv, const Shape& s, const Options& opt);

// Teaching. o and lse: the forward's; both nullptr: computed here by forward() with the same tiles.
// src: an edited copy of kernels/editable/sources/flash_attention_backward.cu run instead of the shipped
// build (in the worker; CompileError when it does not compile); its first misbehaviour is returned, not
// thrown. The shipped kernel's (src == nullptr) would be a bug and throws RuntimeError.
editable::Fault run_teaching(Backend b, const float* q, const float* k, const float* v, const float* o,
                             const float* lse, const float* dout, float* dq, float* dk, float* dv, const Shape& s,
                             const Options& opt, int block_m = kDefaultBlockM, int block_n = kDefaultBlockN,
                             BackwardTraceView* trace = nullptr, const editable::Source* src = nullptr);

// The parameters of this rung's kernels: rung 5's specs (kernels/rungs/flash_attention.h, namespace
// param), since they are the same parameters: the mask and the scale as they are; BLOCK_M and BLOCK_N
// with rung 5's range and default and only their help restated for the backward's order (a program
// here is one K/V tile, walking query tiles). The registry (`run`, `list`), the study and the panel
// take them from here.
namespace param {
ParamSpec causal();   // flash_attention::param::causal()
ParamSpec scale();    // flash_attention::param::scale()
ParamSpec block_m();  // flash_attention::param::block_m(), help: query rows per (inner) query tile
ParamSpec block_n();  // flash_attention::param::block_n(), help: keys per K/V tile, one program each
ParamSpec dtype();          // flash_attention::param::dtype(): --variant fast's input precision
ParamSpec deterministic();  // --variant fast: dQ by a separate pass instead of atomics (default 0)
}  // namespace param

// `flash-attention-backward` for the command line: inputs q, k, v, do (optional o, lse), outputs
// dq, dk, dv (dq first). q [B, Hq, Lq, d] with k and v [B, Hkv, Lk, d] is grouped-query attention
// (every variant); dk and dv have k's shape.
KernelEntry entry();

// [SECTION] What both backends compute, per cell ---------------------------------------------------------
namespace detail {

// The naive backward, one cell per call. n = bh*lq*lk cells of P/dP ("pd"); rows r = bh*lq + i, bh the
// query (batch, head). Grouped-query attention: query (batch, head) bh reads kv (batch, head) bh / group
// (= kv_bh_of(bh, heads, group), since heads = group * kv heads), and kv (batch, head) kvb is read by
// query (batch, head)s kvb * group .. kvb * group + group - 1.
struct NaiveArgs {
  const float *q, *k, *v, *dout;
  float *p, *dp, *rowsum_d, *dq, *dk, *dv;
  int64_t bh, lq, lk;
  int d;
  float scale;
  bool causal;
  int64_t group = 1;  // query heads per kv head, Hq / Hkv (1: multi-head attention)
};
// 1. S (into p): cell (r, j) = Q_r . K_j * scale, -inf where masked.
KL_ATTN_HD inline void naive_scores(const NaiveArgs& a, int64_t cell) {
  const int64_t r = cell / a.lk, j = cell % a.lk, i = r % a.lq, kvb = r / a.lq / a.group;
  float acc = -INFINITY;
  if (j < attention::visible_keys(i, a.lq, a.lk, a.causal)) {
    acc = 0.0f;
    for (int c = 0; c < a.d; ++c) acc += a.q[r * a.d + c] * a.k[(kvb * a.lk + j) * a.d + c];
    acc *= a.scale;
  }
  a.p[cell] = acc;
}
// 2. per row r: P = softmax(S) in place (0 for a row that sees nothing).
KL_ATTN_HD inline void naive_softmax_row(const NaiveArgs& a, int64_t r) {
  float* row = a.p + r * a.lk;
  float mx = -INFINITY;
  for (int64_t j = 0; j < a.lk; ++j) mx = row[j] > mx ? row[j] : mx;
  float sum = 0.0f;
  for (int64_t j = 0; j < a.lk; ++j) sum += (row[j] = mx == -INFINITY ? 0.0f : expf(row[j] - mx));
  for (int64_t j = 0; j < a.lk; ++j) row[j] = sum > 0.0f ? row[j] / sum : 0.0f;
}
// 3. dP: cell (r, j) = dO_r . V_j.
KL_ATTN_HD inline void naive_dp(const NaiveArgs& a, int64_t cell) {
  const int64_t r = cell / a.lk, j = cell % a.lk, kvb = r / a.lq / a.group;
  float acc = 0.0f;
  for (int c = 0; c < a.d; ++c) acc += a.dout[r * a.d + c] * a.v[(kvb * a.lk + j) * a.d + c];
  a.dp[cell] = acc;
}
// 4. per row r: D_r = rowsum(P_r ∘ dP_r) (= rowsum(dO_r ∘ O_r)).
KL_ATTN_HD inline void naive_rowsum(const NaiveArgs& a, int64_t r) {
  float acc = 0.0f;
  for (int64_t j = 0; j < a.lk; ++j) acc += a.p[r * a.lk + j] * a.dp[r * a.lk + j];
  a.rowsum_d[r] = acc;
}
// 5. dS = P ∘ (dP - D), in place of dP.
KL_ATTN_HD inline void naive_ds(const NaiveArgs& a, int64_t cell) {
  const int64_t r = cell / a.lk;
  a.dp[cell] = a.p[cell] * (a.dp[cell] - a.rowsum_d[r]);
}
// 6. dV and dK: cell (kvb, j, c) = sum over the group's query heads b and rows i of P_b[i, j] dO_b[i, c];
// scale * the same of dS_b[i, j] Q_b[i, c]. bh / group * lk * d cells.
KL_ATTN_HD inline void naive_dkdv(const NaiveArgs& a, int64_t cell) {
  const int64_t c = cell % a.d, bj = cell / a.d, kvb = bj / a.lk, j = bj % a.lk;
  float acc_v = 0.0f, acc_k = 0.0f;
  for (int64_t b = kvb * a.group; b < (kvb + 1) * a.group; ++b)
    for (int64_t i = 0; i < a.lq; ++i) {
      const int64_t pc = (b * a.lq + i) * a.lk + j, qc = (b * a.lq + i) * a.d + c;
      acc_v += a.p[pc] * a.dout[qc];
      acc_k += a.dp[pc] * a.q[qc];
    }
  a.dv[cell] = acc_v;
  a.dk[cell] = a.scale * acc_k;
}
// 7. dQ: cell (r, c) = scale * sum_j dS[r, j] K[j, c].
KL_ATTN_HD inline void naive_dq(const NaiveArgs& a, int64_t cell) {
  const int64_t c = cell % a.d, r = cell / a.d, kvb = r / a.lq / a.group;
  float acc = 0.0f;
  for (int64_t j = 0; j < a.lk; ++j) acc += a.dp[r * a.lk + j] * a.k[(kvb * a.lk + j) * a.d + c];
  a.dq[cell] = a.scale * acc;
}

void naive_cpu(const NaiveArgs& a);
// The launch of backward_teaching (kernels/editable/sources/flash_attention_backward.cu): grid, block,
// shared memory and the arguments in the kernel's order; the trace's tensors absent without a trace.
editable::Launch teaching_launch(const float* q, const float* k, const float* v, const float* lse, const float* drow,
                                 const float* dout, float* dq, float* dk, float* dv, const Shape& s, float scale,
                                 bool causal, int bm, int bn, const BackwardTraceView* t);
#ifdef KL_HAS_CUDA
void naive_cuda(const NaiveArgs& a);
// D = rowsum(dO ∘ O) per row, and L from rung 5's trace (m_after, l_after at the last step).
void rowsum_cuda(const float* dout, const float* o, float* drow, int64_t rows, int d);
void lse_from_trace_cuda(const float* m_after, const float* l_after, float* lse, int64_t rows, int64_t steps);
#endif

}  // namespace detail

}  // namespace kl::flash_attention_backward
