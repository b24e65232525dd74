// Rung 2's study: what the ReLU + dropout panel concludes, with no GL. Settings in (n, p, seed,
// block_size and the backend), the result out: the inputs, the traced output and keep mask where the
// backend runs (the panel rasters the mask), the drop rate over 25 seeds with its 99% interval, the
// histogram of survivors' out/x with a bin centred on 1/(1-p), the tie check (u == p is kept), fused
// against unfused timed at the panel's n and at a size where bytes dominate, and every check sentence.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/rungs/relu_dropout.h"
#include "kernels/studies/study.h"

namespace kl::study {

constexpr int64_t kReluDropoutMaxN = int64_t(1) << 20;  // the panel's range
constexpr int kDropoutSeeds = 25;                         // the rate plot: this seed and the next 24
constexpr int kDropoutBins = 9;                           // bins s/4 wide centred on k*s/4, k = 0..8, s = 1/(1-p)
constexpr double kZ99 = 2.5758;                           // two-sided 99% normal quantile

std::vector<ParamSpec> relu_dropout_params();

struct ReluDropoutResult {
  Backend backend = Backend::Cpu;
  int64_t n = 0;
  double p = 0;
  uint64_t seed = 0;
  int block_size = 0;
  float scale = 1;                 // keep_scale(p): fl(1/(1-p)), what every kernel multiplies by
  std::vector<float> x;            // the inputs on the host: uniform in [-1, 1)
  Buffer<float> out;               // the traced kernel's output, where the backend runs
  relu_dropout::DropoutTrace trace;  // its keep mask and element trace, where the backend runs

  // The drop rate of this seed and of kDropoutSeeds seeds from it, against p +- z sqrt(p(1-p)/n).
  int64_t dropped = 0;
  double rate = 0, sigma = 0, lo99 = 0, hi99 = 0;
  bool inside = false;
  std::vector<double> seed_rates;  // seed, seed + 1, ...
  int seeds_inside = 0;

  // Survivors (kept, x > 0) by out/x: kDropoutBins bins of width bin_width centred on k * bin_width,
  // so bin spike_bin is centred on 1/(1-p) and ratios a rounding either side of it fall into it.
  std::vector<uint32_t> hist;
  std::vector<double> bin_centres;
  std::vector<std::string> bin_labels;  // the centres, "%.4g"
  double bin_width = 0;
  int spike_bin = kDropoutBins / 2;
  int64_t survivors = 0, in_spike = 0, elsewhere = 0;
  int64_t within_1ulp = 0;   // survivors whose out equals the reference within 1 ulp (the check's tolerance)

  // The tie: at p = u of element tie_element, keep = u >= p must keep it (a u > p test would drop it).
  int64_t tie_element = 0;
  double tie_p = 0;
  bool tie_kept_traced = false, tie_kept_fused = false, tie_kept_unfused = false;

  // Fused against unfused, medians in ms, at the panel's n and at big_n.
  double t_fused_ms = 0, t_unfused_ms = 0, t_fused_big_ms = 0, t_unfused_big_ms = 0;
  int64_t big_n = 0;
  bool launch_bound = false;  // the fused time at n is over twice what its bytes take at big_n's rate
  double bytes_time_us = 0;   // 8 n bytes at the fused rate measured at big_n

  Check matches_reference, bit_for_bit, rate_inside, tie_kept;
  std::string formula_line;   // out = ..., keep = ..., scale
  std::string philox_line;    // which Philox word each element uses; not tl.rand's mask
  std::string rate_line;      // dropped k of n = ...; 99% interval [...]
  std::string seeds_line;     // (25 of 25 seeds inside; ...)
  std::string rate_title;     // empirical drop rate, seeds a..b
  std::string hist_title;     // the spike's count and the count elsewhere
  std::string time_title, big_time_title;  // the two timing charts
  std::string big_fused_label, big_unfused_label;  // "fused, 34 MB": the bytes each moves at big_n
  std::string notice;         // the panel's opening line: what to notice, with these numbers
  std::string fusion_line;    // what the panel-n saving is: one launch or bytes (on a GPU); the CPU's ratios
  // On the CPU backend: CPU timings do not show what a GPU does; the bytes' ratio and the H200's recorded
  // figure (kernels/studies/gpu_expectation.h). Empty on the CUDA backend.
  std::string gpu_line;
  // An edited kernel (kernels/editable): which source ran (the traced runs: the mask, the rates over seeds,
  // the tie), and its first misbehaviour (kind None when it ran cleanly; the checks read what it stored).
  bool edited = false;
  std::string source_file;    // "relu_dropout.cu" (shipped) or the edited source's file name
  editable::Fault fault;
  std::string fault_line;     // "edited kernel: out-of-bounds store to ..." or empty
};

// Throws InputError for settings out of range. `src`: an edited copy of kernels/editable/sources/
// relu_dropout.cu run instead of the shipped traced kernel (CompileError when it does not compile); the
// fused and unfused kernels it is compared with stay the shipped ones. Without the argument, the rung's
// edited source the app holds (editable::edited("relu-dropout")) if any, else the shipped one.
ReluDropoutResult run_relu_dropout(Backend b, const ParamValues& settings, const editable::Source* src);
ReluDropoutResult run_relu_dropout(Backend b, const ParamValues& settings);
Report relu_dropout_report(const ReluDropoutResult& r);
Entry relu_dropout_entry();

}  // namespace kl::study
