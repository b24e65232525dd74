// app/panels/backward_panel.cpp: its parameters are the study's, and rendered headlessly by `shot` on
// the CPU backend: the first view is what the backward saves; the tiles view draws the recomputed P
// (sequential colour map pixels) and its stepper moves the current tile in the tile grid; a K/V tile past
// the shape is refused on screen (exit 0, no crash) rather than clamped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "app/panel.h"
#include "app/panels/timeline_view.h"
#include "kernels/studies/flash_attention_backward_study.h"
#include "test_util.h"
#include "viz/heatmap.h"
#include "viz/png.h"

namespace kl {
namespace {

struct Image {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
};

Image shot(const std::string& sets, const std::string& name) {
  Image im;
  std::string out;
  const std::string file = test::tmp_dir() + "/" + name;
  EXPECT_EQ(test::run_cli("shot backward --backend cpu --size 1400x900 --out " + file + " " + sets, &out), 0) << out;
  EXPECT_TRUE(viz::read_png(file, im.rgba, im.w, im.h)) << file;
  return im;
}

int count_colour(const Image& im, int x0, int x1, int r, int g, int b) {
  int n = 0;
  for (int y = 0; y < im.h; ++y)
    for (int x = x0; x < x1; ++x) {
      const uint8_t* p = &im.rgba[size_t(y * im.w + x) * 4];
      n += (std::abs(p[0] - r) <= 2 && std::abs(p[1] - g) <= 2 && std::abs(p[2] - b) <= 2) ? 1 : 0;
    }
  return n;
}

int sequential_pixels(const Image& im) {
  std::vector<bool> bin(64 * 64 * 64, false);
  for (int k = 0; k <= 2048; ++k) {
    float c[3];
    viz::colormap_rgb(float(k) / 2048.0f, c);
    const int R = int(c[0] * 255.0f + 0.5f) >> 2, G = int(c[1] * 255.0f + 0.5f) >> 2, B = int(c[2] * 255.0f + 0.5f) >> 2;
    bin[size_t((R * 64 + G) * 64 + B)] = true;
  }
  int n = 0;
  for (int y = 0; y < im.h; ++y)
    for (int x = 0; x < im.w; ++x) {
      const uint8_t* p = &im.rgba[size_t(y * im.w + x) * 4];
      n += bin[size_t(((p[0] >> 2) * 64 + (p[1] >> 2)) * 64 + (p[2] >> 2))] ? 1 : 0;
    }
  return n;
}

// The first view is what the backward saves: the L, P and P + dP bars and the naive wall over L, not two
// identical P heatmaps (issue 27: every takeaway was below them, under the fold).
TEST(BackwardPanel, FirstViewIsWhatTheBackwardSaves) {
  const Image a = shot("", "bw_panel_first.png");
  EXPECT_LT(sequential_pixels(a), 3000) << "a P heatmap in the first view";
  EXPECT_GT(count_colour(a, 0, a.w, 200, 80, 70), 2000) << "no P + dP bar";   // the naive P + dP bar
  EXPECT_GT(count_colour(a, 0, a.w, 74, 130, 199), 500) << "no L bar";       // FlashAttention's L
}

TEST(BackwardPanel, TilesViewDrawsOnePTileAndMovesTheCurrentTile) {
  const Image a = shot("--set view=tiles --set q_tile=0", "bw_panel_0.png"),
              b = shot("--set view=tiles --set q_tile=2", "bw_panel_2.png");
  EXPECT_GT(sequential_pixels(a), 10000);  // the recomputed P heatmap (the forward's is the same: one number)
  EXPECT_LT(sequential_pixels(a), 90000);  // one of them, not two
  EXPECT_GT(sequential_pixels(b), 10000);
  // the tile grid's "done" colour (74, 130, 199) in its column, the first quarter of the panel: none at
  // step 0, two tiles' worth at step 2
  const int done0 = count_colour(a, 0, a.w / 4, 74, 130, 199), done2 = count_colour(b, 0, b.w / 4, 74, 130, 199);
  EXPECT_GT(done2, done0 + 1000) << done0 << " " << done2;
}

TEST(BackwardPanel, TilePastTheShapeIsShownNotClamped) {
  std::string out;
  const std::string file = test::tmp_dir() + "/bw_panel_bad.png";
  EXPECT_EQ(test::run_cli("shot backward --backend cpu --size 1400x900 --out " + file + " --set kv_tile=9", &out), 0)
      << out;
}

// `study backward` and the panel agree by construction: the panel's specs are the study's params().
TEST(BackwardPanel, ParamsAreTheStudys) {
  std::unique_ptr<app::Panel> panel;
  for (auto& p : app::make_panels())
    if (p->id() == "backward") panel = std::move(p);
  ASSERT_NE(panel, nullptr);
  const std::vector<ParamSpec>& got = panel->params().specs();
  const std::vector<ParamSpec> want = flash_attention_backward_study::params();
  // Then the "Inside the fast kernel" view's own one (issue 30: recording), which the study has no use for.
  const std::vector<ParamSpec> view = app::TimelineView::params(timeline::kBackward);
  ASSERT_EQ(got.size(), want.size() + view.size());
  for (size_t i = 0; i < view.size(); ++i) EXPECT_EQ(got[want.size() + i].name, view[i].name);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(int(got[i].kind), int(want[i].kind)) << want[i].name;
    EXPECT_EQ(got[i].range_text(), want[i].range_text()) << want[i].name;
    EXPECT_EQ(got[i].def, want[i].def) << want[i].name;
    EXPECT_EQ(got[i].help, want[i].help) << want[i].name;
    EXPECT_EQ(got[i].override_reason, want[i].override_reason) << want[i].name;
    EXPECT_EQ(got[i].kernel_def, want[i].kernel_def) << want[i].name;
  }
}

}  // namespace
}  // namespace kl
