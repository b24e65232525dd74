// A float32 C-order array with a shape: what the command line reads from and writes to .npy files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kl {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;

  int64_t size() const;  // product of shape (1 for a 0-d array)
  std::string shape_text() const;  // "(4096, 2000)"
  static Array zeros(std::vector<int64_t> shape);
};

}  // namespace kl
