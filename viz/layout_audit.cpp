#include "viz/layout_audit.h"

#include <imgui_internal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <unordered_map>

namespace kl::viz::audit {
namespace {

bool g_on = false;

struct Widget {
  std::string what;
  ImRect r, visible;  // the widget, and the visible region of its window when it was drawn
  bool scroll_y = false;
  ImGuiWindow* window = nullptr;
};
struct Label {
  std::string widget, text;
  ImRect r, parent;
};
struct Cover {
  std::string what;
  ImRect r;
  int covered = 0;
};
std::vector<Widget> g_widgets;
std::vector<Label> g_labels;
std::vector<Cover> g_covers;

std::string rect_text(const ImRect& r) {
  char b[96];
  std::snprintf(b, sizeof b, "[%.0f,%.0f - %.0f,%.0f]", r.Min.x, r.Min.y, r.Max.x, r.Max.y);
  return b;
}

// How far `r` leaves `parent` (0: inside), in pixels, per axis.
float out_x(const ImRect& r, const ImRect& p) { return std::max(p.Min.x - r.Min.x, r.Max.x - p.Max.x); }
float out_y(const ImRect& r, const ImRect& p) { return std::max(p.Min.y - r.Min.y, r.Max.y - p.Max.y); }

// Overlap by more than a sliver (anti-aliasing, glyph bearings and line spacing are not overlaps).
bool overlaps(const ImRect& a, const ImRect& b, float min_h) {
  const float w = std::min(a.Max.x, b.Max.x) - std::max(a.Min.x, b.Min.x);
  const float h = std::min(a.Max.y, b.Max.y) - std::max(a.Min.y, b.Min.y);
  return w > 2.0f && h > min_h;
}

ImGuiWindow* current_window() { return ImGui::GetCurrentContext() ? ImGui::GetCurrentWindowRead() : nullptr; }

bool can_scroll_y(const ImGuiWindow* w) { return w && w->ScrollMax.y > 0.0f; }

// [SECTION] Texts read back from the draw lists --------------------------------------------------------
struct GlyphKey {
  float u1, v1;
  unsigned cp;
};
using GlyphMap = std::unordered_map<uint64_t, GlyphKey>;

uint64_t uv_key(float u, float v) {
  uint32_t a, b;
  std::memcpy(&a, &u, 4);
  std::memcpy(&b, &v, 4);
  return (uint64_t(a) << 32) | b;
}

GlyphMap glyph_map() {
  GlyphMap m;
  for (ImFont* f : ImGui::GetIO().Fonts->Fonts)
    for (const ImFontGlyph& g : f->Glyphs)
      if (g.Visible) m[uv_key(g.U0, g.V0)] = {g.U1, g.V1, g.Codepoint};
  return m;
}

void append_utf8(std::string& s, unsigned cp) {
  char b[8] = {0};
  ImTextCharToUtf8(b, cp);
  s += b;
}

struct Run {
  std::string text;
  ImRect r, clip;
  ImGuiWindow* window = nullptr;
  float h = 0;  // glyph height (about the font size)
  bool ellipsis = false;
};

void read_runs(ImGuiWindow* w, const GlyphMap& gm, std::vector<Run>& runs) {
  ImDrawList* dl = w->DrawList;
  const ImTextureID font_tex = ImGui::GetIO().Fonts->TexID;
  for (const ImDrawCmd& cmd : dl->CmdBuffer) {
    if (cmd.UserCallback || cmd.ElemCount == 0 || cmd.TextureId != font_tex) continue;
    const ImRect clip(cmd.ClipRect.x, cmd.ClipRect.y, cmd.ClipRect.z, cmd.ClipRect.w);
    Run cur;
    ImRect last;
    bool have = false;
    auto flush = [&] {
      if (have) runs.push_back(cur);
      have = false;
    };
    // A glyph is a quad of 4 consecutive vertices drawn as (0,1,2)(0,2,3), its first vertex carrying
    // the glyph's (U0,V0) and its third (U1,V1). Commands are walked through their own indices: with
    // draw-list channels (tables, columns) the vertices of several commands interleave.
    const unsigned end = std::min(cmd.IdxOffset + cmd.ElemCount, unsigned(dl->IdxBuffer.Size));
    for (unsigned i = cmd.IdxOffset; i + 6 <= end;) {
      const ImDrawIdx* ix = &dl->IdxBuffer[int(i)];
      const unsigned base = cmd.VtxOffset + ix[0];
      const bool quad = ix[1] == ix[0] + 1 && ix[2] == ix[0] + 2 && ix[3] == ix[0] && ix[4] == ix[0] + 2 &&
                        ix[5] == ix[0] + 3 && base + 3 < unsigned(dl->VtxBuffer.Size);
      const ImDrawVert* v = quad ? &dl->VtxBuffer[int(base)] : nullptr;
      auto it = quad ? gm.find(uv_key(v[0].uv.x, v[0].uv.y)) : gm.end();
      if (it == gm.end() || v[2].uv.x != it->second.u1 || v[2].uv.y != it->second.v1) {
        i += 3;
        continue;
      }
      ImRect g(v[0].pos, v[0].pos);
      for (int k = 1; k < 4; ++k) g.Add(v[k].pos);
      const float h = std::max(g.GetWidth(), g.GetHeight());
      bool joins = false;
      if (have) {
        const float gap = std::max(cur.h, 8.0f) * 0.6f;
        const bool row = g.Min.x > last.Min.x && g.Min.x - last.Max.x < gap &&
                         std::min(g.Max.y, last.Max.y) > std::max(g.Min.y, last.Min.y);
        const bool column = g.Max.y < last.Max.y && last.Min.y - g.Max.y < gap &&  // rotated, bottom to top
                            std::min(g.Max.x, last.Max.x) > std::max(g.Min.x, last.Min.x);
        joins = row || column;
        if (joins && row && g.Min.x - last.Max.x > cur.h * 0.3f) cur.text += ' ';
      }
      if (!joins) {
        flush();
        cur = Run();
        cur.r = g;
        cur.clip = clip;
        cur.window = w;
        have = true;
      }
      cur.r.Add(g);
      cur.h = std::max(cur.h, std::min(g.GetHeight(), g.GetWidth() * 4.0f));
      append_utf8(cur.text, it->second.cp);
      cur.ellipsis = cur.ellipsis || it->second.cp == 0x2026;
      last = g;
      i += 6;
    }
    flush();
  }
}

bool is_overlay(const ImGuiWindow* w) {
  return (w->Flags & (ImGuiWindowFlags_Tooltip | ImGuiWindowFlags_Popup)) != 0;
}

std::string short_text(const std::string& t) { return t.size() > 60 ? t.substr(0, 57) + "..." : t; }

void check_runs(const std::vector<Run>& runs, const std::string& ctx, std::vector<std::string>& out) {
  for (const Run& r : runs) {
    const std::string head = ctx + ": text '" + short_text(r.text) + "' " + rect_text(r.r);
    const bool scroll = can_scroll_y(r.window);
    const bool scroll_x = (r.window->Flags & ImGuiWindowFlags_HorizontalScrollbar) != 0;  // read by scrolling
    if ((!scroll_x && out_x(r.r, r.clip) > 1.0f) || (!scroll && out_y(r.r, r.clip) > 1.0f))
      out.push_back(head + " cut by its clip rectangle " + rect_text(r.clip) + " in window '" + r.window->Name + "'");
    ImRect vis = r.r;
    vis.ClipWithFull(r.clip);
    if (vis.GetWidth() > 0 && vis.GetHeight() > 0 &&
        (out_x(vis, r.window->OuterRectClipped) > 1.0f || out_y(vis, r.window->OuterRectClipped) > 1.0f))
      out.push_back(head + " drawn outside its window '" + std::string(r.window->Name) + "' " +
                    rect_text(r.window->OuterRectClipped));
    if (r.ellipsis) out.push_back(head + " truncated with an ellipsis in window '" + r.window->Name + "'");
  }
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = i + 1; j < runs.size(); ++j) {
      const Run &a = runs[i], &b = runs[j];
      if (a.text == b.text) continue;  // a text and its shadow
      if (is_overlay(a.window) != is_overlay(b.window)) continue;  // tooltips lie over things on purpose
      ImRect va = a.r, vb = b.r;
      va.ClipWithFull(a.clip);
      vb.ClipWithFull(b.clip);
      if (overlaps(va, vb, 0.3f * std::min(a.h, b.h)))
        out.push_back(ctx + ": text '" + short_text(a.text) + "' " + rect_text(va) + " overlaps text '" +
                      short_text(b.text) + "' " + rect_text(vb));
    }
}

// [SECTION] Windows whose content is wider than they show ---------------------------------------------
void check_extents(ImGuiWindow* w, const std::vector<Run>& runs, const std::string& ctx,
                   std::vector<std::string>& out) {
  if (is_overlay(w) || (w->Flags & ImGuiWindowFlags_HorizontalScrollbar)) return;
  const float visible = w->WorkRect.Max.x - w->DC.CursorStartPos.x;
  if (w->ContentSize.x <= visible + 1.0f) return;
  std::string who;
  for (const Widget& x : g_widgets)
    if (x.window == w && x.r.Max.x > w->WorkRect.Max.x + 1) who += (who.empty() ? "" : ", ") + x.what;
  for (const Run& r : runs)
    if (r.window == w && r.r.Max.x > w->WorkRect.Max.x + 1) who += (who.empty() ? "'" : ", '") + short_text(r.text) + "'";
  char b[160];
  std::snprintf(b, sizeof b, ": window '%s' holds content %.0f px wide in %.0f px visible", w->Name, w->ContentSize.x,
                visible);
  out.push_back(ctx + b + (who.empty() ? std::string(" (the items past the edge draw nothing)") : "; past the edge: " + who));
}

}  // namespace

void set_enabled(bool on) { g_on = on; }
bool enabled() { return g_on; }

void clear() {
  g_widgets.clear();
  g_labels.clear();
  g_covers.clear();
}

void widget(const std::string& what, const ImVec2& min, const ImVec2& max) {
  if (!g_on) return;
  ImGuiWindow* w = current_window();
  if (!w) return;
  ImRect vis = w->ClipRect;
  g_widgets.push_back({what, ImRect(min, max), vis, can_scroll_y(w), w});
}

void last_item(const std::string& what) {
  if (!g_on) return;
  widget(what, ImGui::GetItemRectMin(), ImGui::GetItemRectMax());
}

void label(const std::string& widget_name, const std::string& text, const ImVec2& min, const ImVec2& max,
           const ImVec2& widget_min, const ImVec2& widget_max) {
  if (!g_on) return;
  g_labels.push_back({widget_name, text, ImRect(min, max), ImRect(widget_min, widget_max)});
}

void covers_data(const std::string& what, const ImVec2& min, const ImVec2& max, int covered) {
  if (!g_on) return;
  g_covers.push_back({what, ImRect(min, max), covered});
}

namespace {
std::string g_tooltip;
}  // namespace

const std::string& tooltip_text() { return g_tooltip; }

std::vector<std::string> collect(const std::string& ctx) {
  std::vector<std::string> out;
  if (!g_on || !ImGui::GetCurrentContext()) return out;
  const GlyphMap gm = glyph_map();
  std::vector<Run> runs;
  std::vector<ImGuiWindow*> windows;
  for (ImGuiWindow* w : GImGui->Windows)
    if (w->Active && !w->Hidden) windows.push_back(w), read_runs(w, gm, runs);
  g_tooltip.clear();
  for (const Run& r : runs)
    if (r.window->Flags & ImGuiWindowFlags_Tooltip) g_tooltip += (g_tooltip.empty() ? "" : " ") + r.text;
  check_runs(runs, ctx, out);
  for (ImGuiWindow* w : windows) check_extents(w, runs, ctx, out);
  for (size_t i = 0; i < g_widgets.size(); ++i) {
    const Widget& x = g_widgets[i];
    if (out_x(x.r, x.visible) > 1.0f || (!x.scroll_y && out_y(x.r, x.visible) > 1.0f))
      out.push_back(ctx + ": " + x.what + " " + rect_text(x.r) + " leaves the visible region " + rect_text(x.visible) +
                    " of window '" + x.window->Name + "'");
    for (size_t j = i + 1; j < g_widgets.size(); ++j)
      if (g_widgets[j].window == x.window && overlaps(x.r, g_widgets[j].r, 2.0f))
        out.push_back(ctx + ": " + x.what + " " + rect_text(x.r) + " overlaps " + g_widgets[j].what + " " +
                      rect_text(g_widgets[j].r));
  }
  for (size_t i = 0; i < g_labels.size(); ++i) {
    const Label& l = g_labels[i];
    if (out_x(l.r, l.parent) > 1.0f || out_y(l.r, l.parent) > 1.0f)
      out.push_back(ctx + ": " + l.widget + " label '" + short_text(l.text) + "' " + rect_text(l.r) +
                    " outside its widget " + rect_text(l.parent));
    for (size_t j = i + 1; j < g_labels.size(); ++j)
      if (g_labels[j].widget == l.widget && g_labels[j].text != l.text && overlaps(l.r, g_labels[j].r, 2.0f))
        out.push_back(ctx + ": " + l.widget + " label '" + short_text(l.text) + "' " + rect_text(l.r) +
                      " overlaps label '" + short_text(g_labels[j].text) + "' " + rect_text(g_labels[j].r));
  }
  for (const Cover& c : g_covers)
    if (c.covered > 0)
      out.push_back(ctx + ": " + c.what + " " + rect_text(c.r) + " covers " + std::to_string(c.covered) +
                    " data points");
  // One line per finding: a text drawn twice (into two commands of one window) is reported once.
  std::vector<std::string> unique;
  for (const std::string& f : out)
    if (std::find(unique.begin(), unique.end(), f) == unique.end()) unique.push_back(f);
  return unique;
}

}  // namespace kl::viz::audit
