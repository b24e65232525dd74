#include "viz/draw_util.h"

#include "viz/layout_audit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui_internal.h>

namespace kl::viz::detail {

std::vector<double> nice_ticks(double lo, double hi, int target, bool log_axis) {
  std::vector<double> t;
  if (!(std::isfinite(lo) && std::isfinite(hi))) return t;
  if (hi < lo) std::swap(lo, hi);
  if (log_axis) {
    if (hi <= 0) return t;
    if (lo <= 0) lo = hi * 1e-6;
    const double eps = 1e-9;
    const int e0 = int(std::floor(std::log10(lo) + eps)), e1 = int(std::ceil(std::log10(hi) - eps));
    const int decades = e1 - e0;
    // Many decades: every k-th power of ten. Few: 1-2-5 within each decade.
    const int stride = std::max(1, (decades + target - 1) / std::max(1, target));
    const bool fine = decades < 2;
    for (int e = e0; e <= e1; ++e) {
      if (!fine && (e - e0) % stride) continue;
      const double p = std::pow(10.0, e);
      const double mults[] = {1, 2, 5};
      for (double m : mults) {
        if (!fine && m != 1) continue;
        const double v = m * p;
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
      }
    }
    return t;
  }
  if (hi == lo) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

std::string tick_label(double v) {
  char buf[32];
  const double a = std::fabs(v);
  auto trimmed = [&](double x, const char* suffix) {
    snprintf(buf, sizeof(buf), "%.3g%s", x, suffix);
    return std::string(buf);
  };
  if (a == 0) return "0";
  if (a >= 1e9) return trimmed(v / 1e9, "G");
  if (a >= 1e6) return trimmed(v / 1e6, "M");
  if (a >= 1e4) return trimmed(v / 1e3, "k");
  if (a < 1e-3) {
    snprintf(buf, sizeof(buf), "%.2g", v);
    return buf;
  }
  snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

void add_text_vertical(ImDrawList* dl, const ImVec2& center, ImU32 col, const char* text) {
  // Each glyph's quad is written rotated, in the draw list's current command: the text is clipped by
  // the widget's (and window's) clip rectangle like any other text, never drawn outside it.
  ImFont* font = ImGui::GetFont();
  const float scale = ImGui::GetFontSize() / font->FontSize;
  const ImVec2 ts = ImGui::CalcTextSize(text);
  const float cx = std::floor(center.x), cy = std::floor(center.y);
  auto rot = [&](float ux, float uy) { return ImVec2(cx + (uy - ts.y * 0.5f), cy - (ux - ts.x * 0.5f)); };
  float x = 0;
  for (const char* s = text; *s;) {
    unsigned int c = 0;
    s += ImTextCharFromUtf8(&c, s, nullptr);
    if (c == 0) break;
    const ImFontGlyph* g = font->FindGlyph(ImWchar(c));
    if (!g) continue;
    if (g->Visible) {
      const float x0 = x + g->X0 * scale, x1 = x + g->X1 * scale, y0 = g->Y0 * scale, y1 = g->Y1 * scale;
      dl->PrimReserve(6, 4);
      dl->PrimQuadUV(rot(x0, y0), rot(x1, y0), rot(x1, y1), rot(x0, y1), ImVec2(g->U0, g->V0), ImVec2(g->U1, g->V0),
                     ImVec2(g->U1, g->V1), ImVec2(g->U0, g->V1), col);
    }
    x += g->AdvanceX * scale;
  }
}

ImRect vertical_text_rect(const ImVec2& center, const char* text) {
  const ImVec2 ts = ImGui::CalcTextSize(text);
  const float cx = std::floor(center.x), cy = std::floor(center.y);
  return ImRect(cx - ts.y * 0.5f, cy - ts.x * 0.5f, cx + ts.y * 0.5f, cy + ts.x * 0.5f);
}

void add_label(ImDrawList* dl, const std::string& widget, const ImVec2& outer0, const ImVec2& outer1,
               const ImVec2& pos, ImU32 col, const std::string& text) {
  dl->AddText(pos, col, text.c_str());
  const ImVec2 ts = ImGui::CalcTextSize(text.c_str());
  audit::label(widget, text, pos, ImVec2(pos.x + ts.x, pos.y + ts.y), outer0, outer1);
}

void add_dashed_line(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 col, float dash, float thickness) {
  const float dx = b.x - a.x, dy = b.y - a.y;
  const float len = std::sqrt(dx * dx + dy * dy);
  if (len <= 0) return;
  const float ux = dx / len, uy = dy / len;
  for (float s = 0; s < len; s += 2 * dash) {
    const float e = std::min(len, s + dash);
    dl->AddLine(ImVec2(a.x + ux * s, a.y + uy * s), ImVec2(a.x + ux * e, a.y + uy * e), col, thickness);
  }
}

std::vector<std::string> wrap_words(const std::string& text, float width) {
  std::vector<std::string> out;
  auto w = [](const std::string& t) { return ImGui::CalcTextSize(t.c_str()).x; };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string para = text.substr(pos, eol - pos);
    std::string line;
    size_t i = 0;
    do {
      size_t sp = para.find(' ', i);
      if (sp == std::string::npos) sp = para.size();
      std::string word = para.substr(i, sp - i);
      i = sp + 1;
      const std::string joined = line.empty() ? word : line + " " + word;
      if (line.empty() || w(joined) <= width) {
        line = joined;
      } else {
        out.push_back(line);
        line = word;
      }
      // A word wider than a line alone: split it where it must (paths, long identifiers).
      while (w(line) > width && line.size() > 1) {
        size_t cut = line.size() - 1;
        while (cut > 1 && (w(line.substr(0, cut)) > width || (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80)) --cut;
        out.push_back(line.substr(0, cut));
        line = line.substr(cut);
      }
    } while (i <= para.size());
    out.push_back(line);
    pos = eol + 1;
  }
  return out;
}

std::string wrap_words_joined(const std::string& text, float width) {
  std::string r;
  const std::vector<std::string> lines = wrap_words(text, width);
  for (size_t i = 0; i < lines.size(); ++i) r += (i ? "\n" : "") + lines[i];
  return r;
}

}  // namespace kl::viz::detail
