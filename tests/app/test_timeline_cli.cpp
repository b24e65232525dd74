// `kernel-ladder timeline` (app/cli/timeline.cpp): every bad input exits 2 with one line naming the
// parameter, before any GPU work (a bad --append file included); a machine that cannot run the instrumented
// Hopper kernels is refused the same way; on an H100/H200 a recording is written, read back and summarised.
#include <gtest/gtest.h>

#include "kernels/measure/timeline.h"
#include "kernels/rungs/flash_attention_fast.h"
#include "test_util.h"

namespace kl {
namespace {

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void expect_refused(const std::string& args, const std::string& needle) {
  std::string out;
  const int code = test::run_cli(args, &out);
  EXPECT_EQ(code, 2) << args << "\n" << out;
  EXPECT_NE(out.find(needle), std::string::npos) << args << "\nexpected '" << needle << "' in:\n" << out;
  EXPECT_EQ(count_lines(out), 1) << args << ": more than one line:\n" << out;
}

TEST(TimelineCli, BadInputIsRefusedInOneLine) {
  const std::string json = " --json " + test::test_file("never.json");
  expect_refused("timeline matmul" + json, "timeline matmul: unknown kernel; allowed: flash-attention, "
                                           "flash-attention-backward");
  expect_refused("timeline flash-attention --set d=96" + json, "--set d=96: must be one of 64|128");
  expect_refused("timeline flash-attention --set L=100" + json, "--set L=100: must be integers in [128, 65536]");
  expect_refused("timeline flash-attention --set width=3" + json, "--set width=3: unknown parameter; known: L, d");
  expect_refused("timeline flash-attention --path mma" + json, "--path=mma is out of range: allowed auto, wgmma,");
  expect_refused("timeline flash-attention-backward --path wgmma-late" + json,
                 "--path=wgmma-late is out of range: allowed wgmma, wgmma-tma");
  expect_refused("timeline flash-attention --set deterministic=1" + json, "deterministic=1 is out of range");
  expect_refused("timeline flash-attention --set Hkv=5" + json, "Hkv=5 is out of range: allowed 0 (as many as H) or a "
                                                                "divisor of H = 16");
  expect_refused("timeline flash-attention-backward --set Hkv=2" + json, "Hkv=2 is out of range: allowed 0 or H = 16");
  expect_refused("timeline flash-attention --ctas 1,x" + json, "--ctas=1,x is out of range: allowed all, or CTA indices");
  expect_refused("timeline flash-attention --ctas 2,2" + json, "each CTA once");
  expect_refused("timeline flash-attention --iterations 0" + json, "iterations=0 is out of range: allowed [1, 1000]");
  expect_refused("timeline flash-attention --iterations many" + json, "--iterations");
  expect_refused("timeline flash-attention", "--json FILE or --out FILE.png is required");
  expect_refused("timeline flash-attention --backend cpu" + json, "--backend cpu cannot run the Hopper kernels");
}

TEST(TimelineCli, ABadFileToAppendToIsRefusedNamingTheField) {
  const std::string bad = test::write_file("bad.json", "{\"schema\": 1, \"recordings\": [{\"kernel\": \"x\"}]}");
  expect_refused("timeline flash-attention --append --json " + bad,
                 bad + ": recordings[0].kernel: expected \"flash-attention\" or \"flash-attention-backward\"");
}

TEST(TimelineCli, WithoutAnH100TheRecordingIsRefused) {
  if (test::has_cuda_device()) GTEST_SKIP() << "a CUDA device is present (the GPU test records)";
  std::string out;
  EXPECT_EQ(test::run_cli("timeline flash-attention --json " + test::test_file("none.json"), &out), 2) << out;
  EXPECT_EQ(count_lines(out), 1) << out;
  // The CPU build has no CUDA; a CUDA build finds no device.
  EXPECT_TRUE(out.find("needs the CUDA backend") != std::string::npos || out.find("needs a CUDA device") != std::string::npos)
      << out;
}

// An H100/H200 with the sm_90a build: what the instrumented kernels need.
bool hopper() {
#ifdef KL_HAS_CUDA
  return flash_attention::fast_wgmma_kernels_loaded();
#else
  return false;
#endif
}

TEST(TimelineCliCuda, RecordsAppendsAndSummarises) {
  KL_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "no sm_90a code on this device";
  const std::string json = test::test_file("rec.json");
  std::string out;
  ASSERT_EQ(test::run_cli("timeline flash-attention --set L=1024 --set d=64 --ctas 0,3 --iterations 3 --json " + json, &out), 0)
      << out;
  EXPECT_NE(out.find("flash-attention: wgmma-persistent-m192 (the by-shape default)"), std::string::npos) << out;
  EXPECT_NE(out.find("wrote " + json + " (1 recording)"), std::string::npos) << out;
  ASSERT_EQ(test::run_cli("timeline flash-attention-backward --set L=1024 --ctas 5 --iterations 3 --append --json " + json, &out),
            0)
      << out;
  EXPECT_NE(out.find("(2 recordings)"), std::string::npos) << out;
  // Grouped-query attention (the forward): 16 query heads over 2 K/V heads, as the bench's Hkv=2 rows.
  ASSERT_EQ(test::run_cli("timeline flash-attention --set L=1024 --set Hkv=2 --ctas 0 --iterations 3 --append --json " +
                              json, &out),
            0)
      << out;
  EXPECT_NE(out.find("B=1 H=16 Hkv=2 L=1024 d=128"), std::string::npos) << out;
  EXPECT_NE(out.find("(3 recordings)"), std::string::npos) << out;
  const timeline::File f = timeline::load(json);
  ASSERT_EQ(f.recordings.size(), 3u);
  EXPECT_EQ(f.recordings[2].Hkv, 2);
  EXPECT_EQ(f.recordings[0].Hkv, 16);
  EXPECT_TRUE(f.recordings[2].same_output);
  ASSERT_EQ(f.recordings[0].ctas.size(), 2u);
  EXPECT_EQ(f.recordings[0].ctas[1].index, 3);
  EXPECT_EQ(f.recordings[0].ctas[0].lanes.size(), 4u);  // three consumer warpgroups and the producer
  EXPECT_EQ(f.recordings[1].kernel, timeline::kBackward);
  EXPECT_EQ(f.recordings[1].ctas[0].index, 5);
  EXPECT_TRUE(f.recordings[0].same_output);
  EXPECT_TRUE(f.recordings[1].same_output);
  expect_refused("timeline flash-attention --ctas 99999 --json " + test::test_file("never.json"),
                 "--ctas=99999 is out of range: allowed [0, ");
}

// Recorded and drawn in one run (--out): the view of the new recording, labelled as recorded now, and the layout
// audit clean; the panels' section on the CUDA backend (its "Record now" row shown) passes the audit too.
TEST(TimelineCliCuda, RecordsAndDrawsTheView) {
  KL_REQUIRE_CUDA();
  if (!hopper()) GTEST_SKIP() << "no sm_90a code on this device";
  const std::string png = test::test_file("live.png"), json = test::test_file("live.json");
  std::string out;
  ASSERT_EQ(test::run_cli("timeline flash-attention --set L=2048 --set B=2 --iterations 3 --json " + json + " --out " + png +
                              " --size 1280x720 --layout-report",
                          &out),
            0)
      << out;
  EXPECT_NE(out.find("wrote " + png + " (1280x720; Notice: wgmma-persistent-q2-late (the by-shape default) has a "
                                      "tensor-core product in flight"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("layout report: 0 findings over 1 view"), std::string::npos) << out;
  // The file it wrote draws the same way without recording.
  ASSERT_EQ(test::run_cli("timeline --from " + json + " --out " + test::test_file("again.png"), &out), 0) << out;
  for (const char* panel : {"flash-attention", "backward"}) {
    ASSERT_EQ(test::run_cli(std::string("shot ") + panel + " --backend cuda --chrome --layout-report --size 1280x720 "
                                                           "--set view=inside --out " + test::test_file(std::string(panel) + ".png"),
                            &out),
              0)
        << out;
    EXPECT_NE(out.find("layout report: 0 findings over 1 view"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace kl
