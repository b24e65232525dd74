// app/panels/transpose_panel.cpp rendered headlessly by `shot`: the warp views draw what the study counted
// (the naive kernel's strided stores as sectors moved but not asked for, in amber; none for the coalesced
// kernels), a ragged matrix's tile past the edge, and the panel passes the layout audit at 1280x720 and at
// 3840x2160 with UI scale 2 at each of its tour stops.
#include <gtest/gtest.h>

#include <cstdlib>

#include "app/panel_specs.h"
#include "test_util.h"
#include "viz/png.h"

namespace kl {
namespace {

void shot(const std::string& args, const std::string& name, std::vector<uint8_t>& rgba) {
  const std::string file = test::test_file(name);
  std::string out;
  ASSERT_EQ(test::run_cli("shot transpose --backend cpu --size 1400x1600 --out " + file + " " + args, &out), 0) << out;
  int w = 0, h = 0;
  ASSERT_TRUE(viz::read_png(file, rgba, w, h)) << file;
  ASSERT_EQ(w, 1400);
  ASSERT_EQ(h, 1600);
}

// Pixels of exactly this colour (the panel's fills are flat).
int count(const std::vector<uint8_t>& rgba, int r, int g, int b) {
  int n = 0;
  for (size_t i = 0; i + 3 < rgba.size(); i += 4) n += rgba[i] == r && rgba[i + 1] == g && rgba[i + 2] == b;
  return n;
}
int amber(const std::vector<uint8_t>& rgba) { return count(rgba, 230, 170, 60); }   // a sector's unused bytes
int outside(const std::vector<uint8_t>& rgba) { return count(rgba, 26, 26, 30); }  // past the matrix's edge

TEST(TransposePanel, NaiveStoresShowTheSectorsTheyMoveAndCoalescedOnesNone) {
  std::vector<uint8_t> naive, tiled, padded;
  shot("--set variant=naive", "naive.png", naive);
  shot("--set variant=tiled", "tiled.png", tiled);
  shot("--set variant=padded", "padded.png", padded);
  // naive's first store: 32 sectors of 8 floats for 32 lanes, 224 cells of amber (about 80 pixels each).
  EXPECT_GT(amber(naive), 224 * 40);
  EXPECT_EQ(amber(tiled), 0);
  EXPECT_EQ(amber(padded), 0);
  EXPECT_EQ(outside(naive), 0);  // 64 x 96: whole tiles
}

TEST(TransposePanel, ARaggedTileDrawsWhatLiesPastTheEdge) {
  std::vector<uint8_t> rgba;
  shot("--set rows=40 --set cols=40 --set program=3 --set variant=naive", "ragged.png", rgba);
  // Program 3's tile holds in's rows 32..39, columns 32..39: 1024 - 64 cells past the edge, in both views.
  EXPECT_GT(outside(rgba), 2 * 960 * 40);
}

TEST(TransposePanel, ParametersAreTheStudys) { test::expect_panel_params_are_the_studys("transpose"); }

TEST(TransposePanel, LayoutAuditAtTheProjectorsSizeAndAt4kScale2) {
  for (const char* look : {"--size 1280x720 --ui-scale 1", "--size 3840x2160 --ui-scale 2"}) {
    std::string out;
    const int code = test::run_cli(std::string("shot transpose --stops --chrome --layout-report --backend cpu ") + look, &out);
    EXPECT_EQ(code, 0) << look << "\n" << out;
    EXPECT_NE(out.find("layout report: 0 findings over 3 views"), std::string::npos) << look << "\n" << out;
  }
}

}  // namespace
}  // namespace kl
