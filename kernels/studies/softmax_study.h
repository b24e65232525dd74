// Rung 3's study: what the softmax panel concludes, with no GL. Settings in (the panel's ParamValues and a
// Backend), plain results out; the panel fills its textures from the buffers kept here and shows every
// sentence verbatim, `kernel-ladder study softmax` prints report(), and the tests assert on the numbers.
// Inputs of the bug and the sweep are standard normal (torch.randn's distribution, as in the write-up),
// drawn by Box-Muller from a seeded std::mt19937: the same values for a seed on every platform.
//   softmax_bug      buggy (BLOCK_SIZE 1024) and fixed over the same rows: outputs, recorded writers, the
//                    float64 reference, the two checks, row sums, the reference's mass in columns 0..1023.
//                    The inputs are x_scale * N(0, 1): at x_scale ~ 100, exp(x) overflows float32 (past
//                    x = 88.7) in a kernel that does not subtract the row max first, and the study says where
//                    (written elements that are inf or NaN, the first one's row, column and x).
//   softmax_sweep    max abs diff over the written columns for n_cols = 1..8192 (4 rows each), both kernels,
//                    unclipped (an exact 0 stays 0: the plot marks what it clips); N(0, 1) inputs whatever
//                    x_scale is (the sweep is about the truncation).
//   softmax_limits   the widest row `fixed` takes: this build's limit against the chip's register file.
//   softmax_online   the online form on one row: per chunk, rowmax(chunk), m, alpha = exp(m_old - m_new), l.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rungs/softmax.h"
#include "kernels/studies/study.h"

namespace kl::study {

// The panel's parameters, and the only place they are declared: n_cols, rows, seed, x_scale, view, trace_row
// (the panel's own) and chunk (softmax::param::chunk(), with the panel's other default as a panel_override).
// The panel builds its ParamValues from this list, so `study softmax` and the panel agree by construction.
std::vector<ParamSpec> softmax_params();

// Registers of a compute capability 9.0 chip (CUDA Programming Guide, "Technical Specifications"):
// 64K 32-bit registers per SM and per block, at most 255 per thread.
constexpr int64_t kHwRegsPerBlock = 65536;
constexpr int kHwMaxRegsPerThread = 255;

struct SoftmaxLimits {
  int64_t build_max_cols = 0;    // softmax::fixed_max_cols(): threads x row values per thread
  int threads_per_block = 0;     // the device's max_threads_per_block
  int values_per_thread = 0;     // softmax::kMaxRowRegsPerThread, this build's choice
  int64_t hw_regs_per_block = kHwRegsPerBlock;
  int hw_regs_per_thread = kHwMaxRegsPerThread;
  int64_t hw_regs_per_thread_at_full_block = 0;  // hw_regs_per_block / threads_per_block
  // How the shipped kernel (softmax_traced) runs the widest row: its launch's threads (Triton's num_warps:
  // 16 warps from BLOCK_SIZE 4096), the row values each thread then holds, and what the compiler gave it:
  // its float v[64] is indexed by a bound known only at run time, so it lives in local memory (the stack
  // frame), not registers (kernels/studies/kernel_resources.h: ptxas's record, or the GPU's own build).
  int kernel_threads = 0;
  int64_t kernel_values_per_thread = 0;
  int kernel_registers = 0;
  int64_t kernel_stack_bytes = 0;
  std::string kernel_origin;
  std::string device;            // the device's name
  std::string sentence;          // what the panel shows under the row sums
};
SoftmaxLimits softmax_limits(Backend b);

struct SoftmaxBug {
  int64_t n_cols = 0, rows = 0, block_fixed = 0;  // block_fixed = next_power_of_2(n_cols)
  int64_t seed = 0;
  std::vector<float> x, out_buggy, out_fixed;     // x standard normal from seed; outputs NaN where never written
  std::vector<double> ref;                        // float64 reference
  std::vector<int32_t> writer_buggy, writer_fixed;  // recorded writer per element, -1 = never
  // Where the backend runs, for the panel's texture fills (softmax::output_cells).
  Buffer<float> dev_out_buggy, dev_out_fixed;
  softmax::SoftmaxTrace trace_buggy, trace_fixed;

  int64_t unwritten_buggy = 0, unwritten_fixed = 0;
  double diff_buggy = 0, diff_fixed = 0;          // max abs diff over the written elements
  float vmax = 1;                                 // largest finite output (the colour scale's top)
  std::vector<double> sum_buggy_all, sum_buggy_written, sum_fixed, ref_head_mass;  // per row
  double x_scale = 1;                             // x = x_scale * N(0, 1)
  // Written elements that are inf or NaN (exp overflowing, a 0/0), and the first of them (row-major).
  int64_t nonfinite_buggy = 0, nonfinite_fixed = 0;
  int64_t first_nonfinite_row = -1, first_nonfinite_col = -1;  // fixed's first, else buggy's
  float first_nonfinite_x = 0;
  std::string nonfinite_sentence;                 // "" when every written element is finite
  // An edited kernel (kernels/editable, the buggy and fixed runs): which source ran, its first misbehaviour.
  bool edited = false;
  std::string source_file;                        // "softmax.cu" (shipped) or the edited source's file name
  editable::Fault fault;
  std::string fault_line;                         // "edited kernel: ..." or empty

  Check buggy, fixed;                 // "buggy matches reference: ..." and "fixed matches reference: ..."
  bool truncated = false;             // n_cols > 1024
  std::string headline;               // the line over the heatmaps
  std::string buggy_caption, fixed_caption;          // the heatmaps' titles
  std::string buggy_written, buggy_unwritten, fixed_written;  // under the heatmaps ("" when none)
  std::string row_sums_sentence;      // under the row-sum table
  std::string inputs_sentence;        // under the checks: what x is, and that the diff depends on the draw
  std::string notice;                 // the panel's opening line: what to notice, with these numbers
};
// Throws InputError for settings out of range (as the panel's controls would refuse them). `src`: an edited
// copy of kernels/editable/sources/softmax.cu run for buggy and fixed instead of the shipped one
// (CompileError when it does not compile). Without the argument, the rung's edited source the app holds
// (editable::edited("softmax")) if any, else the shipped one.
SoftmaxBug softmax_bug(Backend b, const ParamValues& p, const editable::Source* src);
SoftmaxBug softmax_bug(Backend b, const ParamValues& p);

struct SoftmaxSweep {
  static constexpr int64_t kRows = 4;
  static constexpr double kRounding = 1e-6;  // diffs at or below it are called float32 rounding
  std::vector<int64_t> n_cols;            // 1 .. 8192
  std::vector<double> buggy, fixed;       // max abs diff over written columns, unclipped
  double rounding_min = 0, rounding_max = 0;  // smallest and largest non-zero diff at n_cols <= 1024, both
  double buggy_past_min = 0;              // smallest buggy diff past 1024 (the bug, not rounding)
  double fixed_past_max = 0;              // largest fixed diff past 1024 (rounding, for the shipped kernel)
  double plot_floor = 0;                  // the y axis floor: the power of ten at or below the smallest non-zero
  double plot_ceiling = 0;                // the y axis top: 0.1, or the power of ten at or above the largest diff
  int clipped = 0;                        // points below plot_floor (exact zeros), drawn on it and marked
  std::string title, sentence, clipped_sentence;
};
// Standard normal inputs from seed + 7 (another draw than softmax_bug's). `src` as for softmax_bug.
SoftmaxSweep softmax_sweep(Backend b, const ParamValues& p, const editable::Source* src);
SoftmaxSweep softmax_sweep(Backend b, const ParamValues& p);
// The sweep's sentence from its numbers (rounding_*, buggy_past_min, fixed_past_max).
std::string sweep_sentence(const SoftmaxSweep& s);

struct SoftmaxOnlineStep {
  int64_t first_col = 0, last_col = 0;  // columns of the chunk, inclusive
  float chunk_max = 0, m = 0, l = 0;    // recorded by the kernel after the chunk
  double alpha = 0;                     // exp(m_old - m_new); 0 on the first chunk (m_old = -inf)
  bool m_moved = false;                 // alpha < 1 (always on the first chunk)
  double ref_sum = 0;                   // float64: sum of exp(x - m) over the columns seen so far
};
struct SoftmaxOnline {
  int64_t n_cols = 0, rows = 0, row = 0;
  int chunk = 0;
  std::vector<float> row_x;             // the traced row
  float row_absmax = 1;
  Buffer<float> dev_x;                  // the whole input where the backend runs (texture fill)
  std::vector<SoftmaxOnlineStep> steps;
  Check check;                          // "online matches reference (this row): ..."
  std::string intro;                    // the paragraph over the check
  std::string notice;                   // the panel's opening line
};
// Throws InputError for trace_row >= rows (naming the range) and other out-of-range settings.
SoftmaxOnline softmax_online(Backend b, const ParamValues& p, const editable::Source* src);
SoftmaxOnline softmax_online(Backend b, const ParamValues& p);  // the app's edited source, if any

// The common form: view=bug gives the two checks, row sums, the sweep and the limits; view=online the
// online check and its steps.
Report softmax_report(Backend b, const ParamValues& p);
Entry softmax_entry();

}  // namespace kl::study
