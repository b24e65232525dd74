// The layout audit: what of a frame is cut, drawn outside its region or on top of something else.
// Three sources, collected after ImGui::Render():
//   - every text drawn this frame, read back from the draw lists (glyph quads, decoded to characters
//     through the font atlas): a text cut by its clip rectangle, drawn outside its window's visible
//     region, truncated with an ellipsis, or overlapping another text;
//   - every window's content extent: content wider than the window shows, where it cannot scroll
//     sideways (an item wholly past the edge draws nothing, so only the extent tells);
//   - widgets and labels registered explicitly (plots, heatmaps, colour bars, legends, the ui
//     helpers' controls): a widget outside its window's visible region, a label outside its widget,
//     widgets or labels overlapping each other, a legend covering data.
// Off unless enabled (the cost is a walk over the frame's vertices). One finding per line:
//   "PANEL: text 'softmax(x)' [x0,y0 - x1,y1] outside its window 'view' [..]".
#pragma once
#include <imgui.h>

#include <string>
#include <vector>

namespace kl::viz::audit {

void set_enabled(bool on);
bool enabled();
void clear();  // forget the registrations of the frame (call before drawing the audited frame)

// A widget drawn in the current window (its rectangle must lie in the window's visible region and
// must not overlap another registered widget of that window).
void widget(const std::string& what, const ImVec2& min, const ImVec2& max);
// The last ImGui item, registered as a widget.
void last_item(const std::string& what);
// A label of a widget: it must lie inside the widget's rectangle and not overlap another label of it.
void label(const std::string& widget_name, const std::string& text, const ImVec2& min, const ImVec2& max,
           const ImVec2& widget_min, const ImVec2& widget_max);
// A legend or other overlay that must not cover data: `covered` points of data lie under it.
void covers_data(const std::string& what, const ImVec2& min, const ImVec2& max, int covered);

// The findings of the frame just rendered (after ImGui::Render()), each prefixed with `context`.
std::vector<std::string> collect(const std::string& context);
// The text of the tooltip that frame showed, as collect() read it from the glyphs ("" when none): the
// event log carries it, so that a test of the real window can read what a hover shows.
const std::string& tooltip_text();

}  // namespace kl::viz::audit
