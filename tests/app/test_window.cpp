// The GLFW window host, under Xvfb as a user's desktop would run it: a few hundred frames of the
// vector-add panel, closed by --frames, with no GL error and a clean exit.
#include <gtest/gtest.h>

#include "test_util.h"

namespace kl {
namespace {

bool have_xvfb() { return test::run_shell("command -v xvfb-run", nullptr) == 0; }

TEST(Window, ThreeHundredFramesUnderXvfb) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed (./ladder.sh test installs it)";
  std::string out;
  const int code = test::run_shell("xvfb-run -a -s '-screen 0 1600x1000x24' " + std::string(KL_BINARY) +
                                       " --backend cpu --frames 300 --panel vector-add --set n=100000 --set block_size=512",
                                   &out);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("window (GLFW)"), std::string::npos) << out;
  EXPECT_NE(out.find("closed after 300 frames, 0 GL errors"), std::string::npos) << out;
}

TEST(Window, BadPanelInWindowModeExitsTwo) {
  std::string out;
  EXPECT_EQ(test::run_cli("--panel nope --frames 1", &out), 2) << out;
  EXPECT_NE(out.find("--panel nope"), std::string::npos) << out;
}

}  // namespace
}  // namespace kl
