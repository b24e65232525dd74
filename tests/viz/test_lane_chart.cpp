// viz/lane_chart.*: each pixel column in the colour covering most of its time (summed per colour, columns no
// segment touches left empty), the segment under a time, zoom and pan kept inside the range, and the chart
// drawn headlessly: its colours where the window puts them, the mark band, nothing cut or overlapping.
#include <gtest/gtest.h>
#include <imgui.h>

#include "test_util.h"
#include "viz/gl_check.h"
#include "viz/lane_chart.h"
#include "viz/layout_audit.h"
#include "viz/png.h"
#include "viz/render_host.h"
#include "viz_test_frame.h"

namespace kl {
namespace {

using viz::ColumnRun;
using viz::LaneSegment;

const unsigned kA = IM_COL32(230, 80, 70, 255), kB = IM_COL32(80, 200, 110, 255), kC = IM_COL32(70, 120, 230, 255);

LaneSegment seg(double a, double b, unsigned c) {
  LaneSegment s;
  s.start = a, s.end = b, s.color = c;
  return s;
}

void expect_runs(const std::vector<ColumnRun>& got, const std::vector<ColumnRun>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].c0, want[i].c0) << i;
    EXPECT_EQ(got[i].c1, want[i].c1) << i;
    EXPECT_EQ(got[i].color, want[i].color) << i;
  }
}

TEST(LaneChart, EachColumnTakesTheColourCoveringMostOfItsTime) {
  const std::vector<LaneSegment> s = {seg(0, 10, kA), seg(10, 12, kB), seg(12, 30, kC)};
  // One column per 10: the second is 2 of B against 8 of C.
  expect_runs(viz::column_runs(s, 0, 30, 3), {{0, 1, kA}, {1, 3, kC}});
  // One column per unit: every segment its own columns.
  expect_runs(viz::column_runs(s, 0, 30, 30), {{0, 10, kA}, {10, 12, kB}, {12, 30, kC}});
  // A window inside: [5, 15) in 2 columns: A 5 | B 2 + C 3.
  expect_runs(viz::column_runs(s, 5, 15, 2), {{0, 1, kA}, {1, 2, kC}});
  // Colours are summed over a column's segments: A 1 + 1 + 1 + 1 = 4 against C 3 and B 3.
  const std::vector<LaneSegment> many = {seg(0, 1, kA), seg(1, 2, kB), seg(2, 3, kA), seg(3, 4, kB),
                                         seg(4, 5, kA), seg(5, 6, kB), seg(6, 7, kA), seg(7, 10, kC)};
  expect_runs(viz::column_runs(many, 0, 10, 1), {{0, 1, kA}});
  // A column no segment touches is in no run.
  expect_runs(viz::column_runs({seg(0, 5, kA), seg(20, 30, kB)}, 0, 30, 3), {{0, 1, kA}, {2, 3, kB}});
  EXPECT_TRUE(viz::column_runs(s, 0, 30, 0).empty());
  EXPECT_TRUE(viz::column_runs(s, 40, 50, 10).empty());
}

TEST(LaneChart, SegmentUnderATime) {
  const std::vector<LaneSegment> s = {seg(0, 10, kA), seg(10, 12, kB), seg(20, 30, kC)};
  EXPECT_EQ(viz::segment_at(s, 0), 0);
  EXPECT_EQ(viz::segment_at(s, 9.99), 0);
  EXPECT_EQ(viz::segment_at(s, 10), 1);
  EXPECT_EQ(viz::segment_at(s, 15), -1);  // a gap
  EXPECT_EQ(viz::segment_at(s, 29), 2);
  EXPECT_EQ(viz::segment_at(s, 30), -1);
  EXPECT_EQ(viz::segment_at(s, -1), -1);
}

TEST(LaneChart, ZoomAndPanStayInsideTheRange) {
  // Zooming in by half about t = 40 keeps 40 where it was on screen (a fifth of the way in).
  viz::TimeWindow w = viz::zoom_window({0, 200}, 40, 0.5, 0, 1000, 10);
  EXPECT_DOUBLE_EQ(w.t0, 20);
  EXPECT_DOUBLE_EQ(w.t1, 120);
  // Never narrower than min_span, never wider than the range, never outside it.
  w = viz::zoom_window({0, 20}, 10, 0.01, 0, 1000, 10);
  EXPECT_DOUBLE_EQ(w.t1 - w.t0, 10);
  w = viz::zoom_window({900, 1000}, 990, 100, 0, 1000, 10);
  EXPECT_DOUBLE_EQ(w.t0, 0);
  EXPECT_DOUBLE_EQ(w.t1, 1000);
  w = viz::zoom_window({800, 1000}, 1000, 2, 0, 1000, 10);
  EXPECT_DOUBLE_EQ(w.t1, 1000);
  EXPECT_DOUBLE_EQ(w.t0, 600);
  // Panning stops at the ends with the width kept.
  w = viz::pan_window({100, 200}, -500, 0, 1000);
  EXPECT_DOUBLE_EQ(w.t0, 0);
  EXPECT_DOUBLE_EQ(w.t1, 100);
  w = viz::pan_window({100, 200}, 5000, 0, 1000);
  EXPECT_DOUBLE_EQ(w.t0, 900);
  w = viz::centre_window({0, 100}, 500, 0, 1000);
  EXPECT_DOUBLE_EQ(w.t0, 450);
  EXPECT_DOUBLE_EQ(w.t1, 550);
}

int count_colour(const std::vector<uint8_t>& rgba, int w, int x0, int y0, int x1, int y1, unsigned col) {
  const int r = col & 0xFF, g = (col >> 8) & 0xFF, b = (col >> 16) & 0xFF;
  int n = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      const test::Rgb p = test::pixel(rgba, w, x, y);
      n += std::abs(p.r - r) <= 2 && std::abs(p.g - g) <= 2 && std::abs(p.b - b) <= 2;
    }
  return n;
}

TEST(LaneChart, DrawnHeadlesslyWhereTheWindowPutsIt) {
  constexpr int kW = 900, kH = 300;
  viz::HostOptions o;
  o.width = kW, o.height = kH;
  std::string error;
  auto host = viz::make_headless_host(o, &error);
  ASSERT_TRUE(host) << error;
  const int errors_before = viz::gl_error_count();
  // Row 0: A over [0, 500), B over [500, 1000) with texts; row 1: C all along with a mark over [0, 250).
  std::vector<viz::LaneRow> rows(2);
  rows[0].label = "producer";
  rows[0].segments = {seg(0, 500, kA), seg(500, 1000, kB)};
  rows[0].segments[0].text = "first half";
  rows[0].segments[1].text = "second half";
  rows[1].label = "warpgroup 0";
  rows[1].segments = {seg(0, 1000, kC)};
  rows[1].marks = {{0, 250}};
  rows[1].mark_color = IM_COL32(238, 238, 238, 255);
  rows[1].mark_band = 5;
  viz::LaneChartOptions lo;
  lo.lo = 0, lo.hi = 1000, lo.axis_label = "ns";
  viz::TimeWindow window{0, 1000};
  viz::audit::set_enabled(true);
  std::vector<std::string> findings;
  for (int frame = 0; frame < 2; ++frame) {
    ASSERT_TRUE(host->begin_frame());
    viz::audit::clear();
    test::begin_canvas(float(kW), float(kH));
    viz::lane_chart("lanes", rows, lo, &window, float(kW));
    test::end_canvas();
    host->end_frame();
    findings = viz::audit::collect("lane chart");
  }
  viz::audit::set_enabled(false);
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(host->read_pixels(rgba, w, h));
  viz::write_png(test::tmp_dir() + "/lane-chart.png", rgba, w, h);
  EXPECT_EQ(viz::gl_error_count(), errors_before) << viz::gl_first_error();
  EXPECT_TRUE(findings.empty()) << findings[0];
  // The whole window: A and B share row 0 about equally; C fills row 1, the mark a quarter of its band.
  const int a = count_colour(rgba, w, 0, 0, kW, 24, kA), b = count_colour(rgba, w, 0, 0, kW, 24, kB);
  EXPECT_GT(a, 4000);
  EXPECT_NEAR(double(a) / b, 1.0, 0.15);
  EXPECT_GT(count_colour(rgba, w, 0, 20, kW, 50, kC), 8000);
  // Row 1 spans y 20..45: its segments 20..39, its mark band 40..44 (the plot's background where no mark is).
  const int mark = count_colour(rgba, w, 0, 41, kW, 44, IM_COL32(238, 238, 238, 255));
  const int empty = count_colour(rgba, w, 0, 41, kW, 44, IM_COL32(20, 21, 24, 255));
  EXPECT_GT(mark, 300);
  EXPECT_NEAR(double(mark) / (mark + empty), 0.25, 0.02);
  // Zoomed to [0, 500): A only.
  window = {0, 500};
  ASSERT_TRUE(host->begin_frame());
  test::begin_canvas(float(kW), float(kH));
  viz::lane_chart("lanes", rows, lo, &window, float(kW));
  test::end_canvas();
  host->end_frame();
  ASSERT_TRUE(host->read_pixels(rgba, w, h));
  EXPECT_GT(count_colour(rgba, w, 0, 0, kW, 24, kA), 2 * a - 1000);
  EXPECT_EQ(count_colour(rgba, w, 0, 0, kW, 24, kB), 0);
}

}  // namespace
}  // namespace kl
