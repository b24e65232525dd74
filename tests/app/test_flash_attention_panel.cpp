// app/panels/flash_attention_panel.cpp rendered headlessly by `shot` on the CPU backend at several
// steps: the tile grid marks done / current tiles in proportion to the step, and the "weights so far"
// heatmap fills in tile by tile while the final weights stay whole.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "app/panel.h"
#include "app/panels/timeline_view.h"
#include "assets/embedded.h"
#include "kernels/studies/flash_attention_study.h"
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
  EXPECT_EQ(test::run_cli("shot flash-attention --backend cpu --size 1400x900 --out " + file +
                              " --set lq=48 --set lk=96 --set block_m=16 --set block_n=16 " + sets,
                          &out),
            0)
      << out;
  EXPECT_TRUE(viz::read_png(file, im.rgba, im.w, im.h)) << file;
  return im;
}

// Pixels of exactly colour c (the tile states are flat fills) in the left 40 % (the tile grid's column).
int count_left(const Image& im, int r, int g, int b) {
  int n = 0;
  for (int y = 0; y < im.h; ++y)
    for (int x = 0; x < im.w * 2 / 5; ++x) {
      const uint8_t* p = &im.rgba[size_t(y * im.w + x) * 4];
      n += (std::abs(p[0] - r) <= 2 && std::abs(p[1] - g) <= 2 && std::abs(p[2] - b) <= 2) ? 1 : 0;
    }
  return n;
}

// Pixels on the sequential colour map (the weight heatmaps) in the right 60 %.
int weights_right(const Image& im) {
  std::vector<bool> bin(64 * 64 * 64, false);
  for (int k = 0; k <= 2048; ++k) {
    float c[3];
    viz::colormap_rgb(float(k) / 2048.0f, c);
    const int R = int(c[0] * 255.0f + 0.5f) >> 2, G = int(c[1] * 255.0f + 0.5f) >> 2, B = int(c[2] * 255.0f + 0.5f) >> 2;
    bin[size_t((R * 64 + G) * 64 + B)] = true;
  }
  int n = 0;
  for (int y = 0; y < im.h; ++y)
    for (int x = im.w * 2 / 5; x < im.w; ++x) {
      const uint8_t* p = &im.rgba[size_t(y * im.w + x) * 4];
      n += bin[size_t(((p[0] >> 2) * 64 + (p[1] >> 2)) * 64 + (p[2] >> 2))] ? 1 : 0;
    }
  return n;
}

// Only the chosen query block is stepped (done / current / pending); the other blocks are other programs,
// one colour at every step (the grid once advanced every block in lockstep, as if programs synchronised).
TEST(FlashAttentionPanel, MiddleStepShowsDoneCurrentAndPendingTiles) {
  const Image s1 = shot("--set step=1", "fa-step1.png");
  const Image s3 = shot("--set step=3", "fa-step3.png");
  const Image s5 = shot("--set step=5", "fa-step5.png");
  ASSERT_EQ(s3.w, 1400);
  ASSERT_EQ(s3.h, 900);
  // The legend's swatches hold some of each colour at every step: counts are taken against step 1's.
  const int done1 = count_left(s1, 74, 130, 199);
  const int done3 = count_left(s3, 74, 130, 199) - done1, done5 = count_left(s5, 74, 130, 199) - done1;
  const int cur3 = count_left(s3, 236, 172, 62), cur5 = count_left(s5, 236, 172, 62);
  const int pend3 = count_left(s3, 58, 61, 70), pend5 = count_left(s5, 58, 61, 70);
  EXPECT_GT(cur3, 500);  // one current tile
  EXPECT_NEAR(double(cur5) / cur3, 1.0, 0.2);
  // Done tiles: 2 at step 3, 4 at step 5; pending: 3, then 1.
  EXPECT_NEAR(double(done5) / done3, 2.0, 0.35);
  EXPECT_GT(pend3, pend5);
  // The other programs' colour: the same at every step, and more of it than one block's row of tiles.
  const int other1 = count_left(s1, 64, 112, 108), other5 = count_left(s5, 64, 112, 108);
  EXPECT_GT(other1, 6 * cur3);
  EXPECT_NEAR(double(other5) / other1, 1.0, 0.02);
}

TEST(FlashAttentionPanel, PartialWeightsFillInTileByTile) {
  const int w1 = weights_right(shot("--set step=1", "fa-w1.png"));
  const int w3 = weights_right(shot("--set step=3", "fa-w3.png"));
  const int w6 = weights_right(shot("--set step=6", "fa-w6.png"));
  // Two heatmaps of equal size: the final one whole, the partial one step/6 of it (plus colour bars).
  EXPECT_LT(w1, w3);
  EXPECT_LT(w3, w6);
  EXPECT_NEAR(double(w3) / w6, (1.0 + 3.0 / 6.0) / 2.0, 0.1);
}

// Pixels of exactly colour c in the right 60 % (the chosen block's bars).
int count_right(const Image& im, int r, int g, int b) {
  int n = 0;
  for (int y = 0; y < im.h; ++y)
    for (int x = im.w * 2 / 5; x < im.w; ++x) {
      const uint8_t* p = &im.rgba[size_t(y * im.w + x) * 4];
      n += (std::abs(p[0] - r) <= 2 && std::abs(p[1] - g) <= 2 && std::abs(p[2] - b) <= 2) ? 1 : 0;
    }
  return n;
}

// Step 1 is every row's first tile: every max moves (amber bars), alpha = 0; at step 3 some rows keep theirs.
TEST(FlashAttentionPanel, FirstStepBarsAreAllMovedRows) {
  const Image s1 = shot("--set step=1", "fa-bars1.png");
  const Image s3 = shot("--set step=3", "fa-bars3.png");
  // (The converging plot's line shares the steady blue, so the counts are compared between steps.)
  const int amber1 = count_right(s1, 236, 172, 62), amber3 = count_right(s3, 236, 172, 62);
  const int blue1 = count_right(s1, 74, 130, 199), blue3 = count_right(s3, 74, 130, 199);
  EXPECT_GT(amber1, 1000);  // amber: the m and l bars of all 16 rows
  EXPECT_GT(amber1, amber3 + 300);  // 9 of 16 rows moved at step 3
  EXPECT_GT(blue3, blue1 + 500) << "step 3's steady rows are not blue";
}

// Three traffic bars: standard attention's colour is drawn in the memory column.
TEST(FlashAttentionPanel, TrafficShowsStandardAttention) {
  const Image s3 = shot("--set step=3", "fa-traffic.png");
  EXPECT_GT(count_left(s3, 200, 120, 220), 1000);
}

int count_all(const Image& im, int r, int g, int b) {
  int n = 0;
  for (size_t i = 0; i + 3 < im.rgba.size(); i += 4)
    n += (std::abs(im.rgba[i] - r) <= 2 && std::abs(im.rgba[i + 1] - g) <= 2 && std::abs(im.rgba[i + 2] - b) <= 2) ? 1 : 0;
  return n;
}

// The IO view draws rung 5's counted traffic (its green) in its plots; past rung 4's wall the traffic strip
// draws no rung-4 bar (it once drew one where rung 4 is refused).
TEST(FlashAttentionPanel, IoViewAndNoRungFourBarPastItsWall) {
  const Image steps = shot("--set step=3", "fa-io-steps.png"), io = shot("--set view=io", "fa-io.png");
  EXPECT_GT(count_all(io, 90, 200, 140), count_all(steps, 90, 200, 140) + 500);
  const Image here = shot("--set view=checks", "fa-io-here.png");
  const Image past = shot("--set view=checks --set lk=4096 --set lq=32 --set block_n=64 --set step=40", "fa-io-past.png");
  EXPECT_GT(count_all(here, 235, 110, 90), 600);  // the rung-4 bar
  EXPECT_LT(count_all(past, 235, 110, 90), 50) << "a rung-4 bar where rung 4 is refused";
}

TEST(FlashAttentionPanel, TextSaysFirstTileAlphaAndCitesTheIoStatement) {
  const std::string text(assets::find("text/flash_attention.md"));
  ASSERT_FALSE(text.empty());
  EXPECT_NE(text.find("alpha = exp(-inf) = 0"), std::string::npos);
  EXPECT_NE(text.find("Theta(N d + N^2)"), std::string::npos);
  EXPECT_NE(text.find("Theta(N^2 d^2 / M)"), std::string::npos);
}

TEST(FlashAttentionPanel, StepPastTheEndIsMovedAndSaid) {
  std::string out;
  const std::string file = test::tmp_dir() + "/fa-past.png";
  // 6 steps at this shape: step=40 is moved to the last step, not refused, and the run still succeeds.
  EXPECT_EQ(test::run_cli("shot flash-attention --backend cpu --out " + file +
                              " --set lq=48 --set lk=96 --set block_n=16 --set step=40",
                          &out),
            0)
      << out;
}

// One spec per parameter: the panel's list is the study's (`study flash-attention` and the panel agree),
// overrides and their reasons included.
TEST(FlashAttentionPanel, ParamsAreTheStudys) {
  const std::vector<ParamSpec> study = flash_attention_study::params();
  for (const auto& panel : app::make_panels()) {
    if (panel->id() != "flash-attention") continue;
    const std::vector<ParamSpec>& specs = panel->params().specs();
    // Then the "Inside the fast kernel" view's own one (issue 30: recording), which the study has no use for.
    const std::vector<ParamSpec> view = app::TimelineView::params(timeline::kForward);
    ASSERT_EQ(specs.size(), study.size() + view.size());
    for (size_t i = 0; i < view.size(); ++i) EXPECT_EQ(specs[study.size() + i].name, view[i].name);
    for (size_t i = 0; i < study.size(); ++i) {
      const ParamSpec &a = specs[i], &b = study[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(int(a.kind), int(b.kind)) << a.name;
      EXPECT_EQ(a.min, b.min) << a.name;
      EXPECT_EQ(a.max, b.max) << a.name;
      EXPECT_EQ(a.def, b.def) << a.name;
      EXPECT_EQ(a.help, b.help) << a.name;
      EXPECT_EQ(a.override_reason, b.override_reason) << a.name;
      EXPECT_EQ(a.kernel_def, b.kernel_def) << a.name;
    }
    // The study's causal is the rung's (default off), its tiles the panel's declared overrides.
    ParamValues v(study);
    EXPECT_FALSE(v.get_bool("causal"));
    EXPECT_EQ(v.get_int("block_m"), 16);
    return;
  }
  FAIL() << "no flash-attention panel";
}

}  // namespace
}  // namespace kl
