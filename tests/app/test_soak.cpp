// app/soak.cpp through the command line: the CPU soak renders 1,400 frames (about ten cycles of every panel
// at every parameter extreme) with no memory growth past its bound and no GL error or failure; a failure
// injected mid-run (KL_INJECT_FAULT) makes it fail and say so. The long form, 10,000 frames (about 5
// minutes on 2 cores), is `kernel-ladder soak --backend cpu` itself, its default; on the GPU machine
// `bench/gpu_session.sh measure` runs it with the CUDA backend.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "test_util.h"

namespace kl {
namespace {

TEST(Soak, CpuCyclesWithinBounds) {
  const std::string args = "soak --backend cpu --size 640x480 --frames 1400";
  std::string out;
  EXPECT_EQ(test::run_cli(args, &out), 0) << out;
  EXPECT_NE(out.find("soak: PASS"), std::string::npos) << out;
  EXPECT_NE(out.find("host RSS after 100 frames"), std::string::npos) << out;
  EXPECT_NE(out.find("GL errors: 0"), std::string::npos) << out;
  EXPECT_NE(out.find("failures shown by panels: 0"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("settings over [0-9]+ panels"))) << out;
  std::printf("%s", out.c_str());  // the figures, for the log
}

TEST(Soak, InjectedLaunchFailureFailsTheRun) {
  // The CPU backend counts editable launches: at frame 0 the vector-add panel's study is launch 1, its
  // sectors-per-request line's (app/panels/memory_access_view.h) launch 2.
  std::string out;
  const int rc = test::run_shell("KL_INJECT_FAULT=launch:2 " KL_BINARY " soak --backend cpu --size 640x480 --frames 40", &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("failures shown by panels: 1"), std::string::npos) << out;
  EXPECT_NE(out.find("first failure shown: CUDA error: unspecified launch failure (injected"), std::string::npos) << out;
  EXPECT_NE(out.find("soak: FAIL"), std::string::npos) << out;
}

TEST(Soak, BadOptionsExitTwo) {
  std::string out;
  EXPECT_EQ(test::run_cli("soak --frames 0", &out), 2) << out;
  EXPECT_EQ(test::run_cli("soak --frames 10 --size 10x10", &out), 2) << out;
  EXPECT_NE(out.find("--size"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("soak --frames 10 --every 0", &out), 2) << out;
}

}  // namespace
}  // namespace kl
