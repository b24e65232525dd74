// Rung 4's study: what the attention panel concludes, without GL. Settings in (the panel's ParamValues
// and a backend), a plain result out: the synthetic Q, K, V, the kernel's O and P, the check lines
// against the float64 reference, the shared-memory budget and the wall, the occupancy it leaves, and the
// device-memory traffic of rung 4 beside standard (unfused) attention. report() gives the common form
// for `kernel-ladder study attention`.
//   [SECTION] Inputs shared with rung 5's study
//   [SECTION] The budget, the wall and the occupancy (no run needed)
//   [SECTION] The run and its checks
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/rungs/attention.h"
#include "kernels/runtime/buffer.h"
#include "kernels/studies/study.h"

namespace kl::attention_study {

// [SECTION] Inputs shared with rung 5's study -----------------------------------------------------------
// The synthetic Q, K and V both attention panels draw, so the two rungs show the same numbers for the
// same settings: Q and K uniform in [-magnitude, magnitude] (the magnitude sets how peaked the softmax
// is), V uniform in [-1, 1], drawn in that order from one seed (std::mt19937), then uploaded.
struct Inputs {
  std::vector<float> hq, hk, hv;  // host copies, [L, d] row-major
  Buffer<float> q, k, v;          // where the backend runs

  void make(Backend b, int64_t lq, int64_t lk, int d, float magnitude, uint32_t seed);
};

// THE attention panel's parameters (lq, lk, d, causal, scale, magnitude, seed): the panel builds its
// ParamValues from this list, so `study attention` and the panel agree by construction. causal and
// scale are attention::param's specs (kernels/rungs/attention.h); a deliberate difference would be a
// panel_override here, with its reason.
std::vector<ParamSpec> params();

// [SECTION] The budget, the wall and the occupancy ----------------------------------------------------------
// CUDA reserves 1 KiB of each SM's shared memory per resident block (sm_80 and later). Occupancy has three
// limits, and the smallest binds: registers (the kernel's registers per thread: cudaFuncGetAttributes on the
// CUDA backend, ptxas's figure recorded at build time on the CPU one; kernels/studies/kernel_resources.h),
// shared memory (the block's bytes + 1 KiB reserved, against the SM's) and threads (kWarps * 32 = 256 per
// block against the SM's 2048), besides the SM's 32 resident blocks.
constexpr int64_t kReservedSmemPerBlock = 1024;

struct Occupancy {
  int by_registers = 0, by_smem = 0, by_threads = 0, by_block_limit = 0;  // blocks per SM each limit allows
  int blocks = 0;            // the smallest: 0 past the wall
  std::string binding;       // the limit(s) that bind: "registers", "shared memory", "registers and threads", ...
  int registers = 0;         // per thread
  std::string registers_origin;
};
// Occupancy of attention_smem at (lk, d) with `registers` per thread on `info`.
Occupancy occupancy(int64_t lk, int d, const DeviceInfo& info, int registers, const std::string& origin = "");
int blocks_per_sm(int64_t lk, int d, const DeviceInfo& info, int registers);  // occupancy().blocks
int64_t one_block_from_lk(int d, const DeviceInfo& info, int registers);      // smallest Lk with 1 block per SM (0: none)

struct Budget {
  int64_t lk = 0;
  int d = 0;
  int64_t need = 0, limit = 0, wall = 0;  // bytes, bytes, the largest Lk that fits at d
  bool past = false;
  bool assumed = false;
  std::string device;
  Occupancy occ;                 // at this Lk
  int blocks = 0;                // blocks per SM at this Lk (occ.blocks)
  int64_t one_block_lk = 0;      // from this Lk on, one block per SM
  std::string bar_text;          // "7.0 KiB needed of 227.0 KiB"
  std::string formula_line;      // "(2 x Lk x d + 16 x d) x 4 B: ... = 7168 bytes"
  std::string limit_line;
  std::string wall_line;
  std::string occupancy_line;    // the blocks per SM, the limit that binds, each limit's figure
  std::string legend;            // the curve's legend: "K+V+Q rows, d=32"
};
Budget budget(Backend b, int64_t lk, int d);

// [SECTION] The run and its checks --------------------------------------------------------------------------
// Optional places the kernel writes its pictures (device pointers on CUDA: mapped GL buffers). Without
// them the study allocates its own and keeps host copies (scores too) in the result.
struct Sinks {
  float* scores = nullptr;   // [lq, lk] x 2 channels (value, state)
  float* weights = nullptr;  // [lq, lk] x 2 channels
  float* out = nullptr;      // [lq, d]
};

struct Line {
  std::string label, text;
  bool ok = false;
  std::string sentence() const { return label + " " + text; }
};

struct Result {
  attention::Shape shape;
  attention::Options opt;
  float magnitude = 0;
  Budget budget;
  bool ran = false;               // false: refused before launch (run_error says why)
  std::string run_error;
  Inputs in;
  std::vector<float> hout;        // [lq, d]
  std::vector<float> hw;          // [lq, lk] x 2
  std::vector<float> hs;          // [lq, lk] x 2, only when no sinks were given
  double err = 0, werr = 0;       // relative errors against float64 (output, weights)
  int64_t nans = 0;
  double rowsum_worst = 0;
  int64_t empty_rows = 0;
  Line check, rowsum;             // "matches reference (float64):", "row sums of the weights:"
  // Standard attention at this shape (the unfused variant, run on the same inputs).
  double unfused_err = 0;
  int64_t unfused_nans = 0;
  Line unfused;                   // "standard attention (unfused):"
  double traffic_smem = 0, traffic_unfused = 0;  // counted bytes (attention.h)
  std::string traffic_line;
  std::string notice;             // the panel's opening line: what to notice, with these numbers
  double smax = 0, pmax = 0, omax = 0;  // colour scales
  // P's colour scale: the 99th percentile of the visible weights where the largest weights are rare outliers
  // (at 64 x 900 most weights are near 1/900 and a scale to the largest, 0.1, draws P uniformly dark), else
  // pmax; the label says when larger weights are clipped to the top colour.
  double p_scale = 0;
  std::string p_scale_label;      // the colour bar's: "weight" or "weight (p99 top)"
  std::string p_scale_note;       // beside P's title where clipped: "colour top: the 99th percentile, ..."
  // An edited kernel (kernels/editable): which source ran, and its first misbehaviour (kind None when it
  // ran cleanly; the checks then read what it did write, and fail when it faulted).
  bool edited = false;
  std::string source_file;        // "attention.cu" (shipped) or the edited source's file name
  editable::Fault fault;
  std::string fault_line;         // "edited kernel: out-of-bounds store to out[...] ..." or empty
};

// Throws InputError for bad settings (ParamValues validated them already) and RuntimeError below.
// The wall is not an exception: the result says it was refused. `src`: an edited copy of
// kernels/editable/sources/attention.cu run instead of the shipped kernel (CompileError when it does not
// compile). Without the argument, the rung's edited source the app holds (editable::edited("attention"))
// if any, else the shipped one.
Result run(Backend b, const ParamValues& p, const Sinks& sinks, const editable::Source* src);
Result run(Backend b, const ParamValues& p, const Sinks& sinks = {});
// An edited kernel adds the lines "kernel: FILE (edited)" and, when it faulted, "edited kernel: <fault>",
// and the number `fault` (1 when it faulted, else 0).
study::Report report(const Result& r);
study::Entry entry();

}  // namespace kl::attention_study
