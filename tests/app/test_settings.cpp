// app/settings.{h,cpp}: the window keeps the open panel and every panel's parameters in its ini file
// ($XDG_CONFIG_HOME/kernel-ladder/imgui.ini) and restores them on the next start, with --panel/--set
// on top; values the panels refuse, unknown panels and the measure panel's one-shot `run` are skipped.
// Under Xvfb, as test_window.cpp runs the window.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace kl {
namespace {

bool have_xvfb() { return test::run_shell("command -v xvfb-run", nullptr) == 0; }

// One directory per test: ctest runs the tests of this file in parallel processes.
std::string config_home(const std::string& name) {
  const std::string d = test::tmp_dir() + "/xdg-settings-" + name;
  test::run_shell("rm -rf " + d + " && mkdir -p " + d, nullptr);
  return d;
}

int window(const std::string& xdg, const std::string& args, std::string* out) {
  return test::run_shell("XDG_CONFIG_HOME=" + xdg + " xvfb-run -a -s '-screen 0 1600x1000x24' " +
                             std::string(KL_BINARY) + " --backend cpu --frames 3 " + args,
                         out);
}

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Settings, PanelAndParametersSurviveARestartCommandLineOnTop) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string xdg = config_home("restart"), ini = xdg + "/kernel-ladder/imgui.ini";
  std::string out;
  ASSERT_EQ(window(xdg, "--panel softmax --set n_cols=2000", &out), 0) << out;
  std::string text = read_all(ini);
  EXPECT_NE(text.find("[KernelLadder][Settings]"), std::string::npos) << text;
  EXPECT_NE(text.find("panel=softmax\n"), std::string::npos) << text;
  EXPECT_NE(text.find("param.softmax.n_cols=2000\n"), std::string::npos) << text;

  ASSERT_EQ(window(xdg, "", &out), 0) << out;  // no arguments: the last run's state
  EXPECT_NE(out.find("restored panel softmax"), std::string::npos) << out;
  text = read_all(ini);
  EXPECT_NE(text.find("panel=softmax\n"), std::string::npos) << text;
  EXPECT_NE(text.find("param.softmax.n_cols=2000\n"), std::string::npos) << text;

  ASSERT_EQ(window(xdg, "--panel vector-add --set n=777", &out), 0) << out;  // the command line wins
  text = read_all(ini);
  EXPECT_NE(text.find("panel=vector-add\n"), std::string::npos) << text;
  EXPECT_NE(text.find("param.vector-add.n=777\n"), std::string::npos) << text;
  EXPECT_NE(text.find("param.softmax.n_cols=2000\n"), std::string::npos) << text;
}

TEST(Settings, RefusedAndUnknownValuesAreSkipped) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string xdg = config_home("refused"), ini = xdg + "/kernel-ladder/imgui.ini";
  test::run_shell("mkdir -p " + xdg + "/kernel-ladder", nullptr);
  std::ofstream(ini) << "[KernelLadder][Settings]\npanel=nope\nparam.softmax.n_cols=notanumber\n"
                        "param.vector-add.n=999999999999\nparam.nope.x=1\nparam.measure.run=1\nparam.softmax.rows=5\n"
                        "garbage line\n\n";
  std::string out;
  ASSERT_EQ(window(xdg, "", &out), 0) << out;
  EXPECT_NE(out.find("closed after 3 frames, 0 GL errors"), std::string::npos) << out;
  EXPECT_NE(out.find("and 1 values"), std::string::npos) << out;  // rows=5 only
  const std::string text = read_all(ini);
  EXPECT_NE(text.find("param.softmax.rows=5\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("param.measure.run"), std::string::npos) << text;
  EXPECT_EQ(text.find("notanumber"), std::string::npos) << text;
}

// The window's size and position, the UI scale chosen with Ctrl+= and the source pane's share come
// back on the next start; a remembered or asked size never exceeds the monitor's work area; --ui-scale
// wins over the remembered scale.
TEST(Settings, WindowGeometryScaleAndSplitterSurviveARestart) {
  if (!have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string xdg = config_home("geometry"), ini = xdg + "/kernel-ladder/imgui.ini", log = xdg + "/ui.log";
  test::run_shell("mkdir -p " + xdg + "/kernel-ladder", nullptr);
  std::ofstream(ini) << "[KernelLadder][Settings]\npanel=softmax\nsource_frac=0.450\nui_scale=1.50\nwindow=10,20,1000,700\n\n";
  std::string out;
  ASSERT_EQ(window(xdg, "--ui-log " + log, &out), 0) << out;
  std::string events = read_all(log);
  EXPECT_NE(events.find("scale 1.50\n"), std::string::npos) << events;
  EXPECT_NE(events.find("size 1000x700\n"), std::string::npos) << events;
  std::string text = read_all(ini);
  EXPECT_NE(text.find("source_frac=0.450\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ui_scale=1.50\n"), std::string::npos) << text;
  EXPECT_NE(text.find(",1000,700\n"), std::string::npos) << text;

  std::remove(log.c_str());
  ASSERT_EQ(window(xdg, "--ui-scale 2 --ui-log " + log, &out), 0) << out;
  events = read_all(log);
  EXPECT_NE(events.find("scale 2.00\n"), std::string::npos) << events;
  text = read_all(ini);
  EXPECT_NE(text.find("ui_scale=1.50\n"), std::string::npos) << "--ui-scale replaced the remembered scale:\n" << text;

  std::remove(log.c_str());
  std::remove(ini.c_str());
  ASSERT_EQ(window(xdg, "--size 4000x3000 --ui-log " + log, &out), 0) << out;  // the screen is 1600x1000
  events = read_all(log);
  EXPECT_NE(events.find("size 1600x1000\n"), std::string::npos) << events;
}

}  // namespace
}  // namespace kl
