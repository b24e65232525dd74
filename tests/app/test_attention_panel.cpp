// app/panels/attention_panel.cpp rendered headlessly by `shot` on the CPU backend: the weight heatmap
// is drawn (pixels of the sequential colour map), the causal mask leaves the upper-right triangle of
// the weights empty (hatched) and the lower-left full, and past the wall the refusal replaces the
// matrices while the budget bar turns red.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "app/panel.h"
#include "assets/embedded.h"
#include "kernels/rungs/attention.h"
#include "kernels/studies/attention_study.h"
#include "kernels/runtime/backend.h"
#include "test_util.h"
#include "viz/heatmap.h"
#include "viz/png.h"

namespace kl {
namespace {

struct Image {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  const uint8_t* px(int x, int y) const { return &rgba[size_t(y * w + x) * 4]; }
};

Image shot(const std::string& sets, const std::string& name) {
  Image im;
  std::string out;
  const std::string file = test::tmp_dir() + "/" + name;
  EXPECT_EQ(test::run_cli("shot attention --backend cpu --size 1400x900 --out " + file + " " + sets, &out), 0) << out;
  EXPECT_TRUE(viz::read_png(file, im.rgba, im.w, im.h)) << file;
  return im;
}

// Pixels whose colour lies on the sequential colour map (the weights'), as a lookup of 6-bit bins.
struct SequentialColours {
  std::vector<bool> bin = std::vector<bool>(64 * 64 * 64, false);
  SequentialColours() {
    for (int k = 0; k <= 2048; ++k) {
      float c[3];
      viz::colormap_rgb(float(k) / 2048.0f, c);
      const int r = int(c[0] * 255.0f + 0.5f) >> 2, g = int(c[1] * 255.0f + 0.5f) >> 2, b = int(c[2] * 255.0f + 0.5f) >> 2;
      for (int dr = -1; dr <= 1; ++dr)
        for (int dg = -1; dg <= 1; ++dg)
          for (int db = -1; db <= 1; ++db) {
            const int R = r + dr, G = g + dg, B = b + db;
            if (R >= 0 && R < 64 && G >= 0 && G < 64 && B >= 0 && B < 64) bin[size_t((R * 64 + G) * 64 + B)] = true;
          }
    }
  }
  bool operator()(const uint8_t* p) const { return bin[size_t(((p[0] >> 2) * 64 + (p[1] >> 2)) * 64 + (p[2] >> 2))]; }
};

// The weight heatmap's image: the widest run of columns holding sequential-map pixels (the colour bar
// beside it is a separate, narrow run), and the rows those columns cover.
struct Box {
  int x0 = 0, x1 = -1, y0 = 0, y1 = -1;
  int width() const { return x1 - x0 + 1; }
  int height() const { return y1 - y0 + 1; }
};

Box weight_image(const Image& im, const SequentialColours& seq) {
  std::vector<int> col(size_t(im.w), 0);
  for (int y = 0; y < im.h; ++y)
    for (int x = 0; x < im.w; ++x) col[size_t(x)] += seq(im.px(x, y)) ? 1 : 0;
  Box best;
  for (int x = 0; x < im.w;) {
    if (col[size_t(x)] < 8) {
      ++x;
      continue;
    }
    int e = x;
    while (e + 1 < im.w && col[size_t(e + 1)] >= 8) ++e;
    if (e - x > best.x1 - best.x0) best.x0 = x, best.x1 = e;
    x = e + 1;
  }
  // Rows: the longest run in which most of those columns hold the map (text elsewhere does not).
  int y0 = 0, y1 = -1;
  for (int y = 0; y < im.h;) {
    auto full = [&](int yy) {
      int n = 0;
      for (int x = best.x0; x <= best.x1; ++x) n += seq(im.px(x, yy)) ? 1 : 0;
      return n * 2 > best.width();
    };
    if (!full(y)) {
      ++y;
      continue;
    }
    int e = y;
    while (e + 1 < im.h && full(e + 1)) ++e;
    if (e - y > y1 - y0) y0 = y, y1 = e;
    y = e + 1;
  }
  best.y0 = y0, best.y1 = y1;
  return best;
}

TEST(AttentionPanel, WeightHeatmapIsDrawn) {
  const SequentialColours seq;
  const Image im = shot("--set causal=0 --set lq=16 --set lk=16", "attn-full.png");
  ASSERT_EQ(im.w, 1400);
  ASSERT_EQ(im.h, 900);
  const Box b = weight_image(im, seq);
  ASSERT_GT(b.width(), 250) << "no weight heatmap found";
  ASSERT_GT(b.height(), 120);
  int on = 0;
  for (int y = b.y0; y <= b.y1; ++y)
    for (int x = b.x0; x <= b.x1; ++x) on += seq(im.px(x, y)) ? 1 : 0;
  EXPECT_GT(on, b.width() * b.height() * 9 / 10);  // without a mask the whole image is weights
}

TEST(AttentionPanel, CausalTriangleIsVisible) {
  const SequentialColours seq;
  const Image full = shot("--set causal=0 --set lq=16 --set lk=16", "attn-nocausal.png");
  const Image tri = shot("--set causal=1 --set lq=16 --set lk=16", "attn-causal.png");
  const Box b = weight_image(full, seq);  // the same place in both shots
  ASSERT_GT(b.width(), 250);
  // Upper-right triangle (key j > query i): masked, so no weight colours; lower-left: weights.
  int upper = 0, upper_on = 0, lower = 0, lower_on = 0;
  for (int y = b.y0; y <= b.y1; ++y)
    for (int x = b.x0; x <= b.x1; ++x) {
      const double u = double(x - b.x0) / b.width(), v = double(y - b.y0) / b.height();
      if (u > v + 0.1) ++upper, upper_on += seq(tri.px(x, y)) ? 1 : 0;
      if (u < v - 0.1) ++lower, lower_on += seq(tri.px(x, y)) ? 1 : 0;
    }
  ASSERT_GT(upper, 1000);
  EXPECT_LT(upper_on, upper / 10) << "the masked triangle holds weight colours";
  EXPECT_GT(lower_on, lower * 9 / 10) << "the visible triangle is not drawn";
}

TEST(AttentionPanel, PastTheWallShowsTheRefusal) {
  const SequentialColours seq;
  const int64_t wall = attention::max_lk(32, device_info(Backend::Cpu).smem_per_block_optin);
  const Image ok = shot("--set d=32 --set lq=8 --set lk=" + std::to_string(wall), "attn-wall.png");
  const Image over = shot("--set d=32 --set lq=8 --set lk=" + std::to_string(wall + 1), "attn-over.png");
  EXPECT_GT(weight_image(ok, seq).width(), 250);  // the largest Lk that fits is drawn
  EXPECT_LT(weight_image(over, seq).width(), 40);  // refused: no weights (at most a legend swatch)
  // The budget bar (top quarter of the panel) turns red past the limit: its fill colour.
  auto red = [](const Image& im) {
    int n = 0;
    for (int y = 0; y < im.h / 4; ++y)
      for (int x = 0; x < im.w; ++x) {
        const uint8_t* p = im.px(x, y);
        n += (std::abs(p[0] - 205) <= 3 && std::abs(p[1] - 60) <= 3 && std::abs(p[2] - 55) <= 3) ? 1 : 0;
      }
    return n;
  };
  EXPECT_GT(red(over), 3000);
  EXPECT_LT(red(ok), 300);
}

// One spec per parameter: the panel's ParamValues are the study's params() (so `study attention` and the
// panel agree by construction), in order, with the same names, ranges, defaults and help.
TEST(AttentionPanel, ParamsAreTheStudys) {
  const std::vector<ParamSpec> study = attention_study::params();
  for (const auto& panel : app::make_panels()) {
    if (panel->id() != "attention") continue;
    const std::vector<ParamSpec>& mine = panel->params().specs();
    ASSERT_EQ(mine.size(), study.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      const ParamSpec &a = mine[i], &b = study[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(int(a.kind), int(b.kind)) << a.name;
      EXPECT_EQ(a.range_text(), b.range_text()) << a.name;
      EXPECT_EQ(a.def, b.def) << a.name;
      EXPECT_EQ(a.help, b.help) << a.name;
      EXPECT_EQ(a.override_reason, b.override_reason) << a.name;
    }
    return;
  }
  FAIL() << "no attention panel";
}

// The panel's text, the budget line the panel draws (the study's, verbatim) and the code state one formula.
TEST(AttentionPanel, TextAndBudgetLineStateTheCodesFormula) {
  const std::string text(assets::find("text/attention.md"));
  ASSERT_FALSE(text.empty());
  const std::string formula = "(2 x Lk x d + " + std::to_string(attention::kBlockQ) + " x d) x 4 bytes";
  EXPECT_NE(text.find(formula), std::string::npos) << "attention.md does not state " << formula;
  EXPECT_EQ(text.find("2 x Lk x d x 4 bytes"), std::string::npos) << "attention.md still gives K and V alone";
  const attention_study::Budget g = attention_study::budget(Backend::Cpu, 20, 32);
  EXPECT_NE(g.formula_line.find("= " + std::to_string(attention::smem_bytes(20, 32)) + " bytes"), std::string::npos)
      << g.formula_line;
  const std::string source(assets::find("source/attention.h"));
  EXPECT_NE(source.find("(2 * Lk * d + kBlockQ * d) * sizeof(float)"), std::string::npos);
}

}  // namespace
}  // namespace kl
