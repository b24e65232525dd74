// Rung 5's study: what the FlashAttention panel concludes, without GL. One traced run of the teaching
// kernel per shape (the trace stays where the backend runs, for the panel's weight pictures); the
// online-softmax state per step (m, l, alpha per row of the chosen query block, which rows' max moved),
// the output converging and its error per step against float64, checks against float64 (naming the rows
// that differ) and rung 4, shared memory against rung 4's wall, and the device-memory traffic of
// standard attention, rung 4 and rung 5 with FlashAttention's IO statement. The kernel may be an edited
// copy of the rung's editable source (the gallery's bugs show in these numbers).
//   [SECTION] Settings and the run
//   [SECTION] One step of the chosen block
//   [SECTION] Memory and traffic (no run needed)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/studies/attention_study.h"

namespace kl::flash_attention_study {

namespace fa = flash_attention;

// The panel's parameters (lq, lk, d, causal, block_m, block_n, qblock, step, magnitude, seed).
std::vector<ParamSpec> params();

// [SECTION] Memory and traffic ------------------------------------------------------------------------------
// Counted bytes through device memory (attention.h for standard attention and rung 4):
//   rung 5 = bh * 4 * (2 Lq d [Q in, O out] + sum over query blocks of tiles_run * 2 BLOCK_N d [K, V])
double traffic_bytes_flash(const attention::Shape& s, bool causal, int block_m, int block_n);

struct Traffic {
  double unfused = 0, smem = 0, flash = 0;     // bytes at this shape
  bool smem_refused = false;                    // Lk past rung 4's wall
  std::vector<double> lk;                       // the plot over Lk: 16, 32, ..., 65536
  std::vector<double> unfused_kib, smem_kib, flash_kib;
  // FlashAttention (Dao et al. 2022, Theorem 2): standard attention Theta(N d + N^2) HBM accesses,
  // FlashAttention Theta(N^2 d^2 / M), M the on-chip memory in elements; with N split into Lq and Lk:
  double paper_standard = 0;  // Lq d + Lk d + Lq Lk   (elements)
  double paper_flash = 0;     // Lq Lk d^2 / M
  double sram_elements = 0;   // M: the per-block shared-memory limit in floats
  double long_lk_ratio = 0;   // standard / rung 5 as Lk grows: 2 BLOCK_M / d
  std::string caption;        // under the bars: what each bar counts (one unit: KiB)
  std::string paper_line;     // the paper's statement with the numbers at this shape
};
Traffic traffic(Backend b, const attention::Shape& s, bool causal, int block_m, int block_n);

// [SECTION] The shared-memory budget: why the tiles shrink at d = 256 ---------------------------------------
// One bar: a tile's shared memory by part, against the per-block limit.
struct BudgetPart {
  std::string name;  // "Q", "K", "V", "S/P", "O", "m, l, alpha"; fast: "Q", "K x 3", "V x 3", "align, mbarriers"
  int64_t bytes = 0;
};
struct Budget {
  std::string label;  // "teaching 16 x 16 (this tile)", "fast wgmma 128 x 80, 2 stages (its tiles at d=256)"
  std::vector<BudgetPart> parts;
  int64_t total = 0, limit = 0;
  bool fits = false;
};
// The bars at head dim d and limit (bytes a block may have): the teaching tile (block_m x block_n; float32:
// Q, K, V, S/P, O, m/l/alpha, fa::smem_bytes), the fast TMA kernel's tiles at d (16-bit Q and kStages x
// (K, V), plus the 1 KiB alignment and the mbarriers) where d is 64, 128 or 256; and at d = 256 the tiles d
// = 128 uses, carried over: teaching 64 x 64 (279296 bytes) and fast 128 x 128 in 3 stages (448 KiB), both
// past the limit: the reason the tiles shrink (64 x 32; 128 x 80 in 2 stages).
std::vector<Budget> budgets(int d, int block_m, int block_n, int64_t limit);
// Under the bars: the limit and, at d = 256, why the tiles shrink, with the numbers.
std::string budget_caption(int d, int64_t limit);

// [SECTION] Settings and the run ---------------------------------------------------------------------------
struct Result {
  attention::Shape shape;
  attention::Options opt;
  int bm = 0, bn = 0;
  int64_t q_blocks = 0, steps = 0, qblock = 0, step = 0;  // qblock and step as applied (moved inside)
  std::string adjust_note;  // "qblock moved to 2, ..." when the settings were outside the shape
  int64_t limit = 0, wall = 0;  // shared memory per block; rung 4's wall at this d
  attention_study::Inputs in;
  Buffer<float> out;
  fa::FlashTrace trace;  // where the backend runs; the chosen query block is qblock of bh 0
  std::vector<float> hout, hm, hl, halpha, hm_before, partial_o;
  std::vector<uint8_t> hstate;
  std::vector<double> converge;  // per step: |O_t / l_t - O| / |O| of the chosen block
  // Per step: |O_t / l_t - R_t| / |R_t| of the chosen block, R_t the float64 softmax over the keys the
  // first t K/V tiles hold (each row's visible ones) times V: float32 rounding at every step for the
  // shipped kernel; an edited one that forgets alpha drifts further from it tile by tile.
  std::vector<double> step_error;
  double wmax = 0, omax = 0;     // colour scales (final weights, output)
  double err = 0;
  int64_t nans = 0;
  attention_study::Line check, rung4;
  std::vector<int64_t> wrong_rows;  // query rows whose output differs from the float64 reference
  double rung4_diff = 0;
  bool rung4_ran = false;
  Traffic mem;
  std::vector<Budget> budget;  // budgets(d, bm, bn, limit)
  std::string budget_caption;
  // An edited kernel (kernels/editable): which source ran, and its first misbehaviour (kind None when it
  // ran cleanly; the checks above then read what it did write).
  bool edited = false;
  std::string source_file;  // "flash_attention.cu" (shipped) or the edited source's file name
  editable::Fault fault;
  std::string fault_line;   // "edited kernel: out-of-bounds store to out[...] ..." or empty
};

// Throws InputError (tiles that do not fit, bad shapes) and RuntimeError. `src`: an edited copy of
// kernels/editable/sources/flash_attention.cu run instead of the shipped kernel (CompileError when it
// does not compile). Without the argument, the rung's edited source the app holds
// (editable::edited("flash-attention")) if any, else the shipped one.
Result run(Backend b, const ParamValues& p, const editable::Source* src);
Result run(Backend b, const ParamValues& p);

// The chosen block's weights after `step` tiles into dst (BLOCK_M x Lk cells x 2 channels, where the
// backend runs): fa::compose_weights on the study's trace.
void compose(Backend b, Result& r, int64_t step, float* dst);
// O_t / l_t of the chosen block after `step` (host, BLOCK_M x d; rows past Lq 0).
std::vector<float> partial_output(const Result& r, int64_t step);

// [SECTION] One step of the chosen block ------------------------------------------------------------------
struct StepView {
  int64_t step = 0;            // 1-based: step t folds in K/V tile t (keys (t-1) BLOCK_N ..)
  int64_t row0 = 0;
  int rows = 0;
  std::vector<float> m, l, alpha;
  std::vector<bool> moved;     // the row's running max moved at this step (m_new > m_old)
  int moved_count = 0;
  int first_count = 0;         // of those, rows that had seen no key before (m_old = -inf, alpha = 0)
  std::string title;           // "Query block 1 (rows 16..31) after step 3 (K/V tile 3 of 6)"
  std::string caption;         // what amber means at this step, with the counts
  std::string stepper_text;    // "step 3 of 6: K/V tile 3, keys 32..47"
};
StepView step_view(const Result& r, int64_t step);

study::Report report(const Result& r, int64_t step);
study::Entry entry();

}  // namespace kl::flash_attention_study
