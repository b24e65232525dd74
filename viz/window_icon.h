// The window's icon: the 48 and 128 px PNGs drawn at build time from assets/icon/kernel-ladder.svg and
// embedded in the binary ("icon/48.png", "icon/128.png"), decoded to RGBA8 for glfwSetWindowIcon.
#pragma once
#include <cstdint>
#include <vector>

struct GLFWwindow;

namespace kl::viz {

struct IconImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;  // width * height * 4, top row first
};

// The embedded icon images, smallest first. Throws RuntimeError when one is missing or does not decode.
std::vector<IconImage> embedded_icons();

// Sets the window's title-bar/taskbar icon (a no-op on platforms where GLFW cannot, e.g. Wayland).
void set_window_icon(GLFWwindow* window);

}  // namespace kl::viz
