// What the "6 · Backward" panel concludes, with no GL: the saved state of the naive backward (P, and dP
// beside it) against FlashAttention's (L, one float per query row) and the wall where the naive one no
// longer fits in the memory of the backend; the tile order of the teaching backward (K/V tiles outer,
// one program each; query tiles inner; causal tiles skipped); for the chosen program (K/V tile
// `kv_tile`) at query step `q_tile`: the recomputed P = exp(S - L) next to rung 5's forward P, dS and its
// signs; dK_j and dV_j converging to the float64 reference as query tiles fold in, and dQ_i (query tile
// `q_tile`) as the programs' contributions fold in.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/studies/study.h"

namespace kl::flash_attention_backward_study {

using flash_attention_backward::Options;
using flash_attention_backward::Shape;
using flash_attention_backward::Wall;

std::vector<ParamSpec> params();

struct Result {
  Shape s;
  Options o;
  int block_m = 0, block_n = 0, d = 0;
  int64_t k_blocks = 0, q_blocks = 0, kv_tile = 0, q_tile = 0;
  Backend backend = Backend::Cpu;

  // Saved state and the wall (bytes)
  uint64_t p_bytes = 0;      // P, float32, what the naive forward saves
  uint64_t naive_bytes = 0;  // P and dP, what the naive backward holds
  uint64_t lse_bytes = 0;    // L, what FlashAttention's forward saves
  Wall wall;                 // the naive backward at this shape on this backend
  int64_t wall_length = 0;   // the largest L = Lq = Lk whose P and dP fit in wall.available
  bool wall_refused = false;  // check_naive_wall refused L = 2 * wall_length (with the bytes named)
  std::string wall_message;

  // Tile order: [k_blocks, q_blocks] states (kTileComputed / kTileSkipped), and the counts
  std::vector<uint8_t> tile_state;
  int64_t tiles_computed = 0, tiles_skipped = 0;
  bool skips_exact = false;  // every state as causality predicts, tile by tile

  // The chosen program (kv_tile), every query step: [q_blocks, BM, BN] and [q_blocks, BN, d]
  std::vector<float> p_recomputed, ds, dk_partial, dv_partial;
  std::vector<float> p_forward;  // [BM, BN]: rung 5's final P of query tile q_tile, keys of kv_tile
  std::vector<float> q_rows;     // [BM, d]: Q of query tile q_tile (0 past Lq), for dK's lineage
  double p_max_abs_diff = 0;     // recomputed P of (q_tile, kv_tile) against p_forward
  int64_t ds_positive = 0, ds_negative = 0, ds_zero = 0;  // dS of (q_tile, kv_tile), visible cells
  std::vector<float> dq_contrib;  // [k_blocks, BM, d]: what each program added to dQ of q_tile

  // Convergence against float64: relative 2-norm errors
  std::vector<double> dk_err, dv_err;  // [q_blocks]: dK_j, dV_j after each query step
  std::vector<double> dq_err;          // [k_blocks]: dQ_i after programs 0..kb
  std::vector<double> dq_ref_tile, dk_ref_tile, dv_ref_tile;  // the reference's tiles, for the views
  double dq_rel = 0, dk_rel = 0, dv_rel = 0;                  // the whole outputs, teaching
  double naive_rel = 0;                                       // max over dQ, dK, dV, naive
  double tolerance = 0;

  // An edited teaching kernel (kernels/editable): which source ran, and its first misbehaviour (kind None
  // when it ran cleanly; the checks then read what it did write, and the teaching check fails when it
  // faulted).
  bool edited = false;
  std::string source_file;   // "flash_attention_backward.cu" (shipped) or the edited source's file name
  editable::Fault fault;
  std::string fault_line;    // "edited kernel: out-of-bounds store to dq[...] ..." or empty
  std::string notice;        // the panel's opening line: what the backward saves, with these numbers
};

// report().lines, in this order: the panel draws each beside the view it is about, so the panel and
// `kernel-ladder study backward` state the same sentences. An edited kernel adds, after them, the line
// "kernel: FILE (edited)" and, when it faulted, "edited kernel: <fault>" (and the number `fault`).
enum Line : size_t {
  kLineSaved,     // what the forward saves: P against L
  kLineWall,      // what the naive backward holds, and its wall
  kLineOrder,     // the tile order
  kLineDq,        // how dQ is accumulated (atomics on CUDA)
  kLineDs,        // dS's signs in the current tile
  kLineRefusal,   // the naive backward's refusal past its wall
  kLineDkErr,     // dK_j's error after each query tile
  kLineDvErr,     // dV_j's error after each query tile
  kLineDqErr,     // dQ_i's error after each program
  kLineCount
};

// An error curve as the panel draws it: x counts what has been folded in, from 1 (the error after one tile
// is at x = 1), one y series per label, and where the current step is on that axis.
struct Curve {
  std::string title, x_label;
  std::vector<double> x;
  std::vector<std::string> labels;
  std::vector<std::vector<double>> y;
  double now = 0;  // the x of the step shown
};
// dK_j and dV_j against query tiles folded in (1..q_blocks; now = q_tile + 1), and dQ_i against the programs
// whose contributions are folded in (1..k_blocks; now = kv_tile + 1): two axes, two plots.
Curve dkdv_curve(const Result& r);
Curve dq_curve(const Result& r);
// What each backward keeps against L = Lq = Lk (this batch*heads), in bytes: the naive one's P and dP
// (8 L^2) and FlashAttention's L (4 L), with the memory available on this backend (labels: "P + dP
// (naive)", "L (FlashAttention)", "memory available"); now = the wall's L. x runs over powers of two from
// 64 to past twice the wall.
Curve saved_curve(const Result& r);

// Throws InputError (a parameter out of range, kv_tile / q_tile past the tiles of the shape, tiles past
// shared memory) or RuntimeError. `src`: an edited copy of kernels/editable/sources/
// flash_attention_backward.cu run instead of the shipped teaching kernel (CompileError when it does not
// compile). Without the argument, the rung's edited source the app holds
// (editable::edited("flash-attention-backward")) if any, else the shipped one.
Result run(Backend b, const ParamValues& p, const editable::Source* src);
Result run(Backend b, const ParamValues& p);
study::Report report(const Result& r);
study::Entry entry();

}  // namespace kl::flash_attention_backward_study
