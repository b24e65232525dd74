#include "app/shell.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "app/editor/editor.h"
#include "app/help.h"
#include "app/ui.h"
#include "assets/embedded.h"
#include "kernels/runtime/errors.h"
#include "viz/data_texture.h"
#include "viz/gl_check.h"
#include "viz/layout_audit.h"
#include "viz/png.h"
#include "viz/render_host.h"
#include "viz/ui_log.h"

namespace kl::app {

int find_panel(const Shell& s, const std::string& id) {
  for (size_t i = 0; i < s.panels.size(); ++i)
    if (s.panels[i]->id() == id) return int(i);
  return -1;
}

std::string panel_ids(const Shell& s) {
  std::string r;
  for (const auto& p : s.panels) r += (r.empty() ? "" : ", ") + p->id();
  return r;
}

namespace {

float g_scale_override = 0;  // --ui-scale (0: none)
constexpr float kViewMinEm = 56, kSourceMinEm = 22;  // widths side by side, in font sizes

float effective_scale(const Shell& s) { return s.ui_scale > 0 ? s.ui_scale : s.base_scale; }

// The sidebar's width: its longest entry where the window allows, else a fifth of the window (the
// entries wrap).
float sidebar_width(const Shell& s, float width) {
  const ImGuiStyle& st = ImGui::GetStyle();
  const float chrome = st.WindowPadding.x * 2 + st.ScrollbarSize + 2;
  // Its controls always fit; the entries fit where the window allows, else they wrap.
  float controls = ImGui::GetFrameHeight() + st.ItemInnerSpacing.x + ImGui::CalcTextSize("Kernel source").x;
  for (const char* b : {"Screenshot (F12)", "Reset parameters", "Undo (Ctrl+Z)"})
    controls = std::max(controls, ImGui::CalcTextSize(b).x + st.FramePadding.x * 2);
  float entries = 0;
  for (const auto& p : s.panels) entries = std::max(entries, ImGui::CalcTextSize(p->title().c_str()).x);
  const float want = std::max(controls, entries) + chrome;
  return std::floor(std::max(controls + chrome, std::min(want, width * 0.2f)));
}

// A selectable entry whose text wraps inside the sidebar.
bool wrapped_selectable(const std::string& text, bool selected) {
  const float wrap = ImGui::GetContentRegionAvail().x;
  const ImVec2 ts = ImGui::CalcTextSize(text.c_str(), nullptr, false, wrap);
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  bool clicked = ImGui::Selectable(("##" + text).c_str(), selected, 0, ImVec2(0, ts.y));
  // Enter opens the entry the keyboard is on, as Space does (Dear ImGui 1.86 reads Enter as "type into").
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsItemFocused() && !io.WantTextInput &&
      (ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_Enter], false) || ImGui::IsKeyPressed(io.KeyMap[ImGuiKey_KeyPadEnter], false)))
    clicked = true;
  ImGui::GetWindowDrawList()->AddText(nullptr, 0.0f, pos, ImGui::GetColorU32(ImGuiCol_Text), text.c_str(), nullptr,
                                      wrap);
  return clicked;
}

// Ctrl+Z outside text fields, and the sidebar's Undo: the newest parameter change goes back, and its
// panel is shown.
void undo_param(Shell& s) {
  std::string owner;
  if (!ui::undo_param_step(&owner)) return;
  const int i = find_panel(s, owner);
  if (i >= 0) s.current = size_t(i);
}

void draw_sidebar(Shell& s, float w, float h) {
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                 ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings;
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(w, h));
  ImGui::Begin("Ladder", nullptr, fixed);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
  ui::wrapped("climb rung by rung");
  ImGui::PopStyleColor();
  ImGui::Separator();
  for (size_t i = 0; i < s.panels.size(); ++i) {
    if (wrapped_selectable(s.panels[i]->title(), s.current == i)) s.current = i;
    viz::ui_log::place("sidebar", s.panels[i]->id(), ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                       ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
  }
  if (wrapped_selectable("Help (F1)", s.help_open)) s.help_open = !s.help_open;
  viz::ui_log::place("sidebar", "help", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x,
                     ImGui::GetItemRectMax().y);
  ImGui::Separator();
  if (ImGui::Button("Screenshot (F12)")) s.screenshot_requested = true;
  if (!s.panels.empty()) {
    Panel& p = *s.panels[s.current];
    if (ImGui::Button("Reset parameters")) ui::reset_params(p.params(), p.id());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("every parameter of %s back to its default (Ctrl+Z undoes it)", p.title().c_str());
    viz::ui_log::place("button", "reset-parameters", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                       ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
  }
  const bool can_undo = !ui::param_history().empty();
  if (!can_undo) ImGui::BeginDisabled();
  if (ImGui::Button("Undo (Ctrl+Z)")) undo_param(s);
  if (!can_undo) ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", can_undo ? ("undo " + ui::param_history().back().owner + ": " + ui::param_history().back().what).c_str()
                                     : "no parameter change to undo");
  ImGui::Checkbox("Kernel source", &s.show_source);
  viz::ui_log::place("checkbox", "source", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                     ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
  ui::wrapped("Ctrl+= / Ctrl+- / Ctrl+0: UI scale " + std::to_string(int(std::lround(viz::ui_scale() * 100))) + "%");
  ImGui::PopStyleColor();
  ImGui::End();
}

// The panel's views, under a mark while they are stale: the edit in the source pane did not compile (or
// was refused), so they still show the last kernel that ran.
void draw_view(Shell& s, Panel& p, const Panel::SourceFocus& focus) {
  if (!focus.file.empty() && !focus.read_only) {  // a read-only kernel is not the one the editor holds
    const std::string why = editor::stale_reason(s.editor, editor::rung_of_file(focus.file));
    static std::string logged;
    if (why != logged) viz::ui_log::event(why.empty() ? "stale cleared " + p.id() : "stale " + p.id() + ": " + why), logged = why;
    if (!why.empty()) {
      ui::wrapped_colored(IM_COL32(242, 204, 102, 255), "Stale: " + why);
      viz::ui_log::place("stale", p.id(), ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x,
                         ImGui::GetItemRectMax().y);
    }
  }
  ui::begin_frame_verdicts();
  p.draw(s.ctx);
}

// The view and the source pane split by a bar the user drags (double click: hide the source): side
// by side where both have room, the source under the view where they have not.
void draw_split(Shell& s, Panel& p, const Panel::SourceFocus& focus) {
  const float em = ImGui::GetFontSize(), bar = std::max(6.0f, std::floor(em * 0.4f));
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // Side by side only where the view keeps the width the panels are laid out for (about 900 px at
  // scale 1); else the source goes under the view, and where the window is too low for both, the
  // view alone (the sidebar's "Kernel source" box shows that the pane is asked for).
  const bool side = avail.x >= kViewMinEm * em + kSourceMinEm * em + bar;
  // In edit mode the editor gets room first: under a shorter view, or alone where even that has none.
  const bool editing = s.editor.editing && s.show_source && !focus.file.empty() && !focus.read_only;
  const bool below = !side && avail.y >= (editing ? 20 : 30) * em;
  const bool split = s.show_source && !focus.file.empty() && (side || below);
  if (!split && editing) {
    ImGui::BeginChild("code", ImVec2(0, 0), false);
    editor::draw_pane(s.editor, p, s.ctx, focus.file, focus.functions);
    ImGui::EndChild();
    return;
  }
  if (!split) {
    ImGui::BeginChild("view", ImVec2(0, 0), false);
    draw_view(s, p, focus);
    ImGui::EndChild();
    return;
  }
  const float total = side ? avail.x : avail.y;
  const float min_src = side ? kSourceMinEm * em : 8 * em, min_view = side ? kViewMinEm * em : (editing ? 10 : 20) * em;
  float& frac = editing ? s.editor.frac : s.source_frac;  // the editor has its own share (it wants more room)
  const float src = std::floor(std::clamp(total * frac, min_src, total - min_view - bar));
  const ImVec2 view_size = side ? ImVec2(avail.x - src - bar, 0) : ImVec2(0, avail.y - src - bar);
  ImGui::BeginChild("view", view_size, false);
  draw_view(s, p, focus);
  ImGui::EndChild();
  if (side) ImGui::SameLine(0, 0);
  const ImVec2 b0 = ImGui::GetCursorScreenPos();
  const ImVec2 bsz = side ? ImVec2(bar, avail.y) : ImVec2(avail.x, bar);
  ImGui::InvisibleButton("##source_splitter", bsz);
  const bool hot = ImGui::IsItemHovered() || ImGui::IsItemActive();
  if (hot) ImGui::SetMouseCursor(side ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
  if (ImGui::IsItemActive()) {
    const float d = side ? ImGui::GetIO().MouseDelta.x : ImGui::GetIO().MouseDelta.y;
    frac = std::clamp((src - d) / total, 0.1f, 0.9f);
  }
  if (ImGui::IsItemHovered() && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) s.show_source = false;
  const ImU32 col = ImGui::GetColorU32(hot ? ImGuiCol_SeparatorHovered : ImGuiCol_Separator);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (side) dl->AddLine(ImVec2(b0.x + bar * 0.5f, b0.y), ImVec2(b0.x + bar * 0.5f, b0.y + bsz.y), col, 2.0f);
  else dl->AddLine(ImVec2(b0.x, b0.y + bar * 0.5f), ImVec2(b0.x + bsz.x, b0.y + bar * 0.5f), col, 2.0f);
  if (side) ImGui::SameLine(0, 0);
  ImGui::BeginChild("code", ImVec2(0, 0), false);
  viz::ui_log::place("pane", "source", ImGui::GetWindowPos().x, ImGui::GetWindowPos().y,
                     ImGui::GetWindowPos().x + ImGui::GetWindowSize().x, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y);
  if (focus.read_only) editor::draw_kernel_source(focus);
  else editor::draw_pane(s.editor, p, s.ctx, focus.file, focus.functions);  // the source, read-only or in the editor
  ImGui::EndChild();
}

void draw_panel(Shell& s, float x, float w, float h) {
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                 ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse;
  Panel& p = *s.panels[s.current];
  ImGui::SetNextWindowPos(ImVec2(x, 0));
  ImGui::SetNextWindowSize(ImVec2(w, h));
  ImGui::Begin(p.title().c_str(), nullptr, fixed);
  const Panel::SourceFocus focus = p.source_focus();
  const int depth = GImGui->CurrentWindowStack.Size;
  ui::set_log_panel(p.id());
  try {
    draw_split(s, p, focus);
  } catch (const std::exception& e) {
    // A failure inside a panel is shown, never fatal; the next parameter change tries again. The
    // panel may have left child windows, IDs, colours or styles pushed: unwind them to its window.
    while (GImGui->CurrentWindowStack.Size > depth) {
      ImGui::ErrorCheckEndWindowRecover(nullptr);
      if (GImGui->CurrentWindow->Flags & ImGuiWindowFlags_ChildWindow) ImGui::EndChild();
      else ImGui::End();
    }
    ImGui::ErrorCheckEndWindowRecover(nullptr);
    s.failures++;
    ui::error_box(ui::error_text(e));  // std::bad_alloc becomes the memory refusal with bytes available
  }
  ImGui::End();
}

// The status bar's pieces, in order: the backend and why, the GL renderer, the frame time, the
// interop path, a texture that read back other values than its data, GL errors, and the last message
// (where the screenshot went). It is one line at any width: where they do not all fit, the least needed are
// left out (hovering the bar lists them all), and a message too long even alone is shortened in its middle
// (a path keeps its file name).
struct Piece {
  ImU32 color;
  std::string text;
  int keep = 0;  // shortened last where higher
  bool middle = false;
  std::string full;
};
std::vector<Piece> status_pieces(const Shell& s) {
  std::vector<Piece> v;
  const bool cuda = s.ctx.backend.backend == Backend::Cuda;
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  v.push_back({cuda ? IM_COL32(128, 230, 128, 255) : IM_COL32(242, 204, 102, 255), s.ctx.backend.reason, 3});
  v.push_back({dim, s.host_kind + ": " + s.gl_renderer, 0});
  char b[64];
  std::snprintf(b, sizeof b, "frame %.1f ms", s.frame_ms);
  v.push_back({dim, b, 2});
  v.push_back({dim, viz::DataTexture::last_interop_status(), 1});
  if (!viz::DataTexture::write_problem().empty())  // a texture read back other values than its data
    v.push_back({IM_COL32(255, 115, 102, 255), viz::DataTexture::write_problem(), 4});
  if (viz::gl_error_count())
    v.push_back({IM_COL32(255, 115, 102, 255), "GL errors: " + std::to_string(viz::gl_error_count()) +
                                                   " (first: " + viz::gl_first_error() + ")", 4});
  if (!s.message.empty()) v.push_back({ImGui::GetColorU32(ImGuiCol_Text), s.message, 5, true});
  for (Piece& p : v) p.full = p.text;
  return v;
}

// `text` cut to `width` with an ellipsis at its end or in its middle (never inside a UTF-8 sequence).
std::string elide(const std::string& text, float width, bool middle) {
  static const std::string dots = "\xE2\x80\xA6";
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  auto boundary = [&](size_t i) { return i >= text.size() || (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80; };
  std::string best = dots;
  for (size_t keep = 1; keep < text.size(); ++keep) {
    std::string t;
    if (middle) {
      size_t head = keep / 3, tail = keep - head;
      while (head > 0 && !boundary(head)) --head;
      size_t from = text.size() - tail;
      while (from < text.size() && !boundary(from)) ++from;
      t = text.substr(0, head) + dots + text.substr(from);
    } else {
      size_t n = keep;
      while (n > 0 && !boundary(n)) --n;
      t = text.substr(0, n) + dots;
    }
    if (ImGui::CalcTextSize(t.c_str()).x > width) break;
    best = t;
  }
  return best;
}

// The pieces that fit on one line of `width`: the least needed are left out first (the status bar's
// tooltip lists them all); a last piece still too wide is shortened.
std::vector<Piece> fit_one_line(std::vector<Piece> v, float width) {
  const float gap = ImGui::GetFontSize() * 1.5f;
  auto total = [&] {
    float t = 0;
    for (size_t i = 0; i < v.size(); ++i) t += (i ? gap : 0) + ImGui::CalcTextSize(v[i].text.c_str()).x;
    return t;
  };
  while (v.size() > 1 && total() > width) {
    size_t least = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i].keep < v[least].keep) least = i;
    v.erase(v.begin() + long(least));
  }
  if (!v.empty() && total() > width) v[0].text = elide(v[0].text, width, v[0].middle);
  return v;
}

float status_height() {
  const ImGuiStyle& st = ImGui::GetStyle();
  return std::floor(ImGui::GetTextLineHeight() + st.WindowPadding.y * 2);
}

void draw_status(const Shell& s, float width, float height, float status_h) {
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar |
                                 ImGuiWindowFlags_NoScrollbar;
  ImGui::SetNextWindowPos(ImVec2(0, height - status_h));
  ImGui::SetNextWindowSize(ImVec2(width, status_h));
  ImGui::Begin("##status", nullptr, fixed);
  const std::vector<Piece> all = status_pieces(s);
  const std::vector<Piece> v = fit_one_line(all, ImGui::GetContentRegionAvail().x);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
    ImGui::PushStyleColor(ImGuiCol_Text, v[i].color);
    ImGui::TextUnformatted(v[i].text.c_str());
    ImGui::PopStyleColor();
  }
  if (ImGui::IsWindowHovered() && (v.size() < all.size() || (!v.empty() && v[0].text != v[0].full))) {
    std::string tip;
    for (const Piece& p : all) tip += (tip.empty() ? "" : "\n") + p.full;
    ImGui::SetTooltip("%s", tip.c_str());
  }
  viz::ui_log::place("status", "bar", ImGui::GetWindowPos().x, ImGui::GetWindowPos().y,
                     ImGui::GetWindowPos().x + ImGui::GetWindowSize().x, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y);
  ImGui::End();
}

// Ctrl+= / Ctrl+- / Ctrl+0 (and the keypad's + - 0): the UI scale in steps of 25 %, back to the
// monitor's. GLFW key codes: Dear ImGui 1.86 indexes keys by the GLFW backend's codes.
// One step per press, never a key repeat: the frame after a step rebuilds the fonts, and on a slow
// machine that frame alone outlasts the repeat delay, so a quick tap would read as held and step twice.
void scale_keys(Shell& s) {
  const ImGuiIO& io = ImGui::GetIO();
  if (!io.KeyCtrl) return;
  const float cur = effective_scale(s);
  float next = cur;
  if (ImGui::IsKeyPressed(61 /* = */, false) || ImGui::IsKeyPressed(334 /* KP + */, false)) next = cur + 0.25f;
  if (ImGui::IsKeyPressed(45 /* - */, false) || ImGui::IsKeyPressed(333 /* KP - */, false)) next = cur - 0.25f;
  if (ImGui::IsKeyPressed(48 /* 0 */, false) || ImGui::IsKeyPressed(320 /* KP 0 */, false)) {
    s.ui_scale = 0;
    next = s.base_scale;
  } else if (next != cur) {
    next = std::clamp(std::round(next * 4.0f) / 4.0f, viz::kMinUiScale, viz::kMaxUiScale);
    s.ui_scale = next;
  }
  if (next != viz::ui_scale()) {
    viz::set_ui_scale(next);  // fonts are rebuilt before the next frame
    char b[32];
    std::snprintf(b, sizeof b, "scale %.2f", double(next));
    viz::ui_log::event(b);
  }
}

}  // namespace

void set_window_scale_override(float scale) { g_scale_override = scale; }

void show_message(Shell& s, const std::string& text, double seconds) {
  s.message = text;
  s.message_until = ImGui::GetCurrentContext() ? ImGui::GetTime() + seconds : seconds;
  viz::ui_log::event("status " + text);
}

std::string next_screenshot_name(const std::string& id) {
  const std::string prefix = "kernel-ladder-" + id + "-";
  long n = 0;
  if (DIR* d = ::opendir(".")) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() <= prefix.size() + 4 || name.rfind(prefix, 0) != 0 || name.substr(name.size() - 4) != ".png") continue;
      const std::string mid = name.substr(prefix.size(), name.size() - prefix.size() - 4);
      if (mid.empty() || mid.size() > 9 || mid.find_first_not_of("0123456789") != std::string::npos) continue;
      n = std::max(n, std::atol(mid.c_str()));
    }
    ::closedir(d);
  }
  std::string file;
  struct stat st {};
  do file = prefix + std::to_string(++n) + ".png";
  while (::stat(file.c_str(), &st) == 0);
  return file;
}

void window_start(Shell& s, viz::RenderHost& host) {
  if (viz::ui_log::is_open()) viz::audit::set_enabled(true);
  s.scale_fixed = g_scale_override > 0;
  s.base_scale = s.scale_fixed ? g_scale_override : std::clamp(host.content_scale(), viz::kMinUiScale, viz::kMaxUiScale);
  if (s.scale_fixed) s.remembered_scale = s.ui_scale, s.ui_scale = 0;
  viz::set_ui_scale(effective_scale(s));
  char b[32];
  std::snprintf(b, sizeof b, "scale %.2f", double(effective_scale(s)));
  viz::ui_log::event(b);
  if (s.win_w > 0 && s.win_h > 0) host.set_geometry(s.win_x, s.win_y, s.win_w, s.win_h);
}

namespace {
// What the frame drew, as a number (FNV-1a over every draw list's vertices, indices and commands, the
// status bar's aside: its frame time changes every frame).
uint64_t frame_hash() {
  const ImDrawData* dd = ImGui::GetDrawData();
  if (!dd || !dd->Valid) return 0;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  };
  for (int i = 0; i < dd->CmdListsCount; ++i) {
    const ImDrawList* dl = dd->CmdLists[i];
    if (dl->_OwnerName && std::strncmp(dl->_OwnerName, "##status", 8) == 0) continue;
    mix(dl->VtxBuffer.Data, size_t(dl->VtxBuffer.Size) * sizeof(ImDrawVert));
    mix(dl->IdxBuffer.Data, size_t(dl->IdxBuffer.Size) * sizeof(ImDrawIdx));
    for (const ImDrawCmd& c : dl->CmdBuffer) {
      mix(&c.ClipRect, sizeof c.ClipRect);
      mix(&c.TextureId, sizeof c.TextureId);
      mix(&c.ElemCount, sizeof c.ElemCount);
    }
  }
  return h;
}

// F12: the frame just shown, as a PNG under the next free name in the working folder.
void save_screenshot(Shell& s, viz::RenderHost& host, long* shots) {
  s.screenshot_requested = false;
  std::vector<uint8_t> rgba;
  int pw = 0, ph = 0;
  try {
    const std::string file = next_screenshot_name(s.panels[s.current]->id());
    if (!host.read_pixels(rgba, pw, ph)) throw RuntimeError("the frame could not be read back");
    viz::write_png(file, rgba, pw, ph);
    ++*shots;
    char* abs = ::realpath(file.c_str(), nullptr);
    const std::string where = abs ? abs : file;
    std::free(abs);
    viz::ui_log::event("screenshot " + where);
    show_message(s, "screenshot saved to " + where);
  } catch (const std::exception& e) {
    viz::ui_log::event("screenshot failed: " + std::string(e.what()));
    show_message(s, std::string("screenshot not saved: ") + e.what(), 20.0);
  }
}
}  // namespace

void window_after_frame(Shell& s, viz::RenderHost& host, long* shots) {
  if (s.current != s.logged_panel && s.current < s.panels.size()) {
    s.logged_panel = s.current;
    viz::ui_log::event("panel " + s.panels[s.current]->id());
  }
  if (s.show_source != s.logged_source) {
    s.logged_source = s.show_source;
    viz::ui_log::event(s.show_source ? "source shown" : "source hidden");
  }
  if (host.width() != s.logged_w || host.height() != s.logged_h) {
    s.logged_w = host.width(), s.logged_h = host.height();
    viz::ui_log::event("size " + std::to_string(s.logged_w) + "x" + std::to_string(s.logged_h));
  }
  int x = 0, y = 0, w = 0, h = 0;
  if (host.geometry(&x, &y, &w, &h) && w > 0 && h > 0) s.win_x = x, s.win_y = y, s.win_w = w, s.win_h = h;
  if (s.quit_requested) host.request_close(), s.quit_requested = false;
  if (viz::ui_log::is_open()) {
    // With the event log on, the window audits its own layout: each change of findings is logged.
    std::string found;
    for (const std::string& f : viz::audit::collect(s.panels[s.current]->id())) found += "audit " + f + "\n";
    // A tooltip is logged once its text is the same two frames running: in its first frame it is drawn at
    // the last tooltip's size, and what falls outside is clipped ("P[row 64, key 32] =" without its value).
    const std::string& tip = viz::audit::tooltip_text();
    if (tip == s.seen_tooltip && tip != s.logged_tooltip) {
      s.logged_tooltip = tip;
      if (!tip.empty()) viz::ui_log::event("tooltip " + tip);
    }
    if (tip != s.seen_tooltip) s.seen_tooltip = tip, ui::keep_drawing(0);
    if (found.empty()) found = "audit clean\n";
    if (found != s.logged_audit) {
      s.logged_audit = found;
      found.pop_back();
      viz::ui_log::event(found);
    }
  }
  if (s.screenshot_requested) save_screenshot(s, host, shots);
  // How long the window may sleep before the next frame: not at all while something animates, for
  // a few frames at the start, or where --frames counts frames; else until input or the soonest
  // frame asked for (a message that expires, the caret's blink while a field has the keyboard).
  double within = ui::next_frame_within();
  // A frame unlike the one before: the layout may not have settled yet (a table's columns, a child's
  // scroll range take a frame or two), or something moves: draw the next one at once.
  const uint64_t drawn = frame_hash();
  if (drawn != s.frame_hash) within = 0;
  s.frame_hash = drawn;
  if (!s.message.empty()) within = within < 0 ? std::max(0.0, s.message_until - ImGui::GetTime())
                                              : std::min(within, std::max(0.0, s.message_until - ImGui::GetTime()));
  if (ImGui::GetIO().WantTextInput) within = within < 0 ? 0.4 : std::min(within, 0.4);
  if (!s.idle_waits || s.ctx.frame < 10) within = 0;
  host.wait_before_next_frame(within);
  s.frame_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count() -
               s.frame_start;
}

namespace {

// Keys for a presenter (the help and the README list them): F2 the source pane, Ctrl+B the sidebar (a status
// line says how to bring it back), Ctrl+PageDown / Ctrl+PageUp the next / previous rung. Not while a text
// field has the keyboard.
void presenter_keys(Shell& s) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  if (ImGui::IsKeyPressed(291 /* F2 */, false)) s.show_source = !s.show_source;
  if (!io.KeyCtrl) return;
  if (ImGui::IsKeyPressed(66 /* B */, false)) {
    s.sidebar = !s.sidebar;
    viz::ui_log::event(s.sidebar ? "sidebar shown" : "sidebar hidden");
    if (!s.sidebar) show_message(s, "sidebar hidden: Ctrl+B brings it back", 8);
  }
  const size_t n = s.panels.size();
  if (n == 0) return;
  if (ImGui::IsKeyPressed(267 /* Page Down */, true)) s.current = (s.current + 1) % n;
  if (ImGui::IsKeyPressed(266 /* Page Up */, true)) s.current = (s.current + n - 1) % n;
}

}  // namespace

void draw_shell(Shell& s, float width, float height) {
  s.frame_start = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (!s.message.empty() && ImGui::GetTime() >= s.message_until) {
    s.message.clear();
    viz::ui_log::event("status cleared");
  }
  const float status_h = status_height();
  const float sidebar_w = s.sidebar ? sidebar_width(s, width) : 0.0f;
  if (s.sidebar) draw_sidebar(s, sidebar_w, height - status_h);
  // GLFW key codes: Dear ImGui 1.86 indexes keys by the GLFW backend's codes.
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsKeyPressed(301 /* F12 */, false)) s.screenshot_requested = true;
  if (ImGui::IsKeyPressed(290 /* F1 */, false)) s.help_open = !s.help_open;
  if (io.KeyCtrl && ImGui::IsKeyPressed(81 /* Q */, false)) s.quit_requested = true;
  // Ctrl+Z undoes a parameter change wherever no text field has the keyboard (the editor's is its own).
  if (io.KeyCtrl && !io.KeyShift && !io.WantTextInput && ImGui::IsKeyPressed(90 /* Z */, false)) undo_param(s);
  presenter_keys(s);
  if (viz::ui_log::is_open()) viz::audit::clear();  // the window's audit (see window_after_frame)
  scale_keys(s);
  if (!s.panels.empty()) draw_panel(s, sidebar_w, width - sidebar_w, height - status_h);
  draw_status(s, width, height, status_h);
  draw_help(s, width, height);
  s.ctx.frame++;
}

}  // namespace kl::app
