// Internal to viz/: small drawing helpers shared by heatmap.cpp and plot.cpp (axis ticks with nice
// numbers, compact tick labels, vertical text). Not for panels: they use viz/plot.h and viz/heatmap.h.
#pragma once
#include <imgui.h>

#include <string>
#include <vector>

namespace kl::viz::detail {

// About `target` tick positions covering [lo, hi] at 1, 2 or 5 times a power of ten (linear axes), or
// at powers of ten, refined with 2x and 5x when the range spans less than two decades (log axes).
std::vector<double> nice_ticks(double lo, double hi, int target, bool log_axis);
// Short labels: 0.25, 1024, 16k, 1.5M, 2G, 1e-05.
std::string tick_label(double v);
// Text rotated 90 degrees counter-clockwise (reading bottom to top), centred on `center`.
void add_text_vertical(ImDrawList* dl, const ImVec2& center, ImU32 col, const char* text);
// A dashed line (vertical or horizontal markers).
void add_dashed_line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float dash, float thickness);

}  // namespace kl::viz::detail
