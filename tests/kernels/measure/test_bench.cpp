// kernels/bench: how many buffer sets a timed loop rotates through so that no launch is timed from the
// L2, and the copy baseline that rotates with them.
#include <gtest/gtest.h>

#include "kernels/measure/bench.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

TEST(Bench, SetsToSpanBothSidesOfFourTimesTheL2) {
  const int64_t l2 = 60 * kMiB;  // the H200's
  EXPECT_EQ(bench::sets_to_span(l2, size_t(4 * l2)), 1);       // one set spans it exactly
  EXPECT_EQ(bench::sets_to_span(l2, size_t(4 * l2 + 1)), 1);
  EXPECT_EQ(bench::sets_to_span(l2, size_t(4 * l2 - 1)), 2);   // one byte short: a second set
  EXPECT_EQ(bench::sets_to_span(l2, size_t(512 * kMiB)), 1);   // vector add at 2^26 fp32 and above
  EXPECT_EQ(bench::sets_to_span(l2, size_t(32 * kMiB)), 8);    // softmax 4096 x 1024 fp32, x + out
  EXPECT_EQ(bench::sets_to_span(l2, size_t(64 * kMiB)), 4);    // 4096 x 2048
  EXPECT_EQ(bench::sets_to_span(l2, size_t(48 * kMiB)), 5);    // 240 / 48 = 5
  EXPECT_EQ(bench::sets_to_span(l2, size_t(47 * kMiB)), 6);    // just short of 5 sets' worth
  EXPECT_EQ(bench::sets_to_span(l2, 1), int(4 * l2));
  EXPECT_EQ(bench::sets_to_span(l2, 0), 1);                    // nothing to time: no rotation
  EXPECT_EQ(bench::sets_to_span(0, size_t(kMiB)), 1);          // no L2 reported
}

TEST(Bench, CpuTimesWhatItFinds) { EXPECT_EQ(bench::cold_sets(Backend::Cpu, size_t(kMiB)), 1); }

TEST(Bench, CopyBaselineRefusesNoSets) {
  try {
    bench::copy_bandwidth_gbs(Backend::Cpu, size_t(kMiB), 0);
    FAIL() << "sets=0 was taken";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sets=0"), std::string::npos) << e.what();
  }
}

TEST(Bench, CopyBaselineRotatesOnCpu) {
  EXPECT_GT(bench::copy_bandwidth_gbs(Backend::Cpu, size_t(kMiB), 3), 0.0);
}

TEST(Bench, CudaColdSetsFollowTheDevicesL2) {
  KL_REQUIRE_CUDA();
  const DeviceInfo d = device_info(Backend::Cuda);
  ASSERT_GT(d.l2_bytes, 0);
  EXPECT_EQ(bench::cold_sets(Backend::Cuda, size_t(d.l2_bytes)), 4);
  EXPECT_EQ(bench::cold_sets(Backend::Cuda, size_t(4 * d.l2_bytes)), 1);
  EXPECT_GT(bench::copy_bandwidth_gbs(Backend::Cuda, size_t(8 * kMiB), 3), 0.0);
}

#ifdef KL_HAS_CUDA
TEST(Bench, SpinRefusesDurationsOutsideItsRange) {
  for (double bad : {0.0, -1.0, 1000.001, 1e9}) {
    try {
      bench::detail::enqueue_spin(bad);
      FAIL() << "ms=" << bad << " was taken";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("allowed (0, 1000]"), std::string::npos) << e.what();
    }
  }
}

TEST(Bench, SpinHoldsTheGpuAndTheTimedWorkStillTimesOnlyItself) {
  KL_REQUIRE_CUDA();
  // A 3 ms spin timed as the work itself takes at least 3 ms ...
  const bench::Timing spin = bench::time(Backend::Cuda, [] { bench::detail::enqueue_spin(3.0); }, 1, 3);
  EXPECT_GE(spin.median_ms, 3.0);
  EXPECT_LT(spin.median_ms, 30.0);
  // ... and the 10 ms spin queued ahead of every timed loop is not inside any interval.
  const bench::Timing tiny = bench::time(Backend::Cuda, [] { bench::detail::enqueue_spin(0.01); }, 1, 5);
  EXPECT_LT(tiny.median_ms, 1.0);
}
#endif

// KL_BENCH_WARMUP_MS: unset 0; a number of milliseconds in [0, 10000]; anything else one line naming the variable,
// the value and the range.
TEST(Bench, WarmupMillisecondsFromTheEnvironment) {
  unsetenv("KL_BENCH_WARMUP_MS");
  EXPECT_EQ(bench::warmup_ms_from_env(), 0.0);
  setenv("KL_BENCH_WARMUP_MS", "150", 1);
  EXPECT_EQ(bench::warmup_ms_from_env(), 150.0);
  for (const char* bad : {"-1", "10001", "fast", "12ms", "nan"}) {
    setenv("KL_BENCH_WARMUP_MS", bad, 1);
    try {
      bench::warmup_ms_from_env();
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("KL_BENCH_WARMUP_MS"), std::string::npos) << m;
      EXPECT_NE(m.find(bad), std::string::npos) << m;
      EXPECT_NE(m.find("[0, 10000]"), std::string::npos) << m;
    }
  }
  unsetenv("KL_BENCH_WARMUP_MS");
}

}  // namespace
}  // namespace kl
