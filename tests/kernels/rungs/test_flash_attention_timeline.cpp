// The instrumented fast kernels (issue 30, kernels/measure/timeline.h) on an H100/H200: for the by-shape
// defaults at d = 64 and 128 (with and without the mask), a few other forward paths, and the backward's main
// kernel, every CTA recorded: each lane's phases in order, the phases the kernel must go through present, the
// persistent kernels' work tiles in the order persistent_index() hands them out, the recorded CTAs covering
// the kernel's own time (CUDA events of the same launch) within 5%, and the instrumented kernel's output bit
// for bit the plain kernel's. Each prints the cost of recording (instrumented against plain time). Skipped
// without a device, and without the sm_90a build (the instrumented kernels are Hopper-only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "kernels/measure/timeline.h"
#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/rungs/flash_attention_fast.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"

namespace kl {
namespace {

using timeline::Phase;
using timeline::Recording;
using timeline::RecordRequest;

// An H100/H200 with the sm_90a build: what the instrumented kernels need.
bool hopper() {
#ifdef KL_HAS_CUDA
  return flash_attention::fast_wgmma_kernels_loaded();
#else
  return false;
#endif
}
#define KL_REQUIRE_HOPPER()                                                \
  do {                                                                     \
    KL_REQUIRE_CUDA();                                                     \
    if (!hopper()) GTEST_SKIP() << "no sm_90a code on this device";        \
  } while (0)

RecordRequest forward(int d, bool causal, const std::string& path = "auto") {
  RecordRequest r;
  r.kernel = timeline::kForward;
  r.d = d, r.H = 2048 / d, r.B = 2, r.L = 4096, r.causal = causal;
  r.path = path;
  r.all_ctas = true;
  r.iterations = 5;
  return r;
}
RecordRequest backward(bool deterministic, const std::string& path = "wgmma", int d = 128) {
  RecordRequest r;
  r.kernel = timeline::kBackward;
  r.d = d, r.H = 16, r.B = 1, r.L = 4096;
  r.path = path;
  r.deterministic = deterministic;
  r.all_ctas = true;
  r.iterations = 5;
  return r;
}

std::string name_of(const RecordRequest& r) {
  return r.kernel + " " + r.path + " d=" + std::to_string(r.d) + (r.causal ? " causal" : "") +
         (r.deterministic ? " deterministic" : "");
}

void print_cost(const Recording& rec, const RecordRequest& r) {
  std::printf("[ cost     ] %s -> %s: plain %.4f ms, instrumented %.4f ms (%+.1f%%), recorded launch %.4f ms\n",
              name_of(r).c_str(), rec.path.c_str(), rec.plain_ms, rec.traced_ms, 100.0 * rec.overhead(),
              rec.recorded_ms);
}

// Every lane's phases in order, none negative; every recorded CTA has all its lanes.
void expect_ordered(const Recording& rec) {
  ASSERT_EQ(int(rec.ctas.size()), rec.grid_ctas) << "every CTA was asked for";
  for (const timeline::Cta& cta : rec.ctas)
    for (const timeline::Lane& lane : cta.lanes) {
      ASSERT_FALSE(lane.events.empty()) << "CTA " << cta.index << " " << lane.role;
      double prev = 0;
      for (const timeline::Event& e : lane.events) {
        EXPECT_GE(e.start_ns, prev) << "CTA " << cta.index << " " << lane.role;
        EXPECT_GE(e.end_ns, e.start_ns) << "CTA " << cta.index << " " << lane.role;
        prev = e.end_ns;
      }
    }
}

// The phases the kernel cannot skip, in every lane of every CTA with work.
void expect_phases(const Recording& rec) {
  const bool fwd = rec.kernel == timeline::kForward;
  const std::vector<Phase> consumer = fwd ? std::vector<Phase>{Phase::WaitK, Phase::WaitTurn, Phase::IssueS, Phase::WaitS,
                                                               Phase::Softmax, Phase::IssuePV, Phase::WaitPV, Phase::Epilogue}
                                          : std::vector<Phase>{Phase::WaitTiles, Phase::IssueS, Phase::IssueDP, Phase::WaitS,
                                                               Phase::Softmax, Phase::WaitDP, Phase::DS, Phase::IssueDVDK,
                                                               Phase::Epilogue};
  const std::vector<Phase> producer = {Phase::LoadQ, Phase::LoadK, Phase::LoadV};
  for (const timeline::Cta& cta : rec.ctas)
    for (const timeline::Lane& lane : cta.lanes) {
      std::set<Phase> seen;
      for (const timeline::Event& e : lane.events) seen.insert(e.phase);
      for (Phase p : timeline::consumer_role(lane.role) ? consumer : producer)
        EXPECT_TRUE(seen.count(p)) << "CTA " << cta.index << " " << lane.role << " has no "
                                   << timeline::phase_info(p).name;
    }
}

// The recorded CTAs, first stamp to last, against the recorded launch's CUDA-event time.
void expect_coverage(const Recording& rec) {
  const timeline::Summary s = timeline::summarize(rec);
  const double kernel_ns = rec.recorded_ms * 1e6;
  std::printf("[ coverage ] recorded span %.1f us of the launch's %.1f us (%.1f%%)\n", s.span_ns * 1e-3,
              kernel_ns * 1e-3, 100.0 * s.span_ns / kernel_ns);
  EXPECT_NEAR(s.span_ns / kernel_ns, 1.0, 0.05);
  EXPECT_GT(rec.clock_ghz, 0.5);  // the H100/H200 run their SMs at 1-2 GHz
  EXPECT_LT(rec.clock_ghz, 3.0);
}

// The persistent kernels: each CTA's consumers take the work tiles persistent_index() gives it, in order.
void expect_tile_order(const Recording& rec) {
  if (rec.path.rfind("wgmma-persistent", 0) != 0) return;
  const int n_m = flash_attention::ceil_div(rec.Lq, rec.block_m), total = n_m * rec.H * rec.B;
  for (const timeline::Cta& cta : rec.ctas) {
    std::vector<int> want;
    for (int k = 0; int64_t(k) * rec.grid_ctas < total; ++k) {
      const int t = flash_attention::persistent_index(k, cta.index, rec.grid_ctas, rec.causal);
      if (t < total) want.push_back(t);
    }
    for (const timeline::Lane& lane : cta.lanes) {
      std::vector<int> got;
      for (const timeline::Event& e : lane.events)
        if (e.phase == Phase::Schedule) got.push_back(e.tile);
      EXPECT_EQ(got, want) << "CTA " << cta.index << " " << lane.role;
    }
  }
}

void check_recording(const RecordRequest& r) {
  SCOPED_TRACE(name_of(r));
  const Recording rec = timeline::record(r);
  print_cost(rec, r);
  EXPECT_TRUE(rec.same_output);
  EXPECT_GT(rec.plain_ms, 0);
  EXPECT_GT(rec.traced_ms, 0);
  expect_ordered(rec);
  expect_phases(rec);
  expect_coverage(rec);
  expect_tile_order(rec);
  // The file holds what was recorded (two CTAs of it: every CTA's phases make tens of MB of JSON).
  Recording two = rec;
  two.ctas.resize(2);
  const timeline::File back = timeline::parse(timeline::to_json(timeline::File{{two}}), "recorded");
  ASSERT_EQ(back.recordings.size(), 1u);
  ASSERT_EQ(back.recordings[0].ctas.size(), 2u);
  EXPECT_EQ(back.recordings[0].ctas[1].lanes[0].events.size(), two.ctas[1].lanes[0].events.size());
}

TEST(FlashAttentionTimelineCuda, ForwardDefaultD64) {
  KL_REQUIRE_HOPPER();
  check_recording(forward(64, false));
  check_recording(forward(64, true));
}

TEST(FlashAttentionTimelineCuda, ForwardDefaultD128) {
  KL_REQUIRE_HOPPER();
  check_recording(forward(128, false));
  check_recording(forward(128, true));
}

// Other schedules: the one-CTA-per-tile kernels (early and late rescale) and the persistent kernel with one Q
// tile and the late rescale (d = 256's default, recorded at d = 128).
TEST(FlashAttentionTimelineCuda, ForwardOtherPaths) {
  KL_REQUIRE_HOPPER();
  for (const char* path : {"wgmma", "wgmma-late", "wgmma-persistent-late"}) check_recording(forward(128, false, path));
}

TEST(FlashAttentionTimelineCuda, BackwardMainKernel) {
  KL_REQUIRE_HOPPER();
  check_recording(backward(false));
  check_recording(backward(true));
  check_recording(backward(false, "wgmma-tma"));
  check_recording(backward(false, "wgmma-tma", 64));  // 128 query rows a step there
}

// The deterministic mode records the dK/dV kernel of the path asked for, and names that path: wgmma-tma's (the
// default's, bulk-copy loads) and wgmma's (cp.async loads) are different launches.
TEST(FlashAttentionTimelineCuda, BackwardDeterministicRecordsItsPathsKernel) {
  KL_REQUIRE_HOPPER();
  for (const std::string path : {"wgmma", "wgmma-tma"}) {
    const Recording rec = timeline::record(backward(true, path));
    EXPECT_TRUE(rec.same_output) << path;
    EXPECT_EQ(rec.path, path);
    EXPECT_EQ(rec.dq, "deterministic");
    const std::string kernel = path == "wgmma" ? "flash_bwd_wgmma_dkdv_d128" : "flash_bwd_wgmma_dkdv_tma_d128";
    EXPECT_EQ(rec.launch.rfind(kernel, 0), 0u) << rec.launch;
  }
}

// d = 128 on wgmma-tma (the default's kernel there) takes 80 query rows a step, and its
// instrumented build too: every lane of every CTA issues S^T once per 80-row step of the 4096 queries.
TEST(FlashAttentionTimelineCuda, BackwardD128Records80RowSteps) {
  KL_REQUIRE_HOPPER();
  const Recording rec = timeline::record(backward(false, "wgmma-tma"));
  EXPECT_TRUE(rec.same_output);
  EXPECT_EQ(rec.block_m, 80);
  EXPECT_NE(rec.launch.find("_m80_traced"), std::string::npos) << rec.launch;
  for (const timeline::Cta& cta : rec.ctas)
    for (const timeline::Lane& lane : cta.lanes) {
      const auto steps = std::count_if(lane.events.begin(), lane.events.end(),
                                       [](const timeline::Event& e) { return e.phase == Phase::IssueS; });
      EXPECT_EQ(steps, flash_attention::ceil_div(4096, 80)) << "CTA " << cta.index << " " << lane.role;
    }
}

// The outputs compared here, apart from the recording's own check: the instrumented kernel writes every
// element (the outputs start as NaN) and the same bits as the plain one.
TEST(FlashAttentionTimelineCuda, InstrumentedOutputIsThePlainOneBitForBit) {
  KL_REQUIRE_HOPPER();
  for (const RecordRequest& r : {forward(64, false), forward(128, true), backward(false), backward(false, "wgmma-tma"),
                                 backward(false, "wgmma-tma", 64)}) {
    RecordRequest few = r;
    few.all_ctas = false;
    few.ctas = {0, 1};
    const timeline::OutputPair o = timeline::outputs_plain_and_traced(few);
    ASSERT_FALSE(o.plain.empty()) << name_of(r);
    EXPECT_TRUE(test::same_bits(o.plain, o.traced)) << name_of(r);
    const size_t nans = size_t(std::count_if(o.traced.begin(), o.traced.end(),
                                             [](uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu); }));
    EXPECT_EQ(nans, 0u) << name_of(r);
  }
}

TEST(FlashAttentionTimelineCuda, CtaOutsideTheLaunchIsRefused) {
  KL_REQUIRE_HOPPER();
  RecordRequest r = forward(128, false);
  r.all_ctas = false;
  r.ctas = {100000};
  try {
    timeline::record(r);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--ctas=100000 is out of range: allowed [0, "), std::string::npos) << e.what();
  }
  r.ctas = {0};
  r.path = "wgmma-persistent-late-n176";  // removed in issue 29: no path of that name now
  EXPECT_THROW(timeline::record(r), InputError);
}

}  // namespace
}  // namespace kl
