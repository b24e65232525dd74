#include "app/shell.h"

#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>

#include "app/ui.h"
#include "assets/embedded.h"
#include "kernels/runtime/errors.h"
#include "viz/data_texture.h"
#include "viz/gl_check.h"
#include "viz/render_host.h"

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

// The panel's kernel source, with the lines of the functions the view is about highlighted: from the
// line that names the function to the next line that closes a top-level block.
void draw_source(const Panel::SourceFocus& f) {
  const std::string_view text = assets::find("source/" + f.file);
  if (text.empty()) {
    ImGui::TextDisabled("no embedded source for %s", f.file.c_str());
    return;
  }
  ImGui::TextDisabled("kernels/%s, embedded at build time; highlighted: the code this view draws", f.file.c_str());
  ImGui::BeginChild("source", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  if (viz::font_mono()) ImGui::PushFont(viz::font_mono());
  bool inside = false;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(pos, end - pos));
    if (!line.empty() && line.back() == '\0') line.pop_back();
    ++line_no;
    bool starts = false;
    for (const std::string& fn : f.functions)
      starts = starts || (line.find(fn + "(") != std::string::npos && line.find(';') == std::string::npos);
    if (starts) inside = true;
    if (inside) {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled(
          p, ImVec2(p.x + ImGui::GetContentRegionAvail().x + 2000.0f, p.y + ImGui::GetTextLineHeightWithSpacing()),
          IM_COL32(70, 70, 20, 160));
    }
    ImGui::TextDisabled("%4d", line_no);
    ImGui::SameLine();
    ImGui::TextUnformatted(line.c_str());
    if (inside && line == "}") inside = false;
    pos = end + 1;
  }
  if (viz::font_mono()) ImGui::PopFont();
  ImGui::EndChild();
}

}  // namespace

void draw_shell(Shell& s, float width, float height) {
  const float status_h = ImGui::GetFrameHeight() + 8.0f;
  const float sidebar_w = s.sidebar ? 210.0f : 0.0f;
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                 ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings;

  if (s.sidebar) {
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(sidebar_w, height - status_h));
    ImGui::Begin("Ladder", nullptr, fixed);
    ImGui::TextDisabled("climb rung by rung");
    ImGui::Separator();
    for (size_t i = 0; i < s.panels.size(); ++i)
      if (ImGui::Selectable(s.panels[i]->title().c_str(), s.current == i)) s.current = i;
    ImGui::Separator();
    if (ImGui::Button("Screenshot (F12)")) s.screenshot_requested = true;
    ImGui::Checkbox("Kernel source", &s.show_source);
    if (!s.message.empty()) {
      ImGui::PushTextWrapPos(0);
      ImGui::TextDisabled("%s", s.message.c_str());
      ImGui::PopTextWrapPos();
    }
    ImGui::End();
  }
  if (ImGui::IsKeyPressed(301 /* GLFW_KEY_F12: Dear ImGui 1.86 indexes keys by the GLFW backend's codes */, false))
    s.screenshot_requested = true;

  if (!s.panels.empty()) {
    Panel& p = *s.panels[s.current];
    ImGui::SetNextWindowPos(ImVec2(sidebar_w, 0));
    ImGui::SetNextWindowSize(ImVec2(width - sidebar_w, height - status_h));
    ImGui::Begin(p.title().c_str(), nullptr, fixed);
    const Panel::SourceFocus focus = p.source_focus();
    const bool split = s.show_source && !focus.file.empty() && width - sidebar_w > 1100.0f;
    if (split) ImGui::BeginChild("view", ImVec2((width - sidebar_w) * 0.62f, 0), false);
    const int depth = GImGui->CurrentWindowStack.Size;
    try {
      p.draw(s.ctx);
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
    if (split) {
      ImGui::EndChild();
      ImGui::SameLine();
      ImGui::BeginChild("code", ImVec2(0, 0), false);
      draw_source(focus);
      ImGui::EndChild();
    }
    ImGui::End();
  }

  ImGui::SetNextWindowPos(ImVec2(0, height - status_h));
  ImGui::SetNextWindowSize(ImVec2(width, status_h));
  ImGui::Begin("##status", nullptr, fixed | ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar);
  const bool cuda = s.ctx.backend.backend == Backend::Cuda;
  ImGui::TextColored(cuda ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(0.95f, 0.8f, 0.4f, 1), "%s",
                     s.ctx.backend.reason.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("|  %s: %s", s.host_kind.c_str(), s.gl_renderer.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("|  %.1f ms/frame (%.0f fps)", 1000.0f / std::max(ImGui::GetIO().Framerate, 1e-3f),
                      ImGui::GetIO().Framerate);
  ImGui::SameLine();
  ImGui::TextDisabled("|  %s", viz::DataTexture::last_interop_status().c_str());
  if (viz::gl_error_count()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "|  GL errors: %d (first: %s)", viz::gl_error_count(),
                       viz::gl_first_error().c_str());
  }
  ImGui::End();
  s.ctx.frame++;
}

}  // namespace kl::app
