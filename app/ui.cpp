#include "app/ui.h"

#include <imgui.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "assets/embedded.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"

namespace kl::app::ui {

bool param_control(ParamValues& p, const std::string& key, std::string* error) {
  const ParamSpec* s = p.spec(key);
  if (!s) return false;
  const std::string label = s->name + "##" + key;
  std::string proposed;
  bool edited = false;
  switch (s->kind) {
    case ParamSpec::Kind::Bool: {
      bool v = p.get_bool(key);
      if (ImGui::Checkbox(label.c_str(), &v)) proposed = v ? "1" : "0", edited = true;
      break;
    }
    case ParamSpec::Kind::Choice: {
      const std::string cur = p.get_text(key);
      if (ImGui::BeginCombo(label.c_str(), cur.c_str())) {
        for (const std::string& c : s->choices)
          if (ImGui::Selectable(c.c_str(), c == cur)) proposed = c, edited = true;
        ImGui::EndCombo();
      }
      break;
    }
    case ParamSpec::Kind::Pow2: {
      // A stepper over exponents: each click doubles or halves, always inside the range.
      int64_t v = p.get_int(key);
      int e = 0, lo = 0, hi = 0;
      while ((int64_t(1) << e) < v) ++e;
      while ((int64_t(1) << lo) < int64_t(s->min)) ++lo;
      while ((int64_t(1) << hi) < int64_t(s->max)) ++hi;
      char fmt[64];
      std::snprintf(fmt, sizeof fmt, "%lld", (long long)v);
      if (ImGui::SliderInt(label.c_str(), &e, lo, hi, fmt, ImGuiSliderFlags_AlwaysClamp))
        proposed = std::to_string(int64_t(1) << e), edited = true;
      break;
    }
    case ParamSpec::Kind::Int: {
      long long v = p.get_int(key);
      long long lo = (long long)s->min, hi = (long long)s->max;
      // Typed values outside the range are offered to ParamValues, which refuses them visibly.
      if (ImGui::InputScalar(label.c_str(), ImGuiDataType_S64, &v, nullptr, nullptr, "%lld",
                             ImGuiInputTextFlags_EnterReturnsTrue))
        proposed = std::to_string(v), edited = true;
      if (hi - lo <= (1ll << 24)) {
        ImGui::SameLine();
        int64_t step = 1;
        if (ImGui::SmallButton(("-##" + key).c_str()) && v - step >= lo)
          proposed = std::to_string(v - step), edited = true;
        ImGui::SameLine();
        if (ImGui::SmallButton(("+##" + key).c_str()) && v + step <= hi)
          proposed = std::to_string(v + step), edited = true;
      }
      break;
    }
    case ParamSpec::Kind::Float: {
      double v = p.get_float(key);
      if (ImGui::InputDouble(label.c_str(), &v, 0.0, 0.0, "%.4g", ImGuiInputTextFlags_EnterReturnsTrue)) {
        char b[64];
        std::snprintf(b, sizeof b, "%.9g", v);
        proposed = b, edited = true;
      }
      break;
    }
  }
  if (!s->help.empty() && ImGui::IsItemHovered())
    ImGui::SetTooltip("%s\nallowed: %s", s->help.c_str(), s->range_text().c_str());
  if (!edited) return false;
  try {
    const std::string before = p.get_text(key);
    p.set(key, proposed);
    if (error) error->clear();
    return p.get_text(key) != before;
  } catch (const InputError& e) {
    if (error) *error = e.what();
    return false;
  }
}

void param_row(ParamValues& p, std::initializer_list<const char*> keys, std::string* error, float gap) {
  bool first = true;
  for (const char* k : keys) {
    if (!first) ImGui::SameLine(0, gap);
    first = false;
    param_control(p, k, error);
  }
}

std::string settings_key(const ParamValues& p, std::initializer_list<const char*> keys, Backend b) {
  std::string key = backend_name(b);
  for (const char* k : keys) key += "/" + p.get_text(k);
  return key;
}

void error_box(const std::string& message) {
  if (message.empty()) return;
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 100, 255));
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(message.c_str());
  ImGui::PopTextWrapPos();
  ImGui::PopStyleColor();
}

void status_line(const char* label, const std::string& text, bool ok) {
  ImGui::TextUnformatted(label);
  ImGui::SameLine();
  ImGui::PushStyleColor(ImGuiCol_Text, ok ? IM_COL32(120, 220, 120, 255) : IM_COL32(255, 110, 100, 255));
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopStyleColor();
}

void explain(const char* text_asset) {
  std::string_view t = assets::find(std::string("text/") + text_asset);
  if (t.empty()) return;
  ImGui::PushTextWrapPos(0.0f);
  // Paragraphs separated by blank lines; a leading "# " line is drawn as a heading.
  size_t pos = 0;
  while (pos < t.size()) {
    size_t end = t.find("\n\n", pos);
    if (end == std::string_view::npos) end = t.size();
    std::string para(t.substr(pos, end - pos));
    for (char& c : para)
      if (c == '\n') c = ' ';
    while (!para.empty() && (para.back() == ' ' || para.back() == '\0')) para.pop_back();
    if (para.rfind("# ", 0) == 0) {
      ImGui::TextColored(ImVec4(0.85f, 0.85f, 1.0f, 1.0f), "%s", para.c_str() + 2);
    } else if (!para.empty()) {
      ImGui::TextUnformatted(para.c_str());
      ImGui::Spacing();
    }
    pos = end + 2;
  }
  ImGui::PopTextWrapPos();
}

namespace {
std::atomic<long> g_failures{0};
std::string g_first_failure;  // the UI thread's
}  // namespace

std::string error_text(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e)) return e.what();
  const std::string text = dynamic_cast<const std::bad_alloc*>(&e) ? mem::host_refusal_text(0, "") : e.what();
  if (g_failures++ == 0) g_first_failure = text;
  return text;
}

long failures_shown() { return g_failures.load(); }
std::string first_failure_shown() { return g_first_failure; }

void section(const char* title) {
  ImGui::Spacing();
  ImGui::TextColored(ImVec4(0.95f, 0.8f, 0.4f, 1.0f), "%s", title);
  ImGui::Separator();
}

}  // namespace kl::app::ui
