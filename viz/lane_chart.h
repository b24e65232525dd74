// A lane chart: rows of coloured time segments on one time axis (a Gantt chart), for timelines such as the
// fast kernel's warp roles (app/panels/timeline_view.*). Each row has a label in a gutter on the left;
// segments are drawn per pixel column in the colour that covers most of the column's time, so a zoomed-out
// view of thousands of phases stays a faithful picture instead of a smear of whichever came last; a segment
// shows its text where it fits (its short text where only that fits). Marks are intervals drawn as a thin bar
// along a row's bottom (what was in flight). Under the rows, the time axis.
//
// Interaction (`interactive`): Ctrl + mouse wheel zooms about the pointer (the wheel alone scrolls the page,
// as everywhere in the app), a left, right or middle drag pans, a double click asks for the caller's default
// window. An overview chart (`overview`) draws `highlight` over its whole range; a click or drag on it moves
// the window there. Everything drawn is registered with the layout audit.
#pragma once
#include <string>
#include <vector>

struct ImVec2;

namespace kl::viz {

struct LaneSegment {
  double start = 0, end = 0;
  unsigned color = 0;           // IM_COL32
  std::string text, short_text;  // drawn inside where they fit (text first); may be empty
};
struct LaneMark {
  double start = 0, end = 0;
};
struct LaneRow {
  std::string label;
  float height = 1.0f;               // in lane heights
  std::vector<LaneSegment> segments;  // sorted by start, not overlapping
  std::vector<LaneMark> marks;        // sorted by start, not overlapping; drawn in a band under the segments
  unsigned mark_color = 0;
  float mark_band = 0;                // the band's height in pixels at UI scale 1 (0: marks drawn over the segments' bottom)
  bool gap_before = false;  // a gap above the row (between groups)
};

struct TimeWindow {
  double t0 = 0, t1 = 0;
};
// Zoom by `factor` (< 1: in) about `anchor`, kept inside [lo, hi] and at least `min_span` wide.
TimeWindow zoom_window(TimeWindow w, double anchor, double factor, double lo, double hi, double min_span);
// Shift by `by`, kept inside [lo, hi] (the width unchanged).
TimeWindow pan_window(TimeWindow w, double by, double lo, double hi);
// The same width centred on `t`, kept inside [lo, hi].
TimeWindow centre_window(TimeWindow w, double t, double lo, double hi);

// The colour of each pixel column of [t0, t1) split into `columns`: runs of columns [c0, c1) of one colour,
// the colour covering the most time of each column (ties: the earlier segment's). Columns no segment touches
// are in no run.
struct ColumnRun {
  int c0 = 0, c1 = 0;
  unsigned color = 0;
};
std::vector<ColumnRun> column_runs(const std::vector<LaneSegment>& segments, double t0, double t1, int columns);
// The segment containing t (start <= t < end), or -1.
int segment_at(const std::vector<LaneSegment>& segments, double t);

struct LaneChartOptions {
  double lo = 0, hi = 1;        // the time range the window stays in
  double min_span = 1;          // the narrowest window
  float lane_height = 20;       // pixels at UI scale 1
  std::string axis_label;       // under the axis ("µs from the recording's start")
  double axis_unit = 1;         // times are divided by this for the tick labels (1000: ns to µs)
  bool interactive = true;
  bool overview = false;               // no labels inside segments; `highlight` drawn; clicks centre it
  const TimeWindow* highlight = nullptr;
  std::string audit_name = "lane chart";
};
struct LaneHover {
  bool active = false;
  int row = -1, segment = -1;  // the segment under the pointer (-1: none)
  double t = 0;
};
struct LaneChartResult {
  LaneHover hover;
  bool reset = false;         // double click: the caller's default window
  bool clicked = false;       // a left click (released without a drag) on hover's segment
  bool moved = false;         // overview: *window was centred where clicked
};
// Draws the chart `width` wide (its height follows from the rows) showing *window (changed by the user's
// zoom and pan where interactive).
LaneChartResult lane_chart(const char* id, const std::vector<LaneRow>& rows, const LaneChartOptions& o, TimeWindow* window,
                           float width);
// The height lane_chart() takes for these rows.
float lane_chart_height(const std::vector<LaneRow>& rows, const LaneChartOptions& o);

}  // namespace kl::viz
