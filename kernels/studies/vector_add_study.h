// Rung 1's study: what the vector-add panel concludes, with no GL. Settings in (n, block_size, seed and
// the backend), the result out: the inputs, the output and the kernel's own trace where the backend runs
// (the panel rasters them), the check verdicts with their sentences, and the lines the panel shows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/trace.h"
#include "kernels/studies/study.h"

namespace kl::study {

// The vector-add panel's parameters (name, range, default, help).
std::vector<ParamSpec> vector_add_params();

struct VectorAddResult {
  Backend backend = Backend::Cpu;
  int64_t n = 0, grid = 0;
  int block_size = 0;
  int64_t offsets = 0;         // grid * BLOCK_SIZE: every offset some program computes
  int64_t masked = 0;          // offsets - n: those the mask offsets < n switches off
  std::vector<float> x, y;     // the inputs, on the host (small integers)
  Buffer<float> out;           // where the backend runs; poisoned with NaN before the launch
  ElementTrace trace;          // recorded by the traced kernel, where the backend runs
  // Numbers the checks state.
  double max_abs_diff = 0;     // against the host reference, over the elements written
  int64_t never_written = 0;   // NaN left in out
  int64_t stored_once = 0;     // elements whose write count is exactly 1
  int64_t masked_recorded = 0; // offsets the trace recorded as masked
  Check matches_reference, trace_check;
  std::string grid_line;       // "grid = ceil(n / BLOCK_SIZE) = ... programs, ... offsets, ... masked"
  std::string block_line;      // what BLOCK_SIZE counts (elements, not threads)
  std::string tail_line;       // the last program's offsets: which store, which are masked
  std::string notice;          // the panel's opening line: what to notice, with these numbers
  // An edited kernel (kernels/editable): which source ran, and its first misbehaviour (kind None when it
  // ran cleanly; the checks above then read what it did write).
  bool edited = false;
  std::string source_file;     // "vector_add.cu" (shipped) or the edited source's file name
  editable::Fault fault;
  std::string fault_line;      // "edited kernel: out-of-bounds store to out[1000] ..." or empty
  // Offsets past n, as the views name them: "masked offset" for a kernel that masks them; an edited kernel
  // whose first fault is an access past n did not (its accesses there were out of bounds, refused).
  bool accessed_past_n = false;  // fault is OutOfBounds at an index >= n
  int64_t fault_offset = -1;     // that index (the cell the views mark), else -1
  std::string past_n_label;      // the grid caption's word for the hatched cells
  std::string past_n_tooltip;    // what the tooltip says of such an offset
};

// Throws InputError for settings out of range (and for more host memory than there is). `src`: an
// edited copy of kernels/editable/sources/vector_add.cu run instead of the shipped kernel (CompileError
// when it does not compile). Without the argument, the rung's edited source the app holds
// (editable::edited("vector-add")) if any, else the shipped one.
VectorAddResult run_vector_add(Backend b, const ParamValues& settings, const editable::Source* src);
VectorAddResult run_vector_add(Backend b, const ParamValues& settings);
// An edited kernel's fault adds a `fault` line and the `fault` number 1 (0 when it ran cleanly).
Report vector_add_report(const VectorAddResult& r);
Entry vector_add_entry();

}  // namespace kl::study
