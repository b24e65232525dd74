// app/panels/softmax_panel.cpp rendered headlessly by `shot` (Mesa here, NVIDIA EGL on the GPU machine):
// the columns the buggy kernel never wrote are drawn as the red/black "unwritten" checker, over the
// right share of the buggy heatmap, and not at all when n_cols <= 1024; the online view renders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "app/panel.h"
#include "assets/embedded.h"
#include "kernels/studies/softmax_study.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

struct Shot {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  bool near(int x, int y, int r, int g, int b, int tol = 6) const {
    const uint8_t* p = &rgba[(size_t(y) * w + x) * 4];
    return std::abs(p[0] - r) <= tol && std::abs(p[1] - g) <= tol && std::abs(p[2] - b) <= tol;
  }
};

Shot shot(const std::string& sets, const std::string& name, const std::string& backend = "cpu") {
  Shot s;
  std::string out;
  const std::string file = test::tmp_dir() + "/" + name;
  EXPECT_EQ(test::run_cli("shot softmax --backend " + backend + " --size 1400x900 --out " + file + " " + sets, &out), 0)
      << out;
  EXPECT_TRUE(viz::read_png(file, s.rgba, s.w, s.h)) << file;
  return s;
}

// The checker of shaders/heatmap.frag: red (0.86, 0.14, 0.14) and near-black (0.06) squares, in rows
// that hold at least 20 red pixels (the heatmap's key under it shows a small swatch of the same checker).
struct Checker {
  int red = 0, x0 = 1 << 30, x1 = -1, y0 = 1 << 30, y1 = -1, black_inside = 0;
};
Checker find_checker(const Shot& s) {
  Checker c;
  for (int y = 0; y < s.h; ++y) {
    int in_row = 0;
    for (int x = 0; x < s.w; ++x) in_row += s.near(x, y, 219, 36, 36);
    if (in_row < 20) continue;
    for (int x = 0; x < s.w; ++x)
      if (s.near(x, y, 219, 36, 36)) {
        ++c.red;
        c.x0 = std::min(c.x0, x), c.x1 = std::max(c.x1, x), c.y0 = std::min(c.y0, y), c.y1 = std::max(c.y1, y);
      }
  }
  for (int y = c.y0; y <= c.y1; ++y)
    for (int x = c.x0; x <= c.x1; ++x) c.black_inside += s.near(x, y, 15, 15, 15);
  return c;
}

void check_unwritten_drawn(const std::string& backend) {
  const Shot s2000 = shot("--set n_cols=2000", "softmax-2000-" + backend + ".png", backend);
  ASSERT_EQ(s2000.w, 1400);
  ASSERT_EQ(s2000.h, 900);
  const Checker c2000 = find_checker(s2000);
  // A solid block of checker: thousands of red pixels, about as many black ones between them, all of it
  // in the left (buggy) heatmap.
  EXPECT_GT(c2000.red, 5000);
  const int area = (c2000.x1 - c2000.x0 + 1) * (c2000.y1 - c2000.y0 + 1);
  EXPECT_GT(c2000.red, area / 3);
  EXPECT_GT(c2000.black_inside, area / 3);
  EXPECT_LT(c2000.x1, s2000.w / 2);

  // The checker covers the share of the buggy map that lies past column 1024: (n - 1024) / n.
  const Shot s1500 = shot("--set n_cols=1500", "softmax-1500-" + backend + ".png", backend);
  const Checker c1500 = find_checker(s1500);
  ASSERT_GT(c1500.red, 1000);
  EXPECT_EQ(c1500.x1, c2000.x1);  // both end at the map's right edge
  const double ratio = double(c1500.x1 - c1500.x0 + 1) / double(c2000.x1 - c2000.x0 + 1);
  EXPECT_NEAR(ratio, (476.0 / 1500.0) / (976.0 / 2000.0), 0.04);

  // n_cols <= 1024: nothing unwritten, no checker anywhere.
  const Checker c1024 = find_checker(shot("--set n_cols=1024", "softmax-1024-" + backend + ".png", backend));
  EXPECT_LT(c1024.red, 20);
}

TEST(SoftmaxPanel, UnwrittenColumnsDrawnAsSuchCpu) { check_unwritten_drawn("cpu"); }

// The CUDA backend fills the textures through interop (or its fallback); the picture is the same.
TEST(SoftmaxPanel, UnwrittenColumnsDrawnAsSuchCuda) {
  KL_REQUIRE_CUDA();
  check_unwritten_drawn("cuda");
}

TEST(SoftmaxPanel, OnlineViewRenders) {
  const Shot s = shot("--set view=online --set n_cols=3000 --set chunk=512", "softmax-online.png");
  ASSERT_EQ(s.w, 1400);
  // The running-max / running-sum lines (90, 180, 240) and the rowmax(chunk) markers (235, 95, 80).
  int blue = 0, red = 0;
  for (int y = 0; y < s.h; ++y)
    for (int x = 0; x < s.w; ++x) blue += s.near(x, y, 90, 180, 240, 10), red += s.near(x, y, 235, 95, 80, 10);
  EXPECT_GT(blue, 300);
  EXPECT_GT(red, 30);
  EXPECT_LT(find_checker(s).red, 20);  // online writes every column
}

// The panel's text (the embedded assets/text/softmax.md, shown under the row sums) states the widest row
// as the study computes it: this build's threads x row values, against the chip's register file.
TEST(SoftmaxPanel, TextStatesTheStudysLimits) {
  std::string md(assets::find("text/softmax.md"));
  ASSERT_FALSE(md.empty());
  for (char& c : md) c = c == '\n' ? ' ' : c;  // the view joins a paragraph's lines
  const study::SoftmaxLimits l = study::softmax_limits(Backend::Cpu);  // the CPU backend assumes an H200
  auto has = [&](const std::string& s) { return md.find(s) != std::string::npos; };
  auto grouped = [](int64_t v) {  // 32768 -> "32,768"
    std::string s = std::to_string(v);
    for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
    return s;
  };
  EXPECT_FALSE(has("hardware limit (1024 threads x 32"));
  EXPECT_TRUE(has("this build's choice, " + std::to_string(l.threads_per_block) + " threads x " +
                  std::to_string(l.values_per_thread) + " row values = " + grouped(l.build_max_cols) + " columns"))
      << md;
  // How the kernel holds it, from the study's numbers: threads x values, and local memory, not registers.
  EXPECT_TRUE(has("on " + std::to_string(l.kernel_threads) + " threads x " + std::to_string(l.kernel_values_per_thread) +
                  " row values each")) << md;
  EXPECT_TRUE(has("local memory (a " + std::to_string(l.kernel_stack_bytes) + "-byte stack frame per thread)")) << md;
  EXPECT_FALSE(has("holds the whole row in one program's registers")) << md;
  EXPECT_TRUE(has(grouped(l.hw_regs_per_block) + " 32-bit registers per SM and per block")) << md;
  EXPECT_TRUE(has("at most " + std::to_string(l.hw_regs_per_thread) + " per thread")) << md;
  EXPECT_TRUE(has("Past it this build refuses")) << md;
  EXPECT_TRUE(has("spills")) << md;
  // Item 9 of the teaching review: offsets and elements, not lanes.
  EXPECT_FALSE(has("lane")) << md;
  EXPECT_TRUE(has("BLOCK_SIZE counts elements, not threads")) << md;
  EXPECT_TRUE(has("power of two because tl.arange")) << md;
}

// One spec per parameter: the panel's parameters are the study's list, spec for spec (name, kind, range,
// default, help and override record), so `study softmax` and the panel agree by construction.
TEST(SoftmaxPanel, ParamsAreTheStudys) {
  std::unique_ptr<app::Panel> panel;
  for (auto& p : app::make_panels())
    if (p->id() == "softmax") panel = std::move(p);
  ASSERT_TRUE(panel);
  const study::Entry* e = study::find("softmax");
  ASSERT_NE(e, nullptr);
  const std::vector<ParamSpec> want = e->params(), got = panel->params().specs();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(int(got[i].kind), int(want[i].kind));
    EXPECT_EQ(got[i].range_text(), want[i].range_text());
    EXPECT_EQ(got[i].def, want[i].def);
    EXPECT_EQ(got[i].help, want[i].help);
    EXPECT_EQ(got[i].override_reason, want[i].override_reason);
    EXPECT_EQ(got[i].kernel_def, want[i].kernel_def);
  }
  // chunk is the rung's spec with the panel's own default, declared as such.
  const ParamSpec* chunk = panel->params().spec("chunk");
  ASSERT_NE(chunk, nullptr);
  EXPECT_TRUE(chunk->is_override());
  EXPECT_EQ(chunk->kernel_def, softmax::param::chunk().def);
  EXPECT_EQ(chunk->kernel_range, softmax::param::chunk().range_text());
  EXPECT_EQ(chunk->def, "256");
}

TEST(SoftmaxPanel, BadSettingsExitTwo) {
  std::string out;
  EXPECT_EQ(test::run_cli("shot softmax --backend cpu --out " + test::tmp_dir() + "/x.png --set n_cols=0", &out), 2) << out;
  EXPECT_EQ(test::run_cli("shot softmax --backend cpu --out " + test::tmp_dir() + "/x.png --set view=nope", &out), 2) << out;
}

}  // namespace
}  // namespace kl
