#include "app/shell.h"

#include <imgui.h>

#include <algorithm>

#include "kernels/errors.h"
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
    try {
      p.draw(s.ctx);
    } catch (const std::exception& e) {
      // A failure inside a panel is shown, never fatal; the next parameter change tries again.
      ImGui::TextColored(ImVec4(1, 0.45f, 0.4f, 1), "%s", e.what());
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
