// viz/plot.cpp: line plots, bar charts and budget bars drawn headlessly; pixels checked for the series'
// colours, the marker line, the bars' fill and the budget bar's over-the-limit red.
#include <gtest/gtest.h>
#include <imgui.h>

#include <cmath>

#include "test_util.h"
#include "viz/gl_check.h"
#include "viz/heatmap.h"
#include "viz/plot.h"
#include "viz/png.h"
#include "viz/render_host.h"
#include "viz_test_frame.h"

namespace kl {
namespace {

constexpr int kW = 1000, kH = 640;

int count_colour(const std::vector<uint8_t>& rgba, int w, int x0, int y0, int x1, int y1, unsigned col, int tol) {
  const int r = col & 0xFF, g = (col >> 8) & 0xFF, b = (col >> 16) & 0xFF;
  int n = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      test::Rgb p = test::pixel(rgba, w, x, y);
      n += std::abs(p.r - r) <= tol && std::abs(p.g - g) <= tol && std::abs(p.b - b) <= tol;
    }
  return n;
}

TEST(Plot, LinePlotBarChartAndBudgetBars) {
  viz::HostOptions o;
  o.width = kW;
  o.height = kH;
  std::string error;
  auto host = viz::make_headless_host(o, &error);
  ASSERT_TRUE(host) << error;
  const int errors_before = viz::gl_error_count();

  viz::Series a{"softmax (buggy)", {}, {}, IM_COL32(230, 90, 80, 255), false};
  viz::Series b{"softmax (online)", {}, {}, IM_COL32(80, 160, 230, 255), false};
  viz::Series c{"measured", {}, {}, IM_COL32(240, 200, 70, 255), true};
  for (int k = 5; k <= 16; ++k) {
    const double n = std::pow(2.0, k);
    a.x.push_back(n), a.y.push_back(n <= 1024 ? 3e-3 * n : std::nan(""));
    b.x.push_back(n), b.y.push_back(2.5e-3 * n + 0.1);
    c.x.push_back(n), c.y.push_back(2.8e-3 * n);
  }
  viz::PlotOptions lp;
  lp.title = "time vs width";
  lp.x_label = "row width";
  lp.y_label = "time (us)";
  lp.log_x = lp.log_y = true;
  lp.v_lines = {1024};
  lp.v_line_labels = {"1024: the wall"};
  viz::PlotOptions bp;
  bp.title = "bandwidth";
  bp.y_label = "GB/s";
  std::vector<viz::Bar> bars = {{"copy", 4420, 0}, {"add v1", 4300, 0}, {"add v2", 4380, 0}, {"relu", 3100, 0}};

  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  for (int frame = 0; frame < 2; ++frame) {
    ASSERT_TRUE(host->begin_frame());
    test::begin_canvas(float(kW), float(kH));
    viz::line_plot("lp", {a, b, c}, lp, ImVec2(560, 380));
    ImGui::SameLine(0, 20);
    viz::bar_chart("bars", bars, bp, ImVec2(400, 380));
    ImGui::Dummy(ImVec2(1, 16));
    ImGui::Indent(20);
    ImGui::TextUnformatted("shared memory per block");
    viz::budget_bar("smem-ok", 48 * 1024, 227 * 1024, "48 KiB / 227 KiB", ImVec2(460, 24));
    viz::budget_bar("smem-near", 200 * 1024, 227 * 1024, "200 KiB / 227 KiB", ImVec2(460, 24));
    viz::budget_bar("smem-over", 260 * 1024, 227 * 1024, "260 KiB > 227 KiB: refused", ImVec2(460, 24));
    ImGui::Unindent(20);
    test::end_canvas();
    host->end_frame();
  }
  ASSERT_TRUE(host->read_pixels(rgba, w, h));
  viz::write_png(test::tmp_dir() + "/plots.png", rgba, w, h);
  EXPECT_EQ(viz::gl_error_count(), errors_before) << viz::gl_first_error();

  // Each line's colour is drawn in the plot area; the marker line's colour too.
  EXPECT_GT(count_colour(rgba, w, 0, 0, 560, 380, a.color, 30), 40);
  EXPECT_GT(count_colour(rgba, w, 0, 0, 560, 380, b.color, 30), 40);
  EXPECT_GT(count_colour(rgba, w, 0, 0, 560, 380, c.color, 30), 30);
  EXPECT_GT(count_colour(rgba, w, 0, 0, 560, 380, IM_COL32(235, 110, 90, 255), 40), 40);
  // Bars in palette colours fill a good part of the bar chart.
  float p0[3];
  viz::categorical_rgb(0, p0);
  const unsigned bar0 = IM_COL32(int(p0[0] * 255 + 0.5f), int(p0[1] * 255 + 0.5f), int(p0[2] * 255 + 0.5f), 255);
  EXPECT_GT(count_colour(rgba, w, 580, 0, 980, 380, bar0, 2), 2000);
  // The over-budget bar is red; the first is not.
  EXPECT_GT(count_colour(rgba, w, 0, 380, 500, kH, IM_COL32(205, 60, 55, 255), 20), 1000);
}

TEST(Plot, DegenerateInputsDrawWithoutErrors) {
  viz::HostOptions o;
  o.width = 400;
  o.height = 300;
  std::string error;
  auto host = viz::make_headless_host(o, &error);
  ASSERT_TRUE(host) << error;
  const int errors_before = viz::gl_error_count();
  viz::PlotOptions lg;
  lg.log_x = lg.log_y = true;
  ASSERT_TRUE(host->begin_frame());
  viz::line_plot("empty", {}, viz::PlotOptions{}, ImVec2(200, 100));
  viz::line_plot("one point", {viz::Series{"p", {1}, {1}, 0, true}}, viz::PlotOptions{}, ImVec2(200, 100));
  viz::line_plot("non-positive on log", {viz::Series{"p", {0, -1}, {0, -5}, 0, false}}, lg, ImVec2(200, 100));
  viz::bar_chart("no bars", {}, viz::PlotOptions{}, ImVec2(200, 100));
  viz::budget_bar("zero limit", 5, 0, "", ImVec2(200, 20));
  host->end_frame();
  EXPECT_EQ(viz::gl_error_count(), errors_before) << viz::gl_first_error();
}

}  // namespace
}  // namespace kl
