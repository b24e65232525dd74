// The Measure view's numbers and the machine they came from, as JSON and CSV: written by the panel's
// export buttons and by `kernel-ladder measure --json F --csv F` (which needs no GL context).
//   JSON: {"machine": {device, backend, date, cpu_figures, quick, copy_gbs, copy_elements, gemm_tflops,
//          gemm, gemm_max_rel_err}, "complete", "cancelled", "error", "points": [...], "fusion": [...]}
//   CSV:  one row per point (kCsvColumns), the machine repeated on every row so each row stands alone.
#pragma once
#include <string>
#include <vector>

#include "kernels/measure/measure.h"

namespace kl::app {

// Fused against unfused at the largest size both were measured at (the fusion bars).
struct FusionPair {
  std::string kernel, fused, unfused;
  double size = 0, fused_ms = 0, unfused_ms = 0;
  double fused_bytes_per_elem = 0, unfused_bytes_per_elem = 0;
  double speedup() const { return fused_ms > 0 ? unfused_ms / fused_ms : 0; }
};
std::vector<FusionPair> fusion_pairs(const measure::Results& r);

extern const char* const kCsvColumns;  // "section,kernel,variant,shape,size,..."

std::string measure_json(const measure::Results& r);
std::string measure_csv(const measure::Results& r);
// Write the text to `path`; InputError naming the flag/field when the file cannot be written.
void write_text_file(const std::string& path, const std::string& text, const std::string& what);

// `kernel-ladder measure [--backend B] [--quick] [--json F] [--csv F]`: every measurement of the view,
// in the foreground, one line per step, then a summary; no GL context. Returns the exit code.
int measure_command(const std::string& backend, bool quick, const std::string& json, const std::string& csv);

}  // namespace kl::app
