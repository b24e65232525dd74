#include "app/shell.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/editor/editor.h"
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
  const float controls = std::max(ImGui::CalcTextSize("Screenshot (F12)").x + st.FramePadding.x * 2,
                                  ImGui::GetFrameHeight() + st.ItemInnerSpacing.x + ImGui::CalcTextSize("Kernel source").x);
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
  const bool clicked = ImGui::Selectable(("##" + text).c_str(), selected, 0, ImVec2(0, ts.y));
  ImGui::GetWindowDrawList()->AddText(nullptr, 0.0f, pos, ImGui::GetColorU32(ImGuiCol_Text), text.c_str(), nullptr,
                                      wrap);
  return clicked;
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
  ImGui::Separator();
  if (ImGui::Button("Screenshot (F12)")) s.screenshot_requested = true;
  ImGui::Checkbox("Kernel source", &s.show_source);
  viz::ui_log::place("checkbox", "source", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                     ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetColorU32(ImGuiCol_TextDisabled));
  ui::wrapped("Ctrl+= / Ctrl+- / Ctrl+0: UI scale " + std::to_string(int(std::lround(viz::ui_scale() * 100))) + "%");
  ImGui::PopStyleColor();
  ImGui::End();
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
  const bool editing = s.editor.editing && s.show_source && !focus.file.empty();
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
    p.draw(s.ctx);
    ImGui::EndChild();
    return;
  }
  const float total = side ? avail.x : avail.y;
  const float min_src = side ? kSourceMinEm * em : 8 * em, min_view = side ? kViewMinEm * em : (editing ? 10 : 20) * em;
  float& frac = editing ? s.editor.frac : s.source_frac;  // the editor has its own share (it wants more room)
  const float src = std::floor(std::clamp(total * frac, min_src, total - min_view - bar));
  const ImVec2 view_size = side ? ImVec2(avail.x - src - bar, 0) : ImVec2(0, avail.y - src - bar);
  ImGui::BeginChild("view", view_size, false);
  p.draw(s.ctx);
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
  editor::draw_pane(s.editor, p, s.ctx, focus.file, focus.functions);  // the source, read-only or in the editor
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
// (where the screenshot went).
struct Piece {
  ImU32 color;
  std::string text;
};
std::vector<Piece> status_pieces(const Shell& s) {
  std::vector<Piece> v;
  const bool cuda = s.ctx.backend.backend == Backend::Cuda;
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  v.push_back({cuda ? IM_COL32(128, 230, 128, 255) : IM_COL32(242, 204, 102, 255), s.ctx.backend.reason});
  v.push_back({dim, s.host_kind + ": " + s.gl_renderer});
  char b[64];
  std::snprintf(b, sizeof b, "%.1f ms/frame (%.0f fps)", 1000.0f / std::max(ImGui::GetIO().Framerate, 1e-3f),
                ImGui::GetIO().Framerate);
  v.push_back({dim, b});
  v.push_back({dim, viz::DataTexture::last_interop_status()});
  if (!viz::DataTexture::write_problem().empty())  // a texture read back other values than its data
    v.push_back({IM_COL32(255, 115, 102, 255), viz::DataTexture::write_problem()});
  if (viz::gl_error_count())
    v.push_back({IM_COL32(255, 115, 102, 255), "GL errors: " + std::to_string(viz::gl_error_count()) +
                                                   " (first: " + viz::gl_first_error() + ")"});
  if (!s.message.empty()) v.push_back({ImGui::GetColorU32(ImGuiCol_Text), s.message});
  return v;
}

// Lines the pieces take at `width`, each piece whole on its line where it fits, wrapped where not.
int layout_lines(const std::vector<Piece>& v, float width, std::vector<bool>* breaks) {
  const float gap = ImGui::GetFontSize() * 1.5f;
  float x = 0;
  int lines = 1;
  for (size_t i = 0; i < v.size(); ++i) {
    const float w = ImGui::CalcTextSize(v[i].text.c_str()).x;
    const bool brk = i > 0 && x + gap + w > width;
    if (breaks) breaks->push_back(brk);
    if (brk) ++lines, x = 0;
    x += (x > 0 ? gap : 0) + std::min(w, width);
    if (w > width) lines += int(w / width), x = width;
  }
  return lines;
}

float status_height(const Shell& s, float width) {
  const ImGuiStyle& st = ImGui::GetStyle();
  const int lines = layout_lines(status_pieces(s), width - st.WindowPadding.x * 2, nullptr);
  return std::floor(lines * ImGui::GetTextLineHeightWithSpacing() - st.ItemSpacing.y + st.WindowPadding.y * 2);
}

void draw_status(const Shell& s, float width, float height, float status_h) {
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar |
                                 ImGuiWindowFlags_NoScrollbar;
  ImGui::SetNextWindowPos(ImVec2(0, height - status_h));
  ImGui::SetNextWindowSize(ImVec2(width, status_h));
  ImGui::Begin("##status", nullptr, fixed);
  const std::vector<Piece> v = status_pieces(s);
  std::vector<bool> breaks;
  layout_lines(v, ImGui::GetContentRegionAvail().x, &breaks);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0 && !breaks[i]) ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
    ui::wrapped_colored(v[i].color, v[i].text);
  }
  ImGui::End();
}

// Ctrl+= / Ctrl+- / Ctrl+0 (and the keypad's + - 0): the UI scale in steps of 25 %, back to the
// monitor's. GLFW key codes: Dear ImGui 1.86 indexes keys by the GLFW backend's codes.
void scale_keys(Shell& s) {
  const ImGuiIO& io = ImGui::GetIO();
  if (!io.KeyCtrl) return;
  const float cur = effective_scale(s);
  float next = cur;
  if (ImGui::IsKeyPressed(61 /* = */) || ImGui::IsKeyPressed(334 /* KP + */)) next = cur + 0.25f;
  if (ImGui::IsKeyPressed(45 /* - */) || ImGui::IsKeyPressed(333 /* KP - */)) next = cur - 0.25f;
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
    if (found.empty()) found = "audit clean\n";
    if (found != s.logged_audit) {
      s.logged_audit = found;
      found.pop_back();
      viz::ui_log::event(found);
    }
  }
  if (!s.screenshot_requested) return;
  s.screenshot_requested = false;
  std::vector<uint8_t> rgba;
  int pw = 0, ph = 0;
  const std::string file = "kernel-ladder-" + s.panels[s.current]->id() + "-" + std::to_string(++*shots) + ".png";
  try {
    if (!host.read_pixels(rgba, pw, ph)) throw RuntimeError("the frame could not be read back");
    viz::write_png(file, rgba, pw, ph);
    char* abs = ::realpath(file.c_str(), nullptr);
    const std::string where = abs ? abs : file;
    std::free(abs);
    s.message = "screenshot saved to " + where;
    viz::ui_log::event("screenshot " + where);
    viz::ui_log::event("status " + s.message);
  } catch (const std::exception& e) {
    s.message = std::string("screenshot not saved: ") + e.what();
    viz::ui_log::event("screenshot failed: " + std::string(e.what()));
  }
}

void draw_shell(Shell& s, float width, float height) {
  const float status_h = status_height(s, width);
  const float sidebar_w = s.sidebar ? sidebar_width(s, width) : 0.0f;
  if (s.sidebar) draw_sidebar(s, sidebar_w, height - status_h);
  if (ImGui::IsKeyPressed(301 /* GLFW_KEY_F12: Dear ImGui 1.86 indexes keys by the GLFW backend's codes */, false))
    s.screenshot_requested = true;
  if (ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed(81 /* GLFW_KEY_Q */, false)) s.quit_requested = true;
  if (viz::ui_log::is_open()) viz::audit::clear();  // the window's audit (see window_after_frame)
  scale_keys(s);
  if (!s.panels.empty()) draw_panel(s, sidebar_w, width - sidebar_w, height - status_h);
  draw_status(s, width, height, status_h);
  s.ctx.frame++;
}

}  // namespace kl::app
