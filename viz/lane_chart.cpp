#include "viz/lane_chart.h"

#include <imgui.h>
#include <imgui_internal.h>  // SetItemUsingMouseWheel

#include <algorithm>
#include <cmath>

#include "viz/draw_util.h"
#include "viz/layout_audit.h"
#include "viz/render_host.h"
#include "viz/ui_log.h"

namespace kl::viz {

// ---- [SECTION] windows and columns (no ImGui) -------------------------------------------------------------
TimeWindow pan_window(TimeWindow w, double by, double lo, double hi) {
  const double span = std::min(w.t1 - w.t0, hi - lo);
  const double t0 = std::clamp(w.t0 + by, lo, hi - span);
  return {t0, t0 + span};
}

TimeWindow zoom_window(TimeWindow w, double anchor, double factor, double lo, double hi, double min_span) {
  const double old = w.t1 - w.t0;
  const double span = std::clamp(old * factor, std::min(min_span, hi - lo), hi - lo);
  const double a = old > 0 ? std::clamp((anchor - w.t0) / old, 0.0, 1.0) : 0.5;
  const double t0 = anchor - a * span;
  return pan_window({t0, t0 + span}, 0, lo, hi);
}

TimeWindow centre_window(TimeWindow w, double t, double lo, double hi) {
  const double span = w.t1 - w.t0;
  return pan_window({t - span / 2, t + span / 2}, 0, lo, hi);
}

namespace {

// The colours of one column and how much time each covers (few: a column holds a handful of phases).
struct Column {
  unsigned color[8] = {};
  double time[8] = {};
  int n = 0;
  void add(unsigned c, double t) {
    for (int i = 0; i < n; ++i)
      if (color[i] == c) {
        time[i] += t;
        return;
      }
    if (n < 8) {
      color[n] = c, time[n] = t, ++n;
      return;
    }
    int least = 0;  // full: the least covered colour gives way
    for (int i = 1; i < n; ++i)
      if (time[i] < time[least]) least = i;
    if (t > time[least]) color[least] = c, time[least] = t;
  }
  unsigned dominant() const {
    int best = 0;
    for (int i = 1; i < n; ++i)
      if (time[i] > time[best]) best = i;
    return color[best];
  }
};

void push_column(std::vector<ColumnRun>* runs, int c, unsigned color) {
  if (!runs->empty() && runs->back().c1 == c && runs->back().color == color) runs->back().c1 = c + 1;
  else runs->push_back({c, c + 1, color});
}

}  // namespace

std::vector<ColumnRun> column_runs(const std::vector<LaneSegment>& segments, double t0, double t1, int columns) {
  std::vector<ColumnRun> runs;
  if (columns <= 0 || !(t1 > t0)) return runs;
  const double dt = (t1 - t0) / columns;
  auto col_of = [&](double t) { return std::clamp(int(std::floor((t - t0) / dt)), 0, columns - 1); };
  auto first = std::lower_bound(segments.begin(), segments.end(), t0,
                                [](const LaneSegment& s, double t) { return s.end <= t; });
  Column acc;
  int cur = -1;  // the column acc holds
  auto flush = [&]() {
    if (cur >= 0 && acc.n > 0) push_column(&runs, cur, acc.dominant());
    acc = Column();
  };
  for (auto it = first; it != segments.end() && it->start < t1; ++it) {
    const double a = std::max(it->start, t0), b = std::min(it->end, t1);
    if (!(b > a)) continue;
    const int ca = col_of(a), cb = col_of(std::nextafter(b, a));
    if (ca != cur) flush(), cur = ca;
    if (ca == cb) {
      acc.add(it->color, b - a);
      continue;
    }
    acc.add(it->color, t0 + dt * (ca + 1) - a);
    flush();
    for (int c = ca + 1; c < cb; ++c) push_column(&runs, c, it->color);
    cur = cb;
    acc.add(it->color, b - (t0 + dt * cb));
  }
  flush();
  return runs;
}

int segment_at(const std::vector<LaneSegment>& segments, double t) {
  auto it = std::upper_bound(segments.begin(), segments.end(), t,
                             [](double x, const LaneSegment& s) { return x < s.end; });
  if (it == segments.end() || it->start > t) return -1;
  return int(it - segments.begin());
}

// ---- [SECTION] drawing --------------------------------------------------------------------------------------
namespace {

float scaled(float px) { return px * ui_scale(); }
float gap_px() { return scaled(6); }
float axis_height() { return ImGui::GetFontSize() + scaled(8); }
float band_px(const LaneRow& r, const LaneChartOptions& o) {
  return o.overview || r.marks.empty() ? 0.0f : std::floor(scaled(r.mark_band));
}
float row_px(const LaneRow& r, const LaneChartOptions& o) {
  return std::max(2.0f, std::floor(scaled(o.lane_height) * r.height)) + band_px(r, o);
}

ImU32 text_on(unsigned c) {
  const float r = float((c >> IM_COL32_R_SHIFT) & 0xFF), g = float((c >> IM_COL32_G_SHIFT) & 0xFF),
              b = float((c >> IM_COL32_B_SHIFT) & 0xFF);
  return 0.299f * r + 0.587f * g + 0.114f * b > 140 ? IM_COL32(16, 16, 18, 255) : IM_COL32(240, 240, 240, 255);
}

struct Geometry {
  ImVec2 outer0, outer1;  // the whole widget
  float plot_x0 = 0, plot_x1 = 0;
  std::vector<float> row_y0, row_y1;
  float axis_y = 0;
};

Geometry layout(const std::vector<LaneRow>& rows, const LaneChartOptions& o, ImVec2 pos, float width) {
  Geometry g;
  g.outer0 = pos;
  float gutter = 0;
  for (const LaneRow& r : rows) gutter = std::max(gutter, ImGui::CalcTextSize(r.label.c_str()).x);
  if (!o.axis_label.empty()) gutter = std::max(gutter, ImGui::CalcTextSize(o.axis_label.c_str()).x);
  gutter += scaled(8);
  g.plot_x0 = std::floor(pos.x + gutter);
  g.plot_x1 = std::floor(pos.x + width) - scaled(2);
  float y = pos.y;
  for (const LaneRow& r : rows) {
    if (r.gap_before) y += gap_px();
    g.row_y0.push_back(y);
    y += row_px(r, o);
    g.row_y1.push_back(y);
  }
  g.axis_y = y;
  g.outer1 = ImVec2(pos.x + width, y + (o.overview ? scaled(2) : axis_height()));
  return g;
}

void draw_row(ImDrawList* dl, const LaneRow& r, float y0, float y1, const Geometry& g, const LaneChartOptions& o,
              const TimeWindow& w) {
  const float band = band_px(r, o);
  const float mark_y1 = y1;
  y1 -= band;
  const int columns = std::max(1, int(g.plot_x1 - g.plot_x0));
  const double per_px = (w.t1 - w.t0) / columns;
  for (const ColumnRun& run : column_runs(r.segments, w.t0, w.t1, columns))
    dl->AddRectFilled(ImVec2(g.plot_x0 + float(run.c0), y0), ImVec2(g.plot_x0 + float(run.c1), y1), run.color);
  auto x_of = [&](double t) { return g.plot_x0 + float((t - w.t0) / per_px); };
  const float h = y1 - y0, font = ImGui::GetFontSize();
  auto first = std::lower_bound(r.segments.begin(), r.segments.end(), w.t0,
                                [](const LaneSegment& s, double t) { return s.end <= t; });
  for (auto it = first; it != r.segments.end() && it->start < w.t1; ++it) {
    const float x0 = std::max(g.plot_x0, x_of(it->start)), x1 = std::min(g.plot_x1, x_of(it->end));
    if (x1 - x0 < scaled(5)) continue;
    if (x_of(it->start) >= g.plot_x0) dl->AddLine(ImVec2(x0, y0), ImVec2(x0, y1 - 1), IM_COL32(12, 12, 14, 200));
    if (o.overview || h < font + 1) continue;
    for (const std::string* t : {&it->text, &it->short_text}) {
      if (t->empty()) continue;
      const ImVec2 ts = ImGui::CalcTextSize(t->c_str());
      if (ts.x + scaled(6) > x1 - x0) continue;
      const ImVec2 at(std::floor((x0 + x1 - ts.x) * 0.5f), std::floor(y0 + (h - ts.y) * 0.5f));
      detail::add_label(dl, o.audit_name, g.outer0, g.outer1, at, text_on(it->color), *t);
      break;
    }
  }
  if (r.marks.empty() || o.overview) return;
  const float mh = band > 0 ? band - 1 : std::max(2.0f, std::floor(h * 0.2f));
  y1 = mark_y1;
  auto m = std::lower_bound(r.marks.begin(), r.marks.end(), w.t0, [](const LaneMark& k, double t) { return k.end <= t; });
  for (; m != r.marks.end() && m->start < w.t1; ++m) {
    const float x0 = std::max(g.plot_x0, x_of(m->start)), x1 = std::min(g.plot_x1, std::max(x0 + 1, x_of(m->end)));
    dl->AddRectFilled(ImVec2(x0, y1 - mh), ImVec2(x1, y1), r.mark_color);
  }
}

void draw_axis(ImDrawList* dl, const Geometry& g, const LaneChartOptions& o, const TimeWindow& w) {
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  dl->AddLine(ImVec2(g.plot_x0, g.axis_y), ImVec2(g.plot_x1, g.axis_y), dim);
  const float ty = g.axis_y + scaled(3);
  if (!o.axis_label.empty()) detail::add_label(dl, o.audit_name, g.outer0, g.outer1, ImVec2(g.outer0.x, ty), dim, o.axis_label);
  const int target = std::max(2, int((g.plot_x1 - g.plot_x0) / scaled(110)));
  float last_end = g.plot_x0 - 1;
  const double unit = o.axis_unit > 0 ? o.axis_unit : 1;
  for (double v : detail::nice_ticks(w.t0 / unit, w.t1 / unit, target, false)) {
    const float x = g.plot_x0 + float((v * unit - w.t0) / (w.t1 - w.t0)) * (g.plot_x1 - g.plot_x0);
    dl->AddLine(ImVec2(x, g.axis_y), ImVec2(x, g.axis_y + scaled(3)), dim);
    const std::string text = detail::tick_label(v);
    const float tw = ImGui::CalcTextSize(text.c_str()).x;
    const float x0 = std::floor(std::clamp(x - tw * 0.5f, g.plot_x0, g.plot_x1 - tw));  // the end ticks' labels inside
    if (x0 < last_end + scaled(8)) continue;
    detail::add_label(dl, o.audit_name, g.outer0, g.outer1, ImVec2(x0, ty), dim, text);
    last_end = x0 + tw;
  }
}

void interact(const Geometry& g, const LaneChartOptions& o, TimeWindow* w, LaneChartResult* res) {
  const ImGuiIO& io = ImGui::GetIO();
  const bool hovered = ImGui::IsItemHovered();
  const double per_px = (w->t1 - w->t0) / std::max(1.0f, g.plot_x1 - g.plot_x0);
  if (o.overview) {
    if (ImGui::IsItemActive() && io.MouseDown[0] && io.MousePos.x >= g.plot_x0) {
      const double span = o.hi - o.lo, t = o.lo + (io.MousePos.x - g.plot_x0) / (g.plot_x1 - g.plot_x0) * span;
      const TimeWindow want = o.highlight ? *o.highlight : *w;
      *w = centre_window(want, t, o.lo, o.hi);
      res->moved = true;
    }
    return;
  }
  if (hovered && io.KeyCtrl) {
    ImGui::SetItemUsingMouseWheel();  // Ctrl + wheel zooms here; the wheel alone scrolls the page
    if (io.MouseWheel != 0.0f && io.MousePos.x >= g.plot_x0) {
      const double anchor = w->t0 + (io.MousePos.x - g.plot_x0) * per_px;
      *w = zoom_window(*w, anchor, std::pow(0.8, double(io.MouseWheel)), o.lo, o.hi, o.min_span);
    }
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) res->reset = true;
  const float still = io.MouseDragThreshold * io.MouseDragThreshold;
  if (hovered && ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < still) res->clicked = true;
  if (ImGui::IsItemActive() && io.MouseDelta.x != 0.0f &&
      (io.MouseDown[0] || io.MouseDown[1] || io.MouseDown[2]))
    *w = pan_window(*w, -io.MouseDelta.x * per_px, o.lo, o.hi);
}

}  // namespace

float lane_chart_height(const std::vector<LaneRow>& rows, const LaneChartOptions& o) {
  const Geometry g = layout(rows, o, ImVec2(0, 0), 100);
  return g.outer1.y;
}

LaneChartResult lane_chart(const char* id, const std::vector<LaneRow>& rows, const LaneChartOptions& o, TimeWindow* window,
                           float width) {
  LaneChartResult res;
  ImGui::PushID(id);
  const Geometry g = layout(rows, o, ImGui::GetCursorScreenPos(), std::floor(width));
  const ImVec2 size(g.outer1.x - g.outer0.x, g.outer1.y - g.outer0.y);
  if (!(window->t1 > window->t0)) *window = {o.lo, o.hi};
  if (o.interactive)
    ImGui::InvisibleButton("##lanes", size, ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                                                ImGuiButtonFlags_MouseButtonMiddle);
  else
    ImGui::Dummy(size);
  if (o.interactive) interact(g, o, window, &res);
  const TimeWindow w = o.overview ? TimeWindow{o.lo, o.hi} : *window;
  audit::widget(o.audit_name, g.outer0, g.outer1);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(g.plot_x0, g.outer0.y), ImVec2(g.plot_x1, g.axis_y), IM_COL32(20, 21, 24, 255));
  const float font = ImGui::GetFontSize();
  for (size_t i = 0; i < rows.size(); ++i) {
    const float y0 = g.row_y0[i], y1 = g.row_y1[i];
    if (!o.overview && !rows[i].label.empty() && y1 - y0 >= font)
      detail::add_label(dl, o.audit_name, g.outer0, g.outer1, ImVec2(g.outer0.x, std::floor(y0 + (y1 - y0 - font) * 0.5f)),
                        ImGui::GetColorU32(ImGuiCol_Text), rows[i].label);
    draw_row(dl, rows[i], y0, y1 - (o.overview ? 0.0f : 1.0f), g, o, w);
  }
  if (o.overview && o.highlight) {
    const double span = o.hi - o.lo;
    auto x_of = [&](double t) { return g.plot_x0 + float((t - o.lo) / span) * (g.plot_x1 - g.plot_x0); };
    const float x0 = x_of(o.highlight->t0), x1 = std::max(x0 + scaled(3), x_of(o.highlight->t1));
    dl->AddRectFilled(ImVec2(x0, g.outer0.y), ImVec2(x1, g.axis_y), IM_COL32(255, 255, 255, 50));
    dl->AddRect(ImVec2(x0 - 1, g.outer0.y), ImVec2(x1 + 1, g.axis_y), IM_COL32(255, 255, 255, 230), 0, 0, scaled(1.5f));
  }
  if (!o.overview) draw_axis(dl, g, o, w);
  if (ui_log::is_open() && !o.overview)  // "place lane CHART ROW x0 y0 x1 y1": where a driven test clicks a row
    for (size_t i = 0; i < rows.size(); ++i)
      ui_log::place("lane", o.audit_name + " " + rows[i].label, g.plot_x0, g.row_y0[i], g.plot_x1, g.row_y1[i]);
  if (o.interactive && ImGui::IsItemHovered()) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    for (size_t i = 0; i < rows.size(); ++i)
      if (m.y >= g.row_y0[i] && m.y < g.row_y1[i] && m.x >= g.plot_x0 && m.x < g.plot_x1) {
        res.hover.active = true;
        res.hover.row = int(i);
        res.hover.t = w.t0 + (m.x - g.plot_x0) / (g.plot_x1 - g.plot_x0) * (w.t1 - w.t0);
        res.hover.segment = segment_at(rows[i].segments, res.hover.t);
      }
  }
  res.clicked = res.clicked && res.hover.segment >= 0;
  ImGui::PopID();
  return res;
}

}  // namespace kl::viz
