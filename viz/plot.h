// The few plots the panels need, drawn with ImDrawList (Debian's Dear ImGui 1.86 has no ImPlot):
// line plots with axes and labels, bar charts, and a budget bar (used against a limit).
#pragma once
#include <string>
#include <vector>

struct ImVec2;

namespace kl::viz {

struct Series {
  std::string label;
  std::vector<double> x, y;
  unsigned color = 0;  // IM_COL32; 0 picks from the categorical palette
  bool points = false; // markers instead of a line
};

struct PlotOptions {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  double y_min = 0, y_max = 0;  // both 0: auto
  std::vector<double> x_ticks;  // line_plot: these x ticks instead of nice ones (empty: nice ticks)
  std::vector<double> v_lines;  // vertical markers (e.g. 1024, the wall)
  std::vector<std::string> v_line_labels;
};

void line_plot(const char* id, const std::vector<Series>& series, const PlotOptions& opt, const ImVec2& size);

struct Bar {
  std::string label;
  double value = 0;
  unsigned color = 0;
  std::string tip;  // the hover text (empty: "label: value")
};
void bar_chart(const char* id, const std::vector<Bar>& bars, const PlotOptions& opt, const ImVec2& size);

// Filled to used/limit, red past the limit, with "used / limit" text inside.
void budget_bar(const char* id, double used, double limit, const std::string& text, const ImVec2& size);

}  // namespace kl::viz
