#include "viz/window_icon.h"

#include <GLFW/glfw3.h>
#include <stb_image.h>

#include <string>

#include "assets/embedded.h"
#include "kernels/runtime/errors.h"

namespace kl::viz {

std::vector<IconImage> embedded_icons() {
  std::vector<IconImage> icons;
  for (const char* name : {"icon/48.png", "icon/128.png"}) {
    const std::string_view png = assets::find(name);
    if (png.empty()) throw RuntimeError(std::string("the embedded icon ") + name + " is missing");
    IconImage im;
    int channels = 0;
    stbi_uc* px = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(png.data()), int(png.size()), &im.width,
                                        &im.height, &channels, 4);
    if (!px) throw RuntimeError(std::string("the embedded icon ") + name + " does not decode: " + stbi_failure_reason());
    im.rgba.assign(px, px + size_t(im.width) * size_t(im.height) * 4);
    stbi_image_free(px);
    icons.push_back(std::move(im));
  }
  return icons;
}

void set_window_icon(GLFWwindow* window) {
  std::vector<IconImage> icons = embedded_icons();
  std::vector<GLFWimage> images;
  for (IconImage& im : icons) images.push_back(GLFWimage{im.width, im.height, im.rgba.data()});
  glfwSetWindowIcon(window, int(images.size()), images.data());  // GLFW copies the pixels
}

}  // namespace kl::viz
