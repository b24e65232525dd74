// Line plots, bar charts and budget bars drawn with ImDrawList (Debian's Dear ImGui 1.86 has no ImPlot).
//   [SECTION] Frame and axes   the plot rectangle, nice ticks, labels, grid
//   [SECTION] line_plot
//   [SECTION] bar_chart
//   [SECTION] budget_bar
#include "viz/plot.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "viz/draw_util.h"
#include "viz/heatmap.h"
#include "viz/layout_audit.h"
#include "viz/ui_log.h"

namespace kl::viz {
namespace {

const ImU32 kAxis = IM_COL32(120, 125, 135, 255);
const ImU32 kGrid = IM_COL32(255, 255, 255, 20);
const ImU32 kFrameBg = IM_COL32(20, 21, 24, 255);
const ImU32 kMarker = IM_COL32(235, 110, 90, 230);

ImU32 series_color(unsigned color, int index) {
  if (color) return color;
  float rgb[3];
  categorical_rgb(index, rgb);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(rgb[0], rgb[1], rgb[2], 1.0f));
}

// [SECTION] Frame and axes ---------------------------------------------------------------------------
// Maps values to pixels along one axis, linear or log10.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  float p0 = 0, p1 = 1;  // pixel positions of lo and hi
  double t(double v) const {
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
  float px(double v) const { return float(p0 + (p1 - p0) * t(v)); }
  bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

// Widens a degenerate range and pads it a little (multiplicatively on log axes), so points on the
// edges are not cut in half; a linear range starting at or above 0 keeps 0 as its floor.
void finish_range(double& lo, double& hi, bool log, double pad) {
  if (!(lo <= hi)) lo = log ? 1 : 0, hi = log ? 10 : 1;
  if (log) {
    if (lo == hi) lo /= 2, hi *= 2;
    const double f = std::pow(hi / lo, pad);
    lo /= f, hi *= f;
    return;
  }
  if (lo == hi) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d, hi += d;
  }
  const double d = (hi - lo) * pad;
  lo = lo >= 0 && lo - d < 0 ? 0 : lo - d;
  hi += d;
}

struct Frame {
  std::string name;       // for the layout audit: "plot 'sweep'"
  ImVec2 outer0, outer1;  // the widget
  ImVec2 p0, p1;          // the plot area
  bool hovered = false;
};

// The least height a plot reads at with the current font: its title (wrapped at `width`), the x label
// and ticks, and a data area of four lines or the legend's height (and the vertical y label's length).
float min_plot_height(const PlotOptions& opt, float width, float legend_h) {
  const float font = ImGui::GetFontSize();
  float h = 8 + font + 6 + font * 0.5f;  // margins, x tick labels, the data area's top inset
  if (!opt.title.empty()) h += ImGui::CalcTextSize(detail::wrap_words_joined(opt.title, width - 8).c_str()).y + 6;
  if (!opt.x_label.empty()) h += font + 2;
  // Room for the legend above the data where no corner is free (the data keeps at least half).
  float data = std::max(4.0f * font, legend_h > 0 ? 2 * legend_h + 18 : 0.0f);
  if (!opt.y_label.empty()) data = std::max(data, ImGui::CalcTextSize(opt.y_label.c_str()).x + 4);
  return std::ceil(h + data);
}

// Reserves the widget (at least min_plot_height() tall: a larger UI scale makes plots taller, never
// crowded), draws the title and axis labels, and returns the plot area left for the data.
Frame begin_frame(const char* id, const PlotOptions& opt, const ImVec2& size, float y_label_w, float legend_h = 0) {
  Frame f;
  f.name = std::string("plot '") + id + "'";
  ImGui::PushID(id);
  f.outer0 = ImGui::GetCursorScreenPos();
  const float w = std::max(120.0f, size.x);
  const ImVec2 sz(w, std::max({80.0f, size.y, min_plot_height(opt, w, legend_h)}));
  ImGui::InvisibleButton("##plot", sz);
  f.hovered = ImGui::IsItemHovered();
  ImGui::PopID();
  f.outer1 = ImVec2(f.outer0.x + sz.x, f.outer0.y + sz.y);
  audit::widget(f.name, f.outer0, f.outer1);
  ui_log::place("plot", id, f.outer0.x, f.outer0.y, f.outer1.x, f.outer1.y);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float font = ImGui::GetFontSize();
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  float top = f.outer0.y + 4, bottom = f.outer1.y - 4, left = f.outer0.x + 4;
  // Widgets clip to their own rectangle: nothing of the plot is drawn outside it.
  dl->PushClipRect(f.outer0, f.outer1, true);
  if (!opt.title.empty()) {
    // A title wider than the plot wraps, between words only (a number never splits across lines).
    const std::string title = detail::wrap_words_joined(opt.title, sz.x - 8);
    const ImVec2 ts = ImGui::CalcTextSize(title.c_str());
    const float x = std::floor(f.outer0.x + std::max(4.0f, (sz.x - ts.x) * 0.5f));
    dl->AddText(ImVec2(x, top), text, title.c_str());
    audit::label(f.name, opt.title, ImVec2(x, top), ImVec2(x + ts.x, top + ts.y), f.outer0, f.outer1);
    top += ts.y + 6;
  }
  if (!opt.x_label.empty()) {
    const ImVec2 ts = ImGui::CalcTextSize(opt.x_label.c_str());
    bottom -= ts.y;
    detail::add_label(dl, f.name, f.outer0, f.outer1,
                      ImVec2(std::floor((left + y_label_w + f.outer1.x - ts.x) * 0.5f), bottom), dim, opt.x_label);
    bottom -= 2;
  }
  if (!opt.y_label.empty()) {
    const ImVec2 c(left + font * 0.5f, (top + bottom) * 0.5f);
    detail::add_text_vertical(dl, c, dim, opt.y_label.c_str());
    const ImRect r = detail::vertical_text_rect(c, opt.y_label.c_str());
    audit::label(f.name, opt.y_label, r.Min, r.Max, f.outer0, f.outer1);
    left += font + 4;
  }
  dl->PopClipRect();
  f.p0 = ImVec2(std::floor(left + y_label_w + 6), std::floor(top + font * 0.5f));
  f.p1 = ImVec2(std::floor(f.outer1.x - 10), std::floor(bottom - font - 6));
  return f;
}

float y_tick_width(const std::vector<double>& ticks) {
  float w = 0;
  for (double v : ticks) w = std::max(w, ImGui::CalcTextSize(detail::tick_label(v).c_str()).x);
  return w;
}

void draw_y_axis(ImDrawList* dl, const Frame& f, const Axis& ay, const std::vector<double>& ticks) {
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  float last_top = 1e9f, last_bottom = -1e9f;  // the last label drawn: labels never overlap
  for (double v : ticks) {
    const float y = std::round(ay.px(v));
    if (y < f.p0.y - 0.5f || y > f.p1.y + 0.5f) continue;
    dl->AddLine(ImVec2(f.p0.x, y), ImVec2(f.p1.x, y), kGrid);
    dl->AddLine(ImVec2(f.p0.x - 4, y), ImVec2(f.p0.x, y), kAxis);
    const std::string s = detail::tick_label(v);
    const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
    const float ly = y - ts.y * 0.5f;
    if (ly + ts.y > last_top - 1 && ly < last_bottom + 1) continue;
    detail::add_label(dl, f.name, f.outer0, f.outer1, ImVec2(f.p0.x - 7 - ts.x, ly), text, s);
    last_top = std::min(last_top, ly), last_bottom = std::max(last_bottom, ly + ts.y);
  }
}

void draw_x_axis(ImDrawList* dl, const Frame& f, const Axis& ax, const std::vector<double>& ticks) {
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  float last_right = -1e9f;
  for (double v : ticks) {
    const float x = std::round(ax.px(v));
    if (x < f.p0.x - 0.5f || x > f.p1.x + 0.5f) continue;
    dl->AddLine(ImVec2(x, f.p0.y), ImVec2(x, f.p1.y), kGrid);
    dl->AddLine(ImVec2(x, f.p1.y), ImVec2(x, f.p1.y + 4), kAxis);
    const std::string s = detail::tick_label(v);
    const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
    const float lx = std::clamp(x - ts.x * 0.5f, f.outer0.x, f.outer1.x - ts.x);
    if (lx < last_right + 6) continue;  // never overlap labels
    detail::add_label(dl, f.name, f.outer0, f.outer1, ImVec2(lx, f.p1.y + 6), text, s);
    last_right = lx + ts.x;
  }
}

void draw_v_lines(ImDrawList* dl, const Frame& f, const Axis& ax, const PlotOptions& opt) {
  std::vector<ImRect> placed;  // labels already drawn: a label that would overlap one goes a line lower
  for (size_t i = 0; i < opt.v_lines.size(); ++i) {
    const double v = opt.v_lines[i];
    if (!ax.usable(v)) continue;
    const float x = std::round(ax.px(v));
    if (x < f.p0.x || x > f.p1.x) continue;
    detail::add_dashed_line(dl, ImVec2(x, f.p0.y), ImVec2(x, f.p1.y), kMarker, 5.0f, 1.5f);
    if (i < opt.v_line_labels.size() && !opt.v_line_labels[i].empty()) {
      const char* s = opt.v_line_labels[i].c_str();
      const ImVec2 ts = ImGui::CalcTextSize(s);
      // Right of the line where it fits, left of it otherwise.
      const float lx = x + 4 + ts.x <= f.p1.x ? x + 4 : x - 4 - ts.x;
      float ly = f.p0.y + 4;
      for (bool moved = true; moved;) {
        moved = false;
        for (const ImRect& r : placed)
          if (lx - 2 < r.Max.x && lx + ts.x + 2 > r.Min.x && ly - 1 < r.Max.y && ly + ts.y + 1 > r.Min.y)
            ly = r.Max.y + 2, moved = true;
      }
      placed.push_back(ImRect(lx - 2, ly - 1, lx + ts.x + 2, ly + ts.y + 1));
      dl->AddRectFilled(ImVec2(lx - 2, ly - 1), ImVec2(lx + ts.x + 2, ly + 1 + ts.y), IM_COL32(20, 21, 24, 220), 2);
      detail::add_label(dl, f.name, f.outer0, f.outer1, ImVec2(lx, ly), kMarker, s);
    }
  }
}

// The legend's box for `labels` (zero when none has text).
ImVec2 legend_size(const std::vector<std::string>& labels) {
  float w = 0;
  int n = 0;
  for (const std::string& l : labels) {
    if (l.empty()) continue;
    w = std::max(w, ImGui::CalcTextSize(l.c_str()).x);
    ++n;
  }
  if (n == 0) return ImVec2(0, 0);
  const float lh = ImGui::GetTextLineHeight() + 2, sw = 18;
  return ImVec2(w + sw + 20, n * lh + 8);
}

int hits_in(const std::vector<ImVec2>& occupied, const ImVec2& b0, const ImVec2& box) {
  int hits = 0;
  for (const ImVec2& p : occupied)
    hits += p.x >= b0.x - 4 && p.x <= b0.x + box.x + 4 && p.y >= b0.y - 4 && p.y <= b0.y + box.y + 4;
  return hits;
}

// The plot corner that hides the fewest data points and marker labels (top right first).
ImVec2 best_corner(const Frame& f, const ImVec2& box, const std::vector<ImVec2>& occupied, int* best_hits) {
  ImVec2 best = ImVec2(f.p1.x - 6 - box.x, f.p0.y + 6);
  *best_hits = 1 << 30;
  for (int corner = 0; corner < 4; ++corner) {  // top right, top left, bottom right, bottom left
    const ImVec2 b0(corner % 2 == 0 ? f.p1.x - 6 - box.x : f.p0.x + 6, corner < 2 ? f.p0.y + 6 : f.p1.y - 6 - box.y);
    const int hits = hits_in(occupied, b0, box);
    if (hits < *best_hits) *best_hits = hits, best = b0;
  }
  return best;
}

void draw_legend(ImDrawList* dl, const Frame& f, const ImVec2& b0, const std::vector<std::string>& labels,
                 const std::vector<ImU32>& colors, const std::vector<bool>& points) {
  const ImVec2 box = legend_size(labels);
  if (box.x <= 0) return;
  const float lh = ImGui::GetTextLineHeight() + 2, sw = 18;
  const ImVec2 b1(b0.x + box.x, b0.y + box.y);
  dl->AddRectFilled(b0, b1, IM_COL32(28, 30, 34, 230), 3);
  dl->AddRect(b0, b1, IM_COL32(80, 84, 92, 255), 3);
  float y = b0.y + 4;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].empty()) continue;
    const float cy = y + lh * 0.5f;
    if (points[i]) dl->AddCircleFilled(ImVec2(b0.x + 8 + sw * 0.5f, cy), 3.5f, colors[i]);
    else dl->AddLine(ImVec2(b0.x + 8, cy), ImVec2(b0.x + 8 + sw, cy), colors[i], 2.5f);
    detail::add_label(dl, f.name, f.outer0, f.outer1, ImVec2(b0.x + 14 + sw, y + 1), ImGui::GetColorU32(ImGuiCol_Text),
                      labels[i]);
    y += lh;
  }
}

// Where the data and the marker labels lie in pixels (the legend must not cover them).
std::vector<ImVec2> occupied_points(const std::vector<Series>& series, const Axis& ax, const Axis& ay,
                                    const PlotOptions& opt, const Frame& f) {
  std::vector<ImVec2> occupied;
  for (size_t i = 0; i < opt.v_lines.size(); ++i) {  // the marker and its label (either side of it)
    const double v = opt.v_lines[i];
    if (!ax.usable(v)) continue;
    const ImVec2 ts = i < opt.v_line_labels.size() ? ImGui::CalcTextSize(opt.v_line_labels[i].c_str()) : ImVec2(0, 0);
    for (float dy = 0; dy <= ts.y + 8; dy += 4)
      for (float dx = -ts.x - 8; dx <= ts.x + 8; dx += 8) occupied.push_back(ImVec2(ax.px(v) + dx, f.p0.y + 4 + dy));
  }
  for (const Series& s : series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    bool have = false;
    ImVec2 q;
    for (size_t i = 0; i < n; ++i) {
      if (!ax.usable(s.x[i]) || !ay.usable(s.y[i])) {
        have = false;
        continue;
      }
      const ImVec2 p(ax.px(s.x[i]), ay.px(s.y[i]));
      if (!s.points && have) {  // the segment's pixels count as occupied too
        const int steps = int(std::min(200.0f, std::hypot(p.x - q.x, p.y - q.y) / 8.0f));
        for (int j = 1; j < steps; ++j)
          occupied.push_back(ImVec2(q.x + (p.x - q.x) * j / steps, q.y + (p.y - q.y) * j / steps));
      }
      occupied.push_back(p);
      q = p, have = true;
    }
  }
  return occupied;
}

}  // namespace

// [SECTION] line_plot ------------------------------------------------------------------------------
namespace {
// The usable points' extent (lo > hi, infinite, where no point is usable).
struct Extent {
  double xlo, xhi, ylo, yhi;
};
Extent data_extent(const std::vector<Series>& series, const Axis& ax, const Axis& ay) {
  const double inf = std::numeric_limits<double>::infinity();
  Extent e{inf, -inf, inf, -inf};
  for (const Series& s : series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!ax.usable(s.x[i]) || !ay.usable(s.y[i])) continue;
      e.xlo = std::min(e.xlo, s.x[i]), e.xhi = std::max(e.xhi, s.x[i]);
      e.ylo = std::min(e.ylo, s.y[i]), e.yhi = std::max(e.yhi, s.y[i]);
    }
  }
  return e;
}

// Where the legend of `box` goes: in a corner where no data is; where every corner has data, outside the data,
// to the right of the plot area (which narrows for it) or above it (which lowers).
ImVec2 place_legend(Frame& f, Axis& ax, Axis& ay, const ImVec2& box, const std::vector<Series>& series,
                    const PlotOptions& opt) {
  int hits = 0;
  ImVec2 at = best_corner(f, box, occupied_points(series, ax, ay, opt, f), &hits);
  if (hits > 0 && f.p1.x - f.p0.x - box.x - 12 >= (f.p1.x - f.p0.x) * 0.5f) {
    f.p1.x = std::floor(f.p1.x - box.x - 12);
    ax.p1 = f.p1.x;
    at = ImVec2(f.p1.x + 10, f.p0.y);
    hits = 0;
  } else if (hits > 0 && f.p1.y - f.p0.y - box.y - 6 >= (f.p1.y - f.p0.y) * 0.5f) {
    at = ImVec2(f.p1.x - box.x, f.p0.y);  // above the data, right-aligned
    f.p0.y = std::floor(f.p0.y + box.y + 6);
    ay.p1 = f.p0.y;
    hits = 0;
  }
  audit::covers_data(f.name + " legend", at, ImVec2(at.x + box.x, at.y + box.y), hits);
  return at;
}

// Each series as a polyline broken at unusable values, or as points.
void draw_series(ImDrawList* dl, const std::vector<Series>& series, const std::vector<ImU32>& colors, const Axis& ax,
                 const Axis& ay) {
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const ImU32 col = colors[k];
    const size_t n = std::min(s.x.size(), s.y.size());
    std::vector<ImVec2> run;
    auto flush = [&] {
      if (run.size() >= 2) dl->AddPolyline(run.data(), int(run.size()), col, 0, 2.0f);
      run.clear();
    };
    for (size_t i = 0; i < n; ++i) {
      if (!ax.usable(s.x[i]) || !ay.usable(s.y[i])) {
        flush();
        continue;
      }
      const ImVec2 p(ax.px(s.x[i]), ay.px(s.y[i]));
      if (s.points) {
        dl->AddCircleFilled(p, 3.5f, col);
        dl->AddCircle(p, 3.5f, IM_COL32(0, 0, 0, 160), 0, 1.0f);
      } else {
        run.push_back(p);
      }
    }
    flush();
  }
}

// Hover: a crosshair at the data's x nearest the pointer and every series' value there, in a tooltip.
void hover_crosshair(ImDrawList* dl, const Frame& f, const std::vector<Series>& series, const Axis& ax,
                     const PlotOptions& opt) {
  const ImVec2 m = ImGui::GetIO().MousePos;
  if (!(f.hovered && m.x >= f.p0.x && m.x <= f.p1.x && m.y >= f.p0.y && m.y <= f.p1.y)) return;
  double best_dx = 1e30, best_x = 0;
  for (const Series& s : series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (ax.usable(s.x[i]) && std::fabs(ax.px(s.x[i]) - m.x) < best_dx)
        best_dx = std::fabs(ax.px(s.x[i]) - m.x), best_x = s.x[i];
  if (best_dx >= 1e30) return;
  const float x = ax.px(best_x);
  dl->AddLine(ImVec2(x, f.p0.y), ImVec2(x, f.p1.y), IM_COL32(255, 255, 255, 70));
  ImGui::BeginTooltip();
  ImGui::Text("%s = %.6g", opt.x_label.empty() ? "x" : opt.x_label.c_str(), best_x);
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (s.x[i] == best_x && std::isfinite(s.y[i])) {
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(series_color(s.color, int(k))), "%s: %.6g",
                           s.label.empty() ? "y" : s.label.c_str(), s.y[i]);
        break;
      }
  }
  ImGui::EndTooltip();
}
}  // namespace

void line_plot(const char* id, const std::vector<Series>& series, const PlotOptions& opt, const ImVec2& size) {
  Axis ax, ay;
  ax.log = opt.log_x;
  ay.log = opt.log_y;
  const Extent e = data_extent(series, ax, ay);
  double xlo = e.xlo, xhi = e.xhi, ylo = e.ylo, yhi = e.yhi;
  if (ui_log::is_open() && std::isfinite(xlo)) {
    // What the plot spans and how its y axis reads, on each change (a test of the window reads it).
    char b[192];
    std::snprintf(b, sizeof b, "plot %s x %g to %g, y %g to %g, y axis %s", id, xlo, xhi, ylo, yhi, ay.log ? "log" : "linear");
    static std::map<std::string, std::string> logged;
    if (logged[id] != b) ui_log::event(b), logged[id] = b;
  }
  for (double v : opt.v_lines)
    if (ax.usable(v) && std::isfinite(xlo)) xlo = std::min(xlo, v), xhi = std::max(xhi, v);
  finish_range(xlo, xhi, ax.log, 0.03);
  const bool fixed_y = !(opt.y_min == 0 && opt.y_max == 0);
  if (fixed_y) ylo = opt.y_min, yhi = opt.y_max;
  finish_range(ylo, yhi, ay.log, fixed_y ? 0.0 : 0.06);
  ax.lo = xlo, ax.hi = xhi, ay.lo = ylo, ay.hi = yhi;

  const float font = ImGui::GetFontSize();
  const int y_target = std::max(2, int(size.y / (font * 2.5f)));
  const std::vector<double> yt = detail::nice_ticks(ylo, yhi, y_target, ay.log);
  std::vector<std::string> labels;
  std::vector<ImU32> colors;
  std::vector<bool> points;
  for (size_t k = 0; k < series.size(); ++k)
    labels.push_back(series[k].label), colors.push_back(series_color(series[k].color, int(k))),
        points.push_back(series[k].points);
  Frame f = begin_frame(id, opt, size, y_tick_width(yt), legend_size(labels).y);
  ax.p0 = f.p0.x, ax.p1 = f.p1.x, ay.p0 = f.p1.y, ay.p1 = f.p0.y;
  const ImVec2 box = legend_size(labels);
  const ImVec2 legend_at = box.x > 0 ? place_legend(f, ax, ay, box, series, opt) : ImVec2();
  const int x_target = std::max(2, int((f.p1.x - f.p0.x) / (font * 5.0f)));
  const std::vector<double> xt = opt.x_ticks.empty() ? detail::nice_ticks(xlo, xhi, x_target, ax.log) : opt.x_ticks;

  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(f.p0, f.p1, kFrameBg);
  draw_y_axis(dl, f, ay, yt);
  draw_x_axis(dl, f, ax, xt);
  draw_v_lines(dl, f, ax, opt);
  dl->PushClipRect(ImVec2(f.p0.x - 4, f.p0.y - 4), ImVec2(f.p1.x + 4, f.p1.y + 4), true);
  draw_series(dl, series, colors, ax, ay);
  dl->PopClipRect();
  dl->AddRect(ImVec2(f.p0.x - 1, f.p0.y - 1), ImVec2(f.p1.x + 1, f.p1.y + 1), kAxis);
  if (box.x > 0) draw_legend(dl, f, legend_at, labels, colors, points);
  hover_crosshair(dl, f, series, ax, opt);
}

// [SECTION] bar_chart ------------------------------------------------------------------------------
void bar_chart(const char* id, const std::vector<Bar>& bars, const PlotOptions& opt, const ImVec2& size) {
  Axis ay;
  ay.log = opt.log_y;
  double ylo = ay.log ? std::numeric_limits<double>::infinity() : 0.0, yhi = ay.log ? 0.0 : 0.0;
  for (const Bar& b : bars)
    if (ay.usable(b.value)) ylo = std::min(ylo, b.value), yhi = std::max(yhi, b.value);
  const bool fixed_y = !(opt.y_min == 0 && opt.y_max == 0);
  if (fixed_y) ylo = opt.y_min, yhi = opt.y_max;
  if (ay.log && std::isfinite(ylo)) ylo = std::pow(10.0, std::floor(std::log10(ylo)));
  if (!fixed_y && !ay.log) yhi *= 1.12;  // room for the value labels above the bars
  if (!fixed_y && ay.log) yhi *= 2.0;
  finish_range(ylo, yhi, ay.log, 0.0);
  ay.lo = ylo, ay.hi = yhi;
  const float font = ImGui::GetFontSize();
  const std::vector<double> yt = detail::nice_ticks(ylo, yhi, std::max(2, int(size.y / (font * 2.5f))), ay.log);
  Frame f = begin_frame(id, opt, size, y_tick_width(yt));
  ay.p0 = f.p1.y, ay.p1 = f.p0.y;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(f.p0, f.p1, kFrameBg);
  draw_y_axis(dl, f, ay, yt);
  if (bars.empty()) {
    dl->AddRect(ImVec2(f.p0.x - 1, f.p0.y - 1), ImVec2(f.p1.x + 1, f.p1.y + 1), kAxis);
    return;
  }
  const float slot = (f.p1.x - f.p0.x) / float(bars.size());
  const float bw = std::max(1.0f, std::min(slot * 0.7f, font * 5.0f));
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImVec2 m = ImGui::GetIO().MousePos;
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const float cx = f.p0.x + slot * (float(i) + 0.5f);
    const float base = ay.log ? f.p1.y : ay.px(0.0);
    const bool ok = ay.usable(b.value);
    const float top = ok ? std::clamp(ay.px(b.value), f.p0.y, f.p1.y) : base;
    const ImU32 col = series_color(b.color, int(i));
    dl->AddRectFilled(ImVec2(std::round(cx - bw * 0.5f), std::min(top, base)),
                      ImVec2(std::round(cx + bw * 0.5f), std::max(top, base)), col, 2.0f,
                      ImDrawFlags_RoundCornersTop);
    // The value above the bar and the label under the axis, when they fit in the slot.
    const std::string v = ok ? detail::tick_label(b.value) : std::string("n/a");
    const ImVec2 vs = ImGui::CalcTextSize(v.c_str());
    // Above the bar where there is room under the plot's top, else just inside the bar's top.
    float vy = std::min(top, base) - vs.y - 2;
    if (vy < f.p0.y) vy = std::min(top, base) + 2;
    if (vs.x <= slot + 4 && vy + vs.y <= f.p1.y)
      detail::add_label(dl, f.name, f.outer0, f.outer1, ImVec2(cx - vs.x * 0.5f, vy), text, v);
    std::string lbl = b.label;
    while (!lbl.empty() && ImGui::CalcTextSize(lbl.c_str()).x > slot - 2) lbl.pop_back();
    if (lbl.size() < b.label.size() && lbl.size() > 1) lbl.back() = '.';
    const ImVec2 ls = ImGui::CalcTextSize(lbl.c_str());
    detail::add_label(dl, f.name, f.outer0, f.outer1, ImVec2(cx - ls.x * 0.5f, f.p1.y + 6), text, lbl);
    if (f.hovered && std::fabs(m.x - cx) <= slot * 0.5f && m.y >= f.p0.y && m.y <= f.p1.y) {
      dl->AddRectFilled(ImVec2(cx - slot * 0.5f, f.p0.y), ImVec2(cx + slot * 0.5f, f.p1.y), IM_COL32(255, 255, 255, 18));
      if (!b.tip.empty()) ImGui::SetTooltip("%s", b.tip.c_str());
      else ImGui::SetTooltip("%s: %.6g", b.label.c_str(), b.value);
    }
  }
  dl->AddRect(ImVec2(f.p0.x - 1, f.p0.y - 1), ImVec2(f.p1.x + 1, f.p1.y + 1), kAxis);
}

// [SECTION] budget_bar -----------------------------------------------------------------------------
void budget_bar(const char* id, double used, double limit, const std::string& text, const ImVec2& size) {
  ImGui::PushID(id);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 sz(std::max(40.0f, size.x), std::max(ImGui::GetFrameHeight(), size.y));
  ImGui::InvisibleButton("##budget", sz);
  const bool hovered = ImGui::IsItemHovered();
  ImGui::PopID();
  const ImVec2 p1(p0.x + sz.x, p0.y + sz.y);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const bool over = limit > 0 ? used > limit : used > 0;
  const double frac = limit > 0 ? std::clamp(used / limit, 0.0, 1.0) : (over ? 1.0 : 0.0);
  // Calm below 80 %, amber close to the limit, red past it.
  const ImU32 fill = over ? IM_COL32(205, 60, 55, 255)
                     : frac >= 0.8 ? IM_COL32(214, 160, 55, 255)
                                   : IM_COL32(74, 130, 199, 255);
  dl->AddRectFilled(p0, p1, kFrameBg, 3.0f);
  if (frac > 0)
    dl->AddRectFilled(p0, ImVec2(p0.x + float(frac) * sz.x, p1.y), fill, 3.0f,
                      frac >= 1.0 ? ImDrawFlags_RoundCornersAll : ImDrawFlags_RoundCornersLeft);
  if (over) {
    // Diagonal stripes over the bar: past the limit is not a matter of degree.
    dl->PushClipRect(p0, p1, true);
    for (float x = p0.x - sz.y; x < p1.x; x += 10)
      dl->AddLine(ImVec2(x, p1.y), ImVec2(x + sz.y, p0.y), IM_COL32(0, 0, 0, 60), 3.0f);
    dl->PopClipRect();
  }
  dl->AddRect(p0, p1, over ? IM_COL32(255, 110, 100, 255) : kAxis, 3.0f, 0, over ? 2.0f : 1.0f);
  std::string label = text;
  if (label.empty()) label = detail::tick_label(used) + " / " + detail::tick_label(limit);
  const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
  const ImVec2 tp(std::floor(p0.x + (sz.x - ts.x) * 0.5f), std::floor(p0.y + (sz.y - ts.y) * 0.5f));
  dl->PushClipRect(p0, p1, true);
  dl->AddText(ImVec2(tp.x + 1, tp.y + 1), IM_COL32(0, 0, 0, 200), label.c_str());  // legible on any fill
  dl->AddText(tp, IM_COL32(245, 245, 245, 255), label.c_str());
  dl->PopClipRect();
  if (hovered)
    ImGui::SetTooltip("%.6g of %.6g (%.1f%%)%s", used, limit, limit > 0 ? 100.0 * used / limit : 0.0,
                      over ? ": over the limit" : "");
}

}  // namespace kl::viz
