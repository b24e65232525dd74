// What the Measure view concludes from a run (kernels/measure/measure.h), without GL: its notice line, and
// on the CPU backend what a GPU does instead (kernels/studies/gpu_expectation.h), with the figures.
#pragma once
#include <string>

#include "kernels/measure/measure.h"

namespace kl::study {

// Fused against unfused at the largest size both were measured at (0 where not measured).
struct FusionRatio {
  double size = 0, speedup = 0;  // unfused time / fused time
  bool launch_bound = false;
};
FusionRatio fusion_ratio(const measure::Results& r, const std::string& kernel, const std::string& fused,
                         const std::string& unfused);

// The view's opening line. Before a run: what Run does. On the CPU backend: that these are CPU figures,
// the fusion ratios measured here against the bytes' ratios a GPU shows, and the recorded H200's fused
// figure. On a GPU: the fusion ratios against the bytes' ratios, and the best fraction of the copy ceiling.
std::string measure_notice(const measure::Results& r);
// On the CPU backend, under the timing views: CPU timings do not show what a GPU does, and the H200's
// recorded figures for both fusions (empty on a GPU).
std::string measure_cpu_line(const measure::Results& r);
// The same for the FlashAttention view: the teaching kernel on a CPU against a CPU GEMM says nothing of a
// GPU's tensor cores; the recorded H200's fastest forward figure (empty on a GPU).
std::string measure_cpu_flash_line(const measure::Results& r);

}  // namespace kl::study
