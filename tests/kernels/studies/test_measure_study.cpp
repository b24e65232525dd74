// kernels/studies/measure_study.*: the Measure view's notice line and, on the CPU backend, what a GPU does
// instead, held to the run's numbers and to the recorded H200 file (docs/perf/h200.json, embedded).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "assets/embedded.h"
#include "kernels/measure/peers.h"
#include "kernels/studies/gpu_expectation.h"
#include "kernels/studies/measure_study.h"

namespace kl::study {
namespace {

measure::Point point(const char* kernel, const char* variant, double size, double ms, double ratio = 0.5) {
  measure::Point p;
  p.section = "bandwidth";
  p.kernel = kernel;
  p.variant = variant;
  p.size = size;
  p.ms = ms;
  p.ratio = ratio;
  return p;
}

measure::Results results(bool cpu) {
  measure::Results r;
  r.machine.cpu_figures = cpu;
  r.points = {point("relu-dropout", "fused", 65536, 0.58), point("relu-dropout", "unfused", 65536, 0.744),
              point("softmax", "fixed", 65536, 0.226), point("softmax", "three_pass", 65536, 0.2555),
              point("vector-add", "fast", 65536, 0.1, 0.97), point("copy", "memcpy", 65536, 0.1, 1.0)};
  return r;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

TEST(MeasureStudy, FusionRatioAtTheLargestCommonSize) {
  const measure::Results r = results(true);
  const FusionRatio f = fusion_ratio(r, "relu-dropout", "fused", "unfused");
  EXPECT_EQ(f.size, 65536);
  EXPECT_DOUBLE_EQ(f.speedup, 0.744 / 0.58);
  EXPECT_EQ(fusion_ratio(r, "softmax", "fixed", "nothing").size, 0);
}

// On the CPU: these are CPU figures, the ratios measured here (1.28x, 1.13x) beside what the bytes give a
// bandwidth-bound GPU (2x, 2.5x), and the H200's recorded fused figure, from the embedded file.
TEST(MeasureStudy, CpuNoticeSaysWhatAGpuDoesInstead) {
  const measure::Results r = results(true);
  const std::string n = measure_notice(r);
  EXPECT_EQ(n.rfind("CPU figures: fusion measured 1.28x (ReLU + dropout) and 1.13x (one-pass softmax) at N = 2^16", 0), 0u)
      << n;
  EXPECT_NE(n.find("a bandwidth-bound GPU shows about 2x and 2.5x (the bytes)"), std::string::npos) << n;
  const GpuExpectation g = relu_dropout_on_gpu();
  EXPECT_NE(n.find(fmt("%.0f GB/s", g.recorded_gbs) + fmt(", %.2f of a copy", g.recorded_of_copy)), std::string::npos) << n;
  const std::string line = measure_cpu_line(r);
  EXPECT_EQ(line.rfind("CPU timings do not show what a GPU does", 0), 0u) << line;
  EXPECT_NE(line.find("Recorded on an " + peers::embedded().device), std::string::npos) << line;
  EXPECT_NE(line.find(fmt("%.0f GB/s", softmax_on_gpu().recorded_gbs)), std::string::npos) << line;
  EXPECT_TRUE(measure_cpu_line(results(false)).empty());
  // The FlashAttention view's line: the recorded H200's fastest forward figure, from the file.
  double best = 0;
  for (const peers::Row& row : peers::embedded().find("flash-forward")->rows) best = std::max(best, row.values[0].value_or(0));
  const std::string fl = measure_cpu_flash_line(r);
  EXPECT_EQ(fl.rfind("CPU timings do not show what a GPU does", 0), 0u) << fl;
  EXPECT_NE(fl.find(fmt("up to %.1f TFLOP/s", best)), std::string::npos) << fl;
  EXPECT_TRUE(measure_cpu_flash_line(results(false)).empty());
}

TEST(MeasureStudy, GpuNoticeStatesTheRatiosAndTheBestFractionOfTheCeiling) {
  const std::string n = measure_notice(results(false));
  EXPECT_EQ(n.rfind("fusion saves bytes: ReLU + dropout 1.28x faster fused (8 against 16 bytes per element: 2x)", 0), 0u)
      << n;
  EXPECT_NE(n.find("the best, vector-add fast, reaches 0.97 of the copy ceiling"), std::string::npos) << n;
  EXPECT_EQ(measure_notice(measure::Results{}).rfind("nothing measured yet", 0), 0u);
}

// The text: a copy bounds a kernel that reads and writes in equal parts; one that reads more than it writes
// can beat it (the old text called the copy the fastest any kernel can read and write memory).
TEST(MeasureStudy, TextSaysWhatTheCopyBounds) {
  std::string text(assets::find("text/measure.md"));
  for (char& c : text) c = c == '\n' ? ' ' : c;
  EXPECT_EQ(text.find("the fastest any kernel can read and write memory"), std::string::npos) << text;
  EXPECT_NE(text.find("a kernel that reads more than it writes (vector add reads two floats per float written) can "
                      "beat a 1:1 copy"), std::string::npos) << text;
  EXPECT_NE(text.find("which do not show what a GPU does"), std::string::npos) << text;
}

}  // namespace
}  // namespace kl::study
