// viz/heatmap.cpp + shaders/heatmap.frag: a known 2-channel DataTexture drawn headlessly, pixels read
// back and checked cell by cell: one palette colour per program id, masked lanes hatched grey,
// never-written cells a red/black checker and NaN values a magenta stripe (told apart, with a key under
// the image), a single unwritten column among a thousand marked above it, grid lines only where cells
// are wide enough, zoom only with Ctrl held.
#include <gtest/gtest.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <string>

#include "assets/embedded.h"
#include "kernels/runtime/errors.h"
#include "test_util.h"
#include "viz/gl_check.h"
#include "viz/heatmap.h"
#include "viz/png.h"
#include "viz/render_host.h"
#include "viz_test_frame.h"

namespace kl {
namespace {

constexpr int kCols = 24, kRows = 8, kCell = 20;  // 20 output pixels per cell
constexpr int kW = 720, kH = 260;

// 24 x 8 cells; pid = col / 4 (six programs); the last program's lanes in rows 0-3 are masked;
// rows 6-7, cols 0-7 were never written; cell (12, 5) is NaN with state 0; (1, 4) highlighted.
std::vector<float> test_cells() {
  std::vector<float> v(size_t(kCols) * kRows * 2);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      float* cell = &v[(size_t(r) * kCols + c) * 2];
      cell[0] = float(c / 4);
      cell[1] = viz::kCellNormal;
      if (c >= 20 && r < 4) cell[1] = viz::kCellMasked;
      if (r >= 6 && c < 8) cell[1] = viz::kCellUnwritten;
    }
  v[(size_t(5) * kCols + 12) * 2] = std::numeric_limits<float>::quiet_NaN();
  v[(size_t(4) * kCols + 1) * 2 + 1] = viz::kCellHighlight;
  return v;
}

struct Frame {
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  viz::HeatmapHover hover;
};

// Draws `hm` over `tex` at (0, 0) in a fresh frame, the mouse at `mouse`.
Frame draw(viz::RenderHost& host, viz::Heatmap& hm, viz::DataTexture& tex, ImVec2 size,
           ImVec2 mouse = ImVec2(-1e9f, -1e9f)) {
  Frame f;
  ImGui::GetIO().MousePos = mouse;
  EXPECT_TRUE(host.begin_frame());
  test::begin_canvas(float(kW), float(kH));
  f.hover = hm.draw("hm", tex, size);
  test::end_canvas();
  host.end_frame();
  EXPECT_TRUE(host.read_pixels(f.rgba, f.w, f.h));
  return f;
}

class HeatmapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    viz::HostOptions o;
    o.width = kW;
    o.height = kH;
    std::string error;
    host_ = viz::make_headless_host(o, &error);
    ASSERT_TRUE(host_) << error;
    errors_before_ = viz::gl_error_count();
  }
  void TearDown() override {
    EXPECT_EQ(viz::gl_error_count(), errors_before_) << viz::gl_first_error();
  }
  std::unique_ptr<viz::RenderHost> host_;
  int errors_before_ = 0;
};

// The colours found in a cell's pixels, its one-pixel border left out.
std::set<uint32_t> cell_colours(const Frame& f, int col, int row) {
  std::set<uint32_t> s;
  for (int y = row * kCell + 1; y < (row + 1) * kCell - 1; ++y)
    for (int x = col * kCell + 1; x < (col + 1) * kCell - 1; ++x) {
      test::Rgb p = test::pixel(f.rgba, f.w, x, y);
      s.insert(uint32_t(p.r) | uint32_t(p.g) << 8 | uint32_t(p.b) << 16);
    }
  return s;
}

bool has_red(const std::set<uint32_t>& s) {
  for (uint32_t c : s)
    if ((c & 0xFF) > 180 && ((c >> 8) & 0xFF) < 70 && ((c >> 16) & 0xFF) < 70) return true;
  return false;
}
bool has_black(const std::set<uint32_t>& s) {
  for (uint32_t c : s)
    if ((c & 0xFF) < 30 && ((c >> 8) & 0xFF) < 30 && ((c >> 16) & 0xFF) < 30) return true;
  return false;
}
bool has_magenta(const std::set<uint32_t>& s) {
  for (uint32_t c : s)
    if ((c & 0xFF) > 190 && ((c >> 8) & 0xFF) < 90 && ((c >> 16) & 0xFF) > 190) return true;
  return false;
}
bool all_grey(const std::set<uint32_t>& s) {
  for (uint32_t c : s) {
    const int r = c & 0xFF, g = (c >> 8) & 0xFF, b = (c >> 16) & 0xFF;
    if (std::abs(r - g) > 8 || std::abs(g - b) > 8 || r > 140) return false;
  }
  return true;
}

TEST_F(HeatmapTest, CategoricalCellsMaskedAndUnwritten) {
  viz::DataTexture tex;
  tex.resize(kCols, kRows, 2);
  const std::vector<float> cells = test_cells();
  tex.upload(cells.data());
  viz::Heatmap hm;
  viz::ColorScale s;
  s.kind = viz::ColorScale::Kind::Categorical;
  hm.set_scale(s);
  hm.set_grid(4, 0);
  const ImVec2 size(kCols * kCell, kRows * kCell);
  // Mouse over the centre of cell (9, 3); the first frame creates the window the mouse can hover.
  draw(*host_, hm, tex, size);
  Frame f = draw(*host_, hm, tex, size, ImVec2(9 * kCell + 10, 3 * kCell + 10));
  viz::write_png(test::tmp_dir() + "/heatmap_categorical.png", f.rgba, f.w, f.h);

  // One palette colour per program, all six distinct, uniform over the cell.
  std::set<uint32_t> pid_colours;
  for (int pid = 0; pid < 6; ++pid) {
    float c[3];
    viz::categorical_rgb(pid, c);
    const int col = pid * 4 + 2, row = pid == 5 ? 5 : 1;  // pid 5's rows 0-3 are masked
    const std::set<uint32_t> cc = cell_colours(f, col, row);
    ASSERT_EQ(cc.size(), 1u) << "pid " << pid;
    test::Rgb p = test::pixel(f.rgba, f.w, col * kCell + 10, row * kCell + 10);
    EXPECT_TRUE(test::near(p, c, 1)) << "pid " << pid << ": " << p.r << "," << p.g << "," << p.b;
    pid_colours.insert(*cc.begin());
  }
  EXPECT_EQ(pid_colours.size(), 6u);

  // Masked lanes: a hatch of two greys, none of them a program's colour.
  const std::set<uint32_t> masked = cell_colours(f, 21, 1);
  EXPECT_GE(masked.size(), 2u);
  EXPECT_TRUE(all_grey(masked));
  for (uint32_t c : masked) EXPECT_EQ(pid_colours.count(c), 0u);
  // The hatch runs diagonally: the same colour repeats along x + y = const.
  const test::Rgb a = test::pixel(f.rgba, f.w, 21 * kCell + 5, kCell + 5);
  const test::Rgb b = test::pixel(f.rgba, f.w, 21 * kCell + 6, kCell + 4);
  EXPECT_TRUE(a.r == b.r && a.g == b.g && a.b == b.b);

  // Never written: the checker's red and black. A NaN the kernel wrote (state 0): magenta, neither.
  for (auto [col, row] : {std::pair{3, 6}, std::pair{6, 7}}) {
    const std::set<uint32_t> cc = cell_colours(f, col, row);
    EXPECT_TRUE(has_red(cc)) << col << "," << row;
    EXPECT_TRUE(has_black(cc)) << col << "," << row;
    EXPECT_FALSE(has_magenta(cc)) << col << "," << row;
  }
  const std::set<uint32_t> nan = cell_colours(f, 12, 5);
  EXPECT_TRUE(has_magenta(nan));
  EXPECT_FALSE(has_red(nan));
  EXPECT_FALSE(has_black(nan));
  EXPECT_TRUE(hm.found().unwritten);
  EXPECT_TRUE(hm.found().nan);
  EXPECT_TRUE(hm.found().masked);
  // The key under the image shows both patterns.
  std::set<uint32_t> key;
  for (int y = kRows * kCell; y < kRows * kCell + 40; ++y)
    for (int x = 0; x < kCols * kCell; ++x) {
      const test::Rgb p = test::pixel(f.rgba, f.w, x, y);
      key.insert(uint32_t(p.r) | uint32_t(p.g) << 8 | uint32_t(p.b) << 16);
    }
  EXPECT_TRUE(has_red(key)) << "no never-written swatch under the image";
  EXPECT_TRUE(has_magenta(key)) << "no NaN swatch under the image";

  // Highlighted: brighter than its program's plain cells.
  const test::Rgb hl = test::pixel(f.rgba, f.w, 1 * kCell + 10, 4 * kCell + 10);
  const test::Rgb plain = test::pixel(f.rgba, f.w, 2 * kCell + 10, 4 * kCell + 10);
  EXPECT_GT(hl.r + hl.g + hl.b, plain.r + plain.g + plain.b + 60);

  // Grid lines every 4 columns: darker pixels on the boundary between programs 0 and 1 (x = 80).
  // The one-pixel line falls on x = 79 or x = 80 (whichever pixel holds the boundary).
  const test::Rgb l0 = test::pixel(f.rgba, f.w, 4 * kCell - 1, 1 * kCell + 10);
  const test::Rgb l1 = test::pixel(f.rgba, f.w, 4 * kCell, 1 * kCell + 10);
  const int line = std::min(l0.r + l0.g + l0.b, l1.r + l1.g + l1.b);
  const test::Rgb beside = test::pixel(f.rgba, f.w, 4 * kCell + 3, 1 * kCell + 10);
  EXPECT_LT(line, beside.r + beside.g + beside.b - 60);

  // Hover: the cell under the mouse.
  EXPECT_TRUE(f.hover.active);
  EXPECT_EQ(f.hover.col, 9);
  EXPECT_EQ(f.hover.row, 3);
}

TEST_F(HeatmapTest, NoGridLinesWhenCellsAreNarrow) {
  const int cols = 400;  // 400 cells over 400 pixels: 1 pixel per cell
  std::vector<float> v(cols * 2);
  for (int c = 0; c < cols; ++c) v[c * 2] = 3.0f, v[c * 2 + 1] = 0.0f;
  viz::DataTexture tex;
  tex.resize(cols, 1, 2);
  tex.upload(v.data());
  viz::Heatmap hm;
  viz::ColorScale s;
  s.kind = viz::ColorScale::Kind::Categorical;
  hm.set_scale(s);
  hm.set_grid(4, 0);
  Frame f = draw(*host_, hm, tex, ImVec2(float(cols), 40));
  float c[3];
  viz::categorical_rgb(3, c);
  for (int x = 1; x < cols - 1; ++x) ASSERT_TRUE(test::near(test::pixel(f.rgba, f.w, x, 20), c, 1)) << x;
}

TEST_F(HeatmapTest, SequentialAndDivergingScalesWithColourBar) {
  const int n = 64;
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = -2.0f + 4.0f * float(i) / float(n - 1);  // -2 .. 2
  viz::DataTexture tex;
  tex.resize(n, 1, 1);
  tex.upload(v.data());
  for (auto kind : {viz::ColorScale::Kind::Sequential, viz::ColorScale::Kind::Diverging}) {
    viz::Heatmap hm;
    viz::ColorScale s;
    s.kind = kind;
    s.lo = -2.0f;
    s.hi = 2.0f;
    s.label = "value";
    hm.set_scale(s);
    const ImVec2 size(n * 8, 160);
    Frame f = draw(*host_, hm, tex, size);
    const bool seq = kind == viz::ColorScale::Kind::Sequential;
    viz::write_png(test::tmp_dir() + (seq ? "/heatmap_sequential.png" : "/heatmap_diverging.png"), f.rgba, f.w, f.h);
    auto map = [&](float t, float c[3]) { seq ? viz::colormap_rgb(t, c) : viz::diverging_rgb(t, c); };
    float lo[3], hi[3];
    map(0.0f, lo);
    map(1.0f, hi);
    EXPECT_TRUE(test::near(test::pixel(f.rgba, f.w, 3, 80), lo, 3));
    EXPECT_TRUE(test::near(test::pixel(f.rgba, f.w, n * 8 - 4, 80), hi, 3));
    if (!seq) {  // the middle of a diverging map is (nearly) white
      const test::Rgb mid = test::pixel(f.rgba, f.w, n * 4, 80);
      EXPECT_GT(mid.r + mid.g + mid.b, 3 * 225);
    }
    // The colour bar to the right: its top is `hi`, its bottom `lo`.
    EXPECT_GT(hm.colorbar_width(), 20.0f);
    bool top_found = false, bottom_found = false;
    for (int x = n * 8; x < n * 8 + int(hm.colorbar_width()); ++x) {
      top_found = top_found || test::near(test::pixel(f.rgba, f.w, x, 9), hi, 12);
      bottom_found = bottom_found || test::near(test::pixel(f.rgba, f.w, x, 150), lo, 12);
    }
    EXPECT_TRUE(top_found);
    EXPECT_TRUE(bottom_found);
  }
}

TEST_F(HeatmapTest, HighlightBandsAndWheelZoom) {
  viz::DataTexture tex;
  tex.resize(kCols, kRows, 2);
  const std::vector<float> cells = test_cells();
  tex.upload(cells.data());
  viz::Heatmap hm;
  viz::ColorScale s;
  s.kind = viz::ColorScale::Kind::Categorical;
  hm.set_scale(s);
  hm.set_highlight(2, 10);
  const ImVec2 size(kCols * kCell, kRows * kCell);
  Frame f = draw(*host_, hm, tex, size);
  // Inside the band: lighter than the same program's colour outside it.
  const test::Rgb in_band = test::pixel(f.rgba, f.w, 14 * kCell + 10, 2 * kCell + 10);
  const test::Rgb outside = test::pixel(f.rgba, f.w, 14 * kCell + 10, 4 * kCell + 10);
  EXPECT_GT(in_band.r + in_band.g + in_band.b, outside.r + outside.g + outside.b + 20);

  // Wheel up over cell (0, 0): zoomed in around the mouse, the hovered cell is still (0, 0) and
  // cell (1, 0) is now wider than 20 pixels.
  hm.set_highlight(-1, -1);
  // The wheel alone belongs to the window (it scrolls the page): no zoom.
  draw(*host_, hm, tex, size, ImVec2(5, 5));
  ImGui::GetIO().MouseWheel = 2.0f;
  Frame w = draw(*host_, hm, tex, size, ImVec2(5, 5));
  float c1[3];
  viz::categorical_rgb(1, c1);
  EXPECT_TRUE(test::near(test::pixel(w.rgba, w.w, 4 * kCell + 10, 10), c1, 1)) << "the wheel alone zoomed";
  // Ctrl + wheel zooms.
  ImGui::GetIO().KeyCtrl = true;
  draw(*host_, hm, tex, size, ImVec2(5, 5));
  ImGui::GetIO().MouseWheel = 2.0f;
  Frame z = draw(*host_, hm, tex, size, ImVec2(5, 5));
  ImGui::GetIO().KeyCtrl = false;
  EXPECT_EQ(z.hover.col, 0);
  EXPECT_EQ(z.hover.row, 0);
  float c0[3];
  viz::categorical_rgb(0, c0);
  EXPECT_TRUE(test::near(test::pixel(z.rgba, z.w, 3 * kCell + 10, 10), c0, 1)) << "col 3 still pid 0 at x=70";
  EXPECT_FALSE(test::near(test::pixel(z.rgba, z.w, 4 * kCell + 10, 10), c1, 1)) << "zoomed: pid 1 moved right";
  hm.reset_view();
  Frame r = draw(*host_, hm, tex, size);
  EXPECT_TRUE(test::near(test::pixel(r.rgba, r.w, 4 * kCell + 10, 10), c1, 1));
}

TEST_F(HeatmapTest, ManyCellsPerPixelShowOnlyCellColours) {
  // 4096 x 512 cells drawn at 512 x 128 pixels: each pixel shows one cell's colour (nearest), never a
  // blend, so program ids stay readable colours from the palette. A diverging map beside it, with
  // a highlighted row and column, for the eye (the PNG is written to the test's tmp directory).
  const int cols = 4096, rows = 512;
  std::vector<float> v(size_t(cols) * rows * 2);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int64_t lane = int64_t(r) * cols + c;
      v[size_t(lane) * 2] = float(lane / 65536);                       // 32 programs of 65536 lanes
      v[size_t(lane) * 2 + 1] = lane >= int64_t(cols) * rows - 300000 ? 1.0f : 0.0f;  // masked tail
    }
  viz::DataTexture tex;
  tex.resize(cols, rows, 2);
  tex.upload(v.data());
  viz::Heatmap hm;
  viz::ColorScale s;
  s.kind = viz::ColorScale::Kind::Categorical;
  hm.set_scale(s);
  hm.set_grid(cols, 16);  // program boundaries every 16 rows: skipped, cells are too small

  const int n = 48;
  std::vector<float> att(size_t(n) * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) att[size_t(i) * n + j] = std::sin(0.21f * float(i)) * std::cos(0.13f * float(j));
  viz::DataTexture tex2;
  tex2.resize(n, n, 1);
  tex2.upload(att.data());
  viz::Heatmap hm2;
  viz::ColorScale s2;
  s2.kind = viz::ColorScale::Kind::Diverging;
  s2.lo = -1.0f;
  s2.hi = 1.0f;
  s2.label = "score";
  hm2.set_scale(s2);
  hm2.set_grid(16, 16);
  hm2.set_highlight(20, 30);

  Frame f;
  for (int frame = 0; frame < 2; ++frame) {
    ImGui::GetIO().MousePos = ImVec2(560 + 7 * 4 + 2, 20 + 9 * 4 + 2);
    ASSERT_TRUE(host_->begin_frame());
    test::begin_canvas(float(kW), float(kH));
    hm.draw("programs", tex, ImVec2(512, 128));
    ImGui::SameLine(0, 48);
    ImGui::SetCursorPosY(20);
    f.hover = hm2.draw("scores", tex2, ImVec2(4 * n, 4 * n));
    test::end_canvas();
    host_->end_frame();
  }
  ASSERT_TRUE(host_->read_pixels(f.rgba, f.w, f.h));
  viz::write_png(test::tmp_dir() + "/heatmap_gallery.png", f.rgba, f.w, f.h);
  std::set<uint32_t> palette;
  for (int k = 0; k < 12; ++k) {
    float c[3];
    viz::categorical_rgb(k, c);
    palette.insert(uint32_t(c[0] * 255 + 0.5f) | uint32_t(c[1] * 255 + 0.5f) << 8 | uint32_t(c[2] * 255 + 0.5f) << 16);
  }
  int off_palette = 0;
  for (int y = 0; y < 100; ++y)  // the unmasked part
    for (int x = 0; x < 512; ++x) {
      const test::Rgb p = test::pixel(f.rgba, f.w, x, y);
      off_palette += !palette.count(uint32_t(p.r) | uint32_t(p.g) << 8 | uint32_t(p.b) << 16);
    }
  EXPECT_EQ(off_palette, 0);
  EXPECT_TRUE(f.hover.active);
  EXPECT_EQ(f.hover.col, 7);
  EXPECT_EQ(f.hover.row, 9);
}

// A softmax output of 1025 columns whose last column was never written, drawn 600 pixels wide (1.7
// columns a pixel): the column is not lost between pixels (its pixels show the checker), a mark stands
// over it on the column axis, and the key names it; with that column written, none of them.
TEST_F(HeatmapTest, SingleUnwrittenColumnAmongManyIsMarked) {
  const int cols = 1025, rows = 12, w = 600, h = 120, top = 30;
  for (const bool unwritten : {true, false}) {
    SCOPED_TRACE(unwritten ? "column 1024 never written" : "every column written");
    std::vector<float> v(size_t(cols) * rows * 2);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        float* cell = &v[(size_t(r) * cols + c) * 2];
        cell[0] = 0.3f + 0.0005f * float(c);
        cell[1] = unwritten && c == cols - 1 ? viz::kCellUnwritten : viz::kCellNormal;
      }
    viz::DataTexture tex;
    tex.resize(cols, rows, 2);
    tex.upload(v.data());
    viz::Heatmap hm;
    hm.set_scale({viz::ColorScale::Kind::Sequential, 0.0f, 1.0f, ""});
    Frame f;
    for (int frame = 0; frame < 2; ++frame) {
      ASSERT_TRUE(host_->begin_frame());
      test::begin_canvas(float(kW), float(kH));
      ImGui::SetCursorPos(ImVec2(0, float(top)));
      hm.draw("softmax", tex, ImVec2(float(w), float(h)));
      test::end_canvas();
      host_->end_frame();
    }
    ASSERT_TRUE(host_->read_pixels(f.rgba, f.w, f.h));
    viz::write_png(test::tmp_dir() + (unwritten ? "/heatmap_1025_unwritten.png" : "/heatmap_1025_written.png"), f.rgba,
                   f.w, f.h);
    std::set<uint32_t> image_end, mark;
    for (int y = top; y < top + h; ++y)
      for (int x = w - 3; x < w; ++x) {
        const test::Rgb p = test::pixel(f.rgba, f.w, x, y);
        image_end.insert(uint32_t(p.r) | uint32_t(p.g) << 8 | uint32_t(p.b) << 16);
      }
    for (int y = top - 8; y < top; ++y)
      for (int x = w - 12; x < w + 6; ++x) {
        const test::Rgb p = test::pixel(f.rgba, f.w, x, y);
        mark.insert(uint32_t(p.r) | uint32_t(p.g) << 8 | uint32_t(p.b) << 16);
      }
    EXPECT_EQ(has_red(image_end), unwritten);
    EXPECT_EQ(has_red(mark), unwritten);
    EXPECT_EQ(hm.found().unwritten, unwritten);
    EXPECT_FALSE(hm.found().nan);
  }
}

// One-channel data (no state): a NaN is a NaN the kernel wrote, unless the panel says its output was
// poisoned with NaN before the launch, where it is a cell never written.
TEST_F(HeatmapTest, OneChannelNanIsANanUnlessThePoisonSaysOtherwise) {
  std::vector<float> v(kCols * kRows, 0.5f);
  v[3 * kCols + 5] = std::numeric_limits<float>::quiet_NaN();
  viz::DataTexture tex;
  tex.resize(kCols, kRows, 1);
  tex.upload(v.data());
  for (const bool poison : {false, true}) {
    viz::Heatmap hm;
    hm.set_scale({viz::ColorScale::Kind::Diverging, -1.0f, 1.0f, ""});
    hm.set_colorbar(false);
    hm.set_nan_means_unwritten(poison);
    Frame f = draw(*host_, hm, tex, ImVec2(kCols * kCell, kRows * kCell));
    const std::set<uint32_t> cc = cell_colours(f, 5, 3);
    EXPECT_EQ(has_magenta(cc), !poison);
    EXPECT_EQ(has_red(cc) && has_black(cc), poison);
    EXPECT_EQ(hm.found().nan, !poison);
    EXPECT_EQ(hm.found().unwritten, poison);
  }
}

TEST(HeatmapLifetime, OutlivesItsHostAndMovesToTheNextOne) {
  // Panels own heatmaps and textures and may be destroyed after the host: nothing may call GL then
  // (epoxy aborts with no current context). A new host gets fresh GL objects.
  viz::DataTexture tex;
  viz::Heatmap hm;
  viz::ColorScale s;
  s.kind = viz::ColorScale::Kind::Categorical;
  hm.set_scale(s);
  for (int round = 0; round < 2; ++round) {
    viz::HostOptions o;
    o.width = kW;
    o.height = kH;
    std::string error;
    auto host = viz::make_headless_host(o, &error);
    ASSERT_TRUE(host) << error;
    EXPECT_THROW(tex.upload(nullptr), RuntimeError) << "names of the previous host's context";
    tex.resize(kCols, kRows, 2);
    const std::vector<float> cells = test_cells();
    tex.upload(cells.data());
    Frame f = draw(*host, hm, tex, ImVec2(kCols * kCell, kRows * kCell));
    float c[3];
    viz::categorical_rgb(round == 0 ? 0 : 2, c);
    EXPECT_TRUE(test::near(test::pixel(f.rgba, f.w, (round == 0 ? 2 : 10) * kCell + 10, kCell + 10), c, 1));
  }
}

TEST(ColourMaps, ViridisEndsAndMonotoneLightness) {
  float a[3], b[3];
  viz::colormap_rgb(0.0f, a);
  viz::colormap_rgb(1.0f, b);
  // matplotlib's viridis: #440154 at 0, #fde725 at 1.
  EXPECT_NEAR(a[0], 0x44 / 255.0, 0.02);
  EXPECT_NEAR(a[2], 0x54 / 255.0, 0.02);
  EXPECT_NEAR(b[0], 0xfd / 255.0, 0.02);
  EXPECT_NEAR(b[1], 0xe7 / 255.0, 0.02);
  double prev = -1;
  for (int i = 0; i <= 64; ++i) {
    float c[3];
    viz::colormap_rgb(i / 64.0f, c);
    const double luma = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
    EXPECT_GT(luma, prev) << i;
    prev = luma;
  }
}

TEST(ColourMaps, CategoricalPaletteIsTwelveDistinctColours) {
  std::set<uint32_t> seen;
  for (int i = 0; i < 12; ++i) {
    float c[3], d[3];
    viz::categorical_rgb(i, c);
    viz::categorical_rgb(i + 12, d);
    EXPECT_EQ(c[0], d[0]);
    viz::categorical_rgb(i - 12, d);
    EXPECT_EQ(c[1], d[1]);
    seen.insert(uint32_t(c[0] * 255) | uint32_t(c[1] * 255) << 8 | uint32_t(c[2] * 255) << 16);
  }
  EXPECT_EQ(seen.size(), 12u);
}

// The shader names the cell states (generated #defines from kernels/runtime/cell_state.h), never their
// numbers: comparing `state` with a literal would be a second definition that can drift.
TEST(HeatmapShader, ComparesCellStatesByName) {
  const std::string frag(assets::find("shaders/heatmap.frag"));
  ASSERT_FALSE(frag.empty());
  EXPECT_FALSE(std::regex_search(frag, std::regex(R"(state\s*[=!]=\s*[0-9])"))) << frag;
  EXPECT_FALSE(std::regex_search(frag, std::regex(R"(#define\s+CELL_)"))) << "the shader defines a state itself";
  for (const char* name : {"CELL_NORMAL", "CELL_MASKED", "CELL_UNWRITTEN", "CELL_HIGHLIGHT", "CELL_OUTSIDE"})
    EXPECT_NE(frag.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace kl
