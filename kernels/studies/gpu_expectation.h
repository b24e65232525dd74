// What a GPU does where the CPU backend's timings cannot show it. On the CPU the memory-bound kernels are
// timed against caches and one core's loops, so their fused / unfused ratios (0.9x to 1.3x) teach nothing
// about a GPU, where at large sizes they are bound by memory bandwidth and time follows the bytes moved.
// Each sentence says so, gives the bytes' ratio, and the figure recorded on an H200 (docs/perf/h200.json,
// embedded as perf/h200.json; kernels/measure/peers.h), so a CPU view states what to expect beside what it
// measured.
#pragma once
#include <string>

namespace kl::study {

// Bytes per element each version moves (as the Measure view counts them, kernels/measure/measure.cpp).
constexpr double kReluDropoutFusedBytes = 8, kReluDropoutUnfusedBytes = 16;
constexpr double kSoftmaxOnePassBytes = 8, kSoftmaxThreePassBytes = 20;

struct GpuExpectation {
  double bytes_ratio = 0;     // unfused bytes / fused bytes: the time ratio a bandwidth-bound GPU shows
  double recorded_gbs = 0;    // the ladder's fused kernel on the recorded H200 (0 where not recorded)
  double recorded_of_copy = 0;
  std::string recorded_shape; // "n=2^26 p=0.5"
  std::string sentence;       // "CPU timings do not show what a GPU does: ..."
};
GpuExpectation relu_dropout_on_gpu();
GpuExpectation softmax_on_gpu();

}  // namespace kl::study
