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
  bool launch_bound = false;  // at this size the time is mostly the fixed cost of a call (measure.h)
  double speedup() const { return fused_ms > 0 ? unfused_ms / fused_ms : 0; }
};
std::vector<FusionPair> fusion_pairs(const measure::Results& r);
// The bar chart's title: "ReLU+dropout, N=2^20: 1.58x (launch-bound)".
std::string fusion_title(const FusionPair& f);

// The table's colours (IM_COL32 packing: 0xAABBGGRR), one per measure::Verdict. Green means "at the
// ceiling" only: a ratio above 1 (the ceiling did not bound it) and a launch-bound size get their own.
constexpr unsigned kSuccessColour = 0xFF78DB78u;       // green  (120, 219, 120)
constexpr unsigned kFairColour = 0xFF66CCF2u;          // amber  (242, 204, 102)
constexpr unsigned kLowColour = 0xFF7380FFu;           // red    (255, 128, 115)
constexpr unsigned kAboveCeilingColour = 0xFFF0B4A0u;  // violet (160, 180, 240): not a bound, not success
constexpr unsigned kLaunchBoundColour = 0xFFA0A0A0u;   // grey: fixed cost, not bandwidth
unsigned verdict_colour(measure::Verdict v);
// The recorded peers' ratios (kernels/measure/peers.h): ahead of the peer (the ratio as shown >= 1) and behind.
constexpr unsigned kAheadColour = 0xFF96E15Au;  // green (90, 225, 150): not the plots' lines' green
constexpr unsigned kBehindColour = kLowColour;  // red   (255, 128, 115)
unsigned standing_colour(double ratio, int digits);

extern const char* const kCsvColumns;  // "section,kernel,variant,shape,size,..."

std::string measure_json(const measure::Results& r);
std::string measure_csv(const measure::Results& r);
// Write the text to `path`; InputError naming the flag/field when the file cannot be written.
void write_text_file(const std::string& path, const std::string& text, const std::string& what);

// `kernel-ladder measure [--backend B] [--quick] [--json F] [--csv F]`: every measurement of the view,
// in the foreground, one line per step, then a summary; no GL context. Returns the exit code.
int measure_command(const std::string& backend, bool quick, const std::string& json, const std::string& csv);

}  // namespace kl::app
