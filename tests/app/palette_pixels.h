// Pixel checks shared by the panel tests: how many of the categorical palette's colours (program ids)
// cover at least `min_pixels` pixels of an RGBA8 image.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "viz/heatmap.h"

namespace kl::test {

inline int palette_colours_present(const std::vector<uint8_t>& rgba, int min_pixels) {
  int present = 0;
  for (int k = 0; k < 12; ++k) {
    float c[3];
    viz::categorical_rgb(k, c);
    int count = 0;
    for (size_t i = 0; i + 3 < rgba.size(); i += 4) {
      bool match = true;
      for (int ch = 0; ch < 3; ++ch) match = match && std::abs(int(rgba[i + ch]) - int(c[ch] * 255.0f + 0.5f)) <= 3;
      count += match;
    }
    present += count >= min_pixels;
  }
  return present;
}

}  // namespace kl::test
