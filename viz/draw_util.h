// Internal to viz/: small drawing helpers shared by heatmap.cpp and plot.cpp (axis ticks with nice
// numbers, compact tick labels, vertical text). Not for panels: they use viz/plot.h and viz/heatmap.h.
#pragma once
#include <imgui.h>
#include <imgui_internal.h>

#include <string>
#include <vector>

namespace kl::viz::detail {

// About `target` tick positions covering [lo, hi] at 1, 2 or 5 times a power of ten (linear axes), or
// at powers of ten, refined with 2x and 5x when the range spans less than two decades (log axes).
std::vector<double> nice_ticks(double lo, double hi, int target, bool log_axis);
// Short labels: 0.25, 1024, 16k, 1.5M, 2G, 1e-05.
std::string tick_label(double v);
// Text rotated 90 degrees counter-clockwise (reading bottom to top), centred on `center`, clipped by
// the current clip rectangle. Its rectangle: vertical_text_rect().
void add_text_vertical(ImDrawList* dl, const ImVec2& center, ImU32 col, const char* text);
ImRect vertical_text_rect(const ImVec2& center, const char* text);
// Text drawn and registered with the layout audit as a label of the widget `widget` (outer0..outer1).
void add_label(ImDrawList* dl, const std::string& widget, const ImVec2& outer0, const ImVec2& outer1,
               const ImVec2& pos, ImU32 col, const std::string& text);
// `text` broken into lines no wider than `width` in the current font, at spaces (and at its own line
// breaks) only: Dear ImGui's own wrapping also breaks after '.' and ',', which splits numbers ("0.\n5050",
// "5.\n29x"). A word wider than a line alone is split where it must (never inside a UTF-8 character).
std::vector<std::string> wrap_words(const std::string& text, float width);
// The same lines joined with '\n' (for ImDrawList::AddText with no wrap width).
std::string wrap_words_joined(const std::string& text, float width);
// A dashed line (vertical or horizontal markers).
void add_dashed_line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float dash, float thickness);

}  // namespace kl::viz::detail
