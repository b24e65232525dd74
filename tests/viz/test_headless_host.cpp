// viz/headless_host.cpp: an EGL context with no X server (Mesa's software device here, NVIDIA's EGL on
// the GPU machine), ImGui rendered into an FBO and read back top row first.
#include <gtest/gtest.h>
#include <imgui.h>

#include <cstdio>
#include <set>

#include "viz/gl_check.h"
#include "viz/host_common.h"
#include "viz/render_host.h"
#include "viz_test_frame.h"

namespace kl {
namespace {

std::unique_ptr<viz::RenderHost> make_host(int w, int h) {
  viz::HostOptions o;
  o.width = w;
  o.height = h;
  std::string error;
  auto host = viz::make_headless_host(o, &error);
  EXPECT_TRUE(host) << error;
  // Which EGL device and driver drew: on the H200 these tests once read back blank while heavy CUDA
  // tests ran beside them (docs/perf-log.md); a failing run's log then says where it rendered.
  if (host) std::printf("headless host: %s, GL_RENDERER %s\n", host->kind().c_str(), host->gl_renderer().c_str());
  return host;
}

// NVIDIA's EGL (seen on the H200 machine) names enumeration EGL_EXT_device_base; Mesa names it
// EGL_EXT_device_enumeration. Either, with EGL_EXT_platform_device, offers the device platform.
TEST(HeadlessHost, DevicePlatformFromEitherExtensionName) {
  std::string missing = "stale";
  const char* nvidia =
      "EGL_EXT_platform_base EGL_EXT_device_base EGL_KHR_client_get_all_proc_addresses EGL_EXT_client_extensions "
      "EGL_KHR_debug EGL_KHR_platform_x11 EGL_EXT_platform_x11 EGL_EXT_platform_device "
      "EGL_MESA_platform_surfaceless EGL_EXT_explicit_device";
  EXPECT_TRUE(viz::detail::egl_offers_device_platform(nvidia, &missing));
  EXPECT_EQ(missing, "");
  EXPECT_TRUE(viz::detail::egl_offers_device_platform(
      "EGL_EXT_device_enumeration EGL_EXT_device_query EGL_EXT_platform_device", &missing));
  EXPECT_FALSE(viz::detail::egl_offers_device_platform("EGL_EXT_device_base EGL_EXT_platform_x11", &missing));
  EXPECT_EQ(missing, "EGL_EXT_platform_device");
  EXPECT_FALSE(viz::detail::egl_offers_device_platform("EGL_EXT_platform_device", &missing));
  EXPECT_EQ(missing, "EGL_EXT_device_enumeration (or EGL_EXT_device_base)");
  // Names are whole words: a longer name that starts the same does not count.
  EXPECT_FALSE(viz::detail::egl_offers_device_platform("EGL_EXT_device_base_x EGL_EXT_platform_devices", &missing));
  EXPECT_EQ(missing, "EGL_EXT_device_enumeration (or EGL_EXT_device_base) and EGL_EXT_platform_device");
  EXPECT_FALSE(viz::detail::egl_offers_device_platform(nullptr, &missing));
  EXPECT_FALSE(viz::detail::egl_offers_device_platform("", nullptr));
}

TEST(HeadlessHost, MakesAGlContext) {
  auto host = make_host(320, 200);
  ASSERT_TRUE(host);
  const std::string renderer = host->gl_renderer();
  EXPECT_FALSE(renderer.empty());
  EXPECT_NE(host->kind().find("headless"), std::string::npos) << host->kind();
  std::printf("GL_RENDERER: %s | host: %s\n", renderer.c_str(), host->kind().c_str());
  EXPECT_EQ(host->width(), 320);
  EXPECT_EQ(host->height(), 200);
  EXPECT_NE(viz::font_regular(), nullptr);
  EXPECT_NE(viz::font_mono(), nullptr);
  ASSERT_NE(viz::font_large(), nullptr);
  ASSERT_TRUE(host->begin_frame());  // the font atlas is built with the first frame
  host->end_frame();
  EXPECT_GT(viz::font_large()->FontSize, viz::font_regular()->FontSize);
  EXPECT_NE(viz::font_mono(), viz::font_regular());
}

TEST(HeadlessHost, RendersAColouredButtonAtTheAskedSize) {
  auto host = make_host(640, 360);
  ASSERT_TRUE(host);
  const int errors_before = viz::gl_error_count();
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  for (int frame = 0; frame < 3; ++frame) {  // a few frames: fonts, then steady state
    ASSERT_TRUE(host->begin_frame());
    test::begin_canvas(640, 360);
    ImGui::SetCursorPos(ImVec2(40, 60));
    ImGui::PushStyleColor(ImGuiCol_Button, ImVec4(0.0f, 0.8f, 0.2f, 1.0f));
    ImGui::Button("A green button", ImVec2(200, 80));
    ImGui::PopStyleColor();
    ImGui::SetCursorPos(ImVec2(40, 200));
    ImGui::PushFont(viz::font_large());
    ImGui::TextUnformatted("Kernel Ladder \xe2\x80\x94 \xcf\x83, \xe2\x89\xa4 1024");
    ImGui::PopFont();
    test::end_canvas();
    host->end_frame();
  }
  ASSERT_TRUE(host->read_pixels(rgba, w, h));
  ASSERT_EQ(w, 640);
  ASSERT_EQ(h, 360);
  ASSERT_EQ(rgba.size(), size_t(640) * 360 * 4);
  // Inside the button, away from its label: the button colour.
  const float green[3] = {0.0f, 0.8f, 0.2f};
  EXPECT_TRUE(test::near(test::pixel(rgba, w, 50, 70), green, 2));
  EXPECT_TRUE(test::near(test::pixel(rgba, w, 230, 130), green, 2));
  // Outside it: not the button colour.
  EXPECT_FALSE(test::near(test::pixel(rgba, w, 20, 20), green, 40));
  std::set<uint32_t> colours;
  for (size_t i = 0; i < rgba.size(); i += 4)
    colours.insert(uint32_t(rgba[i]) | uint32_t(rgba[i + 1]) << 8 | uint32_t(rgba[i + 2]) << 16);
  EXPECT_GT(colours.size(), 10u);  // background, button, anti-aliased text
  EXPECT_EQ(viz::gl_error_count(), errors_before) << viz::gl_first_error();
}

TEST(HeadlessHost, ReadPixelsIsTopRowFirst) {
  auto host = make_host(200, 100);
  ASSERT_TRUE(host);
  ASSERT_TRUE(host->begin_frame());
  ImGui::GetForegroundDrawList()->AddRectFilled(ImVec2(0, 0), ImVec2(200, 10), IM_COL32(255, 0, 0, 255));
  ImGui::GetForegroundDrawList()->AddRectFilled(ImVec2(0, 90), ImVec2(200, 100), IM_COL32(0, 0, 255, 255));
  host->end_frame();
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(host->read_pixels(rgba, w, h));
  const float red[3] = {1, 0, 0}, blue[3] = {0, 0, 1};
  EXPECT_TRUE(test::near(test::pixel(rgba, w, 100, 2), red, 0));
  EXPECT_TRUE(test::near(test::pixel(rgba, w, 100, 97), blue, 0));
}

TEST(HeadlessHost, HostsComeAndGoInOneProcess) {
  for (int i = 0; i < 3; ++i) {
    auto host = make_host(64 + 32 * i, 48);
    ASSERT_TRUE(host);
    ASSERT_TRUE(host->begin_frame());
    ImGui::Text("frame of host %d", i);
    host->end_frame();
    std::vector<uint8_t> rgba;
    int w = 0, h = 0;
    ASSERT_TRUE(host->read_pixels(rgba, w, h));
    EXPECT_EQ(w, 64 + 32 * i);
    EXPECT_EQ(h, 48);
  }
}

TEST(HeadlessHost, OneHostAtATime) {
  auto host = make_host(64, 64);
  ASSERT_TRUE(host);
  std::string error;
  EXPECT_EQ(viz::make_headless_host(viz::HostOptions{}, &error), nullptr);
  EXPECT_NE(error.find("already exists"), std::string::npos) << error;
}

TEST(HeadlessHost, RefusesABadSizeWithAReason) {
  for (auto [w, h] : {std::pair{0, 100}, std::pair{100, -1}, std::pair{100000, 10}}) {
    viz::HostOptions o;
    o.width = w;
    o.height = h;
    std::string error;
    EXPECT_EQ(viz::make_headless_host(o, &error), nullptr);
    EXPECT_NE(error.find("out of range"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace kl
