// PNG files from RGBA8 pixels through Debian's libstb (stb_image_write / stb_image).
#include "viz/png.h"

#include <stb_image.h>
#include <stb_image_write.h>

#include "kernels/runtime/errors.h"

namespace kl::viz {

void write_png(const std::string& path, const std::vector<uint8_t>& rgba, int width, int height) {
  if (width <= 0 || height <= 0 || rgba.size() != size_t(width) * size_t(height) * 4)
    throw RuntimeError("write_png " + path + ": " + std::to_string(rgba.size()) + " bytes do not hold " +
                       std::to_string(width) + "x" + std::to_string(height) + " RGBA8 pixels");
  if (!stbi_write_png(path.c_str(), width, height, 4, rgba.data(), width * 4))
    throw RuntimeError("could not write PNG file " + path);
}

bool read_png(const std::string& path, std::vector<uint8_t>& rgba, int& width, int& height) {
  int n = 0;
  unsigned char* p = stbi_load(path.c_str(), &width, &height, &n, 4);
  if (!p) return false;
  rgba.assign(p, p + size_t(width) * size_t(height) * 4);
  stbi_image_free(p);
  return true;
}

}  // namespace kl::viz
