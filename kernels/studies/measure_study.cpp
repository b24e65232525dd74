#include "kernels/studies/measure_study.h"

#include <cmath>
#include <cstdio>

#include "kernels/measure/peers.h"
#include "kernels/studies/gpu_expectation.h"

namespace kl::study {

FusionRatio fusion_ratio(const measure::Results& r, const std::string& kernel, const std::string& fused,
                         const std::string& unfused) {
  FusionRatio f;
  for (const measure::Point& p : r.points)
    if (p.kernel == kernel && p.variant == unfused && p.size > f.size && r.find(kernel, fused, p.size)) f.size = p.size;
  if (f.size == 0) return f;
  const measure::Point* a = r.find(kernel, fused, f.size);
  const measure::Point* b = r.find(kernel, unfused, f.size);
  f.speedup = a->ms > 0 ? b->ms / a->ms : 0;
  f.launch_bound = a->launch_bound;
  return f;
}

namespace {

std::string pow2(double n) {
  const double e = std::log2(n);
  char b[48];
  if (std::fabs(e - std::round(e)) < 1e-9) std::snprintf(b, sizeof b, "2^%d", int(std::round(e)));
  else std::snprintf(b, sizeof b, "%.0f", n);
  return b;
}

}  // namespace

std::string measure_notice(const measure::Results& r) {
  if (r.points.empty()) return "nothing measured yet: Run times every kernel against a copy and a GEMM measured in the same run";
  const FusionRatio rd = fusion_ratio(r, "relu-dropout", "fused", "unfused");
  const FusionRatio sm = fusion_ratio(r, "softmax", "fixed", "three_pass");
  const GpuExpectation grd = relu_dropout_on_gpu(), gsm = softmax_on_gpu();
  char b[700];
  if (r.machine.cpu_figures) {
    std::snprintf(b, sizeof b,
                  "CPU figures: fusion measured %.2fx (ReLU + dropout) and %.2fx (one-pass softmax) at N = %s on this "
                  "CPU, where a bandwidth-bound GPU shows about %.2gx and %.2gx (the bytes); the recorded H200 runs the "
                  "fused ReLU + dropout at %.0f GB/s, %.2f of a copy",
                  rd.speedup, sm.speedup, pow2(rd.size).c_str(), grd.bytes_ratio, gsm.bytes_ratio, grd.recorded_gbs,
                  grd.recorded_of_copy);
    return b;
  }
  double best = 0;
  std::string best_name;
  const double nmax = r.largest_size("bandwidth");
  for (const measure::Point& p : r.points)
    if (p.section == "bandwidth" && p.size == nmax && p.kernel != "copy" && p.ratio > best && p.ratio <= 1.0)
      best = p.ratio, best_name = p.kernel + " " + p.variant;
  std::snprintf(b, sizeof b,
                "fusion saves bytes: ReLU + dropout %.2fx faster fused (8 against 16 bytes per element: %.2gx) and "
                "softmax %.2fx in one pass (8 against 20: %.2gx) at N = %s%s",
                rd.speedup, grd.bytes_ratio, sm.speedup, gsm.bytes_ratio, pow2(rd.size).c_str(),
                rd.launch_bound ? " (launch-bound: one launch saved, not bytes)" : "");
  std::string n = b;
  if (!best_name.empty()) {
    std::snprintf(b, sizeof b, "; the best, %s, reaches %.2f of the copy ceiling", best_name.c_str(), best);
    n += b;
  }
  return n;
}

std::string measure_cpu_line(const measure::Results& r) {
  if (!r.machine.cpu_figures) return "";
  const GpuExpectation grd = relu_dropout_on_gpu(), gsm = softmax_on_gpu();
  const peers::Recorded& rec = peers::embedded();
  char b[900];
  std::snprintf(b, sizeof b,
                "CPU timings do not show what a GPU does: on a GPU at large sizes these kernels are bound by memory "
                "bandwidth, so time follows the bytes: fused ReLU + dropout about %.2gx faster than unfused (%.0f "
                "against %.0f bytes per element), one-pass softmax about %.2gx faster than three passes (%.0f against "
                "%.0f). Recorded on an %s (%s, %s): fused ReLU + dropout at %s, %.0f GB/s (%.2f of a copy); one-pass "
                "softmax at %s, %.0f GB/s (%.2f of a copy).",
                grd.bytes_ratio, kReluDropoutFusedBytes, kReluDropoutUnfusedBytes, gsm.bytes_ratio,
                kSoftmaxOnePassBytes, kSoftmaxThreePassBytes, rec.device.c_str(), peers::kSourcePath,
                rec.date.c_str(), grd.recorded_shape.c_str(), grd.recorded_gbs, grd.recorded_of_copy,
                gsm.recorded_shape.c_str(), gsm.recorded_gbs, gsm.recorded_of_copy);
  return b;
}

std::string measure_cpu_flash_line(const measure::Results& r) {
  if (!r.machine.cpu_figures) return "";
  const peers::Recorded& rec = peers::embedded();
  const peers::Section* f = rec.find("flash-forward");
  std::string best_shape;
  double best = 0;
  if (f)
    for (const peers::Row& row : f->rows)
      if (!row.values.empty() && row.values[0] && *row.values[0] > best) best = *row.values[0], best_shape = row.shape;
  char b[600];
  std::snprintf(b, sizeof b,
                "CPU timings do not show what a GPU does: here the teaching kernel runs in float32 on CPU cores "
                "against a CPU GEMM; a GPU's fast kernel runs bf16 on tensor cores. Recorded on an %s (%s, %s): the "
                "fast forward at up to %.1f TFLOP/s (%s).",
                rec.device.c_str(), peers::kSourcePath, rec.date.c_str(), best, best_shape.c_str());
  return b;
}

}  // namespace kl::study
