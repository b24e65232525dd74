#include "kernels/runtime/array.h"

namespace kl {

int64_t Array::size() const {
  // A zero anywhere makes the product 0 whatever comes before it: the .npy reader bounds the product of
  // shapes without a zero by the file's size, but not the sizes beside a zero (the fuzzer's
  // (4, 594, 9, ..., 0, ...) overflowed int64 multiplying them).
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string Array::shape_text() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Array Array::zeros(std::vector<int64_t> shape) {
  Array a;
  a.shape = std::move(shape);
  a.data.assign(size_t(a.size()), 0.0f);
  return a;
}

}  // namespace kl
