#include "app/ui.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <set>

#include "assets/embedded.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "viz/draw_util.h"
#include "viz/layout_audit.h"
#include "viz/render_host.h"
#include "viz/ui_log.h"

namespace kl::app::ui {

float px(float pixels_at_scale_1) { return pixels_at_scale_1 * viz::ui_scale(); }

namespace {
int g_columns_open = 0;  // inside column_begin/column_end the item width is already in pixels

// The width of the next control: the panel's pushed width (pixels at scale 1) at the current scale,
// never wider than the room left on the line for it and its label.
float control_width(const std::string& label) {
  ImGuiWindow* w = ImGui::GetCurrentWindow();
  float width = ImGui::CalcItemWidth();
  if (w->DC.ItemWidthStack.Size > 0 && w->DC.ItemWidth > 0 && g_columns_open == 0) width = px(w->DC.ItemWidth);
  const float room = ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ItemInnerSpacing.x -
                     ImGui::CalcTextSize(label.c_str(), nullptr, true).x;
  return std::max(ImGui::GetFontSize() * 3.0f, std::min(width, room));
}


// A typed value applies when the field lets go of the keyboard, however it does: Enter, Tab, a click
// elsewhere (Dear ImGui's EnterReturnsTrue would drop it on the last two). While the field is active
// the text it parses is kept here, by the field's id; `typed` is what the field returned this frame.
// Escape applies nothing: the field lets go in the frame Escape is pressed, and what it held is dropped (the
// widget's own revert cannot be relied on: its text is formatted each frame from the value not yet applied,
// so it never differs from the text Escape restores, and nothing tells the caller).
bool typed_value_done(bool typed, const std::string& value, std::string* proposed) {
  static std::map<ImGuiID, std::string> pending;
  const ImGuiID id = ImGui::GetItemID();
  if (typed) pending[id] = value;
  if (ImGui::IsItemDeactivated() && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false)) {
    pending.erase(id);
    return false;
  }
  if (!ImGui::IsItemDeactivatedAfterEdit()) return false;
  const auto it = pending.find(id);
  if (it == pending.end()) return false;
  *proposed = it->second;
  pending.erase(it);
  return true;
}

// The +/- buttons' step: 1 where the range is small, else a tenth of the value's decade (n = 100000
// steps by 10000), so that a click shows a change.
int64_t int_step(long long v, long long lo, long long hi) {
  if (hi - lo <= 1000) return 1;
  int64_t step = 1;
  while (step * 100 <= std::llabs(v)) step *= 10;
  return step;
}

std::string g_log_panel = "?";
std::vector<ParamStep> g_history;
// The panel that owns the parameters being drawn, for the event log ("param softmax n_cols 2000 -> 1500").
const std::string& log_owner() { return g_log_panel; }
}  // namespace

void set_log_panel(const std::string& id) { g_log_panel = id; }

float param_width(const ParamValues& p, const std::string& key) {
  const ParamSpec* s = p.spec(key);
  if (!s) return 0;
  const ImGuiStyle& st = ImGui::GetStyle();
  const float label = ImGui::CalcTextSize(s->name.c_str()).x;
  if (s->kind == ParamSpec::Kind::Bool) return ImGui::GetFrameHeight() + st.ItemInnerSpacing.x + label;
  ImGuiWindow* win = ImGui::GetCurrentWindow();
  float item = ImGui::CalcItemWidth();
  if (win->DC.ItemWidthStack.Size > 0 && win->DC.ItemWidth > 0 && g_columns_open == 0) item = px(win->DC.ItemWidth);
  float w = item + st.ItemInnerSpacing.x + label;
  if (s->kind == ParamSpec::Kind::Int)
    w += 2 * (st.ItemSpacing.x + ImGui::CalcTextSize("+").x + st.FramePadding.x * 2);
  return w;
}

namespace {
// The widgets of param_control, one per kind of parameter: each returns whether the user asked for a value this
// frame, and leaves it in `proposed`.
bool choice_widget(const ParamValues& p, const ParamSpec& s, const std::string& key, const std::string& label,
                   std::string* proposed) {
  bool edited = false;
  const std::string cur = p.get_text(key);
  if (ImGui::BeginCombo(label.c_str(), cur.c_str())) {
    for (const std::string& c : s.choices)
      if (ImGui::Selectable(c.c_str(), c == cur)) *proposed = c, edited = true;
    ImGui::EndCombo();
  }
  return edited;
}

// A stepper over exponents: each click doubles or halves, always inside the range.
bool pow2_widget(const ParamValues& p, const ParamSpec& s, const std::string& key, const std::string& label,
                 std::string* proposed) {
  int64_t v = p.get_int(key);
  int e = 0, lo = 0, hi = 0;
  while ((int64_t(1) << e) < v) ++e;
  while ((int64_t(1) << lo) < int64_t(s.min)) ++lo;
  while ((int64_t(1) << hi) < int64_t(s.max)) ++hi;
  char fmt[64];
  std::snprintf(fmt, sizeof fmt, "%lld", (long long)v);
  if (!ImGui::SliderInt(label.c_str(), &e, lo, hi, fmt, ImGuiSliderFlags_AlwaysClamp)) return false;
  *proposed = std::to_string(int64_t(1) << e);
  return true;
}

// A typed field and its -/+ steppers; `field_hovered` says whether the field (not a stepper) is under the mouse.
bool int_widget(const ParamValues& p, const ParamSpec& s, const std::string& key, const std::string& label,
                std::string* proposed, bool* field_hovered) {
  bool edited = false;
  long long v = p.get_int(key);
  long long lo = (long long)s.min, hi = (long long)s.max;
  // Typed values outside the range are offered to ParamValues, which refuses them visibly.
  const bool typed = ImGui::InputScalar(label.c_str(), ImGuiDataType_S64, &v, nullptr, nullptr, "%lld");
  *field_hovered = ImGui::IsItemHovered();
  if (typed_value_done(typed, std::to_string(v), proposed)) edited = true;
  // The steppers, greyed at the ends of the range.
  const int64_t step = int_step(v, lo, hi);
  for (const int64_t d : {-step, step}) {
    ImGui::SameLine();
    const bool can = v + d >= lo && v + d <= hi;
    if (!can) ImGui::BeginDisabled();
    if (ImGui::SmallButton(((d < 0 ? "-##" : "+##") + key).c_str())) *proposed = std::to_string(v + d), edited = true;
    if (!can) ImGui::EndDisabled();
    if (step > 1 && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("%s%lld", d < 0 ? "-" : "+", (long long)step);
  }
  return edited;
}

bool float_widget(const ParamValues& p, const std::string& key, const std::string& label, std::string* proposed) {
  double v = p.get_float(key);
  const bool typed = ImGui::InputDouble(label.c_str(), &v, 0.0, 0.0, "%.4g");
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return typed_value_done(typed, b, proposed);
}

// Sets the value a control proposed: a change goes into the undo history and the event log, a refusal into
// `error` (and the log). Returns whether the value changed.
bool apply_proposed(ParamValues& p, const std::string& key, const std::string& proposed, std::string* error) {
  try {
    const std::string before = p.get_text(key);
    p.set(key, proposed);
    if (error) error->clear();
    const bool changed = p.get_text(key) != before;
    if (changed) {
      const std::string what = key + " " + before + " -> " + p.get_text(key);
      g_history.push_back({&p, log_owner(), {{key, before}}, what});
      if (g_history.size() > 200) g_history.erase(g_history.begin());
      viz::ui_log::event("param " + log_owner() + " " + what);
    }
    return changed;
  } catch (const InputError& e) {
    if (error) *error = ui_wording(e.what());
    viz::ui_log::event("refused " + log_owner() + " " + key + ": " + e.what());
    return false;
  }
}
}  // namespace

bool param_control(ParamValues& p, const std::string& key, std::string* error) {
  const ParamSpec* s = p.spec(key);
  if (!s) return false;
  const std::string label = s->name + "##" + key;
  ImGui::SetNextItemWidth(control_width(label));
  const ImVec2 start = ImGui::GetCursorScreenPos();
  std::string proposed;
  bool edited = false, field_hovered = false;
  switch (s->kind) {
    case ParamSpec::Kind::Bool: {
      bool v = p.get_bool(key);
      if (ImGui::Checkbox(label.c_str(), &v)) proposed = v ? "1" : "0", edited = true;
      break;
    }
    case ParamSpec::Kind::Choice:
      edited = choice_widget(p, *s, key, label, &proposed);
      break;
    case ParamSpec::Kind::Pow2:
      edited = pow2_widget(p, *s, key, label, &proposed);
      break;
    case ParamSpec::Kind::Int:
      edited = int_widget(p, *s, key, label, &proposed, &field_hovered);
      break;
    case ParamSpec::Kind::Float:
      edited = float_widget(p, key, label, &proposed);
      break;
  }
  if (!s->help.empty() && (field_hovered || (s->kind != ParamSpec::Kind::Int && ImGui::IsItemHovered())))
    ImGui::SetTooltip("%s\nallowed: %s", s->help.c_str(), s->range_text().c_str());
  viz::audit::widget("control '" + key + "'", start, ImVec2(ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y));
  if (viz::ui_log::is_open())
    viz::ui_log::place("control", log_owner() + " " + key, start.x, start.y, ImGui::GetItemRectMax().x,
                       ImGui::GetItemRectMax().y);
  return edited && apply_proposed(p, key, proposed, error);
}

const std::vector<ParamStep>& param_history() { return g_history; }

bool undo_param_step(std::string* owner) {
  if (g_history.empty()) return false;
  ParamStep step = g_history.back();
  g_history.pop_back();
  for (auto it = step.before.rbegin(); it != step.before.rend(); ++it) {
    try {
      step.params->set(it->first, it->second);
    } catch (const InputError&) {
      // A value that was accepted once is accepted again; nothing to show if not.
    }
  }
  if (owner) *owner = step.owner;
  viz::ui_log::event("undo " + step.owner + " " + step.what);
  return true;
}

int reset_params(ParamValues& p, const std::string& owner) {
  ParamStep step{&p, owner, {}, ""};
  for (const ParamSpec& sp : p.specs()) {
    if (p.get_text(sp.name) == sp.def) continue;
    const std::string before = p.get_text(sp.name);
    try {
      p.set(sp.name, sp.def);
      step.before.push_back({sp.name, before});
    } catch (const InputError&) {
      // A default this backend refuses (none today): the value stays.
    }
  }
  const int n = int(step.before.size());
  step.what = "reset " + std::to_string(n) + (n == 1 ? " value" : " values");
  if (n) g_history.push_back(step);
  viz::ui_log::event("reset " + owner + ": " + std::to_string(n) + (n == 1 ? " value" : " values"));
  return n;
}

namespace {
double g_next_frame = -1;
std::vector<Verdict> g_verdicts;
}  // namespace

void keep_drawing(double seconds) {
  seconds = std::max(0.0, seconds);
  g_next_frame = g_next_frame < 0 ? seconds : std::min(g_next_frame, seconds);
}

double next_frame_within() {
  const double r = g_next_frame;
  g_next_frame = -1;
  return r;
}

const std::vector<Verdict>& frame_verdicts() { return g_verdicts; }
void begin_frame_verdicts() { g_verdicts.clear(); }

std::string ui_wording(const std::string& message) {
  std::string m = message;
  if (m.rfind("--set ", 0) != 0) return m;
  m = m.substr(6);
  const size_t colon = m.find(": ");
  const size_t eq = m.find('=');
  if (colon == std::string::npos || eq == std::string::npos || eq > colon) return m;
  std::string head = m.substr(0, eq) + " = " + m.substr(eq + 1, colon - eq - 1);
  std::string rest = m.substr(colon + 2);
  if (rest.rfind("must be ", 0) == 0) return head + " is not allowed: " + rest;
  return head + ": " + rest;
}

void begin_not_here(bool off) {
  if (!off) return;
  ImGui::BeginGroup();
  ImGui::BeginDisabled();
}

void end_not_here(bool off, const char* why) {
  if (!off) return;
  ImGui::EndDisabled();
  ImGui::EndGroup();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", why);
}

void param_row(ParamValues& p, std::initializer_list<const char*> keys, std::string* error, float gap) {
  bool first = true;
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  const float spacing = gap < 0 ? ImGui::GetStyle().ItemSpacing.x : px(gap);
  float x = 0;
  for (const char* k : keys) {
    const float w = param_width(p, k);
    if (!first && x + spacing + w <= right) ImGui::SameLine(0, spacing);
    first = false;
    param_control(p, k, error);
    x = ImGui::GetItemRectMax().x;
  }
}

std::vector<std::string> wrap_lines(const std::string& text, float width) { return viz::detail::wrap_words(text, width); }

namespace {
// The width wrapped text has from the cursor: to a table cell's right edge inside a table, to the column's
// inside column_begin/column_end (which pushed that position), else to the window's.
float wrap_width() {
  const bool in_table = ImGui::GetCurrentTable() != nullptr;  // a table cell: its own edge
  return ImGui::CalcWrapWidthForPos(ImGui::GetCursorScreenPos(),
                                    g_columns_open && !in_table ? ImGui::GetCurrentWindowRead()->DC.TextWrapPos : 0.0f);
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string r;
  for (size_t i = 0; i < lines.size(); ++i) r += (i ? "\n" : "") + lines[i];
  return r;
}
}  // namespace

void wrapped(const std::string& text) {
  const std::string t = join_lines(wrap_lines(text, wrap_width()));
  ImGui::PushTextWrapPos(-1.0f);  // already broken into lines that fit
  ImGui::TextUnformatted(t.c_str());
  ImGui::PopTextWrapPos();
}

void wrapped_at(const std::string& text, float width) {
  const std::string t = join_lines(wrap_lines(text, std::max(1.0f, width)));
  ImGui::PushTextWrapPos(-1.0f);
  ImGui::TextUnformatted(t.c_str());
  ImGui::PopTextWrapPos();
}

void note(unsigned color, const std::string& text) {
  wrapped_colored(color, text);
  static std::map<std::string, std::set<std::string>> logged;  // each text once per panel
  if (viz::ui_log::is_open() && logged[log_owner()].insert(text).second) viz::ui_log::event("note " + log_owner() + " " + text);
}

void wrapped_colored(unsigned color, const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, color);
  wrapped(text);
  ImGui::PopStyleColor();
}

void wrapped_dim(const std::string& text) { wrapped_colored(ImGui::GetColorU32(ImGuiCol_TextDisabled), text); }

ColumnsLayout columns_or_stack(int n, float min_width) {
  ColumnsLayout c;
  const float avail = ImGui::GetContentRegionAvail().x, gap = ImGui::GetStyle().ItemSpacing.x;
  const float min_w = px(min_width);
  c.per_row = std::max(1, std::min(n, int((avail + gap) / (min_w + gap))));
  c.width = std::floor((avail - gap * float(c.per_row - 1)) / float(c.per_row));
  return c;
}

void column_begin(const ColumnsLayout& c, int i) {
  if (i % c.per_row != 0) ImGui::SameLine();
  ImGui::BeginGroup();
  ++g_columns_open;
  ImGui::PushItemWidth(c.width);
  ImGui::PushTextWrapPos(ImGui::GetCursorPos().x + c.width);
}

void column_end() {
  ImGui::PopTextWrapPos();
  ImGui::PopItemWidth();
  --g_columns_open;
  ImGui::EndGroup();
}

void table_headers_wrapped() {
  ImGuiTable* t = ImGui::GetCurrentTable();
  if (!t) return;
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (int i = 0; i < ImGui::TableGetColumnCount(); ++i) {
    if (!ImGui::TableSetColumnIndex(i)) continue;
    ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, ImGui::GetColorU32(ImGuiCol_TableHeaderBg));
    wrapped(ImGui::TableGetColumnName(i));
    if (viz::ui_log::is_open())
      viz::ui_log::place("header", log_owner() + " " + ImGui::TableGetColumnName(i), ImGui::GetItemRectMin().x,
                         ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
  }
}

namespace {
long g_source_generation = 0;  // 0: no edited kernel ever ran (the keys are as they always were)
}  // namespace

void source_changed() { ++g_source_generation; }

std::string settings_key(const ParamValues& p, std::initializer_list<const char*> keys, Backend b) {
  std::string key = backend_name(b);
  for (const char* k : keys) key += "/" + p.get_text(k);
  if (g_source_generation) key += "/src" + std::to_string(g_source_generation);
  return key;
}

void error_box(const std::string& message) {
  if (message.empty()) return;
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 100, 255));
  wrapped(ui_wording(message));
  ImGui::PopStyleColor();
  if (viz::ui_log::is_open())
    viz::ui_log::place("message", log_owner() + " " + ui_wording(message), ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                       ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
}

void status_line(const char* label, const std::string& text, bool ok) {
  ImGui::TextUnformatted(label);
  // The verdict beside its label where it fits, else under it; wrapped either way.
  const float w = ImGui::CalcTextSize(text.c_str()).x, room = ImGui::GetContentRegionAvail().x;
  if (ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + std::min(w, room * 0.5f) <=
      ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x)
    ImGui::SameLine();
  wrapped_colored(ok ? IM_COL32(120, 220, 120, 255) : IM_COL32(255, 110, 100, 255), text);
  g_verdicts.push_back({label, text, ok});
}

void explain(const char* text_asset) {
  std::string_view t = assets::find(std::string("text/") + text_asset);
  if (t.empty()) return;
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
      wrapped_colored(ImGui::ColorConvertFloat4ToU32(ImVec4(0.85f, 0.85f, 1.0f, 1.0f)), para.substr(2));
    } else if (!para.empty()) {
      wrapped(para);
      ImGui::Spacing();
    }
    pos = end + 2;
  }
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
  // A long heading wraps at the column's (or content region's) edge instead of being cut.
  wrapped_colored(ImGui::ColorConvertFloat4ToU32(ImVec4(0.95f, 0.8f, 0.4f, 1.0f)), title);
  if (g_columns_open == 0) {
    ImGui::Separator();
    return;
  }
  // Inside a column a rule as wide as the column: ImGui's separator spans the window, across the
  // columns beside it.
  ImGuiWindow* w = ImGui::GetCurrentWindow();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float right = w->Pos.x - w->Scroll.x + w->DC.TextWrapPos;
  w->DrawList->AddLine(ImVec2(p.x, p.y), ImVec2(right, p.y), ImGui::GetColorU32(ImGuiCol_Separator));
  ImGui::Dummy(ImVec2(0.0f, 1.0f));
}

}  // namespace kl::app::ui
