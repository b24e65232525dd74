// Helpers for viz tests that draw into the headless host: one full-screen, undecorated ImGui window
// with no padding, so a widget drawn first sits at pixel (0, 0) of the read-back image.
#pragma once
#include <imgui.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace kl::test {

inline void begin_canvas(float w, float h) {
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(w, h));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowBorderSize, 0.0f);
  ImGui::Begin("##canvas", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoMove);
}

inline void end_canvas() {
  ImGui::End();
  ImGui::PopStyleVar(2);
}

struct Rgb {
  int r = 0, g = 0, b = 0;
};

inline Rgb pixel(const std::vector<uint8_t>& rgba, int w, int x, int y) {
  const size_t i = (size_t(y) * size_t(w) + size_t(x)) * 4;
  return {rgba[i], rgba[i + 1], rgba[i + 2]};
}

inline bool near(const Rgb& a, const float c[3], int tol) {
  auto d = [](int v, float f) { return std::abs(v - int(f * 255.0f + 0.5f)); };
  return d(a.r, c[0]) <= tol && d(a.g, c[1]) <= tol && d(a.b, c[2]) <= tol;
}

}  // namespace kl::test
