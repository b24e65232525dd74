// What both render hosts share: the ImGui context, a dark style, the embedded fonts, GL_RENDERER.
#include <epoxy/gl.h>
#include <imgui.h>
#include <backends/imgui_impl_opengl3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "assets/embedded.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/startup_trace.h"
#include "viz/host_common.h"
#include "viz/render_host.h"

namespace kl::viz {
namespace {

// [SECTION] Fonts ------------------------------------------------------------------------------------
ImFont* g_regular = nullptr;
ImFont* g_mono = nullptr;
ImFont* g_large = nullptr;
std::string g_ini_path;  // ImGui keeps the pointer, so it must outlive the context
float g_scale = 1.0f;          // the scale the fonts and style are built at
float g_pending_scale = 1.0f;  // the scale asked for; applied between frames

// Latin-1, Greek (sigma, alpha), general punctuation (em dash, ellipsis), super/subscripts, arrows,
// mathematical operators (<=, x, infinity) and box drawing: what the panels' texts use.
const ImWchar kGlyphRanges[] = {
    0x0020, 0x00FF, 0x0370, 0x03FF, 0x2000, 0x206F, 0x2070, 0x209F,
    0x2190, 0x21FF, 0x2200, 0x22FF, 0x2500, 0x257F, 0x25A0, 0x25FF, 0,
};

ImFont* add_font(const char* asset, float size_px) {
  std::string_view bytes = assets::find(asset);
  if (bytes.size() < 2) throw RuntimeError(std::string("embedded font missing: ") + asset);
  ImFontConfig cfg;
  // The bytes live in the binary's read-only data: the atlas must neither free nor own them.
  cfg.FontDataOwnedByAtlas = false;
  cfg.OversampleH = 2;
  cfg.OversampleV = 1;
  snprintf(cfg.Name, sizeof(cfg.Name), "%s %.0fpx", asset, size_px);
  // The size handed over excludes the trailing zero byte that assets::find() appends.
  ImFont* f = ImGui::GetIO().Fonts->AddFontFromMemoryTTF(const_cast<char*>(bytes.data()),
                                                         int(bytes.size() - 1), size_px, &cfg,
                                                         kGlyphRanges);
  if (!f) throw RuntimeError(std::string("could not load embedded font ") + asset);
  return f;
}

// [SECTION] Style ------------------------------------------------------------------------------------
void apply_style() {
  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 4.0f;
  s.ChildRounding = 3.0f;
  s.FrameRounding = 3.0f;
  s.PopupRounding = 3.0f;
  s.GrabRounding = 3.0f;
  s.TabRounding = 3.0f;
  s.ScrollbarRounding = 6.0f;
  s.WindowBorderSize = 1.0f;
  s.FrameBorderSize = 0.0f;
  s.WindowPadding = ImVec2(10, 10);
  s.FramePadding = ImVec2(8, 4);
  s.ItemSpacing = ImVec2(8, 6);
  s.ItemInnerSpacing = ImVec2(6, 4);
  s.ScrollbarSize = 13.0f;
  s.GrabMinSize = 10.0f;

  // A neutral charcoal base with one desaturated blue accent.
  const ImVec4 bg(0.105f, 0.110f, 0.120f, 1.00f);
  const ImVec4 panel(0.135f, 0.140f, 0.152f, 1.00f);
  const ImVec4 frame(0.185f, 0.192f, 0.208f, 1.00f);
  const ImVec4 frame_hi(0.235f, 0.245f, 0.265f, 1.00f);
  const ImVec4 accent(0.290f, 0.510f, 0.780f, 1.00f);
  const ImVec4 accent_hi(0.360f, 0.590f, 0.860f, 1.00f);
  const ImVec4 accent_lo(0.220f, 0.400f, 0.640f, 1.00f);
  const ImVec4 text(0.900f, 0.910f, 0.925f, 1.00f);
  ImVec4* c = s.Colors;
  c[ImGuiCol_Text] = text;
  c[ImGuiCol_TextDisabled] = ImVec4(0.50f, 0.52f, 0.55f, 1.00f);
  c[ImGuiCol_WindowBg] = bg;
  c[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_PopupBg] = ImVec4(0.12f, 0.125f, 0.135f, 0.97f);
  c[ImGuiCol_Border] = ImVec4(0.26f, 0.27f, 0.29f, 1.00f);
  c[ImGuiCol_BorderShadow] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_FrameBg] = frame;
  c[ImGuiCol_FrameBgHovered] = frame_hi;
  c[ImGuiCol_FrameBgActive] = ImVec4(0.27f, 0.28f, 0.31f, 1.00f);
  c[ImGuiCol_TitleBg] = panel;
  c[ImGuiCol_TitleBgActive] = ImVec4(0.16f, 0.17f, 0.19f, 1.00f);
  c[ImGuiCol_TitleBgCollapsed] = panel;
  c[ImGuiCol_MenuBarBg] = panel;
  c[ImGuiCol_ScrollbarBg] = ImVec4(0, 0, 0, 0.15f);
  c[ImGuiCol_ScrollbarGrab] = frame_hi;
  c[ImGuiCol_ScrollbarGrabHovered] = ImVec4(0.32f, 0.33f, 0.36f, 1.00f);
  c[ImGuiCol_ScrollbarGrabActive] = accent_lo;
  c[ImGuiCol_CheckMark] = accent_hi;
  c[ImGuiCol_SliderGrab] = accent;
  c[ImGuiCol_SliderGrabActive] = accent_hi;
  c[ImGuiCol_Button] = frame;
  c[ImGuiCol_ButtonHovered] = accent_lo;
  c[ImGuiCol_ButtonActive] = accent;
  c[ImGuiCol_Header] = ImVec4(0.20f, 0.25f, 0.33f, 1.00f);
  c[ImGuiCol_HeaderHovered] = accent_lo;
  c[ImGuiCol_HeaderActive] = accent;
  c[ImGuiCol_Separator] = ImVec4(0.26f, 0.27f, 0.29f, 1.00f);
  c[ImGuiCol_SeparatorHovered] = accent_lo;
  c[ImGuiCol_SeparatorActive] = accent;
  c[ImGuiCol_ResizeGrip] = ImVec4(0.26f, 0.27f, 0.29f, 0.50f);
  c[ImGuiCol_ResizeGripHovered] = accent_lo;
  c[ImGuiCol_ResizeGripActive] = accent;
  c[ImGuiCol_Tab] = panel;
  c[ImGuiCol_TabHovered] = accent_lo;
  c[ImGuiCol_TabActive] = ImVec4(0.20f, 0.27f, 0.37f, 1.00f);
  c[ImGuiCol_TabUnfocused] = panel;
  c[ImGuiCol_TabUnfocusedActive] = ImVec4(0.17f, 0.20f, 0.26f, 1.00f);
  c[ImGuiCol_PlotLines] = accent_hi;
  c[ImGuiCol_PlotHistogram] = accent;
  c[ImGuiCol_TableHeaderBg] = ImVec4(0.16f, 0.17f, 0.19f, 1.00f);
  c[ImGuiCol_TableBorderStrong] = ImVec4(0.26f, 0.27f, 0.29f, 1.00f);
  c[ImGuiCol_TableBorderLight] = ImVec4(0.20f, 0.21f, 0.23f, 1.00f);
  c[ImGuiCol_TableRowBgAlt] = ImVec4(1, 1, 1, 0.025f);
  c[ImGuiCol_TextSelectedBg] = ImVec4(0.29f, 0.51f, 0.78f, 0.35f);
  c[ImGuiCol_NavHighlight] = accent_hi;
  c[ImGuiCol_ModalWindowDimBg] = ImVec4(0, 0, 0, 0.55f);
}

}  // namespace

// [SECTION] Context ----------------------------------------------------------------------------------
namespace detail {

namespace {
// Fonts rasterised at `scale` (not scaled bitmaps) and the style's sizes scaled with them.
void build_fonts_and_style(float scale) {
  ImGuiIO& io = ImGui::GetIO();
  // From the unscaled style every time: ScaleAllSizes() multiplies what is there, and apply_style()
  // sets only some sizes, so scaling the live style again would grow the rest (cell padding, indent,
  // minimum window size...) with every change of scale.
  static ImGuiStyle base;
  static bool have_base = false;
  if (!have_base) {
    apply_style();
    base = ImGui::GetStyle();
    have_base = true;
  }
  ImGui::GetStyle() = base;
  ImGui::GetStyle().ScaleAllSizes(scale);
  io.Fonts->Clear();
  g_regular = add_font("font/sans", std::round(16.0f * scale));  // first font added is the default
  g_mono = add_font("font/mono", std::round(15.0f * scale));
  g_large = add_font("font/sans", std::round(22.0f * scale));
  io.FontDefault = g_regular;
  g_scale = scale;
}
}  // namespace

void create_imgui_context(const std::string& ini_path) {
  startup::Step step("ImGui context, its fonts read and its style");
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  g_ini_path = ini_path;
  io.IniFilename = g_ini_path.empty() ? nullptr : g_ini_path.c_str();
  io.LogFilename = nullptr;
  build_fonts_and_style(g_pending_scale);
}

void apply_pending_ui_scale(bool gl_backend_ready) {
  if (!ImGui::GetCurrentContext() || g_pending_scale == g_scale) return;
  build_fonts_and_style(g_pending_scale);
  if (gl_backend_ready) {
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
  }
}

namespace {
uint64_t g_generation_counter = 0;
uint64_t g_live_generation = 0;
}  // namespace

uint64_t gl_context_generation() { return g_live_generation; }
void set_gl_context_live(bool live) { g_live_generation = live ? ++g_generation_counter : 0; }

void destroy_imgui_context() {
  if (!ImGui::GetCurrentContext()) return;
  ImGui::DestroyContext();
  g_regular = g_mono = g_large = nullptr;
}

}  // namespace detail

void set_ui_scale(float scale) { g_pending_scale = std::clamp(scale, kMinUiScale, kMaxUiScale); }
float ui_scale() { return g_pending_scale; }

ImFont* font_regular() { return g_regular; }
ImFont* font_mono() { return g_mono; }
ImFont* font_large() { return g_large; }

std::string RenderHost::gl_renderer() const {
  const GLubyte* r = glGetString(GL_RENDERER);
  return r ? reinterpret_cast<const char*>(r) : std::string();
}

}  // namespace kl::viz
