// app/cli.*: the command line's spellings, and one clear line with exit code 2 for every bad input.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "kernels/runtime/npy.h"
#include "kernels/studies/study.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

using test::write_npy;

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

TEST(Cli, ListNamesPanelsKernelsAndRanges) {
  std::string out;
  ASSERT_EQ(test::run_cli("list", &out), 0) << out;
  EXPECT_NE(out.find("vector-add"), std::string::npos);
  EXPECT_NE(out.find("block_size"), std::string::npos);
  EXPECT_NE(out.find("powers of two in [32, 4096]"), std::string::npos);
  EXPECT_NE(out.find("Backends: cpu"), std::string::npos);
}

TEST(Cli, RunVectorAddWritesTheSum) {
  const int64_t n = 1000;
  const std::vector<float> x = test::random_small_ints(n), y = test::random_small_ints(n);
  const std::string fx = write_npy("x.npy", {n}, x), fy = write_npy("y.npy", {n}, y);
  const std::string out = test::tmp_dir() + "/sum.npy";
  std::string text;
  ASSERT_EQ(test::run_cli("run vector-add --backend cpu --in x=" + fx + " --in y=" + fy + " --out " + out +
                              " --set block_size=64",
                          &text),
            0)
      << text;
  const Array r = npy::read(out);
  ASSERT_EQ(r.shape, std::vector<int64_t>{n});
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(r.data[size_t(i)], x[size_t(i)] + y[size_t(i)]);
}

TEST(Cli, BadInputsExitTwoWithOneLine) {
  const std::string fx = write_npy("bx.npy", {10}, std::vector<float>(10, 1.0f));
  const std::string fy = write_npy("by.npy", {11}, std::vector<float>(11, 1.0f));
  const std::string f2 = write_npy("b2.npy", {2, 5}, std::vector<float>(10, 1.0f));
  const std::string out = test::tmp_dir() + "/never.npy";
  expect_refused("shot no-such-panel --out /tmp/x.png", "unknown panel");
  expect_refused("run no-such-kernel --in x=" + fx + " --out " + out, "unknown kernel");
  expect_refused("run vector-add --in x=" + fx + " --in y=" + fx + " --out " + out + " --set block_size=100",
                 "block_size=100");
  expect_refused("run vector-add --in x=" + fx + " --in y=" + fx + " --out " + out + " --set bogus=1",
                 "unknown parameter");
  expect_refused("run vector-add --in x=" + fx + " --in y=" + fy + " --out " + out, "does not match");
  expect_refused("run vector-add --in x=" + fx + " --in y=" + f2 + " --out " + out, "does not match");
  expect_refused("run vector-add --in x=" + fx + " --out " + out, "missing input");
  expect_refused("run vector-add --in x=/nonexistent.npy --in y=" + fx + " --out " + out, "/nonexistent.npy");
  expect_refused("run vector-add --in z=" + fx + " --in y=" + fx + " --out " + out, "takes inputs");
  expect_refused("run vector-add --in x=" + fx + " --in y=" + fx + " --out " + out + " --variant nope",
                 "--variant nope");
  expect_refused("run vector-add --in x=" + fx + " --in y=" + fx + " --out " + out + " --backend gpu",
                 "--backend gpu");
  expect_refused("shot vector-add --out /tmp/x.png --size 10x10", "--size");
  expect_refused("shot vector-add --out /tmp/x.png --set n=0", "n=0");
  expect_refused("shot vector-add --out /tmp/x.png --set n=67108865", "[1, 67108864]");
  expect_refused("frobnicate", "");
  // The malformed file's error names the file.
  const std::string junk = test::write_file("junk.npy", "not numpy");
  expect_refused("run vector-add --in x=" + junk + " --in y=" + fx + " --out " + out, "junk.npy");
}

TEST(Cli, BackendCudaWithoutDeviceIsRefused) {
  if (test::has_cuda_device()) GTEST_SKIP() << "a CUDA device is present";
  expect_refused("list --backend cuda", "");  // not an option of list: refused by the parser
  const std::string fx = write_npy("cx.npy", {4}, std::vector<float>(4, 1.0f));
  expect_refused("run vector-add --backend cuda --in x=" + fx + " --in y=" + fx + " --out /tmp/never.npy",
                 "--backend cuda");
}

TEST(Cli, BackendIsCheckedForEveryCommand) {
  // The top-level --backend reaches every subcommand, including those that run no kernel.
  for (const char* cmd : {"list", "tour --out /tmp/never-written", "shot vector-add --out /tmp/never.png",
                          "measure --quick", "bench --quick", "soak --frames 1", "bench-frame --frames 1"})
    expect_refused(std::string("--backend tpu ") + cmd, "--backend tpu: must be one of auto|cuda|cpu");
  expect_refused("--size 10x10 list", "--size=10x10 is out of range");  // --size too, whatever the command
  expect_refused("--size big list", "--size big: expected WIDTHxHEIGHT");
}

TEST(Cli, OutDirectoryParentsAreCreatedOrRefusedWithTheReason) {
  const std::string base = test::tmp_dir() + "/mkdirs";
  test::run_shell("rm -rf " + base, nullptr);
  app::make_directories(base + "/a/b/c", "--out");
  struct stat st{};
  EXPECT_EQ(::stat((base + "/a/b/c").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  app::make_directories(base + "/a/b/c", "--out");  // existing: fine
  // A regular file where a directory must go: refused with the OS's reason, naming the path.
  FILE* f = std::fopen((base + "/file").c_str(), "wb");
  ASSERT_TRUE(f);
  std::fclose(f);
  expect_refused("tour --backend cpu --out " + base + "/file/x/y",
                 "--out " + base + "/file/x/y: cannot create " + base + "/file (Not a directory)");
}

TEST(Cli, StudyRefusesAnUnknownPanelNamingTheKnownOnes) {
  expect_refused("study no-such-panel", "study no-such-panel: unknown panel; known: ");
  expect_refused("study", "panel is required");
  expect_refused("--backend tpu study no-such-panel", "--backend tpu");
  std::string out;
  ASSERT_EQ(test::run_cli("list", &out), 0) << out;
  EXPECT_NE(out.find("Studies (study PANEL"), std::string::npos) << out;
  for (const study::Entry& e : study::registry()) EXPECT_NE(out.find("  " + e.panel + " "), std::string::npos);
}

// Every study the rungs register: text and JSON from the command, and --set refused as everywhere.
TEST(Cli, EveryRegisteredStudyPrintsTextAndJson) {
  for (const study::Entry& e : study::registry()) {
    const std::string json = test::tmp_dir() + "/study-" + e.panel + ".json";
    std::string out;
    ASSERT_EQ(test::run_cli("study " + e.panel + " --backend cpu --json " + json, &out), 0) << e.panel << out;
    EXPECT_NE(out.find("wrote " + json), std::string::npos) << out;
    std::ifstream f(json);
    const nlohmann::json j = nlohmann::json::parse(f);
    EXPECT_EQ(j.at("panel"), e.panel);
    expect_refused("study " + e.panel + " --set no_such_parameter=1", "unknown parameter");
  }
}

TEST(Cli, NoDisplayNamesShotAndTour) {
  std::string out;
  const int code =
      test::run_shell("env -u DISPLAY -u WAYLAND_DISPLAY " + std::string(KL_BINARY) + " --frames 1", &out);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("no display"), std::string::npos) << out;
  EXPECT_NE(out.find("shot"), std::string::npos) << out;
  EXPECT_NE(out.find("tour"), std::string::npos) << out;
}

}  // namespace
}  // namespace kl
