#include "app/editor/editor.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "app/editor/highlight.h"
#include "app/editor/line_diff.h"
#include "app/editor/stamps.h"
#include "app/panel.h"
#include "app/ui.h"
#include "assets/embedded.h"
#include "viz/render_host.h"
#include "viz/ui_log.h"

namespace kl::app::editor {

// Every change of any rung's text gets a number no other text had (the drawing caches key on it).
uint64_t next_version() {
  static uint64_t v = 1;
  return ++v;
}

RungEdit& rung_state(Editor& e, const std::string& rung) {
  RungEdit& r = e.rungs[rung];
  if (!r.have_shipped) {
    r.have_shipped = true;
    r.shipped = hooks().shipped ? hooks().shipped(rung) : std::string();
    if (!r.loaded) r.text = r.shipped, r.loaded = true;
    r.edited = r.text != r.shipped;
    r.version = next_version();
  }
  return r;
}

namespace {

// The text field's id and the find box's, as last drawn (the shortcuts are read before either is).
ImGuiID g_edit_id = 0, g_find_id = 0;

// [SECTION] What the editor draws from the text, made again when it changes ---------------------------
struct Derived {
  uint64_t version = 0;
  std::string text;  // the text these lines are views of (the field may move the rung's text)
  std::string find;
  float font = 0;
  std::vector<std::string_view> lines;
  std::vector<size_t> starts;  // byte offset of each line in the text
  std::vector<std::vector<Span>> spans;
  std::vector<float> widths;   // each line's width in the mono font at `font`
  float max_width = 0;
  std::vector<bool> focus;     // inside a highlighted function
  std::vector<bool> changed;   // added or changed against the shipped source
  DiffSummary summary;
  std::vector<size_t> matches; // byte offsets of the find text (case-insensitive)
  LineMarks marks;
};
std::map<std::string, Derived> g_derived;

ImFont* mono() { return viz::font_mono() ? viz::font_mono() : ImGui::GetFont(); }

// The source view's rule for highlighted functions: from the line that names the function (without a
// ';') to the next line "}".
std::vector<bool> focus_lines(const std::vector<std::string_view>& lines, const std::vector<std::string>& fns) {
  std::vector<bool> v(lines.size(), false);
  bool inside = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (!l.empty() && l.back() == '\0') l.remove_suffix(1);
    for (const std::string& fn : fns)
      if (l.find(fn + "(") != std::string_view::npos && l.find(';') == std::string_view::npos) inside = true;
    v[i] = inside;
    if (inside && l == "}") inside = false;
  }
  return v;
}

std::vector<size_t> find_all(const std::string& text, const char* what) {
  std::vector<size_t> v;
  const size_t n = std::strlen(what);
  if (n == 0) return v;
  auto eq = [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b)); };
  for (auto it = text.begin(); (it = std::search(it, text.end(), what, what + n, eq)) != text.end(); it += long(n))
    v.push_back(size_t(it - text.begin()));
  return v;
}

const Derived& derive(Editor& e, const std::string& rung, RungEdit& r, const std::vector<std::string>& fns) {
  Derived& d = g_derived[rung];
  const float font = ImGui::GetFontSize();
  const bool text_changed = d.version != r.version;
  if (text_changed) {
    d.version = r.version;
    d.text = r.text;
    d.lines = split_lines(d.text);
    d.starts.clear();
    for (const std::string_view& l : d.lines) d.starts.push_back(size_t(l.data() - d.text.data()));
    d.spans = highlight(d.lines);
    d.focus = focus_lines(d.lines, fns);
    const std::vector<DiffLine> diff = line_diff(r.shipped, r.text);
    d.summary = summarize(diff);
    d.changed.assign(d.lines.size(), false);
    for (const DiffLine& l : diff)
      if (l.kind == DiffLine::Added && l.new_line >= 1) d.changed[size_t(l.new_line - 1)] = true;
    r.edited = r.text != r.shipped;
    if (r.ran && r.diagnostics_version != r.version) {
      r.diagnostics = carry_diagnostics(r.result.diagnostics, edited_file_name(rung), r.compiled, r.text);
      r.diagnostics_version = r.version;
    }
    d.marks = map_diagnostics(r.ran ? r.diagnostics : std::vector<Diagnostic>{}, edited_file_name(rung), int(d.lines.size()));
  }
  if (text_changed || d.font != font) {
    d.font = font;
    d.widths.clear();
    d.max_width = 0;
    for (const std::string_view& l : d.lines) {
      const float w = mono()->CalcTextSizeA(font, FLT_MAX, 0, l.data(), l.data() + l.size()).x;
      d.widths.push_back(w);
      d.max_width = std::max(d.max_width, w);
    }
  }
  if (text_changed || d.find != e.find) {
    d.find = e.find;
    d.matches = find_all(r.text, e.find);
    if (e.find_current >= int(d.matches.size())) e.find_current = 0;
  }
  return d;
}

int line_of(const Derived& d, size_t offset) {
  const auto it = std::upper_bound(d.starts.begin(), d.starts.end(), offset);
  return std::max(1, int(it - d.starts.begin()));
}

ImU32 token_color(Token t) {
  switch (t) {
    case Token::Comment: return IM_COL32(120, 150, 120, 255);
    case Token::String: return IM_COL32(214, 157, 133, 255);
    case Token::Number: return IM_COL32(181, 206, 168, 255);
    case Token::Preprocessor: return IM_COL32(197, 134, 192, 255);
    case Token::Keyword: return IM_COL32(110, 160, 230, 255);
    case Token::Type: return IM_COL32(78, 201, 176, 255);
    case Token::Cuda: return IM_COL32(230, 190, 100, 255);
    case Token::Plain: break;
  }
  return ImGui::GetColorU32(ImGuiCol_Text);
}

const ImU32 kFocusBg = IM_COL32(70, 70, 20, 160), kErrorBg = IM_COL32(120, 30, 30, 150), kError = IM_COL32(255, 110, 100, 255),
            kWarning = IM_COL32(242, 204, 102, 255), kOk = IM_COL32(120, 220, 120, 255), kAdded = IM_COL32(90, 190, 110, 255),
            kMatch = IM_COL32(150, 120, 30, 150), kMatchCurrent = IM_COL32(230, 170, 40, 200);

// [SECTION] Actions ---------------------------------------------------------------------------------
void forget_undo() {
  // Dear ImGui keeps one text field's undo history and reuses it when that field is activated again;
  // after the text was replaced from outside it would undo into the old text.
  if (g_edit_id && ImGui::GetCurrentContext() && GImGui->InputTextState.ID == g_edit_id) {
    if (GImGui->ActiveId == g_edit_id) ImGui::ClearActiveID();
    GImGui->InputTextState.ID = 0;
  }
}

void scroll_to_match(Editor& e, const Derived& d) {
  if (d.matches.empty()) return;
  const size_t at = d.matches[size_t(e.find_current)];
  const int line = line_of(d, at);
  e.scroll_to_line = line, e.scroll_frames = 3;
  e.scroll_to_col = int(at - d.starts[size_t(line - 1)]);
  e.select_from = int(at), e.select_to = int(at + std::strlen(e.find));
}

}  // namespace

namespace {
enum EditKind { kNone = 0, kInsert, kDelete, kOther };

// One change of the text, as the field made it in a frame (several keys may land in one frame): what
// was put in and taken out at `at`.
struct Change {
  size_t at = 0;
  std::string inserted, deleted;
};
Change diff(const std::string& before, const std::string& after) {
  Change c;
  size_t p = 0;
  while (p < before.size() && p < after.size() && before[p] == after[p]) ++p;
  size_t q = 0;
  while (q < before.size() - p && q < after.size() - p && before[before.size() - 1 - q] == after[after.size() - 1 - q]) ++q;
  c.at = p;
  c.inserted = after.substr(p, after.size() - p - q);
  c.deleted = before.substr(p, before.size() - p - q);
  return c;
}

// Puts `snap` into the field: the field lets go of the keyboard, the text is replaced and the field
// takes the keyboard back with the caret where the snapshot had it.
void apply_snapshot(Editor& e, RungEdit& r, const RungEdit::Snapshot& snap) {
  forget_undo();
  r.text = snap.text;
  r.edited = r.text != r.shipped;
  r.version = next_version();
  r.last_edit_kind = kNone;
  e.focus_editor = true;
  e.select_from = e.select_to = std::clamp(snap.cursor, 0, int(r.text.size()));
  int line = 1;
  for (int i = 0; i < e.select_from; ++i) line += r.text[size_t(i)] == '\n';
  e.scroll_to_line = line, e.scroll_to_col = 0, e.scroll_frames = 3;
}

// A change made in the field: a new undo step where typing starts a word (after a space or a line
// break), where it turns to deleting or back, where the caret moved elsewhere, after a pause of a
// second, and for anything else (a paste over a selection); typing or deleting on goes on in the step.
void record_edit(RungEdit& r, const std::string& before) {
  const Change c = diff(before, r.text);
  const EditKind k = c.deleted.empty() && !c.inserted.empty() ? kInsert
                     : c.inserted.empty() && !c.deleted.empty() ? kDelete : kOther;
  const double now = ImGui::GetTime();
  const bool starts_word = k == kInsert && !std::isspace(static_cast<unsigned char>(c.inserted[0])) &&
                           (c.at == 0 || std::isspace(static_cast<unsigned char>(before[c.at - 1])));
  const size_t near = k == kDelete ? c.at + c.deleted.size() : c.at;  // backspace deletes leftwards
  const bool same = !r.undo.empty() && now - r.last_edit_time < 1.0 && k != kOther && k == r.last_edit_kind &&
                    (near == r.last_edit_at || c.at == r.last_edit_at) && !starts_word;
  if (!same) r.undo.push_back({before, int(c.at)});
  // Several keys typed within one frame (a busy machine): a step at each word they start, as typing them a
  // frame at a time makes. A paste (longer than a frame's keys, 64 characters here) stays one step.
  if (k == kInsert && c.inserted.size() <= 64)
    for (size_t j = 1; j < c.inserted.size(); ++j)
      if (!std::isspace(static_cast<unsigned char>(c.inserted[j])) &&
          std::isspace(static_cast<unsigned char>(c.inserted[j - 1])))
        r.undo.push_back({before.substr(0, c.at) + c.inserted.substr(0, j) + before.substr(c.at), int(c.at + j)});
  while (r.undo.size() > 500) r.undo.erase(r.undo.begin());
  r.redo.clear();
  r.last_edit_time = now;
  r.last_edit_kind = k;
  r.last_edit_at = k == kInsert ? c.at + c.inserted.size() : c.at;
}
}  // namespace

void set_text(Editor& e, const std::string& rung, const std::string& text) {
  RungEdit& r = rung_state(e, rung);
  forget_undo();
  if (text != r.text) {
    r.undo.push_back({r.text, e.cursor});  // a bug loaded, Reset: one step back
    r.redo.clear();
  }
  r.last_edit_kind = kNone;
  r.text = text;
  r.edited = r.text != r.shipped;
  r.version = next_version();
}

bool undo(Editor& e, const std::string& rung) {
  RungEdit& r = rung_state(e, rung);
  if (r.undo.empty()) return false;
  const size_t had = r.text.size();
  r.redo.push_back({r.text, e.cursor});
  const RungEdit::Snapshot snap = r.undo.back();
  r.undo.pop_back();
  apply_snapshot(e, r, snap);
  viz::ui_log::event("editor undo " + rung + ": " + std::to_string(long(r.text.size()) - long(had)) + " chars");
  return true;
}

bool redo(Editor& e, const std::string& rung) {
  RungEdit& r = rung_state(e, rung);
  if (r.redo.empty()) return false;
  const size_t had = r.text.size();
  r.undo.push_back({r.text, e.cursor});
  const RungEdit::Snapshot snap = r.redo.back();
  r.redo.pop_back();
  apply_snapshot(e, r, snap);
  viz::ui_log::event("editor redo " + rung + ": " + std::to_string(long(r.text.size()) - long(had)) + " chars");
  return true;
}

void reset(Editor& e, Panel& panel, const std::string& rung) {
  RungEdit& r = rung_state(e, rung);
  const bool had_edit = r.text != r.shipped;
  set_text(e, rung, r.shipped);
  r.bug.clear(), r.bug_sentence.clear();
  r.ran = false;
  r.edit_in_views = false;
  r.result = RunResult();
  r.diagnostics.clear();
  if (hooks().use_shipped) hooks().use_shipped(panel, rung), ui::source_changed();
  r.status = had_edit ? "reset to the shipped source: Ctrl+Z in the editor (or Undo reset) brings the edit back"
                      : "reset to the shipped source";
  r.status_ok = true;
  if (had_edit) e.focus_editor = true;  // so that Ctrl+Z reaches the editor at once
  viz::ui_log::event("editor reset " + rung);
}

std::string stale_reason(const Editor& e, const std::string& rung) {
  const auto it = e.rungs.find(rung);
  if (it == e.rungs.end() || !it->second.ran) return "";
  const RungEdit& r = it->second;
  const std::string shown = r.edit_in_views ? "the last edited kernel that ran" : "the shipped kernel";
  if (r.result.kind == RunResult::Kind::CompileErrors)
    return "these views show " + shown + ", not the edit in the source pane, which does not compile";
  if (r.result.kind == RunResult::Kind::Refused)
    return "these views show " + shown + ", not the edit in the source pane, which was not run";
  return "";
}

namespace {
// A check's name: its label, or for a check drawn without one, its sentence up to the first ':'.
std::string check_key(const ui::Verdict& v) { return !v.label.empty() ? v.label : v.text.substr(0, v.text.find(':')); }
}  // namespace

RunVerdict run_verdict(RungEdit& r) {
  const std::vector<ui::Verdict>& now = ui::frame_verdicts();
  if (!r.edit_in_views) {
    // The shipped kernel is in the views: what its checks say is the baseline.
    if (!now.empty()) {
      r.shipped_failing.clear();
      for (const ui::Verdict& v : now)
        if (!v.ok) r.shipped_failing.push_back(check_key(v));
    }
    return {r.status, r.status_ok};
  }
  // The frame of the run drew the views before the kernel ran: its checks are the old kernel's.
  if (!r.ran || r.result.kind != RunResult::Kind::Ran || ImGui::GetFrameCount() <= r.run_frame) return {r.status, r.status_ok};
  std::string fails;
  for (const ui::Verdict& v : now)
    if (!v.ok && std::find(r.shipped_failing.begin(), r.shipped_failing.end(), check_key(v)) == r.shipped_failing.end())
      fails += (fails.empty() ? "" : "; ") + (v.label.empty() ? v.text : v.label + " " + v.text);
  RunVerdict out;
  if (now.empty()) out = {r.status, true};
  else if (fails.empty()) out = {r.status + "; the view's checks pass as they do for the shipped kernel", true};
  else out = {"ran the edited kernel, and the view's check fails: " + fails, false};
  if (!now.empty() && out.text != r.verdict_logged) {
    r.verdict_logged = out.text;
    viz::ui_log::event(std::string("editor verdict ") + (out.ok ? "ok: " : "fails: ") + out.text);
  }
  return out;
}

void compile_and_run(Editor& e, Panel& panel, const AppContext& ctx, const std::string& rung) {
  RungEdit& r = rung_state(e, rung);
  const std::string file = edited_file_name(rung);
  if (!hooks().compile_and_run) {
    r.result = RunResult();
    r.result.message = "no compiler is wired to the editor here; the edit is kept";
  } else {
    try {
      r.result = hooks().compile_and_run(panel, ctx, rung, file, r.text);
    } catch (const std::exception& ex) {
      r.result = RunResult();
      r.result.message = ui::error_text(ex);
    }
  }
  r.ran = true;
  r.compiled = r.text;
  r.diagnostics = r.result.diagnostics;
  r.diagnostics_version = r.version;
  r.version = next_version();  // the marks are laid again
  r.diagnostics_version = r.version;
  const LineMarks m = map_diagnostics(r.diagnostics, file, int(split_lines(r.text).size()));
  switch (r.result.kind) {
    case RunResult::Kind::Ran:
      r.status = "ran the edited kernel: views redrawn";
      if (m.warnings) r.status += " (" + std::to_string(m.warnings) + " warning" + (m.warnings == 1 ? ")" : "s)");
      break;
    case RunResult::Kind::CompileErrors:
      r.status = std::to_string(m.errors) + " compile error" + (m.errors == 1 ? "" : "s") + ": the marked lines say what";
      break;
    case RunResult::Kind::Fault: r.status = "run-time fault: " + r.result.message; break;
    case RunResult::Kind::Refused: r.status = "not run: " + r.result.message; break;
  }
  if (r.result.kind == RunResult::Kind::CompileErrors || r.result.kind == RunResult::Kind::Refused)
    r.status += r.edit_in_views ? "; the views still show the last edited kernel that ran" : "; the views still show the shipped kernel";
  r.status_ok = r.result.kind == RunResult::Kind::Ran;
  r.verdict_logged.clear();
  r.run_frame = ImGui::GetCurrentContext() ? ImGui::GetFrameCount() : 0;
  if (r.result.kind == RunResult::Kind::Ran || r.result.kind == RunResult::Kind::Fault)
    ui::source_changed(), r.edit_in_views = true;
  static const char* kinds[] = {"ran", "compile errors", "fault", "refused"};
  viz::ui_log::event("editor run " + rung + ": " + kinds[int(r.result.kind)] + ", " + std::to_string(m.errors) +
                     " errors, " + std::to_string(m.warnings) + " warnings");
  for (const Diagnostic& d : r.diagnostics) viz::ui_log::event("editor diagnostic " + rung + " " + d.text());
  viz::ui_log::event("editor status " + rung + " " + r.status);
}

namespace {

// [SECTION] Pieces of the pane ------------------------------------------------------------------------
// The last item's rectangle in the event log (where a test clicks it).
void place_item(const std::string& kind, const std::string& name) {
  viz::ui_log::place(kind, name, ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x,
                     ImGui::GetItemRectMax().y);
}

// A button on the current row where it fits before the content region's right edge, else on the next.
bool row_button(const char* label, bool* first, bool enabled = true) {
  const ImGuiStyle& st = ImGui::GetStyle();
  const float w = ImGui::CalcTextSize(label, nullptr, true).x + st.FramePadding.x * 2;
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (!*first && ImGui::GetItemRectMax().x + st.ItemSpacing.x + w <= right) ImGui::SameLine();
  *first = false;
  if (!enabled) ImGui::BeginDisabled();
  const bool pressed = ImGui::Button(label);
  if (!enabled) ImGui::EndDisabled();
  return pressed;
}

// The lines of a source (a trailing zero byte left out) with the focused ones behind kFocusBg, numbered, only
// those in view drawn.
void draw_numbered(const std::vector<std::string_view>& lines, const std::vector<bool>& focus) {
  ImGuiListClipper clip;
  clip.Begin(int(lines.size()));
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      std::string_view line = lines[size_t(i)];
      if (!line.empty() && line.back() == '\0') line.remove_suffix(1);
      if (focus[size_t(i)]) {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        ImGui::GetWindowDrawList()->AddRectFilled(
            p, ImVec2(p.x + ImGui::GetContentRegionAvail().x + 2000.0f, p.y + ImGui::GetTextLineHeightWithSpacing()),
            kFocusBg);
      }
      ImGui::TextDisabled("%4d", i + 1);
      ImGui::SameLine();
      ImGui::TextUnformatted(line.data(), line.data() + line.size());
    }
}

void view_mode(Editor& e, RungEdit& r, const std::string& rung, const std::string& file,
               const std::vector<std::string>& fns) {
  if (ImGui::Button("Edit")) {
    e.editing = true;
    viz::ui_log::event("editor open " + rung);
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("edit this kernel, compile and run it with Ctrl+Enter");
  viz::ui_log::place("button", "edit " + rung, ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                     ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
  ImGui::SameLine();
  // Where the highlight starts: below the header comment a pane of a few lines (1280x720) may not reach it.
  const std::vector<std::string_view> lines = split_lines(r.text);
  const std::vector<bool> focus = focus_lines(lines, fns);
  const auto first = std::find(focus.begin(), focus.end(), true);
  const std::string from = first == focus.end() ? "" : " (from line " + std::to_string(first - focus.begin() + 1) + ")";
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
  ui::wrapped(r.edited ? file + ", edited (not the shipped source: Edit, then Reset, brings it back); highlighted: "
                         "the code this view draws" + from
                       : (hooks().shipped_path ? hooks().shipped_path(rung) : file) +
                             ", embedded at build time; highlighted: the code this view draws" + from);
  ImGui::PopStyleColor();
  ImGui::BeginChild("source", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushFont(mono());
  draw_numbered(lines, focus);
  ImGui::PopFont();
  ImGui::EndChild();
}

void toolbar(Editor& e, Panel& panel, RungEdit& r, const std::string& rung) {
  bool first = true;
  if (row_button("Compile & run (Ctrl+Enter)", &first)) e.run_requested = true;
  if (row_button(e.find_open ? "Close find" : "Find (Ctrl+F)", &first)) {
    e.find_open = !e.find_open;
    e.focus_find = e.find_open;
  }
  if (row_button(e.diff ? "Back to the editor" : "Diff against shipped", &first)) {
    e.diff = !e.diff;
    viz::ui_log::event("editor diff " + rung + (e.diff ? " on" : " off"));
  }
  if (row_button("Reset", &first, r.edited || r.ran)) reset(e, panel, rung);
  place_item("button", "reset " + rung);
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("back to the shipped source (undone by Ctrl+Z in the editor)");
  if (!r.edited && !r.undo.empty() && r.undo.back().text != r.shipped && row_button("Undo reset", &first)) undo(e, rung);
  const std::vector<GalleryItem> bugs = hooks().gallery ? hooks().gallery(rung) : std::vector<GalleryItem>{};
  if (row_button("Load bug \xE2\x96\xB8", &first, !bugs.empty())) ImGui::OpenPopup("##bugs");
  place_item("button", "load-bug " + rung);
  if (bugs.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("this build has no gallery of bugs for %s", rung.c_str());
  if (row_button("View", &first)) {
    e.editing = false;
    viz::ui_log::event("editor closed " + rung);
  }
  if (ImGui::BeginPopup("##bugs")) {
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 28);
    for (size_t i = 0; i < bugs.size(); ++i) {
      ImGui::PushID(int(i));
      const bool picked = ImGui::Selectable(bugs[i].name.c_str());
      place_item("bug", rung + " " + bugs[i].name);
      if (picked) {
        set_text(e, rung, bugs[i].text);
        r.bug = bugs[i].name, r.bug_sentence = bugs[i].sentence;
        r.ran = false, r.diagnostics.clear();
        r.status = "loaded the bug '" + bugs[i].name + "': Ctrl+Enter runs it";
        r.status_ok = true;
        e.diff = false;
        viz::ui_log::event("editor bug " + rung + " " + bugs[i].name);
      }
      ImGui::TextDisabled("%s", bugs[i].sentence.c_str());
      ImGui::PopID();
    }
    ImGui::PopTextWrapPos();
    ImGui::EndPopup();
  }
}

void find_bar(Editor& e, const Derived& d) {
  ImGuiIO& io = ImGui::GetIO();
  const bool was_active = g_find_id && ImGui::GetActiveID() == g_find_id;
  const bool enter = was_active && (ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_Enter]) || ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_KeyPadEnter]));
  const bool escape = was_active && ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_Escape], false);
  const float em = ImGui::GetFontSize();
  char count[48] = {0};
  if (d.matches.empty() && e.find[0]) std::snprintf(count, sizeof count, "no match");
  else if (!d.matches.empty()) std::snprintf(count, sizeof count, "%d of %d", e.find_current + 1, int(d.matches.size()));
  const ImGuiStyle& st = ImGui::GetStyle();
  const float buttons = ImGui::CalcTextSize("Previous").x + ImGui::CalcTextSize("Next").x + st.FramePadding.x * 4 +
                        st.ItemSpacing.x * 2;
  ImGui::SetNextItemWidth(std::max(em * 8, std::min(em * 16, ImGui::GetContentRegionAvail().x - buttons)));
  if (e.focus_find) ImGui::SetKeyboardFocusHere(), e.focus_find = false;
  ImGui::InputTextWithHint("##find", "find", e.find, sizeof e.find);
  g_find_id = ImGui::GetItemID();
  bool step = false;
  int dir = 1;
  bool first = false;
  if (row_button("Previous", &first)) step = true, dir = -1;
  if (row_button("Next", &first)) step = true;
  if (count[0]) {
    ImGui::SameLine();
    if (ImGui::GetCursorPosX() + ImGui::CalcTextSize(count).x > ImGui::GetWindowContentRegionMax().x) ImGui::NewLine();
    ImGui::TextDisabled("%s", count);
  }
  if (enter) step = true, dir = io.KeyShift ? -1 : 1, e.focus_find = true;
  if (step && !d.matches.empty()) {
    const int n = int(d.matches.size());
    e.find_current = ((e.find_current + dir) % n + n) % n;
    scroll_to_match(e, d);
    viz::ui_log::event("editor find '" + std::string(e.find) + "' " + std::to_string(e.find_current + 1) + " of " +
                       std::to_string(n));
  }
  if (escape) {
    e.find_open = false;
    e.focus_editor = true;
    if (!d.matches.empty()) scroll_to_match(e, d);
  }
}

struct FieldData {
  std::string* text;
  Editor* e;
};

int field_callback(ImGuiInputTextCallbackData* d) {
  FieldData* f = static_cast<FieldData*>(d->UserData);
  if (d->EventFlag == ImGuiInputTextFlags_CallbackResize) {
    f->text->resize(size_t(d->BufTextLen));
    d->Buf = f->text->data();
    return 0;
  }
  Editor& e = *f->e;
  if (e.select_from >= 0) {
    d->SelectionStart = std::clamp(e.select_from, 0, d->BufTextLen);
    d->SelectionEnd = std::clamp(e.select_to, 0, d->BufTextLen);
    d->CursorPos = d->SelectionEnd;
    e.select_from = e.select_to = -1;
  }
  e.cursor = d->CursorPos;
  return 0;
}

// Keys the text field must not see: Escape (Dear ImGui 1.86 reverts every edit since the field was
// activated), Ctrl+Enter (it would leave the field; here it compiles) and Ctrl+Z / Ctrl+Y (its own undo
// goes a key at a time; the editor's goes a word at a time). Restored after the field.
struct HiddenKeys {
  int keys[5] = {-1, -1, -1, -1, -1};
  float saved[5] = {0, 0, 0, 0, 0};
  void hide(int i, int key) {
    if (key < 0 || key >= 512) return;
    keys[i] = key, saved[i] = ImGui::GetIO().KeysDownDuration[key];
    ImGui::GetIO().KeysDownDuration[key] = -1.0f;
  }
  // Keyboard navigation maps Escape to its Cancel input too, which the field also reads as "revert".
  float saved_cancel = ImGui::GetIO().NavInputsDownDuration[ImGuiNavInput_Cancel];
  void hide_cancel() { ImGui::GetIO().NavInputsDownDuration[ImGuiNavInput_Cancel] = -1.0f; }
  ~HiddenKeys() {
    for (int i = 0; i < 5; ++i)
      if (keys[i] >= 0) ImGui::GetIO().KeysDownDuration[keys[i]] = saved[i];
    ImGui::GetIO().NavInputsDownDuration[ImGuiNavInput_Cancel] = saved_cancel;
  }
};

// Draws the syntax-coloured text over the field (whose own text is transparent) for the lines in view.
void overlay(Editor& e, const RungEdit& r, const Derived& d, ImVec2 origin, float fs, ImGuiID id) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImRect clip = ImGui::GetCurrentWindow()->ClipRect;
  const int first = std::max(0, int((clip.Min.y - origin.y) / fs) - 1);
  const int last = std::min(int(d.lines.size()), int((clip.Max.y - origin.y) / fs) + 2);
  const float right = std::max(clip.Max.x, origin.x + d.max_width) + fs;
  ImFont* f = mono();
  for (int i = first; i < last; ++i) {
    const float y = origin.y + float(i) * fs;
    if (d.focus[size_t(i)]) dl->AddRectFilled(ImVec2(origin.x - fs * 0.3f, y), ImVec2(right, y + fs), kFocusBg);
    if (d.marks.on_line.count(i + 1)) dl->AddRectFilled(ImVec2(origin.x - fs * 0.3f, y), ImVec2(right, y + fs), kErrorBg);
  }
  const size_t flen = std::strlen(e.find);
  for (size_t k = 0; k < d.matches.size(); ++k) {
    const int line = line_of(d, d.matches[k]);
    if (line - 1 < first || line - 1 >= last) continue;
    const char* ls = d.text.data() + d.starts[size_t(line - 1)];
    const char* ms = d.text.data() + d.matches[k];
    const float x0 = f->CalcTextSizeA(fs, FLT_MAX, 0, ls, ms).x, x1 = f->CalcTextSizeA(fs, FLT_MAX, 0, ls, ms + flen).x;
    const float y = origin.y + float(line - 1) * fs;
    dl->AddRectFilled(ImVec2(origin.x + x0, y), ImVec2(origin.x + x1, y + fs),
                      int(k) == e.find_current ? kMatchCurrent : kMatch);
  }
  for (int i = first; i < last; ++i) {
    const std::string_view l = d.lines[size_t(i)];
    const float y = origin.y + float(i) * fs;
    for (const Span& s : d.spans[size_t(i)]) {
      if (s.kind == Token::Plain && l.substr(size_t(s.begin), size_t(s.end - s.begin)).find_first_not_of(" \t") == std::string_view::npos)
        continue;
      const float x = f->CalcTextSizeA(fs, FLT_MAX, 0, l.data(), l.data() + s.begin).x;
      dl->AddText(f, fs, ImVec2(origin.x + x, y), token_color(s.kind), l.data() + s.begin, l.data() + s.end);
    }
    const auto m = d.marks.on_line.find(i + 1);
    if (m == d.marks.on_line.end()) continue;
    const Diagnostic& diag = r.diagnostics[m->second.front()];
    std::string msg = (diag.warning ? "warning: " : "error: ") + diag.message;
    if (m->second.size() > 1) msg += "  (+" + std::to_string(m->second.size() - 1) + " more)";
    dl->AddText(f, fs, ImVec2(origin.x + d.widths[size_t(i)] + fs * 2, y), diag.warning ? kWarning : kError, msg.c_str());
  }
  // The caret (the field's own is drawn in the text colour, which is transparent here), blinking as
  // Dear ImGui's does.
  const ImGuiInputTextState* st = ImGui::GetInputTextState(id);
  if (st && ImGui::GetActiveID() == id && (st->CursorAnim <= 0.0f || std::fmod(st->CursorAnim, 1.20f) <= 0.80f)) {
    const size_t at = std::min(size_t(std::max(0, e.cursor)), d.text.size());
    const int line = d.starts.empty() ? 1 : line_of(d, at);
    const size_t ls = d.starts.empty() ? 0 : d.starts[size_t(line - 1)];
    const float x = f->CalcTextSizeA(fs, FLT_MAX, 0, d.text.data() + ls, d.text.data() + std::max(ls, at)).x;
    const float y = origin.y + float(line - 1) * fs;
    dl->AddLine(ImVec2(origin.x + x + 0.5f, y), ImVec2(origin.x + x + 0.5f, y + fs - 1), IM_COL32(235, 235, 235, 255),
                std::max(1.0f, fs / 14.0f));
  }
}

// Line numbers, compile-error marks and changed-line bars, in the gutter left of the field: only lines
// wholly in view are numbered (a number cut in half reads as another).
void gutter(const RungEdit& r, const Derived& d, ImRect g, ImVec2 origin, float fs, ImRect clip) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(g.Min, g.Max, true);
  const int first = std::max(0, int((clip.Min.y - origin.y) / fs));
  const int last = std::min(int(d.lines.size()), int((clip.Max.y - origin.y) / fs) + 1);
  const ImU32 num = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  for (int i = first; i < last; ++i) {
    const float y = origin.y + float(i) * fs;
    if (y < clip.Min.y - 0.5f || y + fs > clip.Max.y + 0.5f) continue;
    char b[16];
    std::snprintf(b, sizeof b, "%d", i + 1);
    const float w = mono()->CalcTextSizeA(fs, FLT_MAX, 0, b).x;
    const float x = g.Max.x - fs * 1.1f - w;
    const auto m = d.marks.on_line.find(i + 1);
    ImU32 col = num;
    if (m != d.marks.on_line.end()) {
      bool error = false;
      for (size_t k : m->second) error = error || !r.diagnostics[k].warning;
      col = error ? kError : kWarning;
      dl->AddCircleFilled(ImVec2(g.Max.x - fs * 0.55f, y + fs * 0.5f), fs * 0.28f, col);
      if (ImGui::IsMouseHoveringRect(ImVec2(g.Min.x, y), ImVec2(g.Max.x, y + fs))) {
        std::string tip;
        for (size_t k : m->second) tip += (tip.empty() ? "" : "\n") + r.diagnostics[k].text();
        ImGui::SetTooltip("%s", tip.c_str());
      }
    }
    dl->AddText(mono(), fs, ImVec2(x, y), col, b);
    if (d.changed[size_t(i)]) dl->AddRectFilled(ImVec2(g.Max.x - fs * 0.18f, y), ImVec2(g.Max.x, y + fs), kAdded);
  }
  dl->PopClipRect();
}

void edit_field(Editor& e, RungEdit& r, const std::string& rung, const std::vector<std::string>& fns, float height) {
  ImGui::PushFont(mono());
  const float fs = ImGui::GetFontSize();
  const ImGuiStyle& st = ImGui::GetStyle();
  const Derived& d = derive(e, rung, r, fns);  // read before the field: it may change the text under it
  const float gutter_w = std::floor(mono()->CalcTextSizeA(fs, FLT_MAX, 0, "00000").x + fs * 1.3f);
  const ImVec2 g0 = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(gutter_w, height));
  ImGui::SameLine(0, 0);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, ImGui::GetColorU32(ImGuiCol_FrameBg));
  ImGui::BeginChild("##editor", ImVec2(0, height), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PopStyleColor();
  viz::ui_log::place("editor", rung, ImGui::GetWindowPos().x, ImGui::GetWindowPos().y,
                     ImGui::GetWindowPos().x + ImGui::GetWindowSize().x, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y);
  // The field holds the whole text (the child scrolls it both ways), a line's width wider than the
  // longest line and its message beside it.
  float msg_w = 0;
  for (const auto& [line, idx] : d.marks.on_line)
    msg_w = std::max(msg_w, d.widths[size_t(line - 1)] + fs * 2 +
                                mono()->CalcTextSizeA(fs, FLT_MAX, 0, r.diagnostics[idx.front()].message.c_str()).x +
                                fs * 12);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 size(std::max(avail.x, std::max(d.max_width, msg_w) + fs * 2),
                    std::max(avail.y, float(d.lines.size() + 1) * fs + st.FramePadding.y * 2));
  const ImGuiID id = ImGui::GetID("##source_edit");
  g_edit_id = id;
  bool changed = false;
  {
    ImGuiIO& io = ImGui::GetIO();
    if (ImGui::GetActiveID() == id && io.KeyCtrl) {
      if (ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_Z]) && !io.KeyShift) undo(e, rung);
      else if (ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_Y]) || (io.KeyShift && ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_Z])))
        redo(e, rung);
    }
    HiddenKeys hidden;
    hidden.hide(0, io.KeyMap[ImGuiKey_Escape]);
    hidden.hide_cancel();
    if (io.KeyCtrl) {
      hidden.hide(1, io.KeyMap[ImGuiKey_Enter]), hidden.hide(2, io.KeyMap[ImGuiKey_KeyPadEnter]);
      hidden.hide(3, io.KeyMap[ImGuiKey_Z]), hidden.hide(4, io.KeyMap[ImGuiKey_Y]);
    }
    const std::string before = r.text;
    if (e.focus_editor) ImGui::SetKeyboardFocusHere(), e.focus_editor = false;
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(0, 0, 0, 0));
    ImGui::PushStyleColor(ImGuiCol_FrameBg, IM_COL32(0, 0, 0, 0));
    // No horizontal frame padding: Dear ImGui 1.86 makes a multiline field's content its inner width
    // plus that padding, one padding wider than it shows (the child's own padding stands in for it).
    ImGui::PushStyleVar(ImGuiStyleVar_FramePadding, ImVec2(0, st.FramePadding.y));
    FieldData fd{&r.text, &e};
    r.text.reserve(r.text.size() + 1);
    changed = ImGui::InputTextMultiline(
        "##source_edit", r.text.data(), r.text.capacity() + 1, size,
        ImGuiInputTextFlags_AllowTabInput | ImGuiInputTextFlags_CallbackResize | ImGuiInputTextFlags_CallbackAlways |
            ImGuiInputTextFlags_NoHorizontalScroll,
        field_callback, &fd);
    ImGui::PopStyleVar();
    ImGui::PopStyleColor(2);
    r.text.resize(std::strlen(r.text.c_str()));
    if (ImGui::IsItemActivated()) viz::ui_log::event("editor focus " + rung);
    if (changed && r.text != before) record_edit(r, before);
    if (changed) r.version = next_version();
  }
  const ImVec2 origin(ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y + st.FramePadding.y);
  const Derived& now = derive(e, rung, r, fns);
  overlay(e, r, now, origin, fs, id);
  // Follow the caret while typing, and go to a requested line (find, a diagnostic's line).
  const ImRect clip = ImGui::GetCurrentWindow()->ClipRect;
  int line = 0, col = 0;
  const bool forced = e.scroll_to_line > 0;  // re-asserted while the field takes the keyboard
  if (e.scroll_to_line > 0) {
    line = e.scroll_to_line, col = e.scroll_to_col;
    if (--e.scroll_frames <= 0) e.scroll_to_line = 0;
  }
  else if (changed) line = now.starts.empty() ? 1 : line_of(now, size_t(e.cursor)), col = -1;
  if (line > 0 && line <= int(now.lines.size())) {
    const size_t ls = now.starts[size_t(line - 1)];
    const size_t at = col >= 0 ? std::min(now.text.size(), ls + size_t(col)) : std::min(now.text.size(), size_t(std::max(0, e.cursor)));
    const float x = mono()->CalcTextSizeA(fs, FLT_MAX, 0, now.text.data() + ls, now.text.data() + std::max(ls, at)).x;
    const float y = float(line - 1) * fs;
    const float top = origin.y + y, vis_h = clip.GetHeight();
    if (top < clip.Min.y || top + fs > clip.Max.y) ImGui::SetScrollY(std::max(0.0f, y - vis_h * 0.3f));
    else if (forced) ImGui::SetScrollY(ImGui::GetScrollY());
    const float left = origin.x + x;
    if (left < clip.Min.x + fs || left > clip.Max.x - fs * 2) ImGui::SetScrollX(std::max(0.0f, x - clip.GetWidth() * 0.5f));
    else if (forced) ImGui::SetScrollX(ImGui::GetScrollX());
  }
  ImGui::EndChild();
  gutter(r, now, ImRect(g0, ImVec2(g0.x + gutter_w, g0.y + height)), origin, fs, clip);
  ImGui::PopFont();
}

// The rows the diff view shows: indices into `d` of changed lines and of `context` lines around each,
// and -N for a stretch of N unchanged lines left out.
std::vector<int> diff_rows(const std::vector<DiffLine>& d, int context) {
  std::vector<bool> keep(d.size(), false);
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i].kind != DiffLine::Same)
      for (int k = -context; k <= context; ++k)
        if (int(i) + k >= 0 && int(i) + k < int(d.size())) keep[size_t(int(i) + k)] = true;
  std::vector<int> rows;
  for (size_t i = 0; i < d.size();) {
    if (keep[i]) {
      rows.push_back(int(i++));
      continue;
    }
    size_t j = i;
    while (j < d.size() && !keep[j]) ++j;
    rows.push_back(-int(j - i));
    i = j;
  }
  return rows;
}

void diff_view(const RungEdit& r, float height) {
  const std::vector<DiffLine> d = line_diff(r.shipped, r.text);
  const DiffSummary s = summarize(d);
  ImGui::BeginChild("##diff", ImVec2(0, height), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushFont(mono());
  if (s.added == 0 && s.removed == 0) ImGui::TextDisabled("no changes against the shipped source");
  // The changes with three lines of context each; longer unchanged stretches are one line that says so.
  const std::vector<int> rows = diff_rows(d, 3);
  ImGuiListClipper clip;
  clip.Begin(int(rows.size()));
  while (clip.Step())
    for (int k = clip.DisplayStart; k < clip.DisplayEnd; ++k) {
      if (rows[size_t(k)] < 0) {
        ImGui::TextDisabled("          ... %d unchanged line%s", -rows[size_t(k)], rows[size_t(k)] == -1 ? "" : "s");
        continue;
      }
      const DiffLine& l = d[size_t(rows[size_t(k)])];
      char nums[32];
      if (l.kind == DiffLine::Added) std::snprintf(nums, sizeof nums, "    %4d +", l.new_line);
      else if (l.kind == DiffLine::Removed) std::snprintf(nums, sizeof nums, "%4d      -", l.old_line);
      else std::snprintf(nums, sizeof nums, "%4d %4d  ", l.old_line, l.new_line);
      const ImVec2 p = ImGui::GetCursorScreenPos();
      if (l.kind != DiffLine::Same)
        ImGui::GetWindowDrawList()->AddRectFilled(
            p, ImVec2(p.x + ImGui::GetContentRegionAvail().x + 2000.0f, p.y + ImGui::GetTextLineHeightWithSpacing()),
            l.kind == DiffLine::Added ? IM_COL32(30, 90, 40, 160) : IM_COL32(110, 35, 35, 160));
      ImGui::TextDisabled("%s", nums);
      ImGui::SameLine();
      std::string text(l.text);
      if (!text.empty() && text.back() == '\0') text.pop_back();
      if (l.kind == DiffLine::Same) ImGui::TextUnformatted(text.c_str());
      else ImGui::TextColored(ImColor(l.kind == DiffLine::Added ? kAdded : kError), "%s", text.c_str());
    }
  ImGui::PopFont();
  ImGui::EndChild();
}

// Under the editor: each diagnostic (a click goes to its line; a list that would take more than
// `cap` scrolls in its own region) and the status line.
struct Footer {
  float list = 0, status = 0;
};
Footer footer_height(const RungEdit& r, float width, float cap) {
  Footer f;
  const float sp = ImGui::GetStyle().ItemSpacing.y;
  for (const Diagnostic& d : r.diagnostics) f.list += ImGui::CalcTextSize(d.text().c_str(), nullptr, false, width).y + sp;
  if (f.list > cap) f.list = std::floor(cap);
  const std::string status = r.verdict_logged.empty() ? r.status : r.verdict_logged;
  if (!status.empty()) f.status = float(ui::wrap_lines(status, width).size()) * ImGui::GetTextLineHeight() + sp;
  return f;
}

void footer(Editor& e, RungEdit& r, const Derived& d, const std::string& rung, const Footer& size) {
  if (!r.diagnostics.empty()) ImGui::BeginChild("##diagnostics", ImVec2(0, size.list), false);
  for (size_t i = 0; i < r.diagnostics.size(); ++i) {
    const Diagnostic& x = r.diagnostics[i];
    const bool here = x.file.empty() || x.file == edited_file_name(rung);
    const std::string text = (here ? std::string() : x.file + ":") + x.text();
    const float wrap = ImGui::GetContentRegionAvail().x;
    const ImVec2 ts = ImGui::CalcTextSize(text.c_str(), nullptr, false, wrap);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImGui::PushID(int(i));
    if (ImGui::Selectable("##diag", false, 0, ImVec2(0, ts.y)) && x.line >= 1 && x.line <= int(d.lines.size())) {
      e.scroll_to_line = x.line, e.scroll_to_col = std::max(0, x.col - 1), e.scroll_frames = 3;
      const size_t at = d.starts[size_t(x.line - 1)] + size_t(std::max(0, x.col - 1));
      e.select_from = e.select_to = int(at);
      e.focus_editor = true;
    }
    ImGui::PopID();
    ImGui::GetWindowDrawList()->AddText(nullptr, 0.0f, pos, x.warning ? kWarning : kError, text.c_str(), nullptr, wrap);
  }
  if (!r.diagnostics.empty()) ImGui::EndChild();
  const RunVerdict v = run_verdict(r);
  if (!v.text.empty()) ui::wrapped_colored(v.ok ? kOk : kError, v.text);
}

void shortcuts(Editor& e, bool editing) {
  const ImGuiIO& io = ImGui::GetIO();
  if (!editing || !io.KeyCtrl) return;
  // Typing elsewhere: a field other than the editor's has the keyboard, or had it last frame (a panel's
  // input drawn before the pane may have let go of it on this very Enter).
  for (const ImGuiID active : {ImGui::GetActiveID(), GImGui->ActiveIdPreviousFrame})
    if (active != 0 && active != g_edit_id && active != g_find_id) return;
  if (ImGui::IsKeyPressed(70 /* GLFW_KEY_F */, false)) e.find_open = true, e.focus_find = true, e.diff = false;
  if (ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_Enter], false) || ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_KeyPadEnter], false))
    e.run_requested = true;
}

void log_edits(Editor& e, const std::string& rung, const Derived& d) {
  const std::string line = "editor edited " + rung + " +" + std::to_string(d.summary.added) + " -" +
                           std::to_string(d.summary.removed);
  if (line != e.logged) e.logged = line, viz::ui_log::event(line);
}

}  // namespace

void draw_kernel_source(const Panel::SourceFocus& focus) {
  std::string_view text = assets::find("source/" + focus.file);
  while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  if (text.empty()) {
    ui::wrapped("no embedded source for " + focus.file);
    return;
  }
  ui::wrapped_dim("kernels/rungs/" + focus.file + ": the recorded kernel's source in this build, read-only; highlighted: " +
      focus.highlighted);
  const std::vector<std::string_view> lines = split_lines(text);
  const std::vector<bool> lit = stamp_lines(lines, focus.stamps);
  ImGui::BeginChild("kernel-source", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushFont(mono());
  // A new highlight is brought into view, two lines of context above it; the reader's scrolling is kept
  // while it stays.
  static std::string revealed;
  std::string key = focus.file;
  for (const std::string& s : focus.stamps) key += "/" + s;
  if (key != revealed) {
    revealed = key;
    viz::ui_log::event("source " + key);  // "source FILE/PHASE": a driven test's sign that the pane followed
    const auto first = std::find(lit.begin(), lit.end(), true);
    if (first != lit.end())
      ImGui::SetScrollY(std::max(0.0f, float(first - lit.begin() - 2) * ImGui::GetTextLineHeightWithSpacing()));
  }
  draw_numbered(lines, lit);
  ImGui::PopFont();
  ImGui::EndChild();
}

void draw_pane(Editor& e, Panel& panel, const AppContext& ctx, const std::string& file,
               const std::vector<std::string>& functions) {
  const std::string rung = rung_of_file(file);
  RungEdit& r = rung_state(e, rung);
  if (r.text.empty() && r.shipped.empty()) {
    ui::wrapped("no embedded source for " + file);
    return;
  }
  shortcuts(e, e.editing);
  if (!e.editing) {
    view_mode(e, r, rung, file, functions);
    return;
  }
  if (e.run_requested) {
    e.run_requested = false;
    compile_and_run(e, panel, ctx, rung);
  }
  toolbar(e, panel, r, rung);
  const Derived& d = derive(e, rung, r, functions);
  std::string info = file + (r.edited ? ", edited: +" + std::to_string(d.summary.added) + " -" +
                                            std::to_string(d.summary.removed) + " lines against the shipped source, kept until Reset"
                                      : ": the shipped source; edits are kept until Reset");
  ui::wrapped_dim(info);
  if (!r.bug.empty()) ui::wrapped_colored(kWarning, "bug '" + r.bug + "': " + r.bug_sentence);
  if (e.find_open && !e.diff) find_bar(e, derive(e, rung, r, functions));
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float sp = ImGui::GetStyle().ItemSpacing.y;
  const Footer foot = footer_height(r, avail.x - ImGui::GetStyle().ScrollbarSize, std::max(ImGui::GetFontSize() * 2.5f, avail.y * 0.3f));
  const float height = std::floor(std::max(ImGui::GetFontSize() * 6, avail.y - foot.list - foot.status - sp * 2));
  if (e.diff) diff_view(r, height);
  else edit_field(e, r, rung, functions, height);
  const Derived& after = derive(e, rung, r, functions);
  log_edits(e, rung, after);
  footer(e, r, after, rung, foot);
}

}  // namespace kl::app::editor
