// kernels/measure/measure: the Measure view's quick sizes are timed cold (buffer sets rotated past the L2,
// the copy and the kernels alike), a ratio above the copy is never read as success, launch-bound sizes
// are named, and every sentence that states a number states the number the results hold.
#include "kernels/measure/measure.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <regex>
#include <string>

#include "kernels/measure/bench.h"
#include "test_util.h"

namespace kl::measure {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

std::string f(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

// Every number written in `text` ("2^20", "3712", "2.3", "60"), in order; the name "L2" is not a number.
std::vector<std::string> numbers_in(const std::string& text) {
  const std::string s = std::regex_replace(text, std::regex("L2"), "L-two");
  std::vector<std::string> out;
  const std::regex num(R"(\d+(\^\d+)?(\.\d+)?)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), num); it != std::sregex_iterator(); ++it)
    out.push_back(it->str());
  return out;
}

Point bw(const std::string& kernel, const std::string& variant, int64_t n, double gbs, double ratio, int sets,
         bool launch_bound) {
  Point p;
  p.section = "bandwidth", p.kernel = kernel, p.variant = variant, p.size = double(n);
  p.bytes = 8.0 * double(n), p.gbs = gbs, p.ratio = ratio, p.sets = sets, p.launch_bound = launch_bound;
  p.ms = p.bytes / (gbs * 1e9) * 1e3;
  return p;
}

// A CUDA-like result: the quick sizes and one large one, an H200's L2, a 2.3 us call.
Results cuda_like() {
  Results r;
  r.machine.backend = "cuda";
  r.machine.l2_bytes = 60 * kMiB;
  r.machine.call_us = 2.3;
  r.machine.copy_gbs = 3712, r.machine.copy_elements = int64_t(1) << 26;
  r.machine.gemm_tflops = 712, r.machine.gemm_what = "cuBLAS bf16 GEMM 8192^3, fp32 accumulate";
  for (int e : {16, 18, 20, 26}) {
    const int64_t n = int64_t(1) << e;
    const bool lb = e <= 20;
    r.points.push_back(bw("copy", "d2d", n, e == 26 ? 3712 : 900, 1, bandwidth_sets(r.machine.l2_bytes, n), lb));
    r.points.push_back(bw("vector-add", "fast", n, 1000, e == 26 ? 0.95 : 1.36, bandwidth_sets(r.machine.l2_bytes, n), lb));
  }
  return r;
}

TEST(Measure, QuickCudaSizesRotateSetsSpanningFourTimesTheL2) {
  const int64_t l2 = DeviceInfo{}.l2_bytes;  // the H200's 60 MiB
  ASSERT_EQ(l2, 60 * kMiB);
  Options o;
  o.backend = Backend::Cuda, o.quick = true;
  const std::vector<int64_t> quick = sizes(o);
  ASSERT_EQ(quick, (std::vector<int64_t>{int64_t(1) << 16, int64_t(1) << 18, int64_t(1) << 20}));
  for (int64_t n : quick) {
    const int sets = bandwidth_sets(l2, n);
    // The smallest footprint of a timed call is 8 B per element (copy, fused ReLU + dropout, softmax).
    EXPECT_GE(double(sets) * 8.0 * double(n), 4.0 * double(l2)) << "n=" << n;
    EXPECT_LT(double(sets - 1) * 8.0 * double(n), 4.0 * double(l2)) << "n=" << n << ": more sets than needed";
    EXPECT_GT(sets, 1) << "n=" << n << " fits the L2: it must rotate";
  }
  EXPECT_EQ(bandwidth_sets(l2, int64_t(1) << 16), 480);  // 240 MiB / 512 KiB
  EXPECT_EQ(bandwidth_sets(l2, int64_t(1) << 26), 1);    // 512 MiB per set already spans it
  EXPECT_EQ(bandwidth_sets(0, int64_t(1) << 16), 1);     // the CPU backend: no L2 reported, no rotation
}

TEST(Measure, ARatioAboveOneIsNeverSuccess) {
  for (bool lb : {false, true})
    for (double ratio : {1.0001, 1.09, 1.17, 1.36, 3.0}) {
      Point p;
      p.ratio = ratio, p.launch_bound = lb;
      EXPECT_EQ(verdict(p), Verdict::AboveCeiling) << ratio;
      EXPECT_NE(verdict(p), Verdict::AtCeiling) << ratio;
    }
  Point p;
  p.ratio = 0.95;
  EXPECT_EQ(verdict(p), Verdict::AtCeiling);
  p.launch_bound = true;
  EXPECT_EQ(verdict(p), Verdict::LaunchBound) << "a launch-bound 0.95 is not 'at the ceiling'";
  p.launch_bound = false, p.ratio = 0.6;
  EXPECT_EQ(verdict(p), Verdict::Fair);
  p.ratio = 0.2;
  EXPECT_EQ(verdict(p), Verdict::Low);
  EXPECT_STREQ(verdict_name(Verdict::AboveCeiling), "above the ceiling");
}

TEST(Measure, SentencesStateTheResultsNumbers) {
  const Results r = cuda_like();
  EXPECT_EQ(ceilings_sentence(r), "copy 3712 GB/s at 2^26 floats | GEMM ceiling 712 TFLOP/s (" + r.machine.gemm_what + ")");

  const std::string cold = cold_sentence(r);
  // "... span 4x the 60 MiB L2 ... (S = 480 at 2^16, 120 at 2^18, 30 at 2^20, 1 at 2^26 floats)"
  EXPECT_NE(cold.find("4x the " + f("%.0f", double(r.machine.l2_bytes) / kMiB) + " MiB L2"), std::string::npos) << cold;
  std::vector<std::string> expected = {"4", "60"};
  for (const Point& p : r.points)
    if (p.kernel == "copy") expected.push_back(std::to_string(p.sets)), expected.push_back("2^" + f("%.0f", std::log2(p.size)));
  EXPECT_EQ(numbers_in(cold), expected) << cold;

  const std::string launch = launch_sentence(r);
  EXPECT_DOUBLE_EQ(launch_bound_up_to(r), double(int64_t(1) << 20));
  EXPECT_EQ(numbers_in(launch), (std::vector<std::string>{"2.3", "4", "2^20", "10"})) << launch;
  EXPECT_NE(launch.find("at least 2.3 us"), std::string::npos) << launch;
  EXPECT_NE(launch.find("up to N = 2^20"), std::string::npos) << launch;
  EXPECT_NE(launch.find("launch-bound"), std::string::npos) << launch;

  Results none = r;
  for (Point& p : none.points) p.launch_bound = false;
  EXPECT_EQ(launch_bound_up_to(none), 0.0);
  EXPECT_EQ(numbers_in(launch_sentence(none)), (std::vector<std::string>{"2.3", "4", "10"})) << launch_sentence(none);
  Results cpu = r;
  cpu.machine.call_us = 0, cpu.machine.l2_bytes = 0;
  EXPECT_EQ(launch_sentence(cpu), "");
  EXPECT_NE(cold_sentence(cpu).find("timed warm"), std::string::npos);
}

TEST(Measure, CpuQuickRunIsTimedAsFoundAndItsSentencesMatch) {
  Options o;
  o.backend = Backend::Cpu, o.quick = true;
  const Results r = run(o);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.machine.l2_bytes, 0);
  EXPECT_EQ(r.machine.call_us, 0.0);
  for (const Point& p : r.points) {
    if (p.section != "bandwidth") continue;
    EXPECT_EQ(p.sets, 1) << p.series();
    EXPECT_FALSE(p.launch_bound) << p.series();
  }
  EXPECT_EQ(numbers_in(ceilings_sentence(r))[0], f("%.0f", r.machine.copy_gbs));
  EXPECT_NE(ceilings_sentence(r).find(f("%.2f GFLOP/s", r.machine.gemm_tflops * 1e3)), std::string::npos);
  EXPECT_EQ(launch_sentence(r), "");
}

TEST(Measure, CudaQuickRunIsTimedColdAndNamesTheLaunchBoundSizes) {
  KL_REQUIRE_CUDA();
  Options o;
  o.backend = Backend::Cuda, o.quick = true;
  const Results r = run(o);
  ASSERT_TRUE(r.error.empty()) << r.error;
  const int64_t l2 = device_info(Backend::Cuda).l2_bytes;
  ASSERT_EQ(r.machine.l2_bytes, l2);
  ASSERT_GT(r.machine.call_us, 0.0);
  for (const Point& p : r.points) {
    if (p.section != "bandwidth") continue;
    EXPECT_EQ(p.sets, bandwidth_sets(l2, int64_t(p.size))) << p.series() << " n=" << p.size;
    EXPECT_GE(double(p.sets) * 8.0 * p.size, 4.0 * double(l2)) << p.series() << " n=" << p.size;
    const Point* copy = r.find("copy", "d2d", p.size);
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(p.launch_bound, copy->ms * 1e3 < kLaunchBoundFactor * r.machine.call_us) << p.series();
    if (p.ratio > 1) EXPECT_EQ(verdict(p), Verdict::AboveCeiling) << p.series();
    std::printf("%-22s n=2^%.0f sets=%d %.3f of copy, %s\n", p.series().c_str(), std::log2(p.size), p.sets, p.ratio,
                verdict_name(verdict(p)));
  }
  const std::string launch = launch_sentence(r);
  std::printf("%s\n%s\n", cold_sentence(r).c_str(), launch.c_str());
  EXPECT_NE(launch.find(f("at least %.1f us", r.machine.call_us)), std::string::npos) << launch;
  if (launch_bound_up_to(r) > 0)
    EXPECT_NE(launch.find("up to N = " + pow2_name(launch_bound_up_to(r))), std::string::npos) << launch;
}

}  // namespace
}  // namespace kl::measure
