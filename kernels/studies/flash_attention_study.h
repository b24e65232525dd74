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
//   rung 5 = bh * 4 * (2 Lq d [Q in, O out] + sum over query blocks of keys_run * 2 d [K, V]),
//   keys_run = min(tiles_run * BLOCK_N, Lk) (the last tile's rows past Lk are masked loads: no bytes)
double traffic_bytes_flash(const attention::Shape& s, bool causal, int block_m, int block_n);

struct Traffic {
  double unfused = 0, smem = 0, flash = 0;     // bytes at this shape
  bool smem_refused = false;                    // Lk past rung 4's wall
  std::vector<double> lk;                       // the plot over Lk: 16, 32, ..., 65536
  std::vector<double> unfused_kib, smem_kib, flash_kib;
  // standard / rung 5 as Lk grows (Lq, d, BLOCK_M fixed): (d + 2 Lq) / (d ceil(Lq / BLOCK_M)) exactly; it is
  // 2 BLOCK_M / d + BLOCK_M / Lq where BLOCK_M divides Lq, and 2 BLOCK_M / d only where Lq >> d.
  double long_lk_ratio = 0;
  double long_lk_simple = 0;  // 2 BLOCK_M / d, the Lq >> d form
  // FlashAttention (Dao et al. 2022, Theorem 2): for sequence length N, head dimension d and M elements of
  // SRAM with d <= M <= N d, standard attention makes Theta(N d + N^2) HBM accesses, FlashAttention
  // Theta(N^2 d^2 / M). Outside that domain (M > N d: one tile of about M / 4d rows holds the whole
  // sequence) the second bound is less than reading Q, K and V once and is not evaluated. With N split into
  // Lq and Lk the domain is taken as M <= min(Lq, Lk) d.
  double sram_elements = 0;   // M: the per-block shared-memory limit in floats
  double theorem_nd = 0;      // min(Lq, Lk) * d
  bool theorem_applies = false;  // sram_elements <= theorem_nd
  double paper_standard = 0;  // Lq d + Lk d + Lq Lk   (elements)
  double paper_flash = 0;     // Lq Lk d^2 / M, only where theorem_applies (else 0)
  std::string caption;        // under the bars: what each bar counts (one unit: KiB)
  std::string paper_line;     // the paper's statement, its domain, and the numbers where it applies
};
Traffic traffic(Backend b, const attention::Shape& s, bool causal, int block_m, int block_n);

// [SECTION] The IO view: traffic against BLOCK_M and against M ------------------------------------------------
// Rung 5's counted bytes (traffic_bytes_flash) at this shape for BLOCK_M = 16 .. 128 (BLOCK_N as set), with
// standard attention (independent of the tile) and rung 4 (its BLOCK_M is 16; absent past its wall); and
// against M, the shared memory a block may have (floats): at each M the largest square tile B x B whose
// teaching-kernel budget (fa::smem_bytes) fits M, about B_c = M / 4d (the paper's tile), its counted bytes,
// rung 4 where its K and V fit M, and Theorem 2's Lq Lk d^2 / M (x 4 bytes, constants aside) only where it
// applies (M <= min(Lq, Lk) d).
struct IoView {
  std::vector<double> block_m, flash_by_bm_kib;  // against BLOCK_M
  bool block_m_fits_all = true;                  // every BLOCK_M of the sweep fits this device's M
  double unfused_kib = 0, smem_kib = 0;          // smem_kib NaN where rung 4 is refused
  std::vector<double> m_kib;                     // against M (KiB of shared memory per block)
  std::vector<double> m_tile;                    // the tile B at each M
  std::vector<double> m_flash_kib, m_smem_kib, m_theorem_kib;  // NaN where absent
  double device_m_kib = 0;                       // this device's M
  double domain_end_kib = 0;                     // min(Lq, Lk) d floats, in KiB: Theorem 2 applies left of it
  double full_tile_kib = 0;                      // the smallest M whose tile B reaches Lq: traffic stops falling
  int device_tile = 0;                           // B at this device's M
  double device_bc = 0;                          // B_c = M / 4d at this device's M
  std::string caption_bm, caption_m;             // under each plot, with the numbers
};
IoView io_view(Backend b, const attention::Shape& s, bool causal, int block_m, int block_n);


// [SECTION] The shared-memory budget: why the tiles shrink at d = 256 ---------------------------------------
// One bar: a tile's shared memory by part, against the per-block limit.
struct BudgetPart {
  std::string name;  // "Q", "K", "V", "S/P", "O", "m, l, alpha"; fast: "Q" (or "Q x 2"), "K x 2", "V x 2", "O"
                     // (where O goes out by bulk tensor stores), "align, mbarriers"
  int64_t bytes = 0;
};
struct Budget {
  std::string label;  // "teaching 16 x 16 (this tile)", "fast wgmma-late 128 x 80, 2 stages (the H100/H200 ...)"
  std::vector<BudgetPart> parts;
  int64_t total = 0, limit = 0;
  bool fits = false;
};
// The bars at shape s (its head dim d) and limit (bytes a block may have): the teaching tile (block_m x block_n;
// float32: Q, K, V, S/P, O, m/l/alpha, fa::smem_bytes) and, where d is 64, 128 or 256, the fast kernel the
// default on an H100/H200 takes at this shape (fa::fast_kernel_for: the one the panel's line under the bars
// names), its tiles at d (16-bit Q tiles and kStages x (K, V), plus the 1 KiB alignment and the mbarriers); at
// d = 256 also the tiles d = 128 takes, carried over: teaching 64 x 64 (279296 bytes) and the d = 128 default's
// (128 x 128, 2 stages, 2 Q tiles without the mask: 384 KiB), both past the limit: the reason the tiles shrink
// (64 x 32; 128 x 80 in 2 stages, one Q tile).
std::vector<Budget> budgets(const attention::Shape& s, bool causal, int block_m, int block_n, int64_t limit);
// Under the bars: the limit and, at d = 256, why the tiles shrink, with the numbers.
std::string budget_caption(const attention::Shape& s, bool causal, int64_t limit);

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
  // Per step: |O_t / l_t - O| / |O| of the chosen block: how far the partial output still is from the final
  // one (the keys not yet folded in), not an error.
  std::vector<double> converge;
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
  IoView io;
  std::vector<Budget> budget;  // budgets(shape, causal, bm, bn, limit)
  std::string budget_caption;
  // An edited kernel (kernels/editable): which source ran, and its first misbehaviour (kind None when it
  // ran cleanly; the checks above then read what it did write).
  bool edited = false;
  std::string source_file;  // "flash_attention.cu" (shipped) or the edited source's file name
  editable::Fault fault;
  std::string fault_line;   // "edited kernel: out-of-bounds store to out[...] ..." or empty
  std::string notice;       // the panel's opening line: what to notice, with these numbers
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
  int64_t step = 0;            // 1-based: after step t, t K/V tiles are folded in; step t folds in K/V tile t - 1
  int64_t tile = 0;            // the K/V tile this step folds in (0-based, as query blocks and rung 6 count)
  int64_t row0 = 0;
  int rows = 0;
  std::vector<float> m, l, alpha;
  std::vector<bool> moved;     // the row's running max moved at this step (m_new > m_old)
  int moved_count = 0;
  int first_count = 0;         // of those, rows that had seen no key before (m_old = -inf, alpha = 0)
  std::string title;           // "Query block 1 (rows 16..31) after step 3 of 6 (K/V tiles 0..2 folded in)"
  std::string caption;         // what amber means at this step, with the counts
  std::string stepper_text;    // "step 3 of 6: K/V tile 2, keys 32..47"
  // O_t / l_t is exact attention over the keys folded in so far (not an approximation of the final output):
  // its error against float64 over those keys, and how far it is from the final output, and why.
  std::string partial_line;
};
StepView step_view(const Result& r, int64_t step);

study::Report report(const Result& r, int64_t step);
study::Entry entry();

}  // namespace kl::flash_attention_study
