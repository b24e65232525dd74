// PNG files from RGBA8 pixels (stb_image_write), top row first.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kl::viz {
// Throws RuntimeError with the path on failure.
void write_png(const std::string& path, const std::vector<uint8_t>& rgba, int width, int height);
// For tests: reads a PNG back as RGBA8 (stb_image).
bool read_png(const std::string& path, std::vector<uint8_t>& rgba, int& width, int& height);
}  // namespace kl::viz
